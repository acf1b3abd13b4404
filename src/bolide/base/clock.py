"""Time, injected: a :class:`SystemClock` in production and a :class:`ManualClock` in tests.

Every timer in Bolide (expiry, rebalance, leases, delays, flush intervals) reads and waits
through a :class:`Clock`, so tests move time forward instead of sleeping.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from typing import Protocol


class Clock(Protocol):
    def now_ms(self) -> int:
        """Wall-clock time in milliseconds since the epoch (store and born timestamps)."""
        ...

    def monotonic_ms(self) -> int:
        """A clock that never goes backwards, for durations and deadlines, in milliseconds."""
        ...

    async def sleep_ms(self, duration_ms: int) -> None:
        """Wait ``duration_ms`` milliseconds of this clock's time."""
        ...


class SystemClock:
    """The real clock."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000

    async def sleep_ms(self, duration_ms: int) -> None:
        await asyncio.sleep(max(0, duration_ms) / 1000)


class ManualClock:
    """A clock that moves only when a test calls :meth:`advance_ms` or :meth:`set_ms`.

    Sleepers wake, in deadline order, when time reaches their deadline. Both readings move
    together; ``now_ms`` starts at ``start_ms`` and ``monotonic_ms`` at 0.
    """

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._start_ms = start_ms
        self._elapsed_ms = 0
        self._sleepers: list[tuple[int, int, asyncio.Future[None]]] = []
        self._sequence = itertools.count()

    def now_ms(self) -> int:
        return self._start_ms + self._elapsed_ms

    def monotonic_ms(self) -> int:
        return self._elapsed_ms

    async def sleep_ms(self, duration_ms: int) -> None:
        if duration_ms <= 0:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(
            self._sleepers, (self._elapsed_ms + duration_ms, next(self._sequence), future)
        )
        await future

    @property
    def sleeper_count(self) -> int:
        """Sleepers still waiting (cancelled ones excluded); lets tests wait for a loop to park."""
        return sum(1 for _, _, future in self._sleepers if not future.done())

    def advance_ms(self, duration_ms: int) -> None:
        """Move time forward and wake every sleeper whose deadline has come."""
        if duration_ms < 0:
            raise ValueError("a manual clock never goes backwards")
        self._elapsed_ms += duration_ms
        while self._sleepers and self._sleepers[0][0] <= self._elapsed_ms:
            _, _, future = heapq.heappop(self._sleepers)
            if not future.done():
                future.set_result(None)

    def set_ms(self, now_ms: int) -> None:
        """Move wall-clock time to ``now_ms`` (never backwards)."""
        self.advance_ms(now_ms - self.now_ms())
