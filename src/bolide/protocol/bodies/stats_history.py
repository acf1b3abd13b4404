"""A broker's per-minute stats history: Bolide's GET_STATS_HISTORY (code
:data:`~bolide.protocol.codes.RequestCode.BOLIDE_GET_STATS_HISTORY`) header and body.

RocketMQ keeps only the current minute/hour/day windows of a stats cell; charts of the last
hour need the figures minute by minute. Request extFields::

    topic   the topic (required)
    group   a consumer group: the topic@group's lag and get rate instead of the put rate

Response body (JSON, Java-style field names)::

    {"brokerName": "broker-a", "topic": "orders", "group": "billing", "intervalMs": 60000,
     "points": [{"timestampMs": 1700000060000, "messages": 120, "tps": 2.0, "lag": 30}, ...]}

One point per minute, oldest first, at most STATS_HISTORY_POINTS_COUNT. ``messages`` counts
the messages put (or got by the group) since the point before, ``tps`` is that per second,
``lag`` the group's messages not yet consumed at that minute (0 for a topic's history).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Self

import orjson

from bolide.protocol.bodies.values import (
    as_object,
    get_float,
    get_int,
    get_list,
    get_optional_str,
    get_str,
    parse_object,
)
from bolide.protocol.headers.fields import optional_str, put_optional, required_str

__all__ = ["GetStatsHistoryRequestHeader", "StatsHistory", "StatsHistoryPoint"]


@dataclass(frozen=True, slots=True)
class GetStatsHistoryRequestHeader:
    """The topic, and the group when a consumer's history is wanted."""

    topic: str
    group: str | None = None

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> Self:
        """Decode; raises :class:`~bolide.protocol.headers.fields.HeaderError`."""
        return cls(required_str(fields, "topic"), optional_str(fields, "group"))

    def to_ext_fields(self) -> dict[str, str]:
        fields = {"topic": self.topic}
        put_optional(fields, "group", self.group)
        return fields


@dataclass(frozen=True, slots=True)
class StatsHistoryPoint:
    """One minute: ``messages`` put (or got) since the point before, ``tps`` per second over
    that span, ``lag`` in messages at ``timestamp_ms`` (epoch ms, the broker's clock)."""

    timestamp_ms: int
    messages: int
    tps: float
    lag: int = 0

    def to_object(self) -> dict[str, Any]:
        return {
            "timestampMs": self.timestamp_ms,
            "messages": self.messages,
            "tps": self.tps,
            "lag": self.lag,
        }

    @classmethod
    def from_object(cls, obj: Mapping[Any, Any]) -> Self:
        return cls(
            get_int(obj, "timestampMs"),
            get_int(obj, "messages", 0),
            get_float(obj, "tps"),
            get_int(obj, "lag", 0),
        )


@dataclass(frozen=True, slots=True)
class StatsHistory:
    """The answer of GET_STATS_HISTORY: a topic's (or topic@group's) points, oldest first."""

    broker_name: str
    topic: str
    group: str | None
    interval_ms: int
    points: list[StatsHistoryPoint] = field(default_factory=list)

    def to_json(self) -> bytes:
        obj: dict[str, Any] = {
            "brokerName": self.broker_name,
            "topic": self.topic,
            "intervalMs": self.interval_ms,
            "points": [point.to_object() for point in self.points],
        }
        if self.group is not None:
            obj["group"] = self.group
        return orjson.dumps(obj)

    @classmethod
    def from_json(cls, data: bytes | bytearray | memoryview | str) -> Self:
        """Parse; raises :class:`~bolide.protocol.bodies.fastjson.BodyError`."""
        obj = parse_object(data, "StatsHistory")
        return cls(
            get_str(obj, "brokerName", ""),
            get_str(obj, "topic"),
            get_optional_str(obj, "group"),
            get_int(obj, "intervalMs"),
            [
                StatsHistoryPoint.from_object(as_object(item, "point"))
                for item in get_list(obj, "points")
            ],
        )
