"""PULL_MESSAGE (11) request and response headers, and the pull sysFlag bits (docs/protocol.md
§2.4)."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Self, final

from bolide.protocol.headers.fields import (
    frozen_constructor,
    optional_str,
    put_optional,
    required_int,
    required_str,
)

__all__ = ["PullMessageRequestHeader", "PullMessageResponseHeader", "PullSysFlag"]


class PullSysFlag(enum.IntFlag):
    """Bits of a pull request's ``sysFlag``."""

    COMMIT_OFFSET = 0x1
    """Also store ``commitOffset`` for (group, topic, queue) — master only, first pass only."""
    SUSPEND = 0x2
    """Long polling allowed: park the pull when nothing is there."""
    SUBSCRIPTION = 0x4
    """Use this request's ``subscription``/``expressionType``, not the heartbeat's."""
    CLASS_FILTER = 0x8
    """Filter-server class filter; obsolete."""
    LITE_PULL_MESSAGE = 0x10
    """Set by the Java lite pull consumer; no broker effect."""


@final
@dataclass(frozen=True, slots=True)
class PullMessageRequestHeader:
    """PULL_MESSAGE request. ``queue_offset`` is the logical offset to read from;
    ``suspend_timeout_ms`` the long-poll hold; ``sys_flag`` a :class:`PullSysFlag` value
    (kept as int: unknown bits survive a round trip)."""

    consumer_group: str
    topic: str
    queue_id: int
    queue_offset: int
    max_messages: int
    sys_flag: int
    commit_offset: int
    suspend_timeout_ms: int
    sub_version: int
    subscription: str | None = None
    expression_type: str | None = None

    @property
    def flags(self) -> PullSysFlag:
        """``sys_flag`` as flags."""
        return PullSysFlag(self.sys_flag)

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> Self:
        """Decode; raises :class:`HeaderError` (missing required field, bad number)."""
        # Hot path (every pull): on any miss, the checked path names the culprit.
        try:
            get = fields.get
            return _construct_pull_header(
                fields["consumerGroup"],
                fields["topic"],
                int(fields["queueId"]),
                int(fields["queueOffset"]),
                int(fields["maxMsgNums"]),
                int(fields["sysFlag"]),
                int(fields["commitOffset"]),
                int(fields["suspendTimeoutMillis"]),
                int(fields["subVersion"]),
                get("subscription") or None,
                get("expressionType") or None,
            )
        except (KeyError, ValueError):
            return cls(
                required_str(fields, "consumerGroup"),
                required_str(fields, "topic"),
                required_int(fields, "queueId"),
                required_int(fields, "queueOffset"),
                required_int(fields, "maxMsgNums"),
                required_int(fields, "sysFlag"),
                required_int(fields, "commitOffset"),
                required_int(fields, "suspendTimeoutMillis"),
                required_int(fields, "subVersion"),
                optional_str(fields, "subscription"),
                optional_str(fields, "expressionType"),
            )

    def to_ext_fields(self) -> dict[str, str]:
        fields = {
            "consumerGroup": self.consumer_group,
            "topic": self.topic,
            "queueId": str(self.queue_id),
            "queueOffset": str(self.queue_offset),
            "maxMsgNums": str(self.max_messages),
            "sysFlag": str(int(self.sys_flag)),
            "commitOffset": str(self.commit_offset),
            "suspendTimeoutMillis": str(self.suspend_timeout_ms),
            "subVersion": str(self.sub_version),
        }
        put_optional(fields, "subscription", self.subscription)
        put_optional(fields, "expressionType", self.expression_type)
        return fields


_construct_pull_header = frozen_constructor(PullMessageRequestHeader)


@dataclass(frozen=True, slots=True)
class PullMessageResponseHeader:
    """Pull response header. All four fields are required in **every** pull response, errors
    included: the Java client unboxes them and C++ fails without them."""

    suggest_which_broker_id: int
    next_begin_offset: int
    min_offset: int
    max_offset: int

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> Self:
        """Decode; raises :class:`HeaderError`."""
        try:
            return cls(
                int(fields["suggestWhichBrokerId"]),
                int(fields["nextBeginOffset"]),
                int(fields["minOffset"]),
                int(fields["maxOffset"]),
            )
        except (KeyError, ValueError):
            return cls(
                required_int(fields, "suggestWhichBrokerId"),
                required_int(fields, "nextBeginOffset"),
                required_int(fields, "minOffset"),
                required_int(fields, "maxOffset"),
            )

    def to_ext_fields(self) -> dict[str, str]:
        return {
            "suggestWhichBrokerId": str(self.suggest_which_broker_id),
            "nextBeginOffset": str(self.next_begin_offset),
            "minOffset": str(self.min_offset),
            "maxOffset": str(self.max_offset),
        }
