"""A named background loop with a bounded stop, a wake-up, and crashes reported to its owner."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from bolide.base.clock import Clock
from bolide.base.errors import ServiceCrashedError, invariant

_log = logging.getLogger("bolide.service")

CrashHandler = Callable[["Service", BaseException], None]


class Service:
    """Runs ``step`` every ``interval_ms`` (of ``clock`` time) until stopped.

    A step may instead return how long (ms, of ``clock`` time) to wait before the next step:
    0 runs it at once, None means ``interval_ms`` (timers whose next deadline varies use this).
    ``wakeup()`` runs the next step at once. A step that raises ends the loop: the error is
    logged and handed to ``on_crash`` (the owner decides what to do), and :attr:`crash`
    keeps it. ``stop(timeout_ms)`` lets a running step finish within the timeout, then
    cancels it. No task exists before :meth:`start`.
    """

    def __init__(
        self,
        name: str,
        step: Callable[[], Awaitable[int | None]],
        *,
        interval_ms: int,
        clock: Clock,
        on_crash: CrashHandler | None = None,
        initial_delay_ms: int | None = None,
    ) -> None:
        invariant(interval_ms > 0, "a service interval is positive")
        self.name = name
        self._step = step
        self._interval_ms = interval_ms
        self._initial_delay_ms = interval_ms if initial_delay_ms is None else initial_delay_ms
        self._clock = clock
        self._on_crash = on_crash
        self._wakeup = asyncio.Event()
        self._stop_requested = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.crash: BaseException | None = None
        self.step_count = 0

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        invariant(self._task is None, f"service {self.name} started twice")
        self._task = asyncio.get_running_loop().create_task(self._loop(), name=self.name)

    def wakeup(self) -> None:
        self._wakeup.set()

    async def stop(self, timeout_ms: int = 5_000) -> None:
        """Stop the loop; a step in progress gets ``timeout_ms`` to finish, then is cancelled."""
        self._stop_requested.set()
        self._wakeup.set()
        task = self._task
        if task is None or task.done():
            return
        done, _ = await asyncio.wait({task}, timeout=timeout_ms / 1000)
        if not done:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _wait(self, duration_ms: int) -> None:
        if self._wakeup.is_set():
            return
        sleeper = asyncio.ensure_future(self._clock.sleep_ms(duration_ms))
        waker = asyncio.ensure_future(self._wakeup.wait())
        try:
            await asyncio.wait({sleeper, waker}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for future in (sleeper, waker):
                future.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await future

    async def _loop(self) -> None:
        delay_ms = self._initial_delay_ms
        while not self._stop_requested.is_set():
            await self._wait(delay_ms)
            self._wakeup.clear()
            if self._stop_requested.is_set():
                return
            try:
                next_delay_ms = await self._step()
            except asyncio.CancelledError:
                raise
            except Exception as error:
                self.crash = error
                _log.exception("service %s crashed", self.name)
                if self._on_crash is not None:
                    self._on_crash(self, ServiceCrashedError(f"service {self.name} crashed"))
                return
            self.step_count += 1
            delay_ms = self._interval_ms if next_delay_ms is None else max(0, next_delay_ms)
