"""Headers of the producer side: send (codes 10, 310, 320), send back (36), transactions (37, 39).

SEND_MESSAGE (10) carries the long Java field names; SEND_MESSAGE_V2 (310) and
SEND_BATCH_MESSAGE (320) carry the same fields under one-letter keys (docs/protocol.md §2.2)::

    a producerGroup   e queueId        i properties         m batch
    b topic           f sysFlag        j reconsumeTimes     n brokerName (4.9.5+; v1: bname)
    c defaultTopic    g bornTimestamp  k unitMode
    d defaultTopicQueueNums  h flag    l maxReconsumeTimes

Both decode to one :class:`SendMessageRequestHeader`. Whether a send is a batch is decided by
``batch`` alone, never by the code (C++ sends batches as code 10 with ``batch`` = ``"1"``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple, Self, final

from bolide.protocol.headers.fields import (
    TRUE_TEXTS,
    WireHeader,
    format_bool,
    frozen_constructor,
    optional_int,
    optional_str,
    parse_bool,
    put_optional,
    required_int,
    required_str,
    wire,
    wire_header,
)

__all__ = [
    "CheckTransactionStateRequestHeader",
    "ConsumerSendMsgBackRequestHeader",
    "EndTransactionRequestHeader",
    "SendMessageRequestHeader",
    "SendMessageResponseHeader",
    "send_header_values",
]


class _SendKeys(NamedTuple):
    producer_group: str
    topic: str
    default_topic: str
    default_topic_queue_count: str
    queue_id: str
    sys_flag: str
    born_timestamp_ms: str
    flag: str
    properties: str
    reconsume_times: str
    unit_mode: str
    max_reconsume_times: str
    batch: str
    broker_name: str


_V1_KEYS = _SendKeys(
    "producerGroup",
    "topic",
    "defaultTopic",
    "defaultTopicQueueNums",
    "queueId",
    "sysFlag",
    "bornTimestamp",
    "flag",
    "properties",
    "reconsumeTimes",
    "unitMode",
    "maxReconsumeTimes",
    "batch",
    "bname",
)
_V2_KEYS = _SendKeys(*"abcdefghijklmn")


@final
@dataclass(frozen=True, slots=True)
class SendMessageRequestHeader:
    """SEND_MESSAGE / SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE request header.

    ``queue_id`` < 0 lets the broker pick a queue; ``sys_flag`` is the message sysFlag
    (compression, transaction bits); ``properties`` the properties string (docs/protocol.md §3.3).
    """

    producer_group: str
    topic: str
    default_topic: str
    default_topic_queue_count: int
    queue_id: int
    sys_flag: int
    born_timestamp_ms: int
    flag: int
    properties: str | None = None
    reconsume_times: int | None = None
    unit_mode: bool = False
    max_reconsume_times: int | None = None
    batch: bool = False
    broker_name: str | None = None

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> Self:
        """Decode the long-name (v1, code 10) form; raises :class:`HeaderError`."""
        return cls._decode(fields, _V1_KEYS)

    @classmethod
    def from_v2_ext_fields(cls, fields: Mapping[str, str]) -> Self:
        """Decode the one-letter (v2, codes 310/320) form; raises :class:`HeaderError`."""
        return cls._decode(fields, _V2_KEYS)

    def to_ext_fields(self) -> dict[str, str]:
        """The long-name (v1) form."""
        return self._encode(_V1_KEYS)

    def to_v2_ext_fields(self) -> dict[str, str]:
        """The one-letter (v2) form."""
        return self._encode(_V2_KEYS)

    @classmethod
    def _decode(cls, fields: Mapping[str, str], keys: _SendKeys) -> Self:
        # Any miss falls back to the checked path, which finds the culprit and raises
        # HeaderError naming it.
        values = _send_header_values(fields, keys)
        if values is None:
            return cls._decode_checked(fields, keys)
        return _construct_send_header(*values)

    @classmethod
    def _decode_checked(cls, fields: Mapping[str, str], keys: _SendKeys) -> Self:
        return cls(
            required_str(fields, keys.producer_group),
            required_str(fields, keys.topic),
            required_str(fields, keys.default_topic),
            required_int(fields, keys.default_topic_queue_count),
            required_int(fields, keys.queue_id),
            required_int(fields, keys.sys_flag),
            required_int(fields, keys.born_timestamp_ms),
            required_int(fields, keys.flag),
            optional_str(fields, keys.properties),
            optional_int(fields, keys.reconsume_times),
            parse_bool(fields, keys.unit_mode),
            optional_int(fields, keys.max_reconsume_times),
            parse_bool(fields, keys.batch),
            optional_str(fields, keys.broker_name),
        )

    def _encode(self, keys: _SendKeys) -> dict[str, str]:
        fields = {
            keys.producer_group: self.producer_group,
            keys.topic: self.topic,
            keys.default_topic: self.default_topic,
            keys.default_topic_queue_count: str(self.default_topic_queue_count),
            keys.queue_id: str(self.queue_id),
            keys.sys_flag: str(self.sys_flag),
            keys.born_timestamp_ms: str(self.born_timestamp_ms),
            keys.flag: str(self.flag),
            keys.unit_mode: format_bool(self.unit_mode),
            keys.batch: format_bool(self.batch),
        }
        put_optional(fields, keys.properties, self.properties)
        put_optional(fields, keys.reconsume_times, self.reconsume_times)
        put_optional(fields, keys.max_reconsume_times, self.max_reconsume_times)
        put_optional(fields, keys.broker_name, self.broker_name)
        return fields


_construct_send_header = frozen_constructor(SendMessageRequestHeader)

SendHeaderValues = tuple[
    str, str, str, int, int, int, int, int, str | None, int | None, bool, int | None, bool,
    str | None,
]  # fmt: skip
"""The fields of a :class:`SendMessageRequestHeader` as a plain tuple, in declaration order."""


def send_header_values(fields: Mapping[str, str], *, v2: bool) -> SendHeaderValues | None:
    """The send header of ``fields`` (the one-letter form when ``v2``) as a plain tuple, the
    values :meth:`SendMessageRequestHeader.from_ext_fields` / ``from_v2_ext_fields`` would
    hold; None when a field is missing or malformed (those decodes then say which)."""
    return _send_header_values(fields, _V2_KEYS if v2 else _V1_KEYS)


def _send_header_values(fields: Mapping[str, str], keys: _SendKeys) -> SendHeaderValues | None:
    # Hot path (every send): no per-field helper calls, no object.
    a, b, c, d, e, f, g, h, i, j, k, l_, m, n = keys
    get = fields.get
    try:
        reconsume_times = get(j)
        max_reconsume_times = get(l_)
        return (
            fields[a],
            fields[b],
            fields[c],
            int(fields[d]),
            int(fields[e]),
            int(fields[f]),
            int(fields[g]),
            int(fields[h]),
            get(i) or None,
            int(reconsume_times) if reconsume_times else None,
            get(k, "").lower() in TRUE_TEXTS,
            int(max_reconsume_times) if max_reconsume_times else None,
            get(m, "").lower() in TRUE_TEXTS,
            get(n) or None,
        )
    except (KeyError, ValueError):
        return None


@dataclass(frozen=True, slots=True)
class SendMessageResponseHeader:
    """Send response header, plus the two extFields a Java broker always adds.

    ``msg_id`` is the offset message id (for a batch, every id joined by ``,``);
    ``queue_offset`` the logical offset of the (first) stored message. ``msg_region``
    (``MSG_REGION``) and ``trace_on`` (``TRACE_ON``) are read by the Java client without a null
    check, so they are written unless set to ``None``.
    """

    msg_id: str
    queue_id: int
    queue_offset: int
    transaction_id: str | None = None
    msg_region: str | None = "DefaultRegion"
    trace_on: bool | None = True
    recall_handle: str | None = None
    """``recallHandle``: a timer message's handle for RECALL_MESSAGE (RocketMQ 5.3)."""

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> Self:
        """Decode; raises :class:`HeaderError`."""
        try:
            trace_on = fields.get("TRACE_ON")
            return cls(
                fields["msgId"],
                int(fields["queueId"]),
                int(fields["queueOffset"]),
                fields.get("transactionId") or None,
                fields.get("MSG_REGION") or None,
                None if trace_on is None else trace_on.lower() in TRUE_TEXTS,
                fields.get("recallHandle") or None,
            )
        except (KeyError, ValueError):
            required_str(fields, "msgId")
            required_int(fields, "queueId")
            required_int(fields, "queueOffset")
            raise  # pragma: no cover - the checks above raise first

    def to_ext_fields(self) -> dict[str, str]:
        fields = {
            "msgId": self.msg_id,
            "queueId": str(self.queue_id),
            "queueOffset": str(self.queue_offset),
        }
        put_optional(fields, "transactionId", self.transaction_id)
        put_optional(fields, "MSG_REGION", self.msg_region)
        if self.trace_on is not None:
            fields["TRACE_ON"] = format_bool(self.trace_on)
        put_optional(fields, "recallHandle", self.recall_handle)
        return fields


@wire_header
class ConsumerSendMsgBackRequestHeader(WireHeader):
    """CONSUMER_SEND_MSG_BACK (36). ``commit_log_offset`` is wire ``offset``; ``delay_level``
    0 lets the broker choose (3 + reconsume times), < 0 sends straight to the DLQ."""

    commit_log_offset: int = wire("offset")
    group: str = wire("group")
    delay_level: int = wire("delayLevel")
    origin_msg_id: str | None = wire("originMsgId", default=None)
    origin_topic: str | None = wire("originTopic", default=None)
    unit_mode: bool = wire("unitMode", default=False)
    max_reconsume_times: int | None = wire("maxReconsumeTimes", default=None)


@wire_header
class EndTransactionRequestHeader(WireHeader):
    """END_TRANSACTION (37). ``commit_or_rollback``: 0 unknown, 8 commit, 12 rollback (the
    message sysFlag transaction values); ``msg_id`` is the UNIQ_KEY."""

    producer_group: str = wire("producerGroup")
    tran_state_table_offset: int = wire("tranStateTableOffset")
    commit_log_offset: int = wire("commitLogOffset")
    commit_or_rollback: int = wire("commitOrRollback")
    msg_id: str = wire("msgId")
    from_transaction_check: bool = wire("fromTransactionCheck", default=False)
    transaction_id: str | None = wire("transactionId", default=None)


@wire_header
class CheckTransactionStateRequestHeader(WireHeader):
    """CHECK_TRANSACTION_STATE (39), broker to producer; ``msg_id`` is the UNIQ_KEY."""

    tran_state_table_offset: int = wire("tranStateTableOffset")
    commit_log_offset: int = wire("commitLogOffset")
    msg_id: str | None = wire("msgId", default=None)
    transaction_id: str | None = wire("transactionId", default=None)
    offset_msg_id: str | None = wire("offsetMsgId", default=None)
