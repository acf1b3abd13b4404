"""What the broker writes about a stored message, as 4.x trace records: pure functions from a
message (and what the broker saw of it) to :class:`~bolide.protocol.trace.TraceRecord`.

The broker sees no consume call, so its records use the fields a client would write, read
from the broker's side:

==============================================  ============================================
stored message                                  records
==============================================  ============================================
on a user topic                                 ``Pub`` (NORMAL_MSG); group = PGROUP if sent
on SCHEDULE_TOPIC_XXXX / the timer topic        ``Pub`` (DELAY_MSG) for REAL_TOPIC
... arriving on its real topic                  ``Pub`` (DELAY_MSG) again: the arrival
a half message                                  ``Pub`` (TRANS_MSG_HALF) for REAL_TOPIC
END_TRANSACTION commit / rollback settled      ``EndTransaction`` COMMIT / ROLLBACK_MESSAGE
a send-back (to %RETRY%<group>, delayed or not)  ``SubAfter`` success=false, context FAILED
a POP retry copy (%RETRY%<group>_<topic>)       ``SubAfter`` failed (the invisible time ran out)
a dead letter (%DLQ%<group>)                    ``SubAfter`` failed, then ``Pub`` on %DLQ%
==============================================  ============================================

A ``Pub`` record's cost is store time - born time (the producer-to-store latency); its client
host is the born host. The Pub of a dead letter or a delay arrival is timed at its store time
(cost 0): the broker moved it then. Deliveries and commits are in :mod:`.recorder`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from bolide.base.errors import ProtocolError
from bolide.protocol.address import format_socket_address
from bolide.protocol.headers.pop import FIRST_POP_TIME_PROPERTY
from bolide.protocol.message import TRANSACTION_MASK, MessageExt, MessageSysFlag, PropertyKey
from bolide.protocol.system_topics import (
    DLQ_GROUP_TOPIC_PREFIX,
    POP_RETRY_SEPARATOR_V2,
    RETRY_GROUP_TOPIC_PREFIX,
    SCHEDULE_TOPIC,
    TIMER_TOPIC,
    TRANS_HALF_TOPIC,
    is_pop_retry_topic_v2,
)
from bolide.protocol.trace import TraceMessageType, TraceRecord, TraceType

__all__ = [
    "FAILED_CONTEXT_CODE",
    "SUCCESS_CONTEXT_CODE",
    "TIME_OUT_CONTEXT_CODE",
    "arrival_records",
    "in_life_order",
    "sub_after",
    "transaction_end",
]

SUCCESS_CONTEXT_CODE = 0
"""ConsumeReturnType.SUCCESS."""
TIME_OUT_CONTEXT_CODE = 1
"""ConsumeReturnType.TIME_OUT: a POP delivery's invisible time ran out without an ack."""
FAILED_CONTEXT_CODE = 4
"""ConsumeReturnType.FAILED: the consumer asked for a retry."""
_WAITING_TOPICS = frozenset({SCHEDULE_TOPIC, TIMER_TOPIC})


def _address(message: MessageExt, *, store: bool) -> str:
    return format_socket_address(message.store_host if store else message.born_host)


def _offset_msg_id(message: MessageExt) -> str:
    try:
        return message.offset_msg_id
    except ProtocolError:  # a store host that is no IP literal: the id cannot be written
        return ""


def _retry_group(topic: str, properties: Mapping[str, str]) -> str:
    """The group of a retry topic: ``%RETRY%<group>``, or a POP retry topic
    ``%RETRY%<group>_<topic>`` (its copies carry 1ST_POP_TIME and RETRY_TOPIC = <topic>) or
    its V2 name ``%RETRY%<group>+<topic>`` (enableRetryTopicV2; no group holds a ``+``)."""
    name = topic[len(RETRY_GROUP_TOPIC_PREFIX) :]
    if is_pop_retry_topic_v2(topic):
        return name.split(POP_RETRY_SEPARATOR_V2, 1)[0]
    origin = properties.get(PropertyKey.RETRY_TOPIC, "")
    if origin and FIRST_POP_TIME_PROPERTY in properties and name.endswith(f"_{origin}"):
        return name[: -len(origin) - 1]
    return name


def _pub(
    message: MessageExt,
    region_id: str,
    topic: str,
    kind: TraceMessageType,
    group: str = "",
    *,
    moved: bool = False,
) -> TraceRecord:
    """``moved``: the broker itself stored the message anew (a dead letter, a delay arrival):
    the time is the store time, the cost 0."""
    properties = message.properties
    born_ms = message.store_timestamp_ms if moved else message.born_timestamp_ms
    return TraceRecord(
        TraceType.PUB,
        timestamp_ms=born_ms,
        region_id=region_id,
        group=group or properties.get(PropertyKey.PGROUP, ""),
        topic=topic,
        msg_id=message.msg_id,
        tags=properties.get(PropertyKey.TAGS, ""),
        keys=properties.get(PropertyKey.KEYS, ""),
        store_host=_address(message, store=True),
        body_length=len(message.body),
        cost_time_ms=max(0, message.store_timestamp_ms - born_ms),
        message_type=kind,
        offset_msg_id=_offset_msg_id(message),
        success=True,
        client_host=_address(message, store=False),
    )


def sub_after(
    message_id: str,
    keys: str,
    group: str,
    request_id: str,
    *,
    success: bool,
    cost_time_ms: int,
    now_ms: int,
    context_code: int | None = None,
) -> TraceRecord:
    """A consume result: ``success`` (context SUCCESS) or a retry asked (context FAILED,
    unless ``context_code`` says another)."""
    if context_code is None:
        context_code = SUCCESS_CONTEXT_CODE if success else FAILED_CONTEXT_CODE
    return TraceRecord(
        TraceType.SUB_AFTER,
        timestamp_ms=now_ms,
        group=group,
        msg_id=message_id,
        keys=keys,
        request_id=request_id,
        cost_time_ms=max(0, cost_time_ms),
        success=success,
        context_code=context_code,
    )


def arrival_records(
    message: MessageExt, region_id: str, delivered_marker: str
) -> tuple[str | None, list[TraceRecord]]:
    """The records of one stored ``message`` (see the module's table), and the consumer group
    whose consume attempt failed when it is a send-back or a dead letter (else None): the
    caller closes that group's open delivery with the failed SubAfter it builds.

    ``delivered_marker`` is the property the delay services put on a message they deliver.
    """
    topic, properties = message.topic, message.properties
    if topic in _WAITING_TOPICS:
        real = properties.get(PropertyKey.REAL_TOPIC, "")
        if real.startswith(RETRY_GROUP_TOPIC_PREFIX):
            return _retry_group(real, properties), []
        return None, [_pub(message, region_id, real, TraceMessageType.DELAY_MSG)]
    if topic == TRANS_HALF_TOPIC:
        real = properties.get(PropertyKey.REAL_TOPIC, "")
        return None, [_pub(message, region_id, real, TraceMessageType.TRANS_MSG_HALF)]
    if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        if delivered_marker in properties:  # a delayed send-back arriving: recorded at its put
            return None, []
        return _retry_group(topic, properties), []
    if topic.startswith(DLQ_GROUP_TOPIC_PREFIX):
        group = topic[len(DLQ_GROUP_TOPIC_PREFIX) :]
        dead = _pub(message, region_id, topic, TraceMessageType.NORMAL_MSG, group, moved=True)
        return group, [dead]
    if delivered_marker in properties:
        return None, [_pub(message, region_id, topic, TraceMessageType.DELAY_MSG, moved=True)]
    if message.sys_flag & TRANSACTION_MASK == MessageSysFlag.TRANSACTION_COMMIT:
        return None, []  # a committed half: its END_TRANSACTION gives the record
    return None, [_pub(message, region_id, topic, TraceMessageType.NORMAL_MSG)]


def transaction_end(
    half: MessageExt,
    region_id: str,
    group: str,
    committed: bool,
    transaction_id: str,
    *,
    from_check: bool,
    now_ms: int,
) -> TraceRecord:
    """The ``EndTransaction`` record of a half message settled by END_TRANSACTION."""
    properties = half.properties
    return TraceRecord(
        TraceType.END_TRANSACTION,
        timestamp_ms=now_ms,
        region_id=region_id,
        group=group or properties.get(PropertyKey.PGROUP, ""),
        topic=properties.get(PropertyKey.REAL_TOPIC, half.topic),
        msg_id=half.msg_id,
        tags=properties.get(PropertyKey.TAGS, ""),
        keys=properties.get(PropertyKey.KEYS, ""),
        store_host=_address(half, store=True),
        message_type=TraceMessageType.TRANS_MSG_HALF,
        transaction_id=transaction_id or half.msg_id,  # Java's transaction id is the UNIQ_KEY
        transaction_state="COMMIT_MESSAGE" if committed else "ROLLBACK_MESSAGE",
        from_transaction_check=from_check,
    )


def in_life_order(
    deliveries: Sequence[TraceRecord], results: Sequence[TraceRecord]
) -> list[TraceRecord]:
    """``SubBefore`` records and results (``SubAfter``, each dead letter's ``Pub`` right after
    its failure) of one step, merged by time as the message lived them.

    Readers sort by time alone, so two records of one millisecond must be written in their
    order: a result goes before the deliveries of its millisecond (the failure that made a
    retry copy, before the copy's delivery; a came-back in place, before the next delivery)
    unless it closes one of them (a delivery and its own result); a dead letter's ``Pub``
    stays with its failure."""
    opened = {(record.request_id, record.timestamp_ms) for record in deliveries}
    ranked = [((record.timestamp_ms, 1), record) for record in deliveries]
    tie = 0
    for record in results:
        if record.type is not TraceType.PUB:
            tie = 2 if (record.request_id, record.timestamp_ms) in opened else 0
        ranked.append(((record.timestamp_ms, tie), record))
    ranked.sort(key=lambda item: item[0])  # stable: a failure keeps its Pub after it
    return [record for _, record in ranked]
