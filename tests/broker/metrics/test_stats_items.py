"""RocketMQ's stats windows (minute/hour/day) and the per-topic/group cells, on a manual clock."""

from __future__ import annotations

import pytest

from bolide.base.clock import ManualClock
from bolide.base.histogram import BucketCounts
from bolide.broker.metrics.stats_items import StatsName, StatsTable
from bolide.broker.stats import BrokerStats


def test_minute_window_rate_from_the_oldest_sample_to_now() -> None:
    table = StatsTable(now_ms=0)
    table.add(StatsName.TOPIC_PUT_NUMS, "T", 10, now_ms=0)
    for second in range(10, 70, 10):  # six samples, 10 s apart
        table.sample(second * 1000)
        table.add(StatsName.TOPIC_PUT_NUMS, "T", 10, now_ms=second * 1000)
    cell = table.find(StatsName.TOPIC_PUT_NUMS, "T")
    assert cell is not None and cell.value == 70 and cell.times == 7
    minute = cell.figures(cell.minute, now_ms=70_000)
    # 7 samples kept: the birth sample (0 ms, 0) and those at 10..60 s.
    assert minute.sum == 70
    assert minute.tps == pytest.approx(1.0)
    assert minute.avgpt == pytest.approx(10.0)
    table.sample(70_000)  # the birth sample falls out of the minute window
    minute = cell.figures(cell.minute, now_ms=80_000)
    assert minute.sum == 60  # from the 10 s sample (value 10) to 70
    assert minute.tps == pytest.approx(60 / 70)


def test_a_fresh_keys_first_burst_is_counted_over_a_full_sample() -> None:
    # issue 29 finding 9: 5 sends in a new topic's first 25 ms used to read 200 TPS
    table = StatsTable(now_ms=0)
    cell = table.add(StatsName.TOPIC_PUT_NUMS, "Fresh", 5, now_ms=1_000)
    minute = cell.figures(cell.minute, now_ms=1_025)
    assert minute.sum == 5
    assert minute.tps == pytest.approx(0.5)  # 5 over one 10 s sample interval
    assert cell.figures(cell.hour, now_ms=1_025).tps == pytest.approx(5 / 600)
    assert cell.figures(cell.minute, now_ms=21_000).tps == pytest.approx(0.25)  # 5 over 20 s


def test_a_young_brokers_runtime_rates_are_counted_over_a_full_sample() -> None:
    clock = ManualClock(start_ms=1_700_000_000_000)
    stats = BrokerStats(clock, cluster_name="C1")
    clock.advance_ms(25)
    stats.record_put(5, 500, topic="T")
    put_tps, *_ = stats.rates(60_000)
    assert put_tps == pytest.approx(0.5)


def test_hour_and_day_windows_sample_less_often() -> None:
    table = StatsTable(now_ms=0)
    table.add(StatsName.GROUP_GET_NUMS, "T@G", 5, now_ms=0)
    table.sample(0)
    table.sample(10_000)  # no hour sample: not due for 10 minutes
    cell = table.find(StatsName.GROUP_GET_NUMS, "T@G")
    assert cell is not None
    assert len(cell.hour) == 2 and len(cell.minute) == 3
    assert len(cell.day) == 2


def test_forget_drops_a_deleted_topics_or_groups_cells() -> None:
    table = StatsTable(now_ms=0)
    table.add(StatsName.GROUP_GET_NUMS, "T@G1", 1, now_ms=0)
    table.add(StatsName.GROUP_GET_NUMS, "U@G1", 1, now_ms=0)
    table.add(StatsName.TOPIC_PUT_NUMS, "T", 1, now_ms=0)
    table.add(StatsName.TOPIC_PUT_NUMS, "TT", 1, now_ms=0)
    assert table.forget_topic("T") == 2  # T and T@G1, not TT
    assert table.find(StatsName.TOPIC_PUT_NUMS, "TT") is not None
    assert table.forget_group("G1") == 1  # U@G1
    assert table.find(StatsName.GROUP_GET_NUMS, "U@G1") is None


def test_broker_stats_feed_cells_rates_and_histograms() -> None:
    clock = ManualClock(start_ms=1_700_000_000_000)
    stats = BrokerStats(clock, cluster_name="C1")
    stats.record_put(4, 400, topic="T", elapsed_us=700)
    stats.record_put(1, 5_000, topic="T", elapsed_us=12_000)
    stats.record_get(3, 300, topic="T", group="G")
    stats.record_get_miss()
    clock.advance_ms(10_000)
    stats.sample()
    put = stats.table.find(StatsName.TOPIC_PUT_NUMS, "T")
    assert put is not None and put.value == 5
    size = stats.table.find(StatsName.TOPIC_PUT_SIZE, "T")
    assert size is not None and size.value == 5_400
    broker = stats.table.find(StatsName.BROKER_PUT_NUMS, "C1")
    assert broker is not None and broker.value == 5
    put_tps, get_tps, found, missed = stats.rates(10_000)
    assert (put_tps, get_tps, found, missed) == (0.5, 0.3, 0.1, 0.1)
    assert stats.put_latency_us.count_at_most(1_000) == 1
    assert stats.put_latency_us.count == 2
    assert stats.message_size_bytes.count_at_most(1024) == 1  # 100-byte mean of the first


def test_bucket_counts() -> None:
    histogram = BucketCounts((1, 10, 100))
    for value in (0.5, 1, 5, 50, 500):
        histogram.observe(value)
    assert histogram.cumulative() == [(1, 2), (10, 3), (100, 4), (float("inf"), 5)]
    assert histogram.quantile(0.5) == 10
    assert histogram.quantile(1.0) == 500  # the overflow bucket answers the largest value
    with pytest.raises(ValueError, match="increasing"):
        BucketCounts((5, 1))
