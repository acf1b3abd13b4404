"""RocketMQ 4.x message-trace records: the text the trace topics carry, sans-IO.

A trace message's body holds records back to back. Inside a record the fields are separated
by ``\\x01`` and every record ends with ``\\x02`` (RocketMQ names these two characters the other
way round: ``CONTENT_SPLITOR`` is 1, ``FIELD_SPLITOR`` is 2). Five record types, fields in order:

* ``Pub``: type, timestamp, region, producer group, topic, msgId, tags, keys, store host, body
  length, cost (ms), message type (ordinal), offsetMsgId, success [, client host] -- 14
  written; 13 (no offsetMsgId) and 15 or more (client host) read.
* ``SubBefore`` (one per message of a consume call): type, timestamp, region, consumer group,
  request id, msgId, retry times, keys -- 8.
* ``SubAfter``: type, request id, msgId, cost (ms, the call's time / its message count),
  success, keys, context code [, timestamp, consumer group] -- 9 written (7 and a trailing
  separator for Alibaba Cloud's channel); 6, 7 and 9 read (fewer when the last are empty).
* ``EndTransaction``: type, timestamp, region, producer group, topic, msgId, tags, keys, store
  host, message type, transaction id, transaction state (COMMIT_MESSAGE, ROLLBACK_MESSAGE or
  UNKNOW), from a transaction check -- 13.
* ``Recall`` (5.x): type, timestamp, region, group, topic, msgId, success -- 7.

As Java's ``String.split``, trailing empty fields of a record are dropped before its fields are
counted. The keys of a trace message (:func:`trace_message_keys`) are the msgId of every record
it holds plus every user key, so the broker's index finds the trace by either.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from bolide.base.errors import ProtocolError
from bolide.protocol.system_topics import REGION_TRACE_TOPIC_PREFIX

__all__ = [
    "CONTEXT_CODE_NAMES",
    "DEFAULT_REGION_ID",
    "FIELD_SEPARATOR",
    "RECORD_END",
    "TraceDecodeError",
    "TraceMessageType",
    "TraceRecord",
    "TraceType",
    "decode_records",
    "encode_record",
    "encode_records",
    "pack_records",
    "region_trace_topic",
    "trace_message_keys",
]

FIELD_SEPARATOR = "\x01"
"""Between two fields of a record (Java's ``TraceConstants.CONTENT_SPLITOR``)."""
RECORD_END = "\x02"
"""After every record (Java's ``TraceConstants.FIELD_SPLITOR``)."""
DEFAULT_REGION_ID = "DefaultRegion"
"""The region a record names when nobody configured one (the broker's regionId default)."""
CONTEXT_CODE_NAMES = ("SUCCESS", "TIME_OUT", "EXCEPTION", "RETURNNULL", "FAILED")
"""SubAfter's context code: the ordinal of Java's ``ConsumeReturnType``."""

_TRANSACTION_STATES = frozenset({"COMMIT_MESSAGE", "ROLLBACK_MESSAGE", "UNKNOW"})


class TraceDecodeError(ProtocolError):
    """A trace record that does not follow the 4.x layout (the message says which, and why)."""


class TraceType(enum.StrEnum):
    """Java's ``TraceType`` names, as written in a record's first field."""

    PUB = "Pub"
    RECALL = "Recall"
    SUB_BEFORE = "SubBefore"
    SUB_AFTER = "SubAfter"
    END_TRANSACTION = "EndTransaction"


class TraceMessageType(enum.IntEnum):
    """Java's ``MessageType`` (its ordinal is written)."""

    NORMAL_MSG = 0
    TRANS_MSG_HALF = 1
    TRANS_MSG_COMMIT = 2
    DELAY_MSG = 3
    ORDER_MSG = 4


@dataclass(frozen=True, slots=True)
class TraceRecord:
    """One record of any type; fields a type does not carry keep their defaults.

    ``timestamp_ms`` is -1 when a SubAfter record carries none (6 or 7 fields); ``group`` is
    then empty. ``context_code`` is -1 when absent.
    """

    type: TraceType
    timestamp_ms: int = -1
    region_id: str = ""
    group: str = ""
    topic: str = ""
    msg_id: str = ""
    tags: str = ""
    keys: str = ""
    store_host: str = ""
    body_length: int = 0
    cost_time_ms: int = 0
    message_type: TraceMessageType = TraceMessageType.NORMAL_MSG
    offset_msg_id: str = ""
    success: bool = True
    client_host: str = ""
    request_id: str = ""
    retry_times: int = 0
    context_code: int = -1
    transaction_id: str = ""
    transaction_state: str = ""
    from_transaction_check: bool = False


def _bool(value: bool) -> str:
    return "true" if value else "false"


def encode_record(record: TraceRecord) -> str:
    """``record`` as Java's ``TraceDataEncoder`` writes it, its end mark included (Pub with
    14 fields, or 15 when ``client_host`` is set; SubAfter with 9)."""
    r = record
    fields: list[object]
    if r.type is TraceType.PUB:
        fields = [r.type, r.timestamp_ms, r.region_id, r.group, r.topic, r.msg_id, r.tags,
                  r.keys, r.store_host, r.body_length, r.cost_time_ms, int(r.message_type),
                  r.offset_msg_id, _bool(r.success)]  # fmt: skip
        if r.client_host:
            fields.append(r.client_host)
    elif r.type is TraceType.SUB_BEFORE:
        fields = [r.type, r.timestamp_ms, r.region_id, r.group, r.request_id, r.msg_id,
                  r.retry_times, r.keys]  # fmt: skip
    elif r.type is TraceType.SUB_AFTER:
        fields = [r.type, r.request_id, r.msg_id, r.cost_time_ms, _bool(r.success), r.keys,
                  r.context_code, r.timestamp_ms, r.group]  # fmt: skip
    elif r.type is TraceType.END_TRANSACTION:
        fields = [r.type, r.timestamp_ms, r.region_id, r.group, r.topic, r.msg_id, r.tags,
                  r.keys, r.store_host, int(r.message_type), r.transaction_id,
                  r.transaction_state, _bool(r.from_transaction_check)]  # fmt: skip
    else:
        fields = [r.type, r.timestamp_ms, r.region_id, r.group, r.topic, r.msg_id,
                  _bool(r.success)]  # fmt: skip
    for field in fields:
        if isinstance(field, str) and (FIELD_SEPARATOR in field or RECORD_END in field):
            raise TraceDecodeError(f"a trace field may not hold \\x01 or \\x02: {field!r}")
    return FIELD_SEPARATOR.join(str(field) for field in fields) + RECORD_END


def encode_records(records: Iterable[TraceRecord]) -> str:
    """Records back to back, as one trace message's body."""
    return "".join(encode_record(record) for record in records)


def trace_message_keys(records: Iterable[TraceRecord]) -> list[str]:
    """The KEYS of the trace message holding ``records``: every msgId, then every user key
    (split on spaces), each once, in first-seen order."""
    keys: dict[str, None] = {}
    for record in records:
        if record.msg_id:
            keys[record.msg_id] = None
        for key in record.keys.split(" "):
            if key:
                keys[key] = None
    return list(keys)


def region_trace_topic(region_id: str) -> str:
    """The per-region trace topic, ``rmq_sys_TRACE_DATA_<region_id>``."""
    return REGION_TRACE_TOPIC_PREFIX + region_id


def decode_records(text: str) -> list[TraceRecord]:
    """Every record of a trace message's body.

    Raises :class:`TraceDecodeError` for a record of an unknown type or with too few
    fields or a non-numeric number (naming the record).
    """
    records: list[TraceRecord] = []
    for raw in text.split(RECORD_END):
        fields = raw.split(FIELD_SEPARATOR)
        while fields and not fields[-1]:  # Java's split drops trailing empty strings
            fields.pop()
        if not fields:
            continue
        try:
            records.append(_decode(fields))
        except (ValueError, IndexError) as error:
            raise TraceDecodeError(f"bad trace record {raw!r}: {error}") from None
    return records


def _decode(fields: Sequence[str]) -> TraceRecord:
    kind = fields[0]
    if kind == TraceType.PUB:
        return _decode_pub(fields)
    if kind == TraceType.SUB_BEFORE:
        _need(fields, 7)  # empty keys, the last field, are dropped by the split
        return TraceRecord(TraceType.SUB_BEFORE, int(fields[1]), fields[2], fields[3],
                           request_id=fields[4], msg_id=fields[5],
                           retry_times=int(fields[6]), keys=_at(fields, 7))  # fmt: skip
    if kind == TraceType.SUB_AFTER:
        return _decode_sub_after(fields)
    if kind == TraceType.END_TRANSACTION:
        _need(fields, 13)
        state = fields[11]
        if state not in _TRANSACTION_STATES:
            raise ValueError(f"unknown transaction state {state!r}")
        return TraceRecord(TraceType.END_TRANSACTION, int(fields[1]), fields[2], fields[3],
                           fields[4], fields[5], fields[6], fields[7], fields[8],
                           message_type=TraceMessageType(int(fields[9])),
                           transaction_id=fields[10], transaction_state=state,
                           from_transaction_check=_parse_bool(fields[12]))  # fmt: skip
    if kind == TraceType.RECALL:
        _need(fields, 7)
        return TraceRecord(TraceType.RECALL, int(fields[1]), fields[2], fields[3], fields[4],
                           fields[5], success=_parse_bool(fields[6]))  # fmt: skip
    raise ValueError(f"unknown record type {kind!r}")


def _decode_pub(fields: Sequence[str]) -> TraceRecord:
    _need(fields, 13)
    record = TraceRecord(TraceType.PUB, int(fields[1]), fields[2], fields[3], fields[4],
                         fields[5], fields[6], fields[7], fields[8], int(fields[9]),
                         int(fields[10]), TraceMessageType(int(fields[11])))  # fmt: skip
    if len(fields) == 13:  # an old writer: no offsetMsgId
        return replace(record, success=_parse_bool(fields[12]))
    record = replace(record, offset_msg_id=fields[12], success=_parse_bool(fields[13]))
    if len(fields) >= 15:
        record = replace(record, client_host=fields[14])
    return record


def _decode_sub_after(fields: Sequence[str]) -> TraceRecord:
    _need(fields, 5)  # C++ 2.x writes 6 (keys last); an empty last key leaves 5 after the split
    record = TraceRecord(TraceType.SUB_AFTER, request_id=fields[1], msg_id=fields[2],
                         cost_time_ms=int(fields[3]), success=_parse_bool(fields[4]),
                         keys=_at(fields, 5))  # fmt: skip
    if len(fields) >= 7:
        record = replace(record, context_code=int(fields[6]))
    if len(fields) >= 8:  # 8: the group, the last field, was empty
        record = replace(record, timestamp_ms=int(fields[7]), group=_at(fields, 8))
    return record


def _need(fields: Sequence[str], count: int) -> None:
    if len(fields) < count:
        raise ValueError(f"{fields[0]} needs {count} fields, has {len(fields)}")


def _at(fields: Sequence[str], index: int) -> str:
    return fields[index] if index < len(fields) else ""


def _parse_bool(value: str) -> bool:
    """As Java's ``Boolean.parseBoolean``: "true" in any case is true, anything else false."""
    return value.lower() == "true"


def pack_records(
    records: Sequence[TraceRecord], max_records: int, max_bytes: int
) -> list[tuple[list[TraceRecord], bytes]]:
    """Records cut into trace messages, each (its records, its body), of at most
    ``max_records`` records and ``max_bytes`` bytes (a larger single record goes alone);
    every record encoded once."""
    packed: list[tuple[list[TraceRecord], bytes]] = []
    current: list[TraceRecord] = []
    texts: list[bytes] = []
    size = 0
    for record in records:
        text = encode_record(record).encode()
        if current and (len(current) >= max_records or size + len(text) > max_bytes):
            packed.append((current, b"".join(texts)))
            current, texts, size = [], [], 0
        current.append(record)
        texts.append(text)
        size += len(text)
    if current:
        packed.append((current, b"".join(texts)))
    return packed
