"""The blocking API: the async core run on a private event-loop thread.

:class:`LoopThread` owns one event loop (uvloop when installed) on a daemon thread; a facade
(:class:`BlockingFacade`, :class:`ClientFacade`) hands it coroutines of the async core and
waits for their results, so every behaviour lives once, in the core. The facades themselves
are the other modules of :mod:`bolide.client.blocking`.

Calls must come from outside the loop thread (from a listener running on the loop, use the
async API): a blocking call there would wait for itself.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Callable, Coroutine
from types import TracebackType
from typing import Any, Generic, Protocol, Self, TypeVar

from bolide.base import limits
from bolide.base.errors import InvariantViolationError
from bolide.client.message import SendResult
from bolide.remoting.loop import new_event_loop

__all__ = ["BlockingFacade", "ClientFacade", "LoopThread"]

T = TypeVar("T")

SendCallback = Callable[["concurrent.futures.Future[SendResult]"], object]
"""Called with the finished future of an async send (on the loop thread: keep it short)."""


class LoopThread:
    """An event loop running on its own daemon thread, started on first use."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def started(self) -> bool:
        """Whether the thread runs (it starts on first use)."""
        return self._loop is not None

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The loop, starting the thread if needed."""
        with self._lock:
            if self._loop is None:
                loop = new_event_loop()
                ready = threading.Event()
                thread = threading.Thread(
                    target=self._run, args=(loop, ready), name=self.name, daemon=True
                )
                thread.start()
                ready.wait()
                self._loop, self._thread = loop, thread
            return self._loop

    @staticmethod
    def _run(loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
        asyncio.set_event_loop(loop)
        loop.call_soon(ready.set)
        loop.run_forever()

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule ``coroutine`` on the loop; returns a thread-safe future of its result."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` on the loop and block until it finishes; its exception, if any,
        is raised here unchanged. Raises InvariantViolationError on the loop thread itself."""
        if self._thread is not None and threading.current_thread() is self._thread:
            coroutine.close()
            raise InvariantViolationError(f"blocking call on {self.name}'s own loop thread")
        return self.submit(coroutine).result()

    def stop(self, timeout_ms: int = limits.REMOTING_STOP_GRACE_MS) -> None:
        """Cancel what still runs on the loop, stop it and join the thread. Idempotent."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return
        if threading.current_thread() is thread:
            raise InvariantViolationError(f"{self.name} stopped from its own loop thread")
        cancelled = asyncio.run_coroutine_threadsafe(_cancel_all(), loop)
        with contextlib.suppress(concurrent.futures.TimeoutError):
            cancelled.result(timeout_ms / 1000)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout_ms / 1000)
        if not thread.is_alive():
            loop.close()


async def _cancel_all() -> None:
    current = asyncio.current_task()
    tasks = [task for task in asyncio.all_tasks() if task is not current]
    for task in tasks:
        task.cancel()
    if tasks:
        await asyncio.wait(tasks)


class _AsyncCore(Protocol):
    """What a blocking facade needs of its async core: a coroutine ``start``."""

    async def start(self) -> None: ...


class _ClientCore(_AsyncCore, Protocol):
    """A producer's or consumer's core: a ``group`` and a coroutine ``shutdown``."""

    group: str

    async def shutdown(self) -> None: ...


CoreT = TypeVar("CoreT", bound=_AsyncCore)
ClientCoreT = TypeVar("ClientCoreT", bound=_ClientCore)


async def _call(function: Callable[..., T], *arguments: Any) -> T:
    """Run a plain core method on the loop thread (it may need the running loop)."""
    return function(*arguments)


class BlockingFacade(Generic[CoreT]):
    """The shared half of every blocking facade (producer, consumers, admin client): one
    async core driven on a private :class:`LoopThread` named ``thread_name``.

    ``with facade:`` calls :meth:`start` and, on the way out, :meth:`_close` (the facade's
    ``shutdown`` or ``close``), which stops the loop thread too.
    """

    def __init__(self, core: CoreT, thread_name: str) -> None:
        self._core = core
        self._runner = LoopThread(thread_name)

    @property
    def core(self) -> CoreT:
        """The async core underneath (use it only on :attr:`loop_thread`)."""
        return self._core

    @property
    def loop_thread(self) -> LoopThread:
        return self._runner

    def start(self) -> None:
        """Start (see the async ``start``)."""
        self._runner.run(self._core.start())

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return self._runner.run(coroutine)

    def _on_loop(self, function: Callable[..., T], *arguments: Any) -> T:
        """``function(*arguments)`` on the loop thread once it runs, here before that."""
        if self._runner.started:
            return self._runner.run(_call(function, *arguments))
        return function(*arguments)

    def _finish(self, closing: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run ``closing()`` on the loop (if it ever started), then stop the loop thread
        even when ``closing`` raised. Idempotent when ``closing`` is."""
        try:
            if self._runner.started:
                self._runner.run(closing())
        finally:
            self._runner.stop()

    def _close(self) -> None:
        """What leaving a ``with`` block calls; each facade names its own."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._close()


class ClientFacade(BlockingFacade[ClientCoreT]):
    """A blocking producer or consumer: the group's facade, shut down by :meth:`shutdown`."""

    @property
    def group(self) -> str:
        return self._core.group

    def shutdown(self) -> None:
        """Shut down and stop the loop thread. Idempotent."""
        self._finish(self._core.shutdown)

    def _close(self) -> None:
        self.shutdown()
