"""bench/soak.py's verdict: growth by fitted slope, loss, misorder and p99 drift (issue 30).

The soak itself runs for minutes (``bench/soak.py --minutes 3`` at least); these check that its
judge fails what it must fail, on made-up samples."""

from __future__ import annotations

import pytest
from bench.soak import TOLERANCES, Ledger, Sample, judge, slope_per_minute
from bench.soak_spark import SparkProgress


def _samples(rss_per_minute: float, p99_late_ms: float = 10.0) -> list[Sample]:
    return [
        Sample(
            minute=float(minute),
            rss_kib=50_000 + rss_per_minute * minute,
            rss_file_kib=0.0,
            open_fds=100.0,
            asyncio_tasks=110.0,
            long_polls=30.0,
            pop_in_flight=0.0,
            p50_ms=1.0,
            p99_ms=10.0 if minute < 8 else p99_late_ms,
        )
        for minute in range(12)
    ]


def _ledger(lost: int = 0) -> Ledger:
    ledger = Ledger()
    ledger.sent["plain"] = {f"plain-{i}" for i in range(100)}
    ledger.received["plain"] = {f"plain-{i}" for i in range(lost, 100)}
    return ledger


def test_the_slope_is_the_median_of_pairwise_slopes_per_minute() -> None:
    assert slope_per_minute([(0, 1), (1, 3), (2, 5)]) == pytest.approx(2.0)
    assert slope_per_minute([(0, 1), (1, 2), (2, 9)]) == pytest.approx(4.0)  # 1, 4, 7
    assert slope_per_minute([(0, 7)]) == 0.0


def test_one_transient_last_sample_does_not_decide_but_steady_growth_does() -> None:
    """The 10-minute run: descriptors 106-110 all along, 133 in the last sample only."""
    spiked = _samples(0.0)
    spiked[-1].open_fds = 133.0
    growing = _samples(0.0)
    for sample in growing:
        sample.open_fds = 100.0 + 2 * TOLERANCES["open_fds"] * sample.minute

    assert judge(spiked, _ledger())[0]
    ok, line = judge(growing, _ledger())
    assert not ok and "open_fds grows" in line


def test_a_flat_run_passes_and_says_so_with_its_figures() -> None:
    ok, line = judge(_samples(0.0), _ledger())

    assert ok, line
    assert line.startswith("soak verdict: PASS") and "lost=0" in line


def test_growth_past_the_tolerance_fails() -> None:
    ok, line = judge(_samples(TOLERANCES["rss_kib"] * 2), _ledger())

    assert not ok and "rss_kib grows" in line


def test_a_lost_message_fails() -> None:
    ok, line = judge(_samples(0.0), _ledger(lost=1))

    assert not ok and "lost {'plain': 1}" in line


def test_a_p99_that_drifts_up_fails() -> None:
    ok, line = judge(_samples(0.0, p99_late_ms=100.0), _ledger())

    assert not ok and "p99 drifted" in line


def _spark(rows: int, error: str = "") -> SparkProgress:
    return SparkProgress(rows=rows, batches=9, last_batch_ms=40.0, max_batch_ms=90.0, error=error)


def test_a_spark_query_that_read_every_plain_message_once_passes_with_its_figures() -> None:
    ok, line = judge(_samples(0.0), _ledger(), _spark(100), 100)

    assert ok, line
    assert "spark_rows=100 spark_batches=9 spark_max_batch_ms=90" in line


@pytest.mark.parametrize(
    ("progress", "distinct", "reason"),
    [
        (_spark(100, error="StreamingQueryException: broker gone"), 100, "spark query died"),
        (_spark(99), 99, "spark read 99 of 100 plain messages"),
        (_spark(101), 100, "spark rows 101 but 100 distinct ids"),
    ],
)
def test_a_spark_query_that_died_fell_behind_or_replayed_fails(
    progress: SparkProgress, distinct: int, reason: str
) -> None:
    ok, line = judge(_samples(0.0), _ledger(), progress, distinct)

    assert not ok and reason in line
