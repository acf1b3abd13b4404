"""The broker's own stats history: per minute, for the last hour, each topic's put count and
each topic@group's lag and get count (issue 28's charts; no Prometheus needed).

:class:`StatsHistoryRing` is pure bookkeeping: a bounded ring of snapshots of running totals
(the stats cells' values) and lags, taken by the broker's ``broker-stats-history`` service
every STATS_HISTORY_INTERVAL_MS of the broker's clock
(:func:`bolide.broker.metrics.history.take_history_sample`). Rates are
computed when read, from the difference between consecutive snapshots; the first snapshot is
the broker's start, where every total is 0.

The ring survives a restart: :meth:`StatsHistoryRing.to_json` is written to the store dir
after every snapshot (:mod:`bolide.broker.metrics.history`) and
:meth:`StatsHistoryRing.restore` puts the snapshots of the last hour back before the
broker's start. The start snapshot (totals 0) stays: the minute across the restart counts
nothing, the minutes after it count from 0 again, as the totals do.
"""

from __future__ import annotations

import collections
import itertools
import json
from dataclasses import dataclass

from bolide.base import limits
from bolide.broker.metrics.stats_items import group_stats_key
from bolide.protocol.bodies.stats_history import StatsHistoryPoint

__all__ = ["HistoryFileError", "HistorySnapshot", "StatsHistoryRing"]

_FILE_VERSION = 1


class HistoryFileError(ValueError):
    """A stats history file that does not parse (the message says where)."""


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

    def to_json(self, max_bytes: int = limits.STATS_HISTORY_FILE_MAX_BYTES) -> bytes:
        """The snapshots as JSON of at most ``max_bytes`` (the oldest left out to fit; at
        least the newest one is always written)."""
        kept = list(self._snapshots)
        while True:
            data = json.dumps(
                {"version": _FILE_VERSION, "snapshots": [_snapshot_json(s) for s in kept]},
                separators=(",", ":"),
            ).encode()
            if len(data) <= max_bytes or len(kept) <= 1:
                return data
            kept = kept[max(1, len(kept) // 4) :]  # a quarter of the oldest at a time

    def restore(self, data: bytes, now_ms: int) -> int:
        """Put back the snapshots of ``data`` (:meth:`to_json`) taken in the last hour before
        now and before the oldest snapshot held; the number put back.

        Raises:
            HistoryFileError: ``data`` is not a stats history file.
        """
        try:
            document = json.loads(data)
            if document.get("version") != _FILE_VERSION:
                raise HistoryFileError(f"unknown version {document.get('version')!r}")
            restored = [_snapshot_of(each) for each in document["snapshots"]]
        except (ValueError, TypeError, KeyError, AttributeError, IndexError) as error:
            raise HistoryFileError(f"not a stats history: {error!r}") from error
        oldest_ms = self._snapshots[0].timestamp_ms
        span_ms = (limits.STATS_HISTORY_POINTS_COUNT + 1) * limits.STATS_HISTORY_INTERVAL_MS
        kept = [s for s in restored if now_ms - span_ms <= s.timestamp_ms < oldest_ms]
        kept.sort(key=lambda snapshot: snapshot.timestamp_ms)
        maxlen = limits.STATS_HISTORY_POINTS_COUNT + 1
        self._snapshots = collections.deque([*kept, *self._snapshots][-maxlen:], maxlen=maxlen)
        return len(kept)

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


def _snapshot_json(snapshot: HistorySnapshot) -> dict[str, object]:
    return {
        "timestampMs": snapshot.timestamp_ms,
        "puts": snapshot.put_totals,
        "groups": {key: list(figures) for key, figures in snapshot.group_figures.items()},
    }


def _snapshot_of(document: dict[str, object]) -> HistorySnapshot:
    """Raises ValueError / TypeError / KeyError when ``document`` is not a snapshot."""
    timestamp_ms, puts, groups = document["timestampMs"], document["puts"], document["groups"]
    if not isinstance(timestamp_ms, int) or not isinstance(puts, dict):
        raise TypeError("timestampMs must be an integer and puts an object")
    if not isinstance(groups, dict):
        raise TypeError("groups must be an object")
    return HistorySnapshot(
        timestamp_ms,
        {str(topic): int(total) for topic, total in puts.items()},
        {str(key): (int(lag), int(got)) for key, (lag, got) in groups.items()},
    )


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
