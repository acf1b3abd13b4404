"""NATS JetStream through nats-py.

* publish: ``js.publish(subject, body)``, which waits for the stream's PubAck. Each producer is
  one connection; its window is that many concurrent ``publish`` calls, which nats-py
  multiplexes over one connection.
* consume: a durable pull consumer (deliver all, ack policy ALL) read with
  ``fetch(batch, timeout)``; one ``ack()`` of the last message of a batch acknowledges the
  batch (ack policy ALL), as Redis acknowledges a batch with one XACK and AMQP with
  ``multiple``. Acks are fire-and-forget publishes; ``flush_acks`` waits for a PING/PONG.
* the stream uses file storage; the ack of a publish comes after the server appended the message
  to its block file, and after its fsync only with ``sync_interval: always`` (servers.py).
"""

from __future__ import annotations

import contextlib

import nats
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, StorageType
from nats.js.client import JetStreamContext
from nats.js.errors import NotFoundError

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
    """One connection bound to the durable pull consumer."""

    def __init__(self, client: Client, subscription: JetStreamContext.PullSubscription) -> None:
        self._client = client
        self._subscription = subscription
        self._last: Msg | None = None

    async def fetch(self, max_messages: int, wait_ms: int) -> list[bytes]:
        try:
            messages = await self._subscription.fetch(max_messages, timeout=wait_ms / 1000)
        except TimeoutError:  # nats.errors.TimeoutError is one
            return []
        if messages:
            self._last = messages[-1]
        return [message.data for message in messages]

    async def ack(self) -> None:
        if self._last is not None:
            await self._last.ack()  # ack policy ALL: acknowledges the whole batch
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
        client = await _connect(self.port)
        subscription = await client.jetstream().pull_subscribe_bind(DURABLE, stream=destination)
        return NatsConsumer(client, subscription)
