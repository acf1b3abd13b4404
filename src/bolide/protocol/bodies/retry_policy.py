"""A consumer group's ``groupRetryPolicy`` (RocketMQ 5's SubscriptionGroupConfig field): how long
a 5.x consumer waits before a failed message is delivered again. The proxy hands it to push
consumers as their Settings' ``backoff_policy``.

::

    {"type": "CUSTOMIZED", "customizedRetryPolicy": {"next": [1000, 5000, 10000]}}
    {"type": "EXPONENTIAL",
     "exponentialRetryPolicy": {"initial": 5000, "max": 7200000, "multiplier": 2}}

Times are milliseconds: ``next[i]`` is the wait before attempt ``i + 2`` (the last one repeats);
an exponential wait is ``initial * multiplier ** (attempt - 1)``, at most ``max``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Self

from bolide.protocol.bodies.fastjson import BodyError
from bolide.protocol.bodies.values import as_object, get_enum, get_int, get_list, get_object, to_int

__all__ = ["GroupRetryPolicy", "RetryPolicyType"]


class RetryPolicyType(enum.IntEnum):
    """Java's GroupRetryPolicyType (by name on the wire)."""

    EXPONENTIAL = 0
    CUSTOMIZED = 1


@dataclass(frozen=True, slots=True)
class GroupRetryPolicy:
    """A group's retry back-off (see the module docstring). CUSTOMIZED without waits (Java's
    default object) means the default waits, RocketMQ's delay levels."""

    type: RetryPolicyType = RetryPolicyType.CUSTOMIZED
    next_ms: tuple[int, ...] = ()
    """CUSTOMIZED: the waits, in ms."""
    initial_ms: int = 5_000
    """EXPONENTIAL: the first wait, in ms."""
    max_ms: int = 7_200_000
    """EXPONENTIAL: the longest wait, in ms."""
    multiplier: int = 2
    """EXPONENTIAL: each wait is the previous one times this."""

    def to_object(self) -> dict[str, Any]:
        """The JSON object (both policies, as Java writes them)."""
        return {
            "type": self.type.name,
            "customizedRetryPolicy": {"next": list(self.next_ms)},
            "exponentialRetryPolicy": {
                "initial": self.initial_ms,
                "max": self.max_ms,
                "multiplier": self.multiplier,
            },
        }

    @classmethod
    def from_object(cls, value: Any) -> Self:
        """From the JSON object (Java writes ``{"type":"CUSTOMIZED"}`` alone for its default:
        no waits, meaning the default waits). Raises :class:`BodyError` for an unknown type, a
        negative time or a multiplier under 1."""
        obj = as_object(value, "group retry policy")
        kind = get_enum(obj, "type", RetryPolicyType, RetryPolicyType.CUSTOMIZED)
        customized = get_object(obj, "customizedRetryPolicy")
        exponential = get_object(obj, "exponentialRetryPolicy")
        policy = cls(
            kind,
            tuple(to_int(item, "next") for item in get_list(customized, "next")),
            get_int(exponential, "initial", 5_000),
            get_int(exponential, "max", 7_200_000),
            get_int(exponential, "multiplier", 2),
        )
        if any(wait < 0 for wait in (*policy.next_ms, policy.initial_ms, policy.max_ms)):
            raise BodyError("group retry policy: a wait is negative")
        if kind is RetryPolicyType.EXPONENTIAL and policy.multiplier < 1:
            raise BodyError(f"group retry policy: multiplier {policy.multiplier} is under 1")
        return policy
