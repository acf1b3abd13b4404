"""Broker statistics headers: VIEW_BROKER_STATS_DATA (315), QUERY_CONSUME_TIME_SPAN (303),
QUERY_CONSUME_QUEUE (321). GET/UPDATE_BROKER_CONFIG (26/25) carry no request header; 26
answers ``version`` (the config's DataVersion as JSON text)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Self

from bolide.protocol.headers.fields import (
    optional_str,
    put_optional,
    required_int,
    required_str,
)

__all__ = [
    "QueryConsumeQueueRequestHeader",
    "QueryConsumeTimeSpanRequestHeader",
    "ViewBrokerStatsDataRequestHeader",
]


@dataclass(frozen=True, slots=True)
class ViewBrokerStatsDataRequestHeader:
    """VIEW_BROKER_STATS_DATA (315): a stats name (TOPIC_PUT_NUMS, GROUP_GET_NUMS, ...) and
    its key (a topic, ``topic@group``, the cluster name)."""

    stats_name: str
    stats_key: str

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> Self:
        """Decode; raises :class:`HeaderError`."""
        return cls(required_str(fields, "statsName"), required_str(fields, "statsKey"))

    def to_ext_fields(self) -> dict[str, str]:
        return {"statsName": self.stats_name, "statsKey": self.stats_key}


@dataclass(frozen=True, slots=True)
class QueryConsumeTimeSpanRequestHeader:
    """QUERY_CONSUME_TIME_SPAN (303): per queue of ``topic``, the store times of its oldest
    and newest message and of the group's next message."""

    topic: str
    group: str

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> Self:
        """Decode; raises :class:`HeaderError`."""
        return cls(required_str(fields, "topic"), required_str(fields, "group"))

    def to_ext_fields(self) -> dict[str, str]:
        return {"topic": self.topic, "group": self.group}


@dataclass(frozen=True, slots=True)
class QueryConsumeQueueRequestHeader:
    """QUERY_CONSUME_QUEUE (321): ``count`` consume-queue entries of one queue from ``index``;
    with ``consumerGroup``, its subscription of the topic too."""

    topic: str
    queue_id: int
    index: int
    count: int
    consumer_group: str | None = None

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> Self:
        """Decode; raises :class:`HeaderError`."""
        return cls(
            required_str(fields, "topic"),
            required_int(fields, "queueId"),
            required_int(fields, "index"),
            required_int(fields, "count"),
            optional_str(fields, "consumerGroup"),
        )

    def to_ext_fields(self) -> dict[str, str]:
        fields = {
            "topic": self.topic,
            "queueId": str(self.queue_id),
            "index": str(self.index),
            "count": str(self.count),
        }
        put_optional(fields, "consumerGroup", self.consumer_group)
        return fields
