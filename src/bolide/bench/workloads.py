"""The three workloads of ``bolide bench`` (produce, consume, e2e) and the warm-up, written once
over two small interfaces — a :class:`Sender` ("send these bodies and wait for the broker") and
a :class:`Receiver` ("call me with the bodies you got; commit what you got") — that the client
mode (this module: ``bolide.aio.Producer`` / ``PushConsumer``) and the raw mode
(:mod:`.raw`) implement.

The rules are those the peers follow (bench/peers/README.md): a sliding window of
``in_flight`` sends per producer, ``messages`` in all, no new send after ``max_seconds``;
consume reads a backlog stored first (untimed); e2e publishes message ``i`` at
start + ``i / rate`` and measures stamp-to-receive latency.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from bolide.base import limits
from bolide.base.errors import BolideError
from bolide.base.gc_pause import freeze_startup_objects
from bolide.bench.runtime import (
    BenchSettings,
    LatencyRecorder,
    PhaseMeasure,
    StampedBodies,
    Stopwatch,
    read_stamp_ns,
)
from bolide.client.config import ConsumeFrom
from bolide.client.consumer.listener import ConsumeResult
from bolide.client.consumer.options import ConsumerOptions
from bolide.client.consumer.push_consumer import PushConsumer
from bolide.client.message import Message, SendStatus
from bolide.client.producer.producer import Producer
from bolide.protocol.message import MessageExt

__all__ = [
    "BenchClients",
    "ClientModeClients",
    "Counters",
    "Outcome",
    "Receiver",
    "Sender",
    "load_backlog",
    "run_consume",
    "run_e2e",
    "run_produce",
    "warm_up",
]

_log = logging.getLogger("bolide.cli.bench")

BodiesCallback = Callable[[Sequence[bytes | memoryview], int], None]
"""``on_bodies(bodies, received_ns)``: a receiver got ``bodies`` at ``time.monotonic_ns()``
``received_ns``."""
PRODUCER_GROUP = "bench-producers"
_READY_POLL_S = 0.01
"""How often e2e looks whether the consumers own every queue yet (setup, not measured)."""


class Sender(Protocol):
    """One producer connection; ``send`` may be called by many coroutines at once."""

    async def prepare(self) -> None:
        """Learn the route and connect, so that the timed phase starts with a ready client."""

    async def send(self, bodies: list[bytes]) -> None:
        """Send ``bodies`` in one request (a batch when more than one) and wait for SEND_OK.

        Raises BolideError when the broker refused or did not answer."""

    async def close(self) -> None: ...


class Receiver(Protocol):
    """One consumer of the run's group."""

    async def start(self) -> None:
        """Join the group and start receiving (the callback is called from the loop)."""

    def owned_queue_count(self) -> int:
        """Queues of the run's topic this consumer reads now."""

    async def commit(self) -> None:
        """Send the offsets of everything received to the broker."""

    async def close(self) -> None: ...


class BenchClients(Protocol):
    """Makes the senders and receivers of one mode."""

    async def open_sender(self, topic: str, index: int) -> Sender: ...

    async def open_receiver(
        self, topic: str, group: str, index: int, on_bodies: BodiesCallback
    ) -> Receiver: ...


@dataclass
class Counters:
    """What the progress display shows: the phase and how far it got (``expected`` 0:
    unknown, a run by duration)."""

    phase: str = "starting"
    done: int = 0
    expected: int = 0
    errors: int = 0


@dataclass(frozen=True)
class Outcome:
    """What one timed phase counted and measured."""

    messages: int
    expected_messages: int
    errors: int
    measure: PhaseMeasure
    latency: LatencyRecorder | None


# --- client mode ----------------------------------------------------------------------------------


def _instance_name(role: str, index: int) -> str:
    # One client instance (hence one connection) per producer and consumer, as the peers have.
    return f"bench-{role}-{index}-{os.getpid()}"


class _ClientSender:
    def __init__(self, producer: Producer, topic: str) -> None:
        self._producer = producer
        self._topic = topic

    async def prepare(self) -> None:
        await self._producer.start()
        instance = self._producer.instance
        route = await instance.publish_route(self._topic)
        for broker_name in {queue.broker_name for queue in route.publish_queues}:
            address = instance.broker_address(broker_name)
            if address is not None:
                await instance.pool.connect(address)

    async def send(self, bodies: list[bytes]) -> None:
        if len(bodies) == 1:
            result = await self._producer.send(Message(self._topic, bodies[0]))
        else:
            result = await self._producer.send_batch([Message(self._topic, b) for b in bodies])
        if result.status is not SendStatus.SEND_OK:
            raise BolideError(f"send ended {result.status.value}")

    async def close(self) -> None:
        await self._producer.shutdown()


class _ClientReceiver:
    def __init__(self, consumer: PushConsumer, topic: str, on_bodies: BodiesCallback) -> None:
        self._consumer = consumer
        self._topic = topic
        self._on_bodies = on_bodies
        consumer.subscribe(topic, "*")
        consumer.register_listener(self._listener)

    async def _listener(self, messages: list[MessageExt]) -> ConsumeResult:
        self._on_bodies([message.body for message in messages], time.monotonic_ns())
        return ConsumeResult.SUCCESS

    async def start(self) -> None:
        await self._consumer.start()

    def owned_queue_count(self) -> int:
        return sum(1 for queue in self._consumer.process_queues if queue.topic == self._topic)

    async def commit(self) -> None:
        await self._consumer.persist_offsets()

    async def close(self) -> None:
        await self._consumer.shutdown()


class ClientModeClients:
    """``bolide.aio.Producer`` and ``bolide.aio.PushConsumer`` (asynchronous listener, batches
    of up to ``pull_batch`` messages per call, compression off: bodies are random)."""

    def __init__(self, namesrv: str, settings: BenchSettings) -> None:
        self._namesrv = namesrv
        self._settings = settings

    async def open_sender(self, topic: str, index: int) -> Sender:
        producer = Producer(
            PRODUCER_GROUP,
            self._namesrv,
            instance_name=_instance_name("producer", index),
            compress_over_bytes=limits.MESSAGE_BODY_MAX_BYTES + 1,
        )
        return _ClientSender(producer, topic)

    async def open_receiver(
        self, topic: str, group: str, index: int, on_bodies: BodiesCallback
    ) -> Receiver:
        consumer = PushConsumer(
            group,
            self._namesrv,
            instance_name=_instance_name(f"consumer-{group}", index),
            consume_from=ConsumeFrom.FIRST_OFFSET,
            options=ConsumerOptions(
                pull_batch_size=self._settings.pull_batch,
                consume_batch_max_size=self._settings.pull_batch,
            ),
        )
        return _ClientReceiver(consumer, topic, on_bodies)


# --- shared steps -----------------------------------------------------------------------------


def _cancel_requested(task: asyncio.Task[Any] | None = None) -> bool:
    """True once ``task`` (default: the current task) was asked to stop, even if a library
    swallowed the CancelledError: loops check it to stop anyway. A loop passes its own task,
    looked up once: on Python 3.11 each look-up costs a getpid system call."""
    if task is None:
        task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _stop_if_cancelled() -> None:
    """Raise CancelledError when the current task was asked to stop but a library swallowed
    the cancellation (Python 3.11's ``asyncio.wait_for`` returns a result that arrived with
    it). Called between the steps of a run: without it a SIGTERM that landed in such a call
    was lost and the run went on to its ``--max-seconds`` (issue 30)."""
    if _cancel_requested():
        raise asyncio.CancelledError


async def _close_all(clients: Sequence[Sender] | Sequence[Receiver]) -> None:
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(limits.BENCH_CLOSE_TIMEOUT_MS / 1000):
            await asyncio.gather(*(client.close() for client in clients), return_exceptions=True)
    _stop_if_cancelled()


async def _open_senders(clients: BenchClients, topic: str, count: int) -> list[Sender]:
    senders: list[Sender] = []
    try:
        for index in range(count):
            sender = await clients.open_sender(topic, index)
            senders.append(sender)
            await sender.prepare()
            _stop_if_cancelled()
    except BaseException:
        await _close_all(senders)
        raise
    return senders


async def _open_receivers(
    clients: BenchClients, topic: str, group: str, count: int, on_bodies: BodiesCallback
) -> list[Receiver]:
    receivers = [
        await clients.open_receiver(topic, group, index, on_bodies) for index in range(count)
    ]
    _stop_if_cancelled()
    return receivers


Ticket = Callable[[], int | Awaitable[int]]
"""Returns how many messages the next send carries, 0 when no more may be sent; a paced run
returns an awaitable of it (it waits for the send's turn), a counted run the number itself
(no coroutine per send in the bench's own loop)."""


@dataclass
class _WindowTally:
    acked: int = 0
    errors: int = 0


async def _send_window(
    senders: list[Sender],
    settings: BenchSettings,
    next_ticket: Ticket,
    counters: Counters,
    latency: LatencyRecorder | None,
) -> _WindowTally:
    """``in_flight`` coroutines per sender, each sending while ``next_ticket()`` allows."""
    bodies = StampedBodies(settings.message_bytes)
    tally = _WindowTally()
    perf_counter_ns = time.perf_counter_ns
    stamped = bodies.stamped
    record = latency.record_many if latency is not None else None

    window = asyncio.current_task()  # its cancellation may have been swallowed before

    async def window_slot(sender: Sender) -> None:
        task = asyncio.current_task()
        send = sender.send
        while not (_cancel_requested(task) or _cancel_requested(window)):
            count = next_ticket()
            if not isinstance(count, int):
                count = await count
            if count == 0:
                return
            batch = [stamped()] if count == 1 else [stamped() for _ in range(count)]
            started_ns = perf_counter_ns()
            try:
                await send(batch)
            except BolideError as error:
                tally.errors += count
                counters.errors = tally.errors
                _log.debug("send failed: %s", error)
                continue
            if record is not None:  # every message's own latency, from its send call
                record(perf_counter_ns() - started_ns, count)
            tally.acked += count
            counters.done = tally.acked

    await asyncio.gather(
        *(window_slot(sender) for sender in senders for _ in range(settings.in_flight))
    )
    return tally


def _counted_tickets(total: int, batch_size: int, deadline: float) -> Ticket:
    """Batches of ``batch_size`` until ``total`` (0: no limit) or ``deadline`` (perf_counter)."""
    left = total if total > 0 else sys.maxsize
    perf_counter = time.perf_counter

    def next_ticket() -> int:
        nonlocal left
        if left <= 0 or perf_counter() >= deadline:
            return 0
        count = batch_size if batch_size < left else left
        left -= count
        return count

    return next_ticket


# --- produce ------------------------------------------------------------------------------------


async def run_produce(
    clients: BenchClients, topic: str, settings: BenchSettings, counters: Counters,
    broker_pid: int | None,
) -> Outcome:  # fmt: skip
    """Send ``settings.messages`` (or for ``max_seconds``) through ``producers`` senders with
    ``in_flight`` sends outstanding each. Timed from the first send to the last answer; the
    latency of every message is its send call to SEND_OK."""
    senders = await _open_senders(clients, topic, settings.producers)
    try:
        counters.phase, counters.done, counters.expected = "produce", 0, settings.messages
        latency = LatencyRecorder()
        watch = Stopwatch(broker_pid)
        deadline = time.perf_counter() + settings.max_seconds
        tickets = _counted_tickets(settings.messages, settings.batch_size, deadline)
        tally = await _send_window(senders, settings, tickets, counters, latency)
        measure = watch.stop()
    finally:
        await _close_all(senders)
    expected = settings.messages or tally.acked + tally.errors
    return Outcome(tally.acked, expected, tally.errors, measure, latency)


# --- consume ------------------------------------------------------------------------------------


async def load_backlog(
    clients: BenchClients, topic: str, settings: BenchSettings, counters: Counters
) -> int:
    """Store the consume backlog (untimed): ``messages`` (or what ``max_seconds`` allows) in
    batches of ``BENCH_BACKLOG_BATCH_MESSAGES``; returns how many were stored."""
    senders = await _open_senders(clients, topic, settings.producers)
    try:
        counters.phase, counters.done, counters.expected = "backlog", 0, settings.messages
        deadline = time.perf_counter() + settings.max_seconds
        batch = min(limits.BENCH_BACKLOG_BATCH_MESSAGES, limits.BATCH_MESSAGES_MAX_COUNT)
        tickets = _counted_tickets(settings.messages, batch, deadline)
        tally = await _send_window(senders, settings, tickets, counters, None)
    finally:
        await _close_all(senders)
    return tally.acked


async def run_consume(
    clients: BenchClients, topic: str, group: str, settings: BenchSettings, counters: Counters,
    broker_pid: int | None,
) -> Outcome:  # fmt: skip
    """Store a backlog, then read it with ``consumers`` receivers of a new group and commit.
    Timed from the consumers' start to the last message received and its offset sent."""
    backlog = await load_backlog(clients, topic, settings, counters)
    received = 0
    all_in = asyncio.Event()

    def on_bodies(bodies: Sequence[bytes | memoryview], received_ns: int) -> None:
        nonlocal received
        received += len(bodies)
        counters.done = received
        if received >= backlog:
            all_in.set()

    receivers = await _open_receivers(clients, topic, group, settings.consumers, on_bodies)
    try:
        counters.phase, counters.done, counters.expected = "consume", 0, backlog
        watch = Stopwatch(broker_pid)
        for receiver in receivers:
            await receiver.start()
        _stop_if_cancelled()
        remaining_s = max(0.0, settings.max_seconds - watch.elapsed_s())
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(remaining_s):
                await all_in.wait()
        for receiver in receivers:
            await receiver.commit()
        measure = watch.stop()
    finally:
        await _close_all(receivers)
    return Outcome(received, backlog, 0, measure, None)


# --- e2e ----------------------------------------------------------------------------------------


async def _wait_owned(receivers: list[Receiver], queues: int) -> None:
    """Until the receivers own every queue of the topic (bounded; setup, not measured)."""
    async with asyncio.timeout(limits.BENCH_BROKER_START_TIMEOUT_MS / 1000):
        # The consumers expose no "assignment changed" event: look every few ms.
        while sum(receiver.owned_queue_count() for receiver in receivers) < queues:
            _stop_if_cancelled()
            await asyncio.sleep(_READY_POLL_S)


def _paced_tickets(total: int, rate_per_s: int, batch_size: int) -> Ticket:
    """Message ``i`` is due at start + ``i / rate_per_s``; a ticket waits for its first
    message's due time (start = the first call)."""
    handed_out = itertools.count(0, batch_size)
    started: float | None = None

    async def next_ticket() -> int:
        nonlocal started
        if started is None:
            started = time.perf_counter()
        index = next(handed_out)
        if index >= total:
            return 0
        delay_s = started + index / rate_per_s - time.perf_counter()
        if delay_s > 0:
            await asyncio.sleep(delay_s)
        return min(batch_size, total - index)

    return next_ticket


async def run_e2e(
    clients: BenchClients, topic: str, group: str, settings: BenchSettings, counters: Counters,
    broker_pid: int | None,
) -> Outcome:  # fmt: skip
    """``consumers`` receivers first (until they own every queue), then ``rate_per_s``
    messages a second for ``e2e_seconds``; latency = receive time minus the body's stamp.
    Ends when every message arrived or ``BENCH_E2E_DRAIN_MAX_MS`` after the last send."""
    total = round(settings.rate_per_s * settings.e2e_seconds)
    latency = LatencyRecorder()
    received = 0
    all_in = asyncio.Event()

    def on_bodies(bodies: Sequence[bytes | memoryview], received_ns: int) -> None:
        nonlocal received
        for body in bodies:
            latency.record(received_ns - read_stamp_ns(body))
        received += len(bodies)
        counters.done = received
        if received >= total:
            all_in.set()

    receivers = await _open_receivers(clients, topic, group, settings.consumers, on_bodies)
    senders: list[Sender] = []
    try:
        for receiver in receivers:
            await receiver.start()
        await _wait_owned(receivers, settings.queues)
        senders = await _open_senders(clients, topic, settings.producers)
        # Setup is over: its objects leave the collector's scans, as a server's do at ready.
        freeze_startup_objects()
        counters.phase, counters.done, counters.expected = "e2e", 0, total
        watch = Stopwatch(broker_pid)
        tickets = _paced_tickets(total, settings.rate_per_s, settings.batch_size)
        # e2e shows receipts: the senders count into a throw-away tally
        tally = await _send_window(senders, settings, tickets, Counters(), None)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(limits.BENCH_E2E_DRAIN_MAX_MS / 1000):
                await all_in.wait()
        measure = watch.stop()
    finally:
        await _close_all(senders)
        await _close_all(receivers)
    return Outcome(received, total, tally.errors, measure, latency)


# --- warm-up --------------------------------------------------------------------------------------


async def warm_up(
    clients: BenchClients, topic: str, group: str, settings: BenchSettings, counters: Counters
) -> None:
    """Up to ``BENCH_WARM_UP_MESSAGES`` sent to ``topic`` and read back by ``group``, each half
    bounded by ``BENCH_WARM_UP_MAX_MS``; nothing is measured. The first seconds of a fresh
    broker and client (imports, first segment pages, caches) are slower."""
    bound_s = limits.BENCH_WARM_UP_MAX_MS / 1000
    warm = replace(settings, messages=limits.BENCH_WARM_UP_MESSAGES, max_seconds=bound_s)
    senders = await _open_senders(clients, topic, settings.producers)
    try:
        counters.phase, counters.done, counters.expected = "warm-up", 0, warm.messages
        tickets = _counted_tickets(
            warm.messages, settings.batch_size, time.perf_counter() + bound_s
        )
        sent = (await _send_window(senders, warm, tickets, counters, None)).acked
    finally:
        await _close_all(senders)
    received = 0
    all_in = asyncio.Event()

    def on_bodies(bodies: Sequence[bytes | memoryview], received_ns: int) -> None:
        nonlocal received
        received += len(bodies)
        if received >= sent:
            all_in.set()

    receivers = await _open_receivers(clients, topic, group, settings.consumers, on_bodies)
    try:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(bound_s):
                for receiver in receivers:
                    await receiver.start()
                _stop_if_cancelled()
                await all_in.wait()
    finally:
        await _close_all(receivers)
