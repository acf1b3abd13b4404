"""Put and get counters of one broker, in total and per day, for GET_BROKER_RUNTIME_INFO.

RocketMQ's admin tools (``mqadmin brokerStatus``, the dashboard) read a handful of counters
from the runtime-info table (docs/protocol.md §2.11): messages put and got so far today, and the
totals at this morning's and yesterday morning's midnight. :class:`BrokerStats` keeps them.
The day boundary is local midnight, read from the injected clock, so tests move days with a
ManualClock. Pure bookkeeping: no I/O, no tasks.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping

from bolide.base.clock import Clock
from bolide.protocol.command import BOLIDE_WIRE_VERSION

__all__ = ["BROKER_VERSION_DESC", "BrokerStats"]

BROKER_VERSION_DESC = "V4_9_4"
"""The MQVersion name of :data:`BOLIDE_WIRE_VERSION` (401), reported as brokerVersionDesc."""


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

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self.boot_timestamp_ms = clock.now_ms()
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

    def record_put(self, message_count: int, size_bytes: int) -> None:
        """``message_count`` messages of ``size_bytes`` bytes in all were stored by one request."""
        self._roll_day()
        self.put_request_count += 1
        self.put_total_messages += message_count
        self.put_total_bytes += size_bytes

    def record_put_failure(self) -> None:
        """A send was refused or the store failed it."""
        self.put_failure_count += 1

    def record_get(self, message_count: int, size_bytes: int) -> None:
        """A pull returned ``message_count`` messages of ``size_bytes`` bytes in all."""
        self._roll_day()
        self.get_total_messages += message_count
        self.get_total_bytes += size_bytes

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
