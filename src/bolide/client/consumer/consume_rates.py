"""Measured consume rates for GET_CONSUMER_RUNNING_INFO's status table (per topic):
``consumeOKTPS``, ``consumeFailedTPS`` and ``consumeRT`` (mean ms per listener call) over the
last minute, as the Java client reports them (the dashboard and rocketmq-exporter's
``rocketmq_client_consume_*`` read them).

Each listener call adds to running totals; a sample of the totals is kept at most once a
second, for :data:`~bolide.base.limits.CONSUME_STATS_WINDOW_MS`; a rate is (now's totals -
the oldest sample in the window) / elapsed. Pure bookkeeping: time is passed in.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field

from bolide.base import limits

__all__ = ["ConsumeRates", "TopicRates"]

_SAMPLE_SPACING_MS = 1_000
_Sample = tuple[int, int, int, int, int]
"""(time_ms, ok, failed, listener calls, listener ms in total)"""


@dataclass(slots=True)
class TopicRates:
    ok: int = 0
    failed: int = 0
    calls: int = 0
    spent_ms: int = 0
    samples: collections.deque[_Sample] = field(
        default_factory=lambda: collections.deque(
            maxlen=limits.CONSUME_STATS_WINDOW_MS // _SAMPLE_SPACING_MS + 1
        )
    )


class ConsumeRates:
    """Consume figures of one consumer, by topic."""

    def __init__(self) -> None:
        self._topics: dict[str, TopicRates] = {}

    def record(self, topic: str, ok: int, failed: int, spent_ms: int, now_ms: int) -> None:
        """One listener call on ``topic`` consumed ``ok`` messages, failed ``failed``, and
        took ``spent_ms``."""
        rates = self._topics.get(topic)
        if rates is None:
            rates = self._topics[topic] = TopicRates()
            rates.samples.append((now_ms, 0, 0, 0, 0))
        rates.ok += ok
        rates.failed += failed
        rates.calls += 1
        rates.spent_ms += spent_ms
        if now_ms - rates.samples[-1][0] >= _SAMPLE_SPACING_MS:
            rates.samples.append((now_ms, rates.ok, rates.failed, rates.calls, rates.spent_ms))

    def status(self, topic: str, now_ms: int) -> tuple[float, float, float]:
        """(ok per second, failed per second, mean ms per listener call) over the window."""
        rates = self._topics.get(topic)
        if rates is None:
            return (0.0, 0.0, 0.0)
        start = rates.samples[0]
        for sample in rates.samples:
            if now_ms - sample[0] <= limits.CONSUME_STATS_WINDOW_MS:
                start = sample
                break
        elapsed_ms = max(1, now_ms - start[0])
        calls = rates.calls - start[3]
        return (
            (rates.ok - start[1]) * 1000 / elapsed_ms,
            (rates.failed - start[2]) * 1000 / elapsed_ms,
            (rates.spent_ms - start[4]) / calls if calls else 0.0,
        )
