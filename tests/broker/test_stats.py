"""BrokerStats: put/get counters and the per-day snapshots of GET_BROKER_RUNTIME_INFO."""

from __future__ import annotations

import datetime

from bolide.base.clock import ManualClock
from bolide.broker.metrics.stats_items import StatsName
from bolide.broker.stats import BrokerStats


def _local_midnight_after(now_ms: int, days: int = 1) -> int:
    today = datetime.datetime.fromtimestamp(now_ms / 1000).date()
    midnight = datetime.datetime.combine(today + datetime.timedelta(days=days), datetime.time())
    return int(midnight.timestamp() * 1000)


def test_counters_and_today_now() -> None:
    stats = BrokerStats(ManualClock())
    stats.record_put(3, 300)
    stats.record_get(2, 200)
    stats.record_put_failure()
    info = stats.runtime_info()
    assert info["msgPutTotalTodayNow"] == "3"
    assert info["msgGetTotalTodayNow"] == "2"
    assert info["putMessageFailedTimes"] == "1"
    assert info["msgPutTotalTodayMorning"] == "0"
    assert info["brokerVersion"] == "401"
    assert all(isinstance(value, str) for value in info.values())


def test_mornings_move_at_local_midnight() -> None:
    clock = ManualClock()
    stats = BrokerStats(clock)
    stats.record_put(5, 500)
    clock.set_ms(_local_midnight_after(clock.now_ms()))
    stats.record_put(2, 200)
    info = stats.runtime_info()
    assert (info["msgPutTotalYesterdayMorning"], info["msgPutTotalTodayMorning"]) == ("0", "5")
    assert info["msgPutTotalTodayNow"] == "7"
    clock.set_ms(_local_midnight_after(clock.now_ms()))
    info = stats.runtime_info()
    assert (info["msgPutTotalYesterdayMorning"], info["msgPutTotalTodayMorning"]) == ("5", "7")


def test_days_without_traffic_carry_the_total() -> None:
    clock = ManualClock()
    stats = BrokerStats(clock)
    stats.record_get(4, 40)
    clock.set_ms(_local_midnight_after(clock.now_ms(), days=3))
    info = stats.runtime_info()
    assert (info["msgGetTotalYesterdayMorning"], info["msgGetTotalTodayMorning"]) == ("4", "4")


def test_runtime_is_java_shaped() -> None:
    clock = ManualClock()
    stats = BrokerStats(clock)
    clock.advance_ms((1 * 86_400 + 2 * 3_600 + 3 * 60 + 4) * 1000)
    assert stats.runtime_info()["runtime"] == "[ 1 days, 2 hours, 3 minutes, 4 seconds ]"


def _figures(stats: BrokerStats) -> tuple[object, ...]:
    cells = {
        name: {key: (cell.value, cell.times) for key, cell in stats.table.cells(name).items()}
        for name in (StatsName.TOPIC_PUT_NUMS, StatsName.TOPIC_PUT_SIZE)
    }
    histograms = [
        (h.counts, h.total, h.count, h.max_value)
        for h in (stats.put_latency_us, stats.message_size_bytes)
    ]
    return (
        stats.put_request_count,
        stats.put_total_messages,
        stats.put_total_bytes,
        cells,
        histograms,
        dict(stats.runtime_info()),
    )


def test_a_single_put_counts_as_record_put_of_one() -> None:
    clocks = ManualClock(), ManualClock()
    general, single = BrokerStats(clocks[0]), BrokerStats(clocks[1])
    steps = [("T", 1030, 12), ("T", 2000, 700), ("U", 5, 0), ("T", 1, 3), ("", 9, 4)]
    steps += [("U", 77, -1), ("T", 1024, 2)]
    for index, (topic, size, elapsed_us) in enumerate(steps):
        if index == 5:  # a new local day between two puts
            for clock in clocks:
                clock.set_ms(_local_midnight_after(clock.now_ms()))
        general.record_put(1, size, topic=topic, elapsed_us=elapsed_us)
        single.record_single_put(size, topic, elapsed_us)
        assert _figures(single) == _figures(general)
