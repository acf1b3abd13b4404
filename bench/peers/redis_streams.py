"""Redis Streams through redis-py's asyncio client with the hiredis parser.

* publish: ``XADD <stream> * d <body>``. Each producer is one connection; its window of
  unacknowledged sends is a true sliding window: commands are written as they come and a reader
  task matches the replies, which Redis returns in order, to the waiting callers.
* consume: ``XREADGROUP GROUP bench <consumer> COUNT <batch> BLOCK <ms> STREAMS <stream> >``,
  then ``XACK`` of the ids, sent in the same pipeline as the next read (one round trip per
  batch, as AMQP and JetStream acknowledgements that need no reply).
* ``socket_timeout=None``: redis-py's default (5 s) wraps every write in ``asyncio.wait_for``,
  which costs a task per command and, on Python 3.11, can swallow a cancellation.
* the acknowledgement of an XADD is the reply, which Redis sends after the AOF write (and the
  fsync with ``appendfsync always``) of the event-loop turn that ran the command.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from typing import Any

# The peer's client is no project dependency (bench/peers/install.sh puts it in the venv):
# mypy must pass with it and without it, hence the ignores.
from redis.asyncio import Connection, Redis  # type: ignore[import-not-found, unused-ignore]

GROUP = "bench"
BODY_FIELD = b"d"


class RedisProducer:
    """One connection; many coroutines may call :meth:`publish` at once."""

    def __init__(self, connection: Connection, stream: str) -> None:
        self._connection = connection
        self._stream = stream
        self._waiting: deque[asyncio.Future[Any]] = deque()
        self._reader = asyncio.get_running_loop().create_task(self._read_replies_loop())

    async def _read_replies_loop(self) -> None:
        try:
            while True:
                reply = await self._connection.read_response()
                waiter = self._waiting.popleft()
                if waiter.done():  # its caller was cancelled; the reply still comes, in order
                    continue
                if isinstance(reply, Exception):
                    waiter.set_exception(reply)
                else:
                    waiter.set_result(reply)
        except BaseException as error:
            for waiter in self._waiting:
                if not waiter.done():
                    waiter.set_exception(ConnectionError(f"redis reader stopped: {error!r}"))
            raise

    async def publish(self, body: bytes) -> None:
        if self._reader.done():
            raise ConnectionError("redis producer connection is closed")
        waiter = asyncio.get_running_loop().create_future()
        # appended before the write, with no await in between, so replies match in order
        self._waiting.append(waiter)
        await self._connection.send_command(
            "XADD", self._stream, "*", BODY_FIELD, body, check_health=False
        )
        await waiter

    async def close(self) -> None:
        self._reader.cancel()
        # redis-py may turn the cancellation into its own TimeoutError: either way, it is over
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._reader
        await self._connection.disconnect()


class RedisConsumer:
    """One connection of the ``bench`` group; acknowledgements ride with the next read."""

    def __init__(self, client: Redis, stream: str, name: str) -> None:
        self._client = client
        self._stream = stream
        self._name = name
        self._fetched_ids: list[bytes] = []
        self._ack_ids: list[bytes] = []

    async def fetch(self, max_messages: int, wait_ms: int) -> list[bytes]:
        pipe = self._client.pipeline(transaction=False)
        if self._ack_ids:
            pipe.xack(self._stream, GROUP, *self._ack_ids)
        pipe.xreadgroup(GROUP, self._name, {self._stream: ">"}, count=max_messages, block=wait_ms)
        replies = await pipe.execute()
        self._ack_ids = []
        streams = replies[-1]
        if not streams:
            return []
        entries = streams[0][1]
        self._fetched_ids = [entry_id for entry_id, _ in entries]
        return [fields[BODY_FIELD] for _, fields in entries]

    async def ack(self) -> None:
        self._ack_ids.extend(self._fetched_ids)
        self._fetched_ids = []

    async def flush_acks(self) -> None:
        if self._ack_ids:
            await self._client.xack(self._stream, GROUP, *self._ack_ids)
            self._ack_ids = []

    async def close(self) -> None:
        await self._client.aclose()


class RedisPeer:
    """A redis-server on 127.0.0.1:``port`` (started by servers.py)."""

    name = "redis"

    def __init__(self, port: int, server_pid: int, durability: str) -> None:
        self.port = port
        self.server_pid = server_pid
        self.durability = durability

    def _client(self) -> Redis:
        return Redis(
            host="127.0.0.1", port=self.port, single_connection_client=True, socket_timeout=None
        )

    async def server_version(self) -> str:
        client = self._client()
        try:
            info = await client.info("server")
            return str(info["redis_version"])
        finally:
            await client.aclose()

    async def create_destination(self, destination: str) -> None:
        client = self._client()
        try:
            await client.delete(destination)
            await client.xgroup_create(destination, GROUP, id="0", mkstream=True)
        finally:
            await client.aclose()

    async def delete_destination(self, destination: str) -> None:
        client = self._client()
        try:
            await client.delete(destination)
        finally:
            await client.aclose()

    async def open_producer(self, destination: str) -> RedisProducer:
        connection = Connection(host="127.0.0.1", port=self.port, socket_timeout=None)
        await connection.connect()  # type: ignore[no-untyped-call, unused-ignore]
        return RedisProducer(connection, destination)

    async def open_consumer(self, destination: str, index: int) -> RedisConsumer:
        return RedisConsumer(self._client(), destination, f"consumer-{index}")
