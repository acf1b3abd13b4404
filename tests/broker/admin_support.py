"""Helpers for the admin tests: a cluster, and fake consumers that register with a chosen
language and record what the broker sends them."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

from bolide.protocol.bodies import ConsumerRunningInfo, MessageQueue
from bolide.protocol.codes import LanguageCode, RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.remoting import ClientPool, Connection, Dispatcher
from bolide.testing.cluster import Cluster
from tests.integration.wire import BrokerWire, heartbeat_request, send_request

WAIT_S = 10.0
"""Guard on waits for a request the broker sends: fails a hung test, never a measurement."""


@contextlib.asynccontextmanager
async def admin_cluster(root: Path, **options: object) -> AsyncIterator[Cluster]:
    """A started in-process cluster (name server and brokers on port 0 under ``root``)."""
    async with Cluster(root, **options) as cluster:  # type: ignore[arg-type]
        yield cluster


@dataclass
class FakeConsumer:
    """A client that heartbeats as ``language`` and keeps what the broker sends it.

    ``running_info`` is its answer to GET_CONSUMER_RUNNING_INFO (None: it never answers).
    """

    client_id: str
    language: LanguageCode
    version: int = 401
    running_info: ConsumerRunningInfo | None = None
    resets: asyncio.Queue[RemotingCommand] = field(default_factory=asyncio.Queue)
    pool: ClientPool | None = None

    async def connect(self, address: str, group: str, topic: str) -> None:
        dispatcher = Dispatcher()
        dispatcher.register(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, self._reset, family="c")
        dispatcher.register(RequestCode.GET_CONSUMER_RUNNING_INFO, self._info, family="c")
        self.pool = ClientPool(dispatcher)
        request = heartbeat_request(self.client_id, consumer_groups={group: {topic: "*"}})
        request.language = self.language
        request.version = self.version
        response = await self.pool.invoke(address, request, 5_000)
        assert response.code == ResponseCode.SUCCESS

    async def close(self) -> None:
        if self.pool is not None:
            await self.pool.close()

    async def next_reset(self) -> RemotingCommand:
        return await asyncio.wait_for(self.resets.get(), WAIT_S)

    async def _reset(self, connection: Connection, request: RemotingCommand) -> None:
        del connection
        await self.resets.put(request)

    async def _info(
        self, connection: Connection, request: RemotingCommand
    ) -> RemotingCommand | None:
        del connection
        if self.running_info is None:
            await asyncio.Event().wait()  # never answers; cancelled at shutdown
            return None
        return request.make_response(ResponseCode.SUCCESS, body=self.running_info.to_json())


async def fill(wire: BrokerWire, topic: str, counts: dict[int, int]) -> None:
    """Send ``counts[queue_id]`` messages to each queue of ``topic``."""
    for queue_id, count in counts.items():
        for index in range(count):
            response = await wire.invoke(
                send_request(topic, f"{queue_id}-{index}".encode(), queue_id=queue_id)
            )
            assert response.code == ResponseCode.SUCCESS, response.remark


def queue(topic: str, queue_id: int, broker: str = "broker-a") -> MessageQueue:
    return MessageQueue(topic, broker, queue_id)
