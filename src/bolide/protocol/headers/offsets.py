"""Offset and queue-metadata headers (docs/protocol.md §2.6): codes 14, 15, 29, 30, 31, 32.

Every response value is written as a string (the C++ client reads only strings).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Self

from bolide.protocol.headers.fields import required_int, required_str

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


@dataclass(frozen=True, slots=True)
class QueryConsumerOffsetRequestHeader:
    """QUERY_CONSUMER_OFFSET (14): the committed offset of (group, topic, queue)."""

    consumer_group: str
    topic: str
    queue_id: int

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> Self:
        """Decode; raises :class:`HeaderError`."""
        return cls(
            required_str(fields, "consumerGroup"),
            required_str(fields, "topic"),
            required_int(fields, "queueId"),
        )

    def to_ext_fields(self) -> dict[str, str]:
        return {
            "consumerGroup": self.consumer_group,
            "topic": self.topic,
            "queueId": str(self.queue_id),
        }


@dataclass(frozen=True, slots=True)
class UpdateConsumerOffsetRequestHeader:
    """UPDATE_CONSUMER_OFFSET (15): store ``commit_offset`` for (group, topic, queue)."""

    consumer_group: str
    topic: str
    queue_id: int
    commit_offset: int

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> Self:
        """Decode; raises :class:`HeaderError`."""
        return cls(
            required_str(fields, "consumerGroup"),
            required_str(fields, "topic"),
            required_int(fields, "queueId"),
            required_int(fields, "commitOffset"),
        )

    def to_ext_fields(self) -> dict[str, str]:
        return {
            "consumerGroup": self.consumer_group,
            "topic": self.topic,
            "queueId": str(self.queue_id),
            "commitOffset": str(self.commit_offset),
        }


@dataclass(frozen=True, slots=True)
class QueueRequestHeader:
    """``topic`` + ``queueId``: the header of GET_MAX_OFFSET (30), GET_MIN_OFFSET (31) and
    GET_EARLIEST_MSG_STORETIME (32), whose Java classes are identical."""

    topic: str
    queue_id: int

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> Self:
        """Decode; raises :class:`HeaderError`."""
        return cls(required_str(fields, "topic"), required_int(fields, "queueId"))

    def to_ext_fields(self) -> dict[str, str]:
        return {"topic": self.topic, "queueId": str(self.queue_id)}


GetMaxOffsetRequestHeader = QueueRequestHeader
GetMinOffsetRequestHeader = QueueRequestHeader
GetEarliestMsgStoretimeRequestHeader = QueueRequestHeader


@dataclass(frozen=True, slots=True)
class SearchOffsetRequestHeader:
    """SEARCH_OFFSET_BY_TIMESTAMP (29): the queue offset stored nearest ``timestamp_ms``."""

    topic: str
    queue_id: int
    timestamp_ms: int

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> Self:
        """Decode; raises :class:`HeaderError`."""
        return cls(
            required_str(fields, "topic"),
            required_int(fields, "queueId"),
            required_int(fields, "timestamp"),
        )

    def to_ext_fields(self) -> dict[str, str]:
        return {
            "topic": self.topic,
            "queueId": str(self.queue_id),
            "timestamp": str(self.timestamp_ms),
        }


@dataclass(frozen=True, slots=True)
class OffsetResponseHeader:
    """``offset``: the response header of codes 14, 29, 30 and 31 (identical Java classes).
    For GET_MAX_OFFSET it is the next offset to be written (exclusive)."""

    offset: int

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> Self:
        """Decode; raises :class:`HeaderError`."""
        return cls(required_int(fields, "offset"))

    def to_ext_fields(self) -> dict[str, str]:
        return {"offset": str(self.offset)}


QueryConsumerOffsetResponseHeader = OffsetResponseHeader
SearchOffsetResponseHeader = OffsetResponseHeader
GetMaxOffsetResponseHeader = OffsetResponseHeader
GetMinOffsetResponseHeader = OffsetResponseHeader


@dataclass(frozen=True, slots=True)
class GetEarliestMsgStoretimeResponseHeader:
    """GET_EARLIEST_MSG_STORETIME response: store time (ms) of the message at the min offset,
    -1 when the queue does not exist."""

    timestamp_ms: int

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> Self:
        """Decode; raises :class:`HeaderError`."""
        return cls(required_int(fields, "timestamp"))

    def to_ext_fields(self) -> dict[str, str]:
        return {"timestamp": str(self.timestamp_ms)}
