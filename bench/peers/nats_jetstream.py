"""NATS JetStream through nats-py.

* publish: ``js.publish(subject, body)``, which waits for the stream's PubAck. Each producer is
  one connection; its window is that many concurrent ``publish`` calls, which nats-py
  multiplexes over one connection.
* consume: a durable pull consumer (deliver all, ack policy ALL) read with pull requests of
  ``batch`` messages (:class:`NatsConsumer` says why not nats-py's ``fetch``); one ``ack()``
  of the last message of a batch acknowledges the batch (ack policy ALL), as Redis
  acknowledges a batch with one XACK and AMQP with ``multiple``. Acks are fire-and-forget
  publishes; ``flush_acks`` waits for a PING/PONG.
* the stream uses file storage; the ack of a publish comes after the server appended the message
  to its block file, and after its fsync only with ``sync_interval: always`` (servers.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import json

# The peer's client is no project dependency (bench/peers/install.sh puts it in the venv):
# mypy must pass with it and without it, hence the ignores.
import nats  # type: ignore[import-not-found, unused-ignore]
from nats.aio.client import Client  # type: ignore[import-not-found, unused-ignore]
from nats.aio.msg import Msg  # type: ignore[import-not-found, unused-ignore]
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, StorageType  # type: ignore[import-not-found, unused-ignore]
from nats.js.client import JetStreamContext  # type: ignore[import-not-found, unused-ignore]
from nats.js.errors import NotFoundError  # type: ignore[import-not-found, unused-ignore]

DURABLE = "bench"
PUBLISH_TIMEOUT_S = 30.0
"""Per-publish bound: far above any healthy acknowledgement, so only a stuck server trips it."""
MAX_ACK_PENDING = 100_000
"""Unacknowledged messages the consumer may hold: high, so the server never throttles it."""


def _subject(destination: str) -> str:
    return f"{destination}.messages"


async def _connect(port: int) -> Client:
    return await nats.connect(f"nats://127.0.0.1:{port}", allow_reconnect=False)


class NatsProducer:
    """One connection; many coroutines may call :meth:`publish` at once."""

    def __init__(self, client: Client, destination: str) -> None:
        self._client = client
        self._jetstream = client.jetstream(timeout=PUBLISH_TIMEOUT_S)
        self._subject = _subject(destination)

    async def publish(self, body: bytes) -> None:
        await self._jetstream.publish(self._subject, body)

    async def close(self) -> None:
        await self._client.close()


class NatsConsumer:
    """One connection pulling from the durable consumer, one pull request open at a time.

    nats-py's ``fetch(batch)`` waits, when the stream is idle, until the whole batch arrived or
    the request expired, which adds up to the batch's inter-arrival time to every latency. This
    consumer sends the same pull request (``batch``, ``expires``) to
    ``$JS.API.CONSUMER.MSG.NEXT.<stream>.<durable>`` itself and returns as soon as one message
    arrived, with whatever else is already here: the same number of round trips per batch under
    a backlog, and no added wait when caught up.
    """

    def __init__(self, client: Client, destination: str) -> None:
        self._client = client
        self._next_subject = f"$JS.API.CONSUMER.MSG.NEXT.{destination}.{DURABLE}"
        self._inbox = client.new_inbox()
        self._delivered: asyncio.Queue[Msg] = asyncio.Queue()
        self._open = 0
        """Messages the open pull request may still deliver (0: no request open)."""
        self._last: Msg | None = None

    async def start(self) -> None:
        await self._client.subscribe(self._inbox, cb=self._on_message)

    async def _on_message(self, message: Msg) -> None:
        self._delivered.put_nowait(message)

    async def _request(self, max_messages: int, wait_ms: int) -> None:
        self._open = max_messages  # before the await: a cancelled publish leaves no lost count
        request = {"batch": max_messages, "expires": wait_ms * 1_000_000}
        await self._client.publish(
            self._next_subject, json.dumps(request).encode(), reply=self._inbox
        )

    def _take(self, message: Msg, bodies: list[bytes]) -> None:
        if JetStreamContext.is_status_msg(message):  # 404/408/409: the request is over
            self._open = 0
            return
        self._open = max(0, self._open - 1)
        bodies.append(message.data)
        self._last = message

    async def fetch(self, max_messages: int, wait_ms: int) -> list[bytes]:
        bodies: list[bytes] = []
        try:
            async with asyncio.timeout(wait_ms / 1000):
                while not bodies:
                    if self._open == 0:
                        await self._request(max_messages, wait_ms)
                    self._take(await self._delivered.get(), bodies)
        except TimeoutError:
            return bodies
        while len(bodies) < max_messages and not self._delivered.empty():
            self._take(self._delivered.get_nowait(), bodies)
        return bodies

    async def ack(self) -> None:
        if self._last is not None:
            await self._last.ack()  # ack policy ALL: acknowledges everything up to it
            self._last = None

    async def flush_acks(self) -> None:
        await self._client.flush()

    async def close(self) -> None:
        await self._client.close()


class NatsPeer:
    """A nats-server with JetStream on 127.0.0.1:``port`` (started by servers.py)."""

    name = "nats"

    def __init__(self, port: int, server_pid: int, durability: str) -> None:
        self.port = port
        self.server_pid = server_pid
        self.durability = durability

    async def server_version(self) -> str:
        client = await _connect(self.port)
        try:
            version = client.connected_server_version
            return f"{version.major}.{version.minor}.{version.patch}"
        finally:
            await client.close()

    async def create_destination(self, destination: str) -> None:
        client = await _connect(self.port)
        try:
            jetstream = client.jetstream()
            with contextlib.suppress(NotFoundError):
                await jetstream.delete_stream(destination)
            await jetstream.add_stream(
                name=destination, subjects=[_subject(destination)], storage=StorageType.FILE
            )
            await jetstream.add_consumer(
                destination,
                ConsumerConfig(
                    durable_name=DURABLE,
                    deliver_policy=DeliverPolicy.ALL,
                    ack_policy=AckPolicy.ALL,
                    max_ack_pending=MAX_ACK_PENDING,
                ),
            )
        finally:
            await client.close()

    async def delete_destination(self, destination: str) -> None:
        client = await _connect(self.port)
        try:
            await client.jetstream().delete_stream(destination)
        finally:
            await client.close()

    async def open_producer(self, destination: str) -> NatsProducer:
        return NatsProducer(await _connect(self.port), destination)

    async def open_consumer(self, destination: str, index: int) -> NatsConsumer:
        del index  # every consumer binds the same durable: the group
        consumer = NatsConsumer(await _connect(self.port), destination)
        await consumer.start()
        return consumer
