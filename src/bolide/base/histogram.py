"""Fixed-bucket histograms cheap enough for the hot path.

A :class:`BucketCounts` is a sorted list of upper bounds and one count per bucket (plus the
overflow bucket): :meth:`BucketCounts.observe` is one ``bisect`` and two additions, no lock
and no allocation. Readers (the Prometheus collector, GET_BROKER_RUNTIME_INFO) turn the
counts into cumulative ``le`` buckets at read time. Owned by one event-loop thread; a flush
thread hands its timings to the loop before they are observed.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

__all__ = ["BucketCounts"]


class BucketCounts:
    """Counts of observed values per bucket; ``bounds`` are inclusive upper bounds, in the
    caller's unit (the name of the attribute holding it says which), strictly increasing."""

    __slots__ = ("bounds", "count", "counts", "max_value", "total")

    def __init__(self, bounds: Sequence[float]) -> None:
        if any(b >= a for a, b in zip(bounds[1:], bounds, strict=False)) or not bounds:
            raise ValueError(f"bucket bounds must be non-empty and increasing: {bounds!r}")
        self.bounds = tuple(bounds)
        self.counts = [0] * (len(bounds) + 1)
        self.total = 0.0
        self.count = 0
        self.max_value = 0.0

    def observe(self, value: float) -> None:
        """Count ``value`` in the first bucket whose bound is >= it (else the overflow)."""
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.total += value
        self.count += 1
        if value > self.max_value:
            self.max_value = value

    def cumulative(self) -> list[tuple[float, int]]:
        """``(upper bound, count of values <= it)`` per bucket, ending with ``(inf, count)``."""
        result: list[tuple[float, int]] = []
        running = 0
        for bound, count in zip((*self.bounds, float("inf")), self.counts, strict=True):
            running += count
            result.append((bound, running))
        return result

    def count_at_most(self, bound: float) -> int:
        """How many values were <= ``bound`` (``bound`` must be one of :attr:`bounds`)."""
        return sum(self.counts[: self.bounds.index(bound) + 1])

    def quantile(self, fraction: float) -> float:
        """The upper bound of the bucket holding the ``fraction`` quantile (0 when empty;
        the largest value seen when it falls in the overflow bucket)."""
        if self.count == 0:
            return 0.0
        rank = fraction * self.count
        for bound, running in self.cumulative():
            if running >= rank:
                return self.max_value if bound == float("inf") else bound
        return self.max_value
