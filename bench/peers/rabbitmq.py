"""RabbitMQ (AMQP 0-9-1) through aio-pika.

* publish: a channel in confirm mode; ``default_exchange.publish`` returns on the broker's
  basic.ack. Each producer is one connection with one channel; its window is that many
  concurrent ``publish`` calls on the channel.
* consume: ``basic.consume`` with manual acknowledgement and a prefetch of ``pull_batch``;
  a fetch takes what has been delivered (up to the batch), and ``ack`` sends one
  ``basic.ack(multiple)`` for the batch. A basic.qos round trip after the last ack is the
  barrier that tells the acks were processed (AMQP acks have no reply).
* durability (servers.py): a durable classic queue; SYNC publishes persistent messages, which
  the broker confirms after writing them to disk and fsyncing; ASYNC publishes transient
  messages, confirmed once enqueued in memory (weaker than Bolide's ASYNC: see README.md).
"""

from __future__ import annotations

import asyncio

# The peer's client is no project dependency (bench/peers/install.sh puts it in the venv):
# mypy must pass with it and without it, hence the ignores.
import aio_pika  # type: ignore[import-not-found, unused-ignore]
from aio_pika import DeliveryMode, Message  # type: ignore[import-not-found, unused-ignore]
from aio_pika.abc import AbstractChannel, AbstractConnection, AbstractIncomingMessage  # type: ignore[import-not-found, unused-ignore]

from bench.peers.spec import FlushMode

CONSUMER_BUFFER_MAX_MESSAGES = 100_000
"""Deliveries held between the consume callback and ``fetch``; prefetch keeps it far lower."""


async def _connect(port: int) -> AbstractConnection:
    return await aio_pika.connect(host="127.0.0.1", port=port, login="guest", password="guest")


class RabbitProducer:
    """One connection and one confirm-mode channel; many coroutines may publish at once."""

    def __init__(
        self,
        connection: AbstractConnection,
        channel: AbstractChannel,
        queue: str,
        delivery_mode: DeliveryMode,
    ) -> None:
        self._connection = connection
        self._exchange = channel.default_exchange
        self._queue = queue
        self._delivery_mode = delivery_mode

    async def publish(self, body: bytes) -> None:
        # mandatory (aio-pika's default): an unroutable message raises instead of vanishing
        await self._exchange.publish(
            Message(body, delivery_mode=self._delivery_mode), routing_key=self._queue
        )

    async def close(self) -> None:
        await self._connection.close()


class RabbitConsumer:
    """One connection consuming the queue with manual acks and a prefetch window."""

    def __init__(self, connection: AbstractConnection, channel: AbstractChannel) -> None:
        self._connection = connection
        self._channel = channel
        self._prefetch = 0
        self._delivered: asyncio.Queue[AbstractIncomingMessage] = asyncio.Queue(
            CONSUMER_BUFFER_MAX_MESSAGES
        )
        self._last: AbstractIncomingMessage | None = None

    async def start(self, queue_name: str, prefetch: int) -> None:
        self._prefetch = prefetch
        await self._channel.set_qos(prefetch_count=prefetch)
        queue = await self._channel.get_queue(queue_name)
        await queue.consume(self._on_message, no_ack=False)

    async def _on_message(self, message: AbstractIncomingMessage) -> None:
        await self._delivered.put(message)

    async def fetch(self, max_messages: int, wait_ms: int) -> list[bytes]:
        try:
            async with asyncio.timeout(wait_ms / 1000):
                first = await self._delivered.get()
        except TimeoutError:
            return []
        messages = [first]
        while len(messages) < max_messages and not self._delivered.empty():
            messages.append(self._delivered.get_nowait())
        self._last = messages[-1]
        return [message.body for message in messages]

    async def ack(self) -> None:
        if self._last is not None:
            await self._last.ack(multiple=True)
            self._last = None

    async def flush_acks(self) -> None:
        await self._channel.set_qos(prefetch_count=self._prefetch)

    async def close(self) -> None:
        await self._connection.close()


class RabbitPeer:
    """A rabbitmq-server on 127.0.0.1:``port`` (started by servers.py)."""

    name = "rabbitmq"

    def __init__(
        self, port: int, server_pid: int, durability: str, flush: FlushMode, pull_batch: int
    ) -> None:
        """``pull_batch`` is the prefetch (unacknowledged deliveries) of every consumer."""
        self.port = port
        self.server_pid = server_pid
        self.durability = durability
        self._pull_batch = pull_batch
        self._delivery_mode = (
            DeliveryMode.PERSISTENT if flush is FlushMode.SYNC else DeliveryMode.NOT_PERSISTENT
        )

    async def server_version(self) -> str:
        connection = await _connect(self.port)
        try:
            if connection.transport is None:
                raise ConnectionError("rabbitmq connection has no transport")
            properties = connection.transport.connection.server_properties
            version = properties.get("version", b"unknown")
            return version.decode() if isinstance(version, bytes) else str(version)
        finally:
            await connection.close()

    async def create_destination(self, destination: str) -> None:
        connection = await _connect(self.port)
        try:
            channel = await connection.channel()
            await channel.queue_delete(destination)  # deleting a missing queue succeeds
            await channel.declare_queue(destination, durable=True)
        finally:
            await connection.close()

    async def delete_destination(self, destination: str) -> None:
        connection = await _connect(self.port)
        try:
            channel = await connection.channel()
            await channel.queue_delete(destination)
        finally:
            await connection.close()

    async def open_producer(self, destination: str) -> RabbitProducer:
        connection = await _connect(self.port)
        channel = await connection.channel(publisher_confirms=True)
        return RabbitProducer(connection, channel, destination, self._delivery_mode)

    async def open_consumer(self, destination: str, index: int) -> RabbitConsumer:
        del index  # consumers of one queue share its messages: the group
        connection = await _connect(self.port)
        consumer = RabbitConsumer(connection, await connection.channel())
        await consumer.start(destination, self._pull_batch)
        return consumer
