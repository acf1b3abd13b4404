"""The records of a transaction, as RocketMQ 4.9.7 lays them out (round2-facts §5).

Pure: each function turns a decoded record into the put that the next step stores.

=====================  ===============================  ===========================================
record                 where                            what
=====================  ===============================  ===========================================
half                   RMQ_SYS_TRANS_HALF_TOPIC q 0     the producer's message; REAL_TOPIC,
                                                        REAL_QID and PGROUP name its destination
                                                        and producer group; sysFlag NOT_TYPE, so
                                                        it has a consume-queue entry there only
copy (check)           RMQ_SYS_TRANS_HALF_TOPIC q 0     the half re-appended before each check,
                                                        TRANSACTION_CHECK_TIMES = n and
                                                        TRAN_PREPARED_QUEUE_OFFSET = the first
                                                        half's queue offset (the transaction's
                                                        identity across copies)
op                     RMQ_SYS_TRANS_OP_HALF_TOPIC q 0  tag ``d``; body = the decided half's queue
                                                        offset in decimal ASCII
commit                 REAL_TOPIC / REAL_QID            the half without REAL_TOPIC, REAL_QID,
                                                        TRAN_MSG; sysFlag COMMIT; PREPARED
                                                        TRANSACTION OFFSET = the half's commit-log
                                                        offset
given up               TRANS_CHECK_MAX_TIME_TOPIC q 0   the half as it was after its last check
=====================  ===============================  ===========================================
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from bolide.base.errors import ProtocolError
from bolide.broker.held_messages import put_copy, record_copy
from bolide.protocol.address import SocketAddress
from bolide.protocol.headers import CheckTransactionStateRequestHeader
from bolide.protocol.message import (
    TRANSACTION_NOT_TYPE,
    MessageExt,
    MessageSysFlag,
    PropertyKey,
    reset_transaction_type,
)
from bolide.protocol.record import encode_properties
from bolide.protocol.system_topics import (
    TRANS_CHECK_GROUP,
    TRANS_CHECK_MAX_TIME_TOPIC,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
)
from bolide.store.api import PutRequest

__all__ = [
    "HALF_QUEUE_ID",
    "OP_REMOVE_TAG",
    "TRANSACTION_CONSUMER_GROUP",
    "HalfRecord",
    "check_request",
    "commit_request",
    "discard_request",
    "half_target",
    "is_transaction_half",
    "op_request",
    "parse_half",
    "parse_op",
    "renew_request",
    "resume_request",
]

HALF_QUEUE_ID: Final = 0
"""RocketMQ stores every half message in queue 0 of the half topic (and ops in op queue 0)."""
OP_REMOVE_TAG: Final = "d"
"""TransactionalMessageUtil.REMOVETAG: the tag of an op record."""
TRANSACTION_CONSUMER_GROUP: Final = TRANS_CHECK_GROUP
"""MixAll.CID_SYS_RMQ_TRANS: the group under which the checker's progress on the half and op
queues is kept in consumerOffset.json."""
TRAN_MSG: Final = PropertyKey.TRAN_MSG
PRODUCER_GROUP: Final = PropertyKey.PGROUP
PREPARED_QUEUE_OFFSET: Final = "TRAN_PREPARED_QUEUE_OFFSET"
CHECK_TIMES: Final = PropertyKey.TRANSACTION_CHECK_TIMES
CHECK_IMMUNITY_SECONDS: Final = "CHECK_IMMUNITY_TIME_IN_SECONDS"
_COMMIT_DROPS = (PropertyKey.REAL_TOPIC, PropertyKey.REAL_QID, TRAN_MSG, PropertyKey.WAIT)


def is_transaction_half(properties: dict[str, str], sys_flag: int) -> bool:
    """Whether a send is a half message: TRAN_MSG reads as true (Java's Boolean.parseBoolean)
    or the sysFlag says PREPARED."""
    flagged = (sys_flag & 0xC) == MessageSysFlag.TRANSACTION_PREPARED
    return flagged or properties.get(TRAN_MSG, "").lower() == "true"


def half_target(
    properties: dict[str, str], topic: str, queue_id: int, producer_group: str, sys_flag: int
) -> tuple[str, int, int]:
    """Re-target a half message (parseHalfMessageInner): records REAL_TOPIC / REAL_QID (and
    PGROUP and TRAN_MSG when the client left them out) in ``properties``, and, as RocketMQ 5's
    broker, ``__transactionId__`` = the message's UNIQ_KEY (consumers of the committed message
    see it); returns the half topic, its queue and the sysFlag with the transaction bits reset
    to NOT_TYPE."""
    properties.pop(PREPARED_QUEUE_OFFSET, None)  # the broker's own: a transaction's identity
    unique_key = properties.get(PropertyKey.UNIQ_KEY)
    if unique_key:
        properties[PropertyKey.TRANSACTION_ID] = unique_key
    properties[PropertyKey.REAL_TOPIC] = topic
    properties[PropertyKey.REAL_QID] = str(queue_id)
    properties.setdefault(PRODUCER_GROUP, producer_group)
    properties[TRAN_MSG] = "true"
    return TRANS_HALF_TOPIC, HALF_QUEUE_ID, reset_transaction_type(sys_flag, TRANSACTION_NOT_TYPE)


@dataclass(frozen=True, slots=True)
class HalfRecord:
    """What the broker keeps of a half record (or of a copy of it)."""

    queue_offset: int
    commit_log_offset: int
    origin_queue_offset: int
    producer_group: str
    real_topic: str
    real_queue_id: int
    unique_key: str
    check_times: int
    immunity_ms: int | None
    born_timestamp_ms: int
    store_timestamp_ms: int
    tags: str | None
    keys: str | None
    body_length: int


def parse_half(message: MessageExt) -> HalfRecord:
    """The half record ``message`` (decoded from the half topic).

    Raises:
        ProtocolError: REAL_TOPIC, REAL_QID or PGROUP is missing or REAL_QID is no number.
    """
    properties = message.properties
    real_topic = properties.get(PropertyKey.REAL_TOPIC, "")
    queue_text = properties.get(PropertyKey.REAL_QID, "")
    group = properties.get(PRODUCER_GROUP, "")
    if not real_topic or not queue_text.isdigit() or not group:
        raise ProtocolError(
            f"half record at {message.commit_log_offset} lacks REAL_TOPIC/REAL_QID/PGROUP"
        )
    origin_text = properties.get(PREPARED_QUEUE_OFFSET, "")
    origin = int(origin_text) if origin_text.isdigit() else message.queue_offset
    return HalfRecord(
        queue_offset=message.queue_offset,
        commit_log_offset=message.commit_log_offset,
        origin_queue_offset=origin,
        producer_group=group,
        real_topic=real_topic,
        real_queue_id=int(queue_text),
        unique_key=properties.get(PropertyKey.UNIQ_KEY, ""),
        check_times=_int_or(properties.get(CHECK_TIMES), 0),
        immunity_ms=immunity_ms(properties),
        born_timestamp_ms=message.born_timestamp_ms,
        store_timestamp_ms=message.store_timestamp_ms,
        tags=properties.get(PropertyKey.TAGS),
        keys=properties.get(PropertyKey.KEYS),
        body_length=len(message.body),
    )


def immunity_ms(properties: dict[str, str]) -> int | None:
    """CHECK_IMMUNITY_TIME_IN_SECONDS in ms; None when absent or not a positive number (then
    transactionTimeOut applies, as Java's getImmunityTime does for -1)."""
    seconds = _int_or(properties.get(CHECK_IMMUNITY_SECONDS), -1)
    return seconds * 1_000 if seconds > 0 else None


def _int_or(text: str | None, default: int) -> int:
    if text is None:
        return default
    try:
        return int(text)
    except ValueError:
        return default


def commit_request(message: MessageExt, half: HalfRecord) -> PutRequest:
    """The committed message (endMessageTransaction): real topic and queue, sysFlag COMMIT,
    PREPARED TRANSACTION OFFSET = the half's commit-log offset; body stored as it was."""
    properties = dict(message.properties)
    for name in _COMMIT_DROPS:
        properties.pop(name, None)
    request = put_copy(message, half.real_topic, half.real_queue_id, encode_properties(properties))
    request.sys_flag = reset_transaction_type(message.sys_flag, MessageSysFlag.TRANSACTION_COMMIT)
    request.prepared_transaction_offset = message.commit_log_offset
    return request


def renew_request(message: MessageExt, check_times: int, origin_queue_offset: int) -> PutRequest:
    """The copy re-appended to the half queue before check number ``check_times``
    (renewHalfMessageInner): born time and host kept, so its age still counts from the
    first send."""
    properties = dict(message.properties)
    properties[CHECK_TIMES] = str(check_times)
    properties[PREPARED_QUEUE_OFFSET] = str(origin_queue_offset)
    return put_copy(message, TRANS_HALF_TOPIC, HALF_QUEUE_ID, encode_properties(properties))


def discard_request(message: MessageExt) -> PutRequest:
    """The half given up after too many checks (resolveDiscardMsg), to
    TRANS_CHECK_MAX_TIME_TOPIC queue 0 with its properties as they were."""
    return put_copy(message, TRANS_CHECK_MAX_TIME_TOPIC, 0, encode_properties(message.properties))


def resume_request(message: MessageExt) -> PutRequest:
    """A given-up half put back in the half queue (RESUME_CHECK_HALF_MESSAGE): check count
    0 and a transaction of its own (no TRAN_PREPARED_QUEUE_OFFSET: its old chain is
    decided)."""
    properties = dict(message.properties)
    properties[CHECK_TIMES] = "0"
    properties.pop(PREPARED_QUEUE_OFFSET, None)
    return put_copy(message, TRANS_HALF_TOPIC, HALF_QUEUE_ID, encode_properties(properties))


def op_request(half_queue_offset: int, now_ms: int, store_host: SocketAddress) -> PutRequest:
    """The op record saying the half at ``half_queue_offset`` is decided (putOpMessage)."""
    return PutRequest(
        topic=TRANS_OP_HALF_TOPIC,
        queue_id=HALF_QUEUE_ID,
        body=str(half_queue_offset).encode("ascii"),
        properties=encode_properties({PropertyKey.TAGS: OP_REMOVE_TAG}),
        born_timestamp_ms=now_ms,
        born_host=store_host,
    )


def parse_op(message: MessageExt) -> int | None:
    """The half queue offset an op record decides; None when it is not a ``d`` op."""
    if message.properties.get(PropertyKey.TAGS) != OP_REMOVE_TAG:
        return None
    text = message.body.decode("ascii", "replace")
    return int(text) if text.isdigit() else None


def check_request(message: MessageExt, half: HalfRecord) -> tuple[dict[str, str], bytes]:
    """CHECK_TRANSACTION_STATE's extFields and body for the (latest) half ``message``
    (DefaultTransactionalMessageCheckListener.sendCheckMessage): the body is the record
    re-encoded (MessageDecoder.encode) with its real topic and queue id, stored body as is.

    Raises:
        ProtocolError: the record cannot be re-encoded (a host that is no IP literal).
    """
    header = CheckTransactionStateRequestHeader(
        tran_state_table_offset=message.queue_offset,
        commit_log_offset=message.commit_log_offset,
        msg_id=half.unique_key or None,
        transaction_id=half.unique_key or None,
        offset_msg_id=message.offset_msg_id,
    )
    body = record_copy(
        message,
        topic=half.real_topic,
        queue_id=half.real_queue_id,
        properties=message.properties,
        reconsume_times=message.reconsume_times,
    )
    return header.to_ext_fields(), body
