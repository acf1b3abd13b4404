"""The blocking API: the async core run on a private event-loop thread.

:class:`LoopThread` owns one event loop (uvloop when installed) on a daemon thread; a facade
hands it coroutines of the async core and waits for their results, so every behaviour lives
once, in the core. :class:`Producer` is ``bolide.Producer``; consumers' facades (C2) are built
the same way on :class:`LoopThread`.

Calls must come from outside the loop thread (from a listener running on the loop, use the
async API): a blocking call there would wait for itself.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Callable, Coroutine, Iterable, Sequence
from types import TracebackType
from typing import Any, Generic, Protocol, Self, TypeVar

from bolide.base import limits
from bolide.base.errors import InvariantViolationError
from bolide.client.message import SendResult
from bolide.client.producer.producer import Producer as AsyncProducer
from bolide.client.route import DEFAULT_TOPIC
from bolide.protocol.bodies import MessageQueue
from bolide.protocol.compression import CompressionType
from bolide.protocol.message import Message
from bolide.remoting.loop import new_event_loop
from bolide.remoting.tls import TlsClientSettings

__all__ = ["BlockingFacade", "ClientFacade", "LoopThread", "Producer"]

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


class Producer(ClientFacade[AsyncProducer]):
    """The blocking producer: ``bolide.Producer("order-producers", namesrv="127.0.0.1:9876")``.

    Same options, errors and behaviour as :class:`bolide.aio.Producer` (see
    :class:`bolide.client.producer.producer.Producer`); each call blocks until the async core
    is done. ``send_async`` returns a :class:`concurrent.futures.Future` instead; sends made
    with ``send_async`` (or from several threads) batch naturally under ``auto_batch``.
    ``with Producer(...) as producer:`` starts and shuts it down.
    """

    def __init__(
        self,
        group: str,
        namesrv: str | Iterable[str],
        *,
        instance_name: str | None = None,
        send_timeout_ms: int = limits.PRODUCER_SEND_TIMEOUT_MS,
        retry_count: int = limits.PRODUCER_SEND_RETRY_COUNT,
        compress_over_bytes: int = limits.COMPRESS_BODY_OVER_BYTES,
        max_message_bytes: int = limits.MESSAGE_BODY_MAX_BYTES,
        latency_avoidance: bool = True,
        default_topic: str = DEFAULT_TOPIC,
        default_topic_queue_count: int = limits.PRODUCER_DEFAULT_TOPIC_QUEUE_COUNT,
        access_key: str | None = None,
        secret_key: str | None = None,
        tls: TlsClientSettings | bool | None = None,
        auto_batch: bool = True,
        compress_type: CompressionType | str = CompressionType.ZLIB,
        namespace: str | None = None,
    ) -> None:
        core = AsyncProducer(
            group,
            namesrv,
            instance_name=instance_name,
            send_timeout_ms=send_timeout_ms,
            retry_count=retry_count,
            compress_over_bytes=compress_over_bytes,
            max_message_bytes=max_message_bytes,
            latency_avoidance=latency_avoidance,
            default_topic=default_topic,
            default_topic_queue_count=default_topic_queue_count,
            access_key=access_key,
            secret_key=secret_key,
            tls=tls,
            auto_batch=auto_batch,
            compress_type=compress_type,
            namespace=namespace,
        )
        super().__init__(core, f"bolide-producer-{group}")

    @property
    def client_id(self) -> str:
        return self._core.instance.client_id

    def send(
        self,
        message: Message,
        *,
        queue: MessageQueue | None = None,
        sharding_key: str | None = None,
        timeout_ms: int | None = None,
    ) -> SendResult:
        """Send and wait for the broker (see the async ``send``; ``sharding_key`` sends in
        order to the key's queue)."""
        coroutine = self._core.send(
            message, queue=queue, sharding_key=sharding_key, timeout_ms=timeout_ms
        )
        return self._runner.run(coroutine)

    def send_async(
        self,
        message: Message,
        callback: SendCallback | None = None,
        *,
        queue: MessageQueue | None = None,
        sharding_key: str | None = None,
        timeout_ms: int | None = None,
    ) -> concurrent.futures.Future[SendResult]:
        """Start a send and return at once; the future holds the result or the error."""
        future = self._runner.submit(
            self._core.send(message, queue=queue, sharding_key=sharding_key, timeout_ms=timeout_ms)
        )
        if callback is not None:
            future.add_done_callback(callback)
        return future

    def send_batch(
        self,
        messages: Sequence[Message],
        *,
        queue: MessageQueue | None = None,
        timeout_ms: int | None = None,
    ) -> SendResult:
        """Send one batch (see the async ``send_batch``)."""
        coroutine = self._core.send_batch(messages, queue=queue, timeout_ms=timeout_ms)
        return self._runner.run(coroutine)

    def send_orderly(
        self, message: Message, sharding_key: str, *, timeout_ms: int | None = None
    ) -> SendResult:
        """Send to the queue of ``sharding_key`` (see the async ``send_orderly``)."""
        coroutine = self._core.send_orderly(message, sharding_key, timeout_ms=timeout_ms)
        return self._runner.run(coroutine)

    def send_oneway(self, message: Message, *, queue: MessageQueue | None = None) -> None:
        """Send without waiting for the broker (see the async ``send_oneway``)."""
        self._runner.run(self._core.send_oneway(message, queue=queue))
