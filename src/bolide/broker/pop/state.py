"""The pure state of POP consumption: per (topic, group, queue) where popping continues, which
messages are in flight (invisible until a deadline) and which came back (visible again).

Decide, then act: these classes only compute; :mod:`bolide.broker.pop.service` reads the
store, writes the checkpoint log and answers requests. Every change is also expressed as a
log record (a plain dict, see :mod:`bolide.broker.pop.log`) so that replaying the log after a
crash rebuilds exactly this state. Times are wall-clock milliseconds since the epoch: they
travel in receipt handles and must mean the same after a restart.

Per queue::

    committed offset = min(in flight, came back, pop offset)   (reported as the group's offset)
    pop offset       = the next message never popped
    in flight        = {queue offset: (pop time, invisible time, attempts)}
    came back        = {queue offset: attempts so far}          (served before new messages)

A message's ``attempts`` counts its deliveries: 1 on its first pop. Its reconsume times, as
clients see it, is the stored value plus ``attempts - 1``.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Any

__all__ = ["InFlight", "PopKey", "PopState", "QueueState"]

PopKey = tuple[str, str, int]
"""(topic, group, queue id)."""


@dataclass(slots=True)
class InFlight:
    """A delivered, not yet acknowledged message."""

    pop_time_ms: int
    invisible_time_ms: int
    attempts: int
    commit_log_offset: int

    @property
    def deadline_ms(self) -> int:
        return self.pop_time_ms + self.invisible_time_ms


@dataclass(slots=True)
class QueueState:
    """One (topic, group, queue)."""

    pop_offset: int
    in_flight: dict[int, InFlight] = field(default_factory=dict)
    came_back: dict[int, tuple[int, int]] = field(default_factory=dict)
    """queue offset -> (attempts so far, commit-log offset)."""

    @property
    def committed_offset(self) -> int:
        lowest = self.pop_offset
        if self.in_flight:
            lowest = min(lowest, min(self.in_flight))
        if self.came_back:
            lowest = min(lowest, min(self.came_back))
        return lowest

    @property
    def blocked(self) -> bool:
        """An orderly pop may not take this queue: a batch is still in flight."""
        return bool(self.in_flight)


class PopState:
    """Every queue's POP state, plus a deadline heap for revival."""

    def __init__(self) -> None:
        self.queues: dict[PopKey, QueueState] = {}
        self._deadlines: list[tuple[int, PopKey, int, int]] = []
        """(deadline ms, key, queue offset, pop time ms); stale entries are skipped."""

    # --- changes (each returns the log record that replays it) ------------------------------

    def popped(
        self,
        key: PopKey,
        offsets: list[tuple[int, int, int]],
        next_pop_offset: int,
        pop_time_ms: int,
        invisible_time_ms: int,
    ) -> dict[str, Any]:
        """``offsets`` = [(queue offset, attempts, commit-log offset)] delivered now;
        the pop offset moves to ``next_pop_offset`` (never backwards)."""
        queue = self.queues.setdefault(key, QueueState(next_pop_offset))
        queue.pop_offset = max(queue.pop_offset, next_pop_offset)
        for offset, attempts, commit_log_offset in offsets:
            queue.came_back.pop(offset, None)
            entry = InFlight(pop_time_ms, invisible_time_ms, attempts, commit_log_offset)
            queue.in_flight[offset] = entry
            heapq.heappush(self._deadlines, (entry.deadline_ms, key, offset, pop_time_ms))
        return {
            "t": "pop",
            "k": list(key),
            "m": [list(each) for each in offsets],
            "n": next_pop_offset,
            "p": pop_time_ms,
            "i": invisible_time_ms,
        }

    def acked(self, key: PopKey, offset: int, pop_time_ms: int) -> dict[str, Any] | None:
        """Forget the message if ``pop_time_ms`` is its current delivery's; None otherwise (a
        stale handle: the message came back or was acked already)."""
        queue = self.queues.get(key)
        entry = None if queue is None else queue.in_flight.get(offset)
        if queue is None or entry is None or entry.pop_time_ms != pop_time_ms:
            return None
        del queue.in_flight[offset]
        return {"t": "ack", "k": list(key), "o": offset, "p": pop_time_ms}

    def changed(
        self, key: PopKey, offset: int, pop_time_ms: int, new_pop_time_ms: int, invisible_ms: int
    ) -> dict[str, Any] | None:
        """Give the in-flight message a new delivery time and invisible time (same attempt);
        None when the handle is stale."""
        queue = self.queues.get(key)
        entry = None if queue is None else queue.in_flight.get(offset)
        if queue is None or entry is None or entry.pop_time_ms != pop_time_ms:
            return None
        entry.pop_time_ms = new_pop_time_ms
        entry.invisible_time_ms = invisible_ms
        heapq.heappush(self._deadlines, (entry.deadline_ms, key, offset, new_pop_time_ms))
        return {
            "t": "chg",
            "k": list(key),
            "o": offset,
            "p": pop_time_ms,
            "q": new_pop_time_ms,
            "i": invisible_ms,
        }

    def dead_lettered(self, key: PopKey, offset: int) -> dict[str, Any]:
        """The message went to the DLQ: it is done for the group."""
        return self._done("dlq", key, offset)

    def finished(self, key: PopKey, offset: int) -> dict[str, Any]:
        """The message is done for the group without an ack: its retry copy was stored, or
        it came back and is not what the group now asks for (Apache acks a NO_MATCH)."""
        return self._done("skip", key, offset)

    def _done(self, entry_type: str, key: PopKey, offset: int) -> dict[str, Any]:
        """Forget the message at ``offset`` (in flight or come back); the log entry of type
        ``entry_type`` saying so."""
        queue = self.queues.get(key)
        if queue is not None:
            queue.in_flight.pop(offset, None)
            queue.came_back.pop(offset, None)
        return {"t": entry_type, "k": list(key), "o": offset}

    def reset(self, key: PopKey, offset: int) -> dict[str, Any]:
        """Start again at ``offset``: every in-flight and returned message is forgotten."""
        self.queues[key] = QueueState(offset)
        return {"t": "reset", "k": list(key), "o": offset}

    # --- revival ------------------------------------------------------------------------------

    def next_deadline_ms(self) -> int | None:
        return self._deadlines[0][0] if self._deadlines else None

    def due(self, now_ms: int) -> list[tuple[PopKey, int, InFlight]]:
        """In-flight messages whose invisible time ran out by ``now_ms`` (still in flight;
        the caller brings each back with :meth:`bring_back` or dead-letters it)."""
        found: list[tuple[PopKey, int, InFlight]] = []
        while self._deadlines and self._deadlines[0][0] <= now_ms:
            _, key, offset, pop_time_ms = heapq.heappop(self._deadlines)
            queue = self.queues.get(key)
            entry = None if queue is None else queue.in_flight.get(offset)
            if entry is not None and entry.pop_time_ms == pop_time_ms:
                found.append((key, offset, entry))
        return found

    def bring_back(self, key: PopKey, offset: int) -> None:
        """Make an expired in-flight message visible again (not logged: replay derives it)."""
        queue = self.queues.get(key)
        if queue is None:
            return
        entry = queue.in_flight.pop(offset, None)
        if entry is not None:
            queue.came_back[offset] = (entry.attempts, entry.commit_log_offset)

    # --- replay -------------------------------------------------------------------------------

    def apply(self, record: dict[str, Any]) -> None:
        """Replay one log record (see the change methods for the fields)."""
        kind = record["t"]
        key: PopKey = (str(record["k"][0]), str(record["k"][1]), int(record["k"][2]))
        if kind == "pop":
            offsets = [(int(o), int(a), int(c)) for o, a, c in record["m"]]
            self.popped(key, offsets, int(record["n"]), int(record["p"]), int(record["i"]))
        elif kind == "ack":
            self.acked(key, int(record["o"]), int(record["p"]))
        elif kind == "chg":
            self.changed(
                key, int(record["o"]), int(record["p"]), int(record["q"]), int(record["i"])
            )
        elif kind == "dlq":
            self.dead_lettered(key, int(record["o"]))
        elif kind == "skip":
            self.finished(key, int(record["o"]))
        elif kind == "reset":
            self.reset(key, int(record["o"]))
        else:
            raise ValueError(f"unknown POP log record type {kind!r}")

    def snapshot(self) -> list[dict[str, Any]]:
        """The fewest records that rebuild the current state (log compaction)."""
        records: list[dict[str, Any]] = []
        for key, queue in self.queues.items():
            records.append({"t": "reset", "k": list(key), "o": queue.pop_offset})
            by_time: dict[tuple[int, int], list[list[int]]] = {}
            for offset, entry in sorted(queue.in_flight.items()):
                by_time.setdefault((entry.pop_time_ms, entry.invisible_time_ms), []).append(
                    [offset, entry.attempts, entry.commit_log_offset]
                )
            for offset, (attempts, commit_log_offset) in sorted(queue.came_back.items()):
                # Came back = in flight with a deadline in the past: replay brings it back.
                by_time.setdefault((0, 0), []).append([offset, attempts, commit_log_offset])
            for (pop_time_ms, invisible_ms), offsets in by_time.items():
                records.append(
                    {
                        "t": "pop",
                        "k": list(key),
                        "m": offsets,
                        "n": queue.pop_offset,
                        "p": pop_time_ms,
                        "i": invisible_ms,
                    }
                )
        return records
