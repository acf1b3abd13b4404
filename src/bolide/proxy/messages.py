"""Between 5.x protobuf messages and 4.x stored messages (properties, sysFlag, ids).

========================================  ==============================================
5.x (``apache.rocketmq.v2.Message``)        4.x message
========================================  ==============================================
system_properties.message_id              UNIQ_KEY
tag / keys                                TAGS / KEYS (space-joined)
message_group (FIFO)                      __SHARDINGKEY, queue by consistent hash
delivery_timestamp (DELAY)                TIMER_DELIVER_MS
message_type TRANSACTION                  TRAN_MSG=true, PGROUP, sysFlag PREPARED
trace_context                             TRACE_CONTEXT (and traceparent when it is a
                                          W3C traceparent, so 4.x consumers continue
                                          the trace); back from either
user_properties                           the other properties
receipt_handle (received)                 POP_CK
delivery_attempt (received)               reconsume times + 1
========================================  ==============================================
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Mapping

from bolide.protocol.headers.pop import POP_CK_PROPERTY
from bolide.protocol.message import MessageExt, MessageSysFlag, PropertyKey, java_string_hash
from bolide.proxy.proto import definition_pb2 as pb

__all__ = [
    "SYSTEM_PROPERTY_KEYS",
    "consistent_hash",
    "message_type_of",
    "properties_of",
    "to_proto_message",
]

_W3C_TRACEPARENT = re.compile(r"[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}")
"""A W3C Trace Context ``traceparent`` value (version-traceid-parentid-flags)."""

SYSTEM_PROPERTY_KEYS = frozenset(
    {
        # Apache's MessageConst.STRING_HASH_SET, the set its 5.x proxy leaves out of a received
        # message's user properties (GrpcConverter); everything else passes, __SHARDINGKEY and
        # __transactionId__ included.
        PropertyKey.TRACE_ON,
        PropertyKey.MSG_REGION,
        PropertyKey.KEYS,
        PropertyKey.TRACE_CONTEXT,
        PropertyKey.TAGS,
        PropertyKey.WAIT,
        PropertyKey.DELAY,
        PropertyKey.RETRY_TOPIC,
        PropertyKey.REAL_TOPIC,
        PropertyKey.REAL_QID,
        PropertyKey.TRAN_MSG,
        PropertyKey.PGROUP,
        PropertyKey.MIN_OFFSET,
        PropertyKey.MAX_OFFSET,
        PropertyKey.BUYER_ID,
        PropertyKey.ORIGIN_MESSAGE_ID,
        PropertyKey.TRANSFER_FLAG,
        PropertyKey.CORRECTION_FLAG,
        PropertyKey.MQ2_FLAG,
        PropertyKey.RECONSUME_TIME,
        PropertyKey.UNIQ_KEY,
        PropertyKey.MAX_RECONSUME_TIMES,
        PropertyKey.CONSUME_START_TIME,
        POP_CK_PROPERTY,
        "POP_CK_OFFSET",
        "1ST_POP_TIME",
        PropertyKey.TRAN_PREPARED_QUEUE_OFFSET,
        "DUP_INFO",
        "EXTEND_UNIQ_INFO",
        PropertyKey.INSTANCE_ID,
        PropertyKey.CORRELATION_ID,
        PropertyKey.REPLY_TO_CLIENT,
        PropertyKey.TTL,
        PropertyKey.ARRIVE_TIME,
        PropertyKey.PUSH_REPLY_TIME,
        PropertyKey.CLUSTER,
        PropertyKey.MSG_TYPE,
        PropertyKey.INNER_MULTI_QUEUE_OFFSET,
        PropertyKey.TIMER_DELAY_MS,
        PropertyKey.TIMER_DELAY_SEC,
        PropertyKey.TIMER_DELIVER_MS,
        "TIMER_ENQUEUE_MS",
        "TIMER_DEQUEUE_MS",
        "TIMER_ROLL_TIMES",
        "TIMER_OUT_MS",
        "TIMER_DEL_UNIQKEY",
        "TIMER_DELAY_LEVEL",
        "__BORNHOST",
        "BORN_TIMESTAMP",
        "DLQ_ORIGIN_TOPIC",
        "DLQ_ORIGIN_MESSAGE_ID",
        "__CRC32#",
        # Bolide's own broker-side property (Apache has none of that name)
        "BOLIDE_DELIVERED_FROM",
    }
)
"""Properties never shown as 5.x user properties: exactly those Apache's proxy hides."""

_LCG_MULTIPLIER = 2862933555777941757
_MASK_64 = (1 << 64) - 1


def consistent_hash(key: str, buckets: int) -> int:
    """Guava's ``Hashing.consistentHash(key.hashCode(), buckets)``: the queue a FIFO message
    group goes to, the same one the Apache proxy picks."""
    state = java_string_hash(key) & _MASK_64
    candidate = 0
    while True:
        state = (_LCG_MULTIPLIER * state + 1) & _MASK_64
        next_double = ((state >> 33) + 1) / float(1 << 31)
        following = int((candidate + 1) / next_double)
        if 0 <= following < buckets:
            candidate = following
        else:
            return candidate


def properties_of(message: pb.Message, producer_group: str) -> tuple[dict[str, str], int]:
    """The 4.x properties and sysFlag of a 5.x message to send."""
    system = message.system_properties
    properties: dict[str, str] = {
        key: value for key, value in message.user_properties.items() if key
    }
    if system.HasField("tag") and system.tag:
        properties[PropertyKey.TAGS] = system.tag
    if system.keys:
        properties[PropertyKey.KEYS] = " ".join(system.keys)
    properties[PropertyKey.UNIQ_KEY] = system.message_id
    properties[PropertyKey.WAIT] = "true"
    if system.HasField("message_group") and system.message_group:
        properties[PropertyKey.SHARDING_KEY] = system.message_group
    if system.HasField("delivery_timestamp"):
        deliver_ms = (
            system.delivery_timestamp.seconds * 1000 + system.delivery_timestamp.nanos // 1_000_000
        )
        properties[PropertyKey.TIMER_DELIVER_MS] = str(deliver_ms)
    if system.HasField("trace_context") and system.trace_context:
        properties[PropertyKey.TRACE_CONTEXT] = system.trace_context
        if _W3C_TRACEPARENT.fullmatch(system.trace_context):
            properties.setdefault(PropertyKey.TRACEPARENT, system.trace_context)
    sys_flag = 0
    if system.message_type == pb.TRANSACTION:
        properties[PropertyKey.TRAN_MSG] = "true"
        properties[PropertyKey.PGROUP] = producer_group
        sys_flag |= MessageSysFlag.TRANSACTION_PREPARED
        if system.HasField("orphaned_transaction_recovery_duration"):
            seconds = system.orphaned_transaction_recovery_duration.seconds
            properties[PropertyKey.CHECK_IMMUNITY_TIME_IN_SECONDS] = str(seconds)
    return properties, int(sys_flag)


def message_type_of(properties: Mapping[str, str]) -> int:
    """The 5.x MessageType of a stored message."""
    if properties.get(PropertyKey.TRAN_MSG, "").lower() == "true":
        return int(pb.TRANSACTION)
    if properties.get(PropertyKey.SHARDING_KEY):
        return int(pb.FIFO)
    if any(
        properties.get(key)
        for key in (
            PropertyKey.TIMER_DELIVER_MS,
            PropertyKey.TIMER_DELAY_MS,
            PropertyKey.TIMER_DELAY_SEC,
            PropertyKey.DELAY,
        )
    ):
        return int(pb.DELAY)
    return int(pb.NORMAL)


def to_proto_message(message: MessageExt, *, topic: str | None = None) -> pb.Message:
    """The 5.x form of a stored (popped, or checked) message; ``topic`` overrides the stored
    topic (a half message is stored on the half topic)."""
    properties = message.properties
    result = pb.Message()
    result.topic.name = topic or message.topic
    for key, value in properties.items():
        if key not in SYSTEM_PROPERTY_KEYS:
            result.user_properties[key] = value
    system = result.system_properties
    tags = properties.get(PropertyKey.TAGS)
    if tags:
        system.tag = tags
    keys = properties.get(PropertyKey.KEYS)
    if keys:
        system.keys.extend(key for key in keys.split(" ") if key)
    system.message_id = message.msg_id
    system.body_digest.type = pb.CRC32
    system.body_digest.checksum = format(zlib.crc32(message.body) & 0xFFFFFFFF, "08X")
    system.body_encoding = pb.IDENTITY
    system.message_type = message_type_of(properties)  # type: ignore[assignment]
    system.born_timestamp.FromMilliseconds(message.born_timestamp_ms)
    system.born_host = message.born_host[0]
    system.store_timestamp.FromMilliseconds(message.store_timestamp_ms)
    system.store_host = f"{message.store_host[0]}:{message.store_host[1]}"
    deliver = properties.get(PropertyKey.TIMER_DELIVER_MS) or properties.get("TIMER_OUT_MS")
    if deliver and deliver.isdigit():
        system.delivery_timestamp.FromMilliseconds(int(deliver))
    handle = properties.get(POP_CK_PROPERTY)
    if handle:
        system.receipt_handle = handle
        invisible_ms = int(handle.split(" ")[2])
        system.invisible_duration.FromMilliseconds(invisible_ms)
    system.queue_id = message.queue_id
    system.queue_offset = message.queue_offset
    system.delivery_attempt = message.reconsume_times + 1
    group = properties.get(PropertyKey.SHARDING_KEY)
    if group:
        system.message_group = group
    trace_context = properties.get(PropertyKey.TRACE_CONTEXT) or properties.get(
        PropertyKey.TRACEPARENT
    )
    if trace_context:
        system.trace_context = trace_context
    result.body = message.body
    return result
