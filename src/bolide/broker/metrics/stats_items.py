"""RocketMQ's broker statistics: named counters per key, with minute, hour and day windows.

The Java broker's ``BrokerStatsManager`` keeps, for every stats name (``TOPIC_PUT_NUMS``,
``GROUP_GET_NUMS``, ...) and every key (a topic, ``topic@group``, the cluster name), a running
sum and a count of increments, and samples them: every 10 s for the minute window (7 samples),
every 10 min for the hour window (7 samples), every hour for the day window (25 samples).
VIEW_BROKER_STATS_DATA (315) answers ``sum``, ``tps`` and ``avgpt`` of each window; the
dashboard's trend charts and rocketmq-exporter's ``*_tps`` gauges read them.

Here the same figures come from :class:`StatsTable`: the hot path adds to a cell (one dict
lookup, two additions); :meth:`StatsTable.sample` runs from a background service. A window's
figures go from its oldest sample to the cell's current value, so a fresh burst shows at once
instead of after the next sample. Pure bookkeeping with the time passed in: no I/O, no tasks.

Window figures (``first`` = oldest sample kept, ``last`` = now)::

    sum   = last.value - first.value
    tps   = sum * 1000 / span                                 (0 when no time passed)
    span  = last.time_ms - first.time_ms, but while ``first`` is the cell's birth, at least
            one full sample interval of the window (10 s, 10 min, 1 h)
    avgpt = sum / (last.times - first.times)                  (0 when nothing was added)

The floor keeps a fresh key's rate honest: five sends in the first 25 ms of a topic read
0.5 TPS over the first 10 s, not 200 TPS (Java shows nothing until its second sample).
"""

from __future__ import annotations

import collections
import enum
from collections.abc import Callable
from dataclasses import dataclass

from bolide.base import limits

__all__ = ["StatsCell", "StatsName", "StatsTable", "WindowFigures", "group_stats_key"]


class StatsName(enum.StrEnum):
    """The stats names VIEW_BROKER_STATS_DATA accepts (Java's spelling) and their keys."""

    TOPIC_PUT_NUMS = "TOPIC_PUT_NUMS"  # key: topic
    TOPIC_PUT_SIZE = "TOPIC_PUT_SIZE"  # key: topic
    GROUP_GET_NUMS = "GROUP_GET_NUMS"  # key: topic@group
    GROUP_GET_SIZE = "GROUP_GET_SIZE"  # key: topic@group
    SNDBCK_PUT_NUMS = "SNDBCK_PUT_NUMS"  # key: topic@group
    BROKER_PUT_NUMS = "BROKER_PUT_NUMS"  # key: cluster name
    BROKER_GET_NUMS = "BROKER_GET_NUMS"  # key: cluster name
    GROUP_GET_LATENCY = "GROUP_GET_LATENCY"  # key: queueId@topic@group, value: ms waited


def group_stats_key(topic: str, group: str) -> str:
    """The key of the GROUP_* and SNDBCK_* stats: ``topic@group``."""
    return f"{topic}@{group}"


@dataclass(frozen=True, slots=True)
class WindowFigures:
    """One window's figures, as BrokerStatsItem carries them."""

    sum: int
    tps: float
    avgpt: float

    def to_json_object(self) -> dict[str, float | int]:
        return {"sum": self.sum, "tps": self.tps, "avgpt": self.avgpt}


_Sample = tuple[int, int, int]
"""(time_ms, value, times)"""


class StatsCell:
    """The running figures of one (name, key): a value, how many additions made it, and
    the samples of each window."""

    __slots__ = ("born_ms", "day", "hour", "minute", "times", "value")

    def __init__(self, born_ms: int) -> None:
        self.born_ms = born_ms
        self.value = 0
        self.times = 0
        # Every window starts with a zero sample at birth, so a new key's first burst has
        # a rate at once.
        birth = ((born_ms, 0, 0),)
        self.minute = collections.deque(birth, maxlen=limits.STATS_MINUTE_SAMPLES_COUNT)
        self.hour = collections.deque(birth, maxlen=limits.STATS_HOUR_SAMPLES_COUNT)
        self.day = collections.deque(birth, maxlen=limits.STATS_DAY_SAMPLES_COUNT)

    def add(self, value: int) -> None:
        self.value += value
        self.times += 1

    def figures(self, window: collections.deque[_Sample], now_ms: int) -> WindowFigures:
        """The figures of ``window`` (one of :attr:`minute`, :attr:`hour`, :attr:`day`)."""
        if not window:
            return WindowFigures(0, 0.0, 0.0)
        first_ms, first_value, first_times = window[0]
        total = self.value - first_value
        elapsed_ms = now_ms - first_ms
        if first_ms == self.born_ms and elapsed_ms > 0:  # counted from a full sample on
            elapsed_ms = max(elapsed_ms, self._interval_ms(window))
        tps = total * 1000 / elapsed_ms if elapsed_ms > 0 else 0.0
        times = self.times - first_times
        return WindowFigures(total, tps, total / times if times > 0 else 0.0)

    def _interval_ms(self, window: collections.deque[_Sample]) -> int:
        if window is self.minute:
            return limits.STATS_MINUTE_SAMPLE_INTERVAL_MS
        if window is self.hour:
            return limits.STATS_HOUR_SAMPLE_INTERVAL_MS
        return limits.STATS_DAY_SAMPLE_INTERVAL_MS


class StatsTable:
    """Every stats cell of one broker, by name then key; created on first use."""

    def __init__(self, now_ms: int) -> None:
        self._cells: dict[StatsName, dict[str, StatsCell]] = {name: {} for name in StatsName}
        self._next_hour_sample_ms = now_ms
        self._next_day_sample_ms = now_ms

    def cells(self, name: StatsName) -> dict[str, StatsCell]:
        """The cells of ``name`` by key (the live dict: hot paths add through it)."""
        return self._cells[name]

    def add(self, name: StatsName, key: str, value: int, now_ms: int) -> StatsCell:
        """Add ``value`` to the (name, key) cell, creating it (born at ``now_ms``)."""
        cells = self._cells[name]
        cell = cells.get(key)
        if cell is None:
            cell = cells[key] = StatsCell(now_ms)
        cell.value += value
        cell.times += 1
        return cell

    def find(self, name: StatsName, key: str) -> StatsCell | None:
        return self._cells[name].get(key)

    def sample(self, now_ms: int) -> None:
        """Take the minute samples, and the hour and day ones when they are due."""
        hour_due = now_ms >= self._next_hour_sample_ms
        day_due = now_ms >= self._next_day_sample_ms
        if hour_due:
            self._next_hour_sample_ms = now_ms + limits.STATS_HOUR_SAMPLE_INTERVAL_MS
        if day_due:
            self._next_day_sample_ms = now_ms + limits.STATS_DAY_SAMPLE_INTERVAL_MS
        for cells in self._cells.values():
            for cell in cells.values():
                sample = (now_ms, cell.value, cell.times)
                cell.minute.append(sample)
                if hour_due:
                    cell.hour.append(sample)
                if day_due:
                    cell.day.append(sample)

    def forget_topic(self, topic: str) -> int:
        """Drop the cells of a deleted topic (keys ``topic`` and ``topic@group``)."""
        return self._forget(lambda key: key == topic or key.startswith(f"{topic}@"))

    def forget_group(self, group: str) -> int:
        """Drop the cells of a deleted group (keys ``topic@group``)."""
        return self._forget(lambda key: key.endswith(f"@{group}"))

    def _forget(self, doomed_key: Callable[[str], bool]) -> int:
        """Drop the cells whose key ``doomed_key`` accepts; how many were dropped."""
        dropped = 0
        for cells in self._cells.values():
            doomed = [key for key in cells if doomed_key(key)]
            for key in doomed:
                del cells[key]
            dropped += len(doomed)
        return dropped
