"""Offset and queue-metadata headers (docs/protocol.md §2.6): codes 14, 15, 29, 30, 31, 32.

Every response value is written as a string (the C++ client reads only strings).
"""

from __future__ import annotations

from bolide.protocol.headers.fields import WireHeader, wire, wire_header

__all__ = [
    "GetEarliestMsgStoretimeRequestHeader",
    "GetEarliestMsgStoretimeResponseHeader",
    "GetMaxOffsetRequestHeader",
    "GetMaxOffsetResponseHeader",
    "GetMinOffsetRequestHeader",
    "GetMinOffsetResponseHeader",
    "OffsetResponseHeader",
    "QueryConsumerOffsetRequestHeader",
    "QueryConsumerOffsetResponseHeader",
    "QueueRequestHeader",
    "SearchOffsetRequestHeader",
    "SearchOffsetResponseHeader",
    "UpdateConsumerOffsetRequestHeader",
]


@wire_header
class QueryConsumerOffsetRequestHeader(WireHeader):
    """QUERY_CONSUMER_OFFSET (14): the committed offset of (group, topic, queue)."""

    consumer_group: str = wire("consumerGroup")
    topic: str = wire("topic")
    queue_id: int = wire("queueId")


@wire_header
class UpdateConsumerOffsetRequestHeader(WireHeader):
    """UPDATE_CONSUMER_OFFSET (15): store ``commit_offset`` for (group, topic, queue)."""

    consumer_group: str = wire("consumerGroup")
    topic: str = wire("topic")
    queue_id: int = wire("queueId")
    commit_offset: int = wire("commitOffset")


@wire_header
class QueueRequestHeader(WireHeader):
    """``topic`` + ``queueId``: the header of GET_MAX_OFFSET (30), GET_MIN_OFFSET (31) and
    GET_EARLIEST_MSG_STORETIME (32), whose Java classes are identical."""

    topic: str = wire("topic")
    queue_id: int = wire("queueId")


GetMaxOffsetRequestHeader = QueueRequestHeader
GetMinOffsetRequestHeader = QueueRequestHeader
GetEarliestMsgStoretimeRequestHeader = QueueRequestHeader


@wire_header
class SearchOffsetRequestHeader(WireHeader):
    """SEARCH_OFFSET_BY_TIMESTAMP (29): the queue offset stored nearest ``timestamp_ms``."""

    topic: str = wire("topic")
    queue_id: int = wire("queueId")
    timestamp_ms: int = wire("timestamp")


@wire_header
class OffsetResponseHeader(WireHeader):
    """``offset``: the response header of codes 14, 29, 30 and 31 (identical Java classes).
    For GET_MAX_OFFSET it is the next offset to be written (exclusive)."""

    offset: int = wire("offset")


QueryConsumerOffsetResponseHeader = OffsetResponseHeader
SearchOffsetResponseHeader = OffsetResponseHeader
GetMaxOffsetResponseHeader = OffsetResponseHeader
GetMinOffsetResponseHeader = OffsetResponseHeader


@wire_header
class GetEarliestMsgStoretimeResponseHeader(WireHeader):
    """GET_EARLIEST_MSG_STORETIME response: store time (ms) of the message at the min offset,
    -1 when the queue does not exist."""

    timestamp_ms: int = wire("timestamp")
