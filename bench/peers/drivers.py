"""The three workloads, written once against a small client interface that every peer implements.

A peer adapter (redis_streams.py, nats_jetstream.py, rabbitmq.py) only translates "publish and
wait for the acknowledgement", "fetch up to n" and "acknowledge what was fetched" into its own
client's calls; pacing, windows, deadlines and measurement live here, so they are identical for
every peer.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Protocol

from bench.peers.result import LatencyRecorder, process_tree_cpu_s
from bench.peers.spec import WorkloadSpec
from bolide.bench.runtime import StampedBodies, read_stamp_ns

FETCH_WAIT_MS = 100
"""Longest a consumer's fetch blocks: how soon an idle consumer notices that the run is over."""
E2E_DRAIN_MAX_S = 5.0
"""After the last e2e publish, how long consumers may take to receive the rest."""
CLOSE_MAX_S = 10.0
"""Bound on closing one client connection."""
WARM_UP_MAX_S = 1.0
"""Bound of each half (send, then read back) of the warm-up that precedes a server's first
measured run: the first seconds of a fresh server (JIT, caches, allocators) are slower, more
for some peers than others."""
WARM_UP_MESSAGES = 5_000


class PeerProducer(Protocol):
    """One producer connection; ``publish`` may be called by many coroutines at once."""

    async def publish(self, body: bytes) -> None:
        """Returns once the server acknowledged ``body`` at the run's durability; raises if the
        server refused it."""

    async def close(self) -> None:
        """Closes the connection."""


class PeerConsumer(Protocol):
    """One consumer connection in the run's consumer group, used by one coroutine."""

    async def fetch(self, max_messages: int, wait_ms: int) -> list[bytes]:
        """Up to ``max_messages`` bodies; waits up to ``wait_ms`` for the first, [] if none."""

    async def ack(self) -> None:
        """Acknowledges every body fetched so far; may defer sending until the next fetch."""

    async def flush_acks(self) -> None:
        """Returns once every acknowledgement has been sent (and confirmed if the protocol
        confirms acknowledgements)."""

    async def close(self) -> None:
        """Closes the connection."""


class Peer(Protocol):
    """A running peer server and the way to reach it."""

    name: str
    server_pid: int
    durability: str
    """What the run's flush mode means on this peer, in words (goes into every result)."""

    async def server_version(self) -> str:
        """The version the server reports over its protocol."""

    async def create_destination(self, destination: str) -> None:
        """A fresh, empty stream or queue named ``destination`` with the consumer group
        positioned at its start."""

    async def delete_destination(self, destination: str) -> None:
        """Removes ``destination`` and its data."""

    async def open_producer(self, destination: str) -> PeerProducer:
        """A new producer connection publishing to ``destination``."""

    async def open_consumer(self, destination: str, index: int) -> PeerConsumer:
        """Consumer number ``index`` of the group reading ``destination``."""


@dataclass(frozen=True)
class PhaseMeasure:
    """What one timed phase measured."""

    messages: int
    expected_messages: int
    elapsed_s: float
    server_cpu_s: float
    client_cpu_s: float
    complete: bool


class _Stopwatch:
    """Wall time, our CPU and the server's CPU over one phase."""

    def __init__(self, server_pid: int) -> None:
        self._server_pid = server_pid
        self._server_cpu_s = process_tree_cpu_s(server_pid)
        self._client_cpu_s = time.process_time()
        self._started = time.perf_counter()

    def stop(self, messages: int, expected: int) -> PhaseMeasure:
        elapsed_s = time.perf_counter() - self._started
        return PhaseMeasure(
            messages=messages,
            expected_messages=expected,
            elapsed_s=elapsed_s,
            server_cpu_s=process_tree_cpu_s(self._server_pid) - self._server_cpu_s,
            client_cpu_s=time.process_time() - self._client_cpu_s,
            complete=messages >= expected,
        )


def _cancel_requested() -> bool:
    """True once the current task was asked to cancel, even if a client library swallowed the
    CancelledError (asyncio.wait_for on Python 3.11 can): loops check it to stop anyway."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


async def _close_all(clients: list[PeerProducer] | list[PeerConsumer]) -> None:
    async with asyncio.timeout(CLOSE_MAX_S):
        await asyncio.gather(*(client.close() for client in clients))


async def _send_window(
    producers: list[PeerProducer],
    spec: WorkloadSpec,
    next_ticket: Callable[[], Awaitable[bool]],
    recorder: LatencyRecorder | None,
) -> int:
    """P x F coroutines that publish while ``next_ticket()`` allows; returns acked sends."""
    bodies = StampedBodies(spec.message_bytes)
    acked = 0

    async def window_slot(producer: PeerProducer) -> None:
        nonlocal acked
        while not _cancel_requested() and await next_ticket():
            body = bodies.stamped()
            started_ns = time.perf_counter_ns()
            await producer.publish(body)
            if recorder is not None:
                recorder.record(time.perf_counter_ns() - started_ns)
            acked += 1

    await asyncio.gather(
        *(window_slot(producer) for producer in producers for _ in range(spec.in_flight))
    )
    return acked


def _count_tickets(count: int, deadline: float) -> Callable[[], Awaitable[bool]]:
    tickets = itertools.count()

    async def next_ticket() -> bool:
        return next(tickets) < count and time.perf_counter() < deadline

    return next_ticket


async def run_produce(
    peer: Peer, destination: str, spec: WorkloadSpec, recorder: LatencyRecorder | None
) -> PhaseMeasure:
    """Sends ``spec.message_count`` messages (or what ``spec.max_seconds`` allows) through
    ``spec.producers`` connections with ``spec.in_flight`` unacknowledged sends each.

    The timed phase starts after the connections are open and ends with the last
    acknowledgement. ``recorder`` (if any) gets each send-to-ack latency.
    """
    producers = [await peer.open_producer(destination) for _ in range(spec.producers)]
    try:
        watch = _Stopwatch(peer.server_pid)
        deadline = time.perf_counter() + spec.max_seconds
        acked = await _send_window(
            producers, spec, _count_tickets(spec.message_count, deadline), recorder
        )
        return watch.stop(acked, spec.message_count)
    finally:
        await _close_all(producers)


async def run_consume(
    peer: Peer, destination: str, spec: WorkloadSpec, backlog: int
) -> PhaseMeasure:
    """Reads and acknowledges the ``backlog`` messages stored in ``destination`` with
    ``spec.consumers`` consumers, bounded by ``spec.max_seconds``.

    The timed phase starts after the connections are open and ends when every message was
    received and every acknowledgement sent.
    """
    consumers = [await peer.open_consumer(destination, index) for index in range(spec.consumers)]
    try:
        watch = _Stopwatch(peer.server_pid)
        deadline = time.perf_counter() + spec.max_seconds
        received = 0

        async def consume(consumer: PeerConsumer) -> None:
            nonlocal received
            while received < backlog and time.perf_counter() < deadline and not _cancel_requested():
                bodies = await consumer.fetch(spec.pull_batch, FETCH_WAIT_MS)
                if bodies:
                    received += len(bodies)
                    await consumer.ack()
            await consumer.flush_acks()

        await asyncio.gather(*(consume(consumer) for consumer in consumers))
        return watch.stop(received, backlog)
    finally:
        await _close_all(consumers)


async def run_e2e(
    peer: Peer, destination: str, spec: WorkloadSpec, recorder: LatencyRecorder
) -> PhaseMeasure:
    """Publishes ``spec.rate_per_s`` messages per second for ``spec.e2e_seconds`` while
    ``spec.consumers`` consumers read them; ``recorder`` gets each publish-to-receive latency.

    Message i is due at start + i / rate; a window slot waits for its message's due time, stamps
    it and publishes it, so a slow acknowledgement delays only its own slot (the window is
    ``spec.in_flight`` per producer). Latency is measured from the stamp, taken just before the
    publish call, to the moment the consumer's fetch returned the message.
    """
    consumers = [await peer.open_consumer(destination, index) for index in range(spec.consumers)]
    producers = [await peer.open_producer(destination) for _ in range(spec.producers)]
    try:
        total = round(spec.rate_per_s * spec.e2e_seconds)
        interval_s = 1.0 / spec.rate_per_s
        watch = _Stopwatch(peer.server_pid)
        started = time.perf_counter()
        tickets = itertools.count()

        async def next_ticket() -> bool:
            index = next(tickets)
            if index >= total:
                return False
            delay_s = started + index * interval_s - time.perf_counter()
            if delay_s > 0:
                await asyncio.sleep(delay_s)
            return True

        received = 0
        sending = True
        drain_deadline = float("inf")

        async def consume(consumer: PeerConsumer) -> None:
            nonlocal received
            while not _cancel_requested() and (
                sending or (received < total and time.perf_counter() < drain_deadline)
            ):
                bodies = await consumer.fetch(spec.pull_batch, FETCH_WAIT_MS)
                now_ns = time.monotonic_ns()
                for body in bodies:
                    recorder.record(now_ns - read_stamp_ns(body))
                if bodies:
                    received += len(bodies)
                    await consumer.ack()
            await consumer.flush_acks()

        consuming = asyncio.gather(*(consume(consumer) for consumer in consumers))
        try:
            await _send_window(producers, spec, next_ticket, None)
        except BaseException:  # failed or cancelled: the consumers are no longer wanted
            sending, drain_deadline = False, 0.0  # a client that swallows cancel still stops
            consuming.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                async with asyncio.timeout(CLOSE_MAX_S):
                    await consuming
            raise
        # consumers stop once everything arrived, or at the drain bound
        drain_deadline = time.perf_counter() + E2E_DRAIN_MAX_S
        sending = False
        await consuming
        return watch.stop(received, total)
    finally:
        await _close_all(producers)
        await _close_all(consumers)


async def warm_up(peer: Peer, spec: WorkloadSpec) -> None:
    """Sends up to ``WARM_UP_MESSAGES`` to a scratch destination and reads them back, each half
    bounded by ``WARM_UP_MAX_S``; nothing is measured."""
    destination = "bench-warm-up"
    await peer.create_destination(destination)
    warm = replace(spec, message_count=WARM_UP_MESSAGES, max_seconds=WARM_UP_MAX_S)
    sent = await run_produce(peer, destination, warm, None)
    await run_consume(peer, destination, warm, sent.messages)
    await peer.delete_destination(destination)
