"""Driving real C++ push consumers (rocketmq==0.4.4) against a Bolide broker from tests.

The native library calls the listener on its own threads; :class:`Inbox` copies each message
into a plain record under a lock and wakes the test's event loop, so tests wait on received
messages (bounded), never on time. Blocking native calls (start, shutdown) run in a worker
thread: the broker under test shares the test's event loop.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tests.compat.cpp_harness import native_log_level
from tests.compat.native_shutdown import native_shutdown

WAIT_TIMEOUT_S = 60.0
"""Guard on waits for messages: fails a hung test instead of blocking it (not a measurement;
a C++ consumer rebalances every 10 s, so a wait may legitimately span one or two rounds)."""
EVENTUALLY_SPIN_TURNS = 100
"""Loop turns :func:`eventually` spins before it polls (what the loop alone makes true)."""
EVENTUALLY_POLL_INTERVAL_S = 0.005
"""Poll interval of :func:`eventually` after its spins: short next to any wait here, long
enough to leave the CPU to the native threads it waits for."""


@dataclass(frozen=True, slots=True)
class Received:
    """One message as a C++ listener saw it."""

    consumer: str
    topic: str
    body: str
    tags: str
    keys: str
    queue_id: int
    queue_offset: int
    msg_id: str
    reconsume_times: int
    properties: dict[str, str]


class Inbox:
    """Messages received by one or more C++ push consumers, in arrival order."""

    def __init__(self, loop: asyncio.AbstractEventLoop, properties: tuple[str, ...] = ()) -> None:
        self._loop = loop
        self._properties = properties
        self._lock = threading.Lock()
        self._messages: list[Received] = []
        self._changed = asyncio.Event()

    def listener(self, consumer: str) -> Callable[[Any], None]:
        """The callback to subscribe with, tagging records with ``consumer``."""

        def on_message(message: Any) -> None:
            record = Received(
                consumer=consumer,
                topic=_text(message.topic),
                body=_text(message.body),
                tags=_text(message.tags),
                keys=_text(message.keys),
                queue_id=int(message.queue_id),
                queue_offset=int(message.queue_offset),
                msg_id=_text(message.id),
                reconsume_times=int(message.reconsume_times),
                properties={name: _text(message.get_property(name)) for name in self._properties},
            )
            with self._lock:
                self._messages.append(record)
            self._loop.call_soon_threadsafe(self._changed.set)

        return on_message

    @property
    def messages(self) -> list[Received]:
        with self._lock:
            return list(self._messages)

    def bodies(self, consumer: str | None = None) -> list[str]:
        return [m.body for m in self.messages if consumer is None or m.consumer == consumer]

    async def wait_for(
        self, predicate: Callable[[list[Received]], bool], timeout_s: float = WAIT_TIMEOUT_S
    ) -> list[Received]:
        """Wait until ``predicate(messages)`` holds; TimeoutError after ``timeout_s``."""

        async def wait() -> list[Received]:
            while True:
                self._changed.clear()
                messages = self.messages
                if predicate(messages):
                    return messages
                await self._changed.wait()

        return await asyncio.wait_for(wait(), timeout_s)


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def new_quiet_push_consumer(
    group: str,
    namesrv_address: str,
    *,
    instance_name: str,
    broadcasting: bool = False,
) -> Any:
    """A not-yet-started C++ PushConsumer logging at ``NATIVE_LOG_LEVEL`` (set HOME first).

    ``instance_name`` must differ between consumers of one process: the C++ client id is
    ``<pid>-<ip>@<instance name>``.
    """
    from rocketmq import ffi
    from rocketmq.client import MessageModel, PushConsumer

    model = MessageModel.BROADCASTING if broadcasting else MessageModel.CLUSTERING
    consumer = PushConsumer(group, message_model=model)
    ffi.dll.SetPushConsumerLogLevel(consumer._handle, native_log_level())
    consumer.set_namesrv_addr(namesrv_address)
    consumer.set_instance_name(instance_name)
    return consumer


def destroy_push_consumer(consumer: Any) -> None:
    """Shut down (offsets persisted, client unregistered) and free the native consumer now
    (inside :func:`native_shutdown`: see tests/compat/native_shutdown.py)."""
    from rocketmq import ffi

    handle = consumer._handle
    if handle is None:
        return
    with native_shutdown():
        consumer.shutdown()
    consumer._handle = None
    ffi.dll.DestroyPushConsumer(handle)


async def eventually(predicate: Callable[[], bool], timeout_s: float = WAIT_TIMEOUT_S) -> None:
    """Yield to the event loop until ``predicate()`` holds (state the broker under test changes
    as native client threads talk to it); TimeoutError after ``timeout_s``.

    No event exists to wait on: the state moves as the broker serves native threads, which
    need CPU to run. So after a few loop turns it polls every few milliseconds instead of
    spinning (a spin held one of CI's two cores for as long as a C++ rebalance took, 10 s).
    """

    async def poll() -> None:
        for _ in range(EVENTUALLY_SPIN_TURNS):
            if predicate():
                return
            await asyncio.sleep(0)
        while not predicate():  # noqa: ASYNC110
            await asyncio.sleep(EVENTUALLY_POLL_INTERVAL_S)

    await asyncio.wait_for(poll(), timeout_s)


def stored_messages(broker: Any, topic: str) -> list[Any]:
    """Every message of ``topic`` in ``broker``'s store, decoded, by queue then offset."""
    from bolide.protocol.record import decode_records

    store = broker.context.store
    queues = store.topics_and_queues().get(topic, [])
    found: list[Any] = []
    for queue_id in queues:
        offset = store.min_offset(topic, queue_id)
        while offset < store.max_offset(topic, queue_id):
            result = store.get_message(topic, queue_id, offset, 32, 1 << 20)
            found += decode_records(b"".join(bytes(view) for view in result.buffers))
            offset = result.next_begin_offset
    return found
