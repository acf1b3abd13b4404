"""Put and get counters of one broker: in total and per day for GET_BROKER_RUNTIME_INFO, per
topic and group for VIEW_BROKER_STATS_DATA and /metrics, and latency/size histograms.

RocketMQ's admin tools (``mqadmin brokerStatus``, the dashboard) read a handful of counters
from the runtime-info table (docs/protocol.md §2.11): messages put and got so far today, and the
totals at this morning's and yesterday morning's midnight. :class:`BrokerStats` keeps them.
The day boundary is local midnight, read from the injected clock, so tests move days with a
ManualClock. Pure bookkeeping: no I/O, no tasks.

Per topic and per ``topic@group`` figures live in a :class:`StatsTable` (RocketMQ's stats names,
sampled into minute/hour/day windows by the broker's stats service). The hot path pays a dict
lookup and a few additions per request; everything else (TPS, lag, percentiles) is computed
when someone reads it.
"""

from __future__ import annotations

import collections
import datetime
from collections.abc import Mapping

from bolide.base import limits
from bolide.base.clock import Clock
from bolide.base.histogram import BucketCounts
from bolide.broker.metrics.stats_items import StatsName, StatsTable, group_stats_key
from bolide.broker.stats_history import StatsHistoryRing
from bolide.protocol.command import BOLIDE_WIRE_VERSION

__all__ = [
    "BROKER_VERSION_DESC",
    "MESSAGE_SIZE_BOUNDS_BYTES",
    "PUT_LATENCY_BOUNDS_US",
    "BrokerStats",
]

BROKER_VERSION_DESC = "V4_9_4"
"""The MQVersion name of :data:`BOLIDE_WIRE_VERSION` (401), reported as brokerVersionDesc."""


PUT_LATENCY_BOUNDS_US = (
    250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 200_000, 500_000,
    1_000_000, 2_000_000, 3_000_000, 4_000_000, 5_000_000, 10_000_000,
)  # fmt: skip
"""Send latency buckets (µs): fine below 10 ms for Prometheus, and every bound of RocketMQ's
put-message distribution (pmdt: 0 ms, 10, 50, 100, 200, 500 ms, 1-5 s, 10 s)."""
MESSAGE_SIZE_BOUNDS_BYTES = (1024, 4 * 1024, 512 * 1024, 1024 * 1024, 2 * 1024**2, 4 * 1024**2)
"""RocketMQ 5's ``rocketmq_message_size`` buckets: 1 KB, 4 KB, 512 KB, 1 MB, 2 MB, 4 MB."""


_TOPIC_PUT = (StatsName.TOPIC_PUT_NUMS, StatsName.TOPIC_PUT_SIZE)
_GROUP_GET = (StatsName.GROUP_GET_NUMS, StatsName.GROUP_GET_SIZE)
"""The (message count, bytes) statistics a put of a topic and a pull of a group add to."""


def _local_day(now_ms: int) -> datetime.date:
    return datetime.datetime.fromtimestamp(now_ms / 1000).date()


def _next_local_midnight_ms(day: datetime.date) -> int:
    midnight = datetime.datetime.combine(day + datetime.timedelta(days=1), datetime.time())
    return int(midnight.timestamp() * 1000)


class BrokerStats:
    """Counters of messages stored (put) and served to consumers (get).

    ``record_put`` / ``record_get`` are called by the send and pull handlers with the number
    of messages and bytes. The morning snapshots move forward lazily, the first time the
    counters are touched or read on a new local day; a day without any traffic or reading
    simply keeps yesterday's figures as "this morning", as nothing moved.
    """

    def __init__(self, clock: Clock, *, cluster_name: str = "DefaultCluster") -> None:
        self._clock = clock
        self.cluster_name = cluster_name
        self.boot_timestamp_ms = clock.now_ms()
        self.table = StatsTable(self.boot_timestamp_ms)
        """Per topic / group / cluster cells (VIEW_BROKER_STATS_DATA, /metrics)."""
        self.history = StatsHistoryRing(self.boot_timestamp_ms)
        """Per minute for the last hour (GET_STATS_HISTORY, the dashboard's charts)."""
        self.put_latency_us = BucketCounts(PUT_LATENCY_BOUNDS_US)
        """Send requests from decoding to the answer, µs (SYNC_FLUSH waits included)."""
        self.message_size_bytes = BucketCounts(MESSAGE_SIZE_BOUNDS_BYTES)
        """Stored record sizes (one observation per send request: the mean record size)."""
        self.get_latency_ms = BucketCounts((1, 10, 100, 1_000, 5_000, 15_000, 30_000))
        """How long pulls that found messages waited for them (0 when not parked), ms."""
        self.send_back_total = 0
        self.get_found_requests = 0
        self.get_miss_requests = 0
        self.rebalance_notifications = 0
        """NOTIFY_CONSUMER_IDS_CHANGED rounds: each makes a group's consumers rebalance."""
        self._rate_samples: collections.deque[tuple[int, int, int, int, int]] = collections.deque(
            maxlen=limits.STATS_HOUR_SAMPLE_INTERVAL_MS // limits.STATS_MINUTE_SAMPLE_INTERVAL_MS
            + 1
        )
        self._topic_put_nums = self.table.cells(StatsName.TOPIC_PUT_NUMS)
        self._topic_put_size = self.table.cells(StatsName.TOPIC_PUT_SIZE)
        self._day = _local_day(self.boot_timestamp_ms)
        self._next_day_ms = _next_local_midnight_ms(self._day)
        self.put_total_messages = 0
        self.put_total_bytes = 0
        self.put_failure_count = 0
        self.put_request_count = 0
        """Send requests that stored something (a batch counts once)."""
        self.get_total_messages = 0
        self.get_total_bytes = 0
        self._put_today_morning = 0
        self._put_yesterday_morning = 0
        self._get_today_morning = 0
        self._get_yesterday_morning = 0
        self._rate_samples.append(self._rate_point(self.boot_timestamp_ms))

    def record_put(
        self, message_count: int, size_bytes: int, *, topic: str = "", elapsed_us: int = -1
    ) -> None:
        """``message_count`` messages of ``size_bytes`` bytes in all were stored in ``topic``
        (when named), the request taking ``elapsed_us`` (when measured)."""
        if self._clock.now_ms() >= self._next_day_ms:
            self._roll_day()
        self.put_request_count += 1
        self.put_total_messages += message_count
        self.put_total_bytes += size_bytes
        if topic:
            self._add_count_and_size(_TOPIC_PUT, topic, message_count, size_bytes)
        if elapsed_us >= 0:
            self.put_latency_us.observe(elapsed_us)
        if message_count > 0:
            self.message_size_bytes.observe(size_bytes // message_count)

    def record_single_put(self, size_bytes: int, topic: str, elapsed_us: int) -> None:
        """``record_put(1, size_bytes, topic=topic, elapsed_us=elapsed_us)`` with a topic
        already counted and a measured time, in fewer steps (the send fast path's)."""
        cell = self._topic_put_nums.get(topic)
        if cell is None or not topic or elapsed_us < 0 or self._clock.now_ms() >= self._next_day_ms:
            self.record_put(1, size_bytes, topic=topic, elapsed_us=elapsed_us)
            return
        self.put_request_count += 1
        self.put_total_messages += 1
        self.put_total_bytes += size_bytes
        cell.value += 1  # StatsCell.add inline (two cells a send)
        cell.times += 1
        size_cell = self._topic_put_size[topic]
        size_cell.value += size_bytes
        size_cell.times += 1
        self.put_latency_us.observe(elapsed_us)
        self.message_size_bytes.observe(size_bytes)

    def record_send_back(self, topic: str, group: str) -> None:
        """A consumer of ``group`` sent a message of ``topic`` back (SNDBCK_PUT_NUMS)."""
        self.send_back_total += 1
        key = group_stats_key(topic, group)
        self.table.add(StatsName.SNDBCK_PUT_NUMS, key, 1, self._clock.now_ms())

    def record_put_failure(self) -> None:
        """A send was refused or the store failed it."""
        self.put_failure_count += 1

    def record_get(
        self, message_count: int, size_bytes: int, *, topic: str = "", group: str = ""
    ) -> None:
        """A pull of ``group`` on ``topic`` (when named) returned ``message_count`` messages
        of ``size_bytes`` bytes in all."""
        if self._clock.now_ms() >= self._next_day_ms:
            self._roll_day()
        self.get_total_messages += message_count
        self.get_total_bytes += size_bytes
        self.get_found_requests += 1
        if group:
            self._add_count_and_size(_GROUP_GET, f"{topic}@{group}", message_count, size_bytes)

    def _add_count_and_size(
        self, names: tuple[StatsName, StatsName], key: str, message_count: int, size_bytes: int
    ) -> None:
        """Add ``message_count`` and ``size_bytes`` to ``key``'s cells of ``names`` (a count
        and a size statistic), creating both at their first use."""
        count_name, size_name = names
        count_cell = self.table.find(count_name, key)
        size_cell = self.table.find(size_name, key)
        if count_cell is None or size_cell is None:
            now_ms = self._clock.now_ms()
            self.table.add(count_name, key, message_count, now_ms)
            self.table.add(size_name, key, size_bytes, now_ms)
        else:
            count_cell.add(message_count)
            size_cell.add(size_bytes)

    def record_get_miss(self) -> None:
        """A pull found nothing (after its long poll, if any)."""
        self.get_miss_requests += 1

    def sample(self) -> None:
        """Take the windows' samples (the stats service calls this every 10 s)."""
        now_ms = self._clock.now_ms()
        self.refresh_broker_cells()
        self.table.sample(now_ms)
        self._rate_samples.append(self._rate_point(now_ms))

    def _rate_point(self, now_ms: int) -> tuple[int, int, int, int, int]:
        return (
            now_ms,
            self.put_total_messages,
            self.get_total_messages,
            self.get_found_requests,
            self.get_miss_requests,
        )

    def rates(self, window_ms: int) -> tuple[float, float, float, float]:
        """Per second over about the last ``window_ms`` (from the oldest 10 s sample inside
        it, up to now; in a broker's first 10 s, over 10 s: a first burst is no rate):
        messages put, messages got, pulls that found messages, pulls that found none —
        GET_BROKER_RUNTIME_INFO's putTps, getTransferedTps, getFoundTps and getMissTps."""
        now = self._rate_point(self._clock.now_ms())
        start = self._rate_samples[-1]
        for sample in reversed(self._rate_samples):
            if now[0] - sample[0] > window_ms:
                break
            start = sample
        elapsed_ms = now[0] - start[0]
        if elapsed_ms <= 0:
            return (0.0, 0.0, 0.0, 0.0)
        if start[0] == self.boot_timestamp_ms:  # a young broker: over one full sample at least
            elapsed_ms = max(elapsed_ms, min(window_ms, limits.STATS_MINUTE_SAMPLE_INTERVAL_MS))
        put, got, found, missed = (
            (now[index] - start[index]) * 1000 / elapsed_ms for index in range(1, 5)
        )
        return (put, got, found, missed)

    def refresh_broker_cells(self) -> None:
        """Bring the broker-wide BROKER_PUT_NUMS / BROKER_GET_NUMS cells (key: the cluster
        name) up to the running totals; readers call this before reading them."""
        now_ms = self._clock.now_ms()
        for name, total in (
            (StatsName.BROKER_PUT_NUMS, self.put_total_messages),
            (StatsName.BROKER_GET_NUMS, self.get_total_messages),
        ):
            cell = self.table.find(name, self.cluster_name)
            if cell is None:
                cell = self.table.add(name, self.cluster_name, 0, now_ms)
                cell.times = 0
            if total != cell.value:
                cell.times += 1
            cell.value = total

    def runtime_info(self) -> Mapping[str, str]:
        """The broker part of GET_BROKER_RUNTIME_INFO's table; every value a string."""
        self._roll_day()
        now_ms = self._clock.now_ms()
        return {
            "brokerVersionDesc": BROKER_VERSION_DESC,
            "brokerVersion": str(BOLIDE_WIRE_VERSION),
            "bootTimestamp": str(self.boot_timestamp_ms),
            "runtime": _runtime_text(now_ms - self.boot_timestamp_ms),
            "msgPutTotalYesterdayMorning": str(self._put_yesterday_morning),
            "msgPutTotalTodayMorning": str(self._put_today_morning),
            "msgPutTotalTodayNow": str(self.put_total_messages),
            "msgGetTotalYesterdayMorning": str(self._get_yesterday_morning),
            "msgGetTotalTodayMorning": str(self._get_today_morning),
            "msgGetTotalTodayNow": str(self.get_total_messages),
            "putMessageFailedTimes": str(self.put_failure_count),
            "putMessageSizeTotal": str(self.put_total_bytes),
            "getMessageTransferedMsgCount": str(self.get_total_messages),
        }

    def _roll_day(self) -> None:
        now_ms = self._clock.now_ms()
        if now_ms < self._next_day_ms:  # the common case: one comparison per message
            return
        day = _local_day(now_ms)
        self._next_day_ms = _next_local_midnight_ms(day)
        if day == self._day:
            return
        # Two or more days without traffic: yesterday's morning total is today's.
        consecutive = day - self._day == datetime.timedelta(days=1)
        self._put_yesterday_morning = (
            self._put_today_morning if consecutive else (self.put_total_messages)
        )
        self._get_yesterday_morning = (
            self._get_today_morning if consecutive else (self.get_total_messages)
        )
        self._put_today_morning = self.put_total_messages
        self._get_today_morning = self.get_total_messages
        self._day = day


def _runtime_text(elapsed_ms: int) -> str:
    """Java's form: ``[ 0 days, 1 hours, 2 minutes, 3 seconds ]``."""
    seconds = max(0, elapsed_ms) // 1000
    days, seconds = divmod(seconds, 86_400)
    hours, seconds = divmod(seconds, 3_600)
    minutes, seconds = divmod(seconds, 60)
    return f"[ {days} days, {hours} hours, {minutes} minutes, {seconds} seconds ]"
