"""The broker's own stats history: per minute, for the last hour, each topic's put count and
each topic@group's lag and get count (issue 28's charts; no Prometheus needed).

:class:`StatsHistoryRing` is pure bookkeeping: a bounded ring of snapshots of running totals
(the stats cells' values) and lags, taken by the broker's ``broker-stats-history`` service
every STATS_HISTORY_INTERVAL_MS of the broker's clock
(:func:`bolide.broker.metrics.history.take_history_sample`). Rates are
computed when read, from the difference between consecutive snapshots; the first snapshot is
the broker's start, where every total is 0.
"""

from __future__ import annotations

import collections
import itertools
from dataclasses import dataclass

from bolide.base import limits
from bolide.broker.metrics.stats_items import group_stats_key
from bolide.protocol.bodies.stats_history import StatsHistoryPoint

__all__ = ["HistorySnapshot", "StatsHistoryRing"]


@dataclass(frozen=True, slots=True)
class HistorySnapshot:
    """Running totals at ``timestamp_ms``: messages put per topic, and per ``topic@group``
    (lag in messages, messages got)."""

    timestamp_ms: int
    put_totals: dict[str, int]
    group_figures: dict[str, tuple[int, int]]


class StatsHistoryRing:
    """The last STATS_HISTORY_POINTS_COUNT minutes of snapshots (plus the one before the
    oldest, so every kept minute has a rate)."""

    def __init__(self, start_ms: int) -> None:
        self._snapshots: collections.deque[HistorySnapshot] = collections.deque(
            [HistorySnapshot(start_ms, {}, {})], maxlen=limits.STATS_HISTORY_POINTS_COUNT + 1
        )

    def record(self, snapshot: HistorySnapshot) -> None:
        """Keep ``snapshot``; the oldest past the bound is dropped."""
        self._snapshots.append(snapshot)

    def topic_points(self, topic: str) -> list[StatsHistoryPoint]:
        """Per minute, oldest first: messages put in ``topic`` and the put TPS."""
        points = []
        for before, after in _pairs(self._snapshots):
            count = after.put_totals.get(topic, 0) - before.put_totals.get(topic, 0)
            points.append(_point(before, after, max(0, count), 0))
        return points

    def group_points(self, topic: str, group: str) -> list[StatsHistoryPoint]:
        """Per minute, oldest first: messages ``group`` got from ``topic``, the get TPS and
        the lag at the end of the minute."""
        key = group_stats_key(topic, group)
        points = []
        for before, after in _pairs(self._snapshots):
            lag, got = after.group_figures.get(key, (0, 0))
            got_before = before.group_figures.get(key, (0, 0))[1]
            points.append(_point(before, after, max(0, got - got_before), lag))
        return points


def _pairs(
    snapshots: collections.deque[HistorySnapshot],
) -> list[tuple[HistorySnapshot, HistorySnapshot]]:
    return list(itertools.pairwise(snapshots))


def _point(
    before: HistorySnapshot, after: HistorySnapshot, messages: int, lag: int
) -> StatsHistoryPoint:
    elapsed_ms = after.timestamp_ms - before.timestamp_ms
    tps = messages * 1000 / elapsed_ms if elapsed_ms > 0 else 0.0
    return StatsHistoryPoint(after.timestamp_ms, messages, tps, lag)
