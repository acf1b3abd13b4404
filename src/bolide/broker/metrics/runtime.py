"""GET_BROKER_RUNTIME_INFO's table (code 28) and the ``rocketmq_brokeruntime_*`` gauges, from
one computation so the admin tools and Prometheus never disagree.

The keys are the Java broker's (``putTps`` = "10 s, 60 s and 600 s rates" as three numbers in
one string, ``putMessageDistributeTime`` = the pmdt buckets, ...). Bolide has no thread pools
in front of its handlers (one event loop; the dispatcher bounds requests per family), so the
``*ThreadPoolQueue*`` keys report the dispatcher's figures: requests queued (0: they run at
once) and its bound as the capacity. Keys Bolide has no figure for are left out rather than
filled with an invented value.
"""

from __future__ import annotations

import asyncio
import shutil

from bolide.base import limits
from bolide.broker.context import BrokerContext
from bolide.broker.held_messages import read_message
from bolide.protocol.system_topics import TIMER_TOPIC

__all__ = ["PMDT_BUCKETS", "runtime_numbers", "runtime_table"]

PMDT_BUCKETS: tuple[tuple[str, str, int], ...] = (
    # (runtime-info label, exporter gauge suffix, upper bound in µs or -1 for "more")
    ("<=0ms", "0ms", 1_000),
    ("0~10ms", "0to10ms", 10_000),
    ("10~50ms", "10to50ms", 50_000),
    ("50~100ms", "50to100ms", 100_000),
    ("100~200ms", "100to200ms", 200_000),
    ("200~500ms", "200to500ms", 500_000),
    ("500ms~1s", "500to1s", 1_000_000),
    ("1~2s", "1to2s", 2_000_000),
    ("2~3s", "2to3s", 3_000_000),
    ("3~4s", "3to4s", 4_000_000),
    ("4~5s", "4to5s", 5_000_000),
    ("5~10s", "5to10s", 10_000_000),
    ("10s~", "10stomore", -1),
)
"""RocketMQ's put-message distribution buckets (``putMessageDistributeTime``)."""


def pmdt_counts(context: BrokerContext) -> list[tuple[str, str, int]]:
    """(label, gauge suffix, count) per pmdt bucket, from the send-latency histogram."""
    histogram = context.stats.put_latency_us
    result: list[tuple[str, str, int]] = []
    below = 0
    for label, suffix, bound_us in PMDT_BUCKETS:
        upto = histogram.count if bound_us < 0 else histogram.count_at_most(bound_us)
        result.append((label, suffix, upto - below))
        below = upto
    return result


def runtime_numbers(context: BrokerContext) -> dict[str, float]:
    """The numeric runtime figures, by Java runtime-info key."""
    stats, store = context.stats, context.store.stats()
    figures: dict[str, float] = {
        "msgPutTotalTodayNow": stats.put_total_messages,
        "msgGetTotalTodayNow": stats.get_total_messages,
        "putMessageSizeTotal": stats.put_total_bytes,
        "putMessageTimesTotal": store.put_message_count,
        "putMessageAverageSize": (
            stats.put_total_bytes / stats.put_total_messages if stats.put_total_messages else 0
        ),
        "putMessageEntireTimeMax": stats.put_latency_us.max_value / 1000,
        "putLatency99": stats.put_latency_us.quantile(0.99) / 1000,
        "putLatency999": stats.put_latency_us.quantile(0.999) / 1000,
        "getMessageEntireTimeMax": 0.0,
        "commitLogMinOffset": store.commit_log_min_offset,
        "commitLogMaxOffset": store.commit_log_max_offset,
        "commitLogDiskRatio": store.disk_used_ratio_percent / 100,
        "consumeQueueDiskRatio": store.disk_used_ratio_percent / 100,
        "remainHowManyDataToFlush": max(
            0, store.commit_log_max_offset - store.commit_log_flushed_offset
        ),
        "dispatchBehindBytes": 0,  # consume queues are written with the commit log
        "dispatchMaxBuffer": 0,
        "pageCacheLockTimeMills": 0,
        "remainTransientStoreBufferNumbs": 0,
        "startAcceptSendRequestTimeStamp": stats.boot_timestamp_ms,
        "bootTimestamp": stats.boot_timestamp_ms,
        "sendThreadPoolQueueSize": 0,
        "sendThreadPoolQueueCapacity": limits.HANDLER_CONCURRENCY_MAX_REQUESTS,
        "sendThreadPoolQueueHeadWaitTimeMills": 0,
        "pullThreadPoolQueueSize": context.long_polling.count,
        "pullThreadPoolQueueCapacity": limits.LONG_POLL_MAX_PARKED_REQUESTS,
        "pullThreadPoolQueueHeadWaitTimeMills": 0,
        "queryThreadPoolQueueSize": 0,
        "queryThreadPoolQueueCapacity": limits.HANDLER_CONCURRENCY_MAX_REQUESTS,
        "queryThreadPoolQueueHeadWaitTimeMills": 0,
        "longPollingParkedPulls": context.long_polling.count,
    }
    earliest_ms = _earliest_store_time_ms(context, store.commit_log_min_offset)
    if earliest_ms is not None:
        figures["earliestMessageTimeStamp"] = earliest_ms
    try:
        usage = shutil.disk_usage(context.config.store_path_root_dir)
    except OSError:
        usage = None
    if usage is not None:
        figures["commitLogDirCapacityTotal"] = usage.total
        figures["commitLogDirCapacityFree"] = usage.free
    return figures


def _earliest_store_time_ms(context: BrokerContext, commit_log_min_offset: int) -> int | None:
    """Store time of the oldest record the commit log still holds (None: empty or unreadable;
    one record read per call)."""
    message = read_message(context.store, commit_log_min_offset)
    return None if message is None else message.store_timestamp_ms


def _rates_text(context: BrokerContext) -> dict[str, str]:
    """putTps, getFoundTps, getMissTps, getTotalTps, getTransferedTps: "t10 t60 t600"."""
    columns: dict[str, list[str]] = {
        key: []
        for key in ("putTps", "getTransferedTps", "getFoundTps", "getMissTps", "getTotalTps")
    }
    for window_ms in (10_000, 60_000, 600_000):
        put, got, found, missed = context.stats.rates(window_ms)
        for key, value in (
            ("putTps", put),
            ("getTransferedTps", got),
            ("getFoundTps", found),
            ("getMissTps", missed),
            ("getTotalTps", found + missed),
        ):
            columns[key].append(f"{value:.2f}")
    table = {key: " ".join(values) for key, values in columns.items()}
    table["getTransferredTps"] = table["getTransferedTps"]  # 5.x spelling (dashboard#195)
    return table


def runtime_table(context: BrokerContext) -> dict[str, str]:
    """GET_BROKER_RUNTIME_INFO's KVTable: every value a string, Java's formats."""
    table = dict(context.stats.runtime_info())
    numbers = runtime_numbers(context)
    for key, value in numbers.items():
        if key in ("commitLogDirCapacityTotal", "commitLogDirCapacityFree"):
            continue
        if key in ("commitLogDiskRatio", "consumeQueueDiskRatio"):
            table[key] = f"{value:.4f}"
        elif key in ("putMessageAverageSize", "putLatency99", "putLatency999"):
            table[key] = f"{value:.2f}"
        else:
            table[key] = str(int(value))
    if "commitLogDirCapacityTotal" in numbers:
        table["commitLogDirCapacity"] = (
            f"Total : {_gib(numbers['commitLogDirCapacityTotal'])}, "
            f"Free : {_gib(numbers['commitLogDirCapacityFree'])}."
        )
    table.update(_table_sizes(context))
    timer = context.timer
    if timer is not None:
        # Bolide's keys: timer messages stored, due within the load window and waiting in
        # memory, and the delivery time everything up to which is delivered.
        table["timerMessagesStored"] = str(context.store.max_offset(TIMER_TOPIC, 0))
        table["timerPendingInMemory"] = str(timer.pending_in_memory)
        table["timerDeliveredUpToMs"] = str(max(0, timer.delivered_key[0]))
    table["putMessageDistributeTime"] = " ".join(
        f"[{label}]:{count}" for label, _, count in pmdt_counts(context)
    )
    table.update(_rates_text(context))
    return table


def _gib(size_bytes: float) -> str:
    return f"{size_bytes / 1024**3:.2f} GiB"


def _table_sizes(context: BrokerContext) -> dict[str, str]:
    """Bolide's own growth figures (not Java keys), which bench/soak.py samples to show that
    nothing grows without bound: the loop's live tasks and the POP in-flight table."""
    pop = context.pop
    in_flight = 0 if pop is None else sum(len(q.in_flight) for q in pop.state.queues.values())
    return {
        "bolideAsyncioTasks": str(len(asyncio.all_tasks())),
        "bolidePopInFlightMessages": str(in_flight),
    }
