"""Which queue a producer sends to: round robin with latency-based broker avoidance, and the
stable sharding-key choice of orderly sends. Pure; time is passed in (monotonic ms).

Latency avoidance (Java's MQFaultStrategy, which Bolide turns on by default): after every
send the broker is charged its latency, or SEND_FAILURE_LATENCY_MS when the send failed, and
is then avoided for the duration paired with the highest level that latency reaches::

    latency  >=   50   100   550  1000  2000  3000  15000 ms
    avoid        0     0    30s   60s  120s  180s   600s

Selection walks the publish queues round robin and takes the first queue whose broker is not
being avoided (on a retry, also not the broker that just failed). When every broker is being
avoided it takes the least bad one (fewest, earliest-ending penalties) rather than failing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bolide.base import limits
from bolide.base.errors import NoRouteError
from bolide.protocol.bodies import MessageQueue
from bolide.protocol.message import java_string_hash

__all__ = [
    "LatencyFaultTable",
    "QueueSelector",
    "not_available_duration_ms",
    "select_by_sharding_key",
]


def not_available_duration_ms(latency_ms: int) -> int:
    """How long to avoid a broker after a send that took ``latency_ms`` (table above)."""
    levels = limits.SEND_LATENCY_LEVELS_MS
    for index in range(len(levels) - 1, -1, -1):
        if latency_ms >= levels[index]:
            return limits.SEND_NOT_AVAILABLE_DURATIONS_MS[index]
    return 0


@dataclass(slots=True)
class _FaultItem:
    latency_ms: int
    available_from_ms: int


class LatencyFaultTable:
    """Per broker name: the last send latency and until when the broker is avoided."""

    def __init__(self) -> None:
        self._items: dict[str, _FaultItem] = {}

    def record(self, broker_name: str, latency_ms: int, now_ms: int, *, failed: bool) -> None:
        """Charge ``broker_name`` for a send that took ``latency_ms`` (or failed)."""
        charged_ms = limits.SEND_FAILURE_LATENCY_MS if failed else latency_ms
        duration_ms = not_available_duration_ms(charged_ms)
        self._items[broker_name] = _FaultItem(charged_ms, now_ms + duration_ms)

    def is_available(self, broker_name: str, now_ms: int) -> bool:
        """Whether ``broker_name`` is not being avoided at ``now_ms``."""
        item = self._items.get(broker_name)
        return item is None or now_ms >= item.available_from_ms

    def least_bad(self, broker_names: Sequence[str], now_ms: int) -> str | None:
        """Among ``broker_names``: the available one with the lowest latency, else the one
        whose penalty ends first. None when ``broker_names`` is empty."""
        if not broker_names:
            return None

        def badness(name: str) -> tuple[bool, int, int, str]:
            item = self._items.get(name)
            if item is None:
                return (False, 0, 0, name)
            return (now_ms < item.available_from_ms, item.available_from_ms, item.latency_ms, name)

        return min(broker_names, key=badness)

    def forget(self, broker_name: str) -> None:
        self._items.pop(broker_name, None)


class QueueSelector:
    """Round-robin queue choice with latency avoidance (see the module docstring).

    One selector per producer; the round-robin index is shared by all its topics, as Java's
    per-topic index is in practice (both only spread load). ``start_index`` seeds it.
    """

    def __init__(self, *, latency_avoidance: bool = True, start_index: int = 0) -> None:
        self._latency_avoidance = latency_avoidance
        self._index = start_index
        self.faults = LatencyFaultTable()

    def select(
        self, queues: Sequence[MessageQueue], now_ms: int, last_broker_name: str | None = None
    ) -> MessageQueue:
        """The queue of ``queues`` for the next attempt; ``last_broker_name`` is the broker the
        previous attempt of this send failed on (avoided when another one exists).

        Raises:
            NoRouteError: ``queues`` is empty.
        """
        if not queues:
            raise NoRouteError("the topic has no writable queue")
        start = self._index
        self._index += 1
        count = len(queues)
        if self._latency_avoidance:
            for step in range(count):
                queue = queues[(start + step) % count]
                if queue.broker_name == last_broker_name and self._has_other_broker(queues):
                    continue
                if self.faults.is_available(queue.broker_name, now_ms):
                    self._index = start + step + 1
                    return queue
            names = sorted({queue.broker_name for queue in queues})
            if last_broker_name is not None and len(names) > 1:
                names.remove(last_broker_name)
            best = self.faults.least_bad(names, now_ms)
            for step in range(count):
                queue = queues[(start + step) % count]
                if queue.broker_name == best:
                    return queue
        for step in range(count):
            queue = queues[(start + step) % count]
            if queue.broker_name != last_broker_name:
                return queue
        return queues[start % count]

    def record(self, broker_name: str, latency_ms: int, now_ms: int, *, failed: bool) -> None:
        """Report how a send to ``broker_name`` went (no effect without latency avoidance)."""
        if self._latency_avoidance:
            self.faults.record(broker_name, latency_ms, now_ms, failed=failed)

    @staticmethod
    def _has_other_broker(queues: Sequence[MessageQueue]) -> bool:
        first = queues[0].broker_name
        return any(queue.broker_name != first for queue in queues)


def select_by_sharding_key(queues: Sequence[MessageQueue], sharding_key: str) -> MessageQueue:
    """The queue for ``sharding_key``: the same key always gives the same queue while the
    queue list is unchanged.

    The index is Java's ``String.hashCode`` of the key modulo the queue count, made
    non-negative (Java's SelectMessageQueueByHash), so Java and Python producers that shard
    by the same string keys agree. Raises NoRouteError when ``queues`` is empty.
    """
    if not queues:
        raise NoRouteError("the topic has no writable queue")
    return queues[abs(_java_remainder(java_string_hash(sharding_key), len(queues)))]


def _java_remainder(dividend: int, divisor: int) -> int:
    """Java's ``%``: the sign follows the dividend (Python's follows the divisor)."""
    remainder = abs(dividend) % divisor
    return -remainder if dividend < 0 else remainder
