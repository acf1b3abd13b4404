"""Helpers for the client integration tests: topic creation over the wire, a collector of
consumed messages that tests wait on, and the broker side of a consumer's connection (to
send it what a broker or an admin tool would)."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable

from bolide.base.errors import invariant
from bolide.client.consumer.listener import ConsumeResult
from bolide.protocol.bodies import PERM_READ, PERM_WRITE
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import CreateTopicRequestHeader
from bolide.protocol.message import MessageExt
from bolide.remoting import ClientPool, Connection
from bolide.testing.cluster import Cluster

WAIT_S = 60.0
"""Generous bound on waiting for an event in these tests: a hang fails instead of blocking.
Above the clients' 20 s rebalance period, which a membership change may have to wait for."""


async def create_topic(cluster: Cluster, topic: str, queue_count: int) -> None:
    """UPDATE_AND_CREATE_TOPIC on every broker of ``cluster`` (registered with the name
    servers before the answer)."""
    header = CreateTopicRequestHeader(
        topic, "TBW102", queue_count, queue_count, PERM_READ | PERM_WRITE
    )
    pool = ClientPool()
    try:
        for broker in cluster.brokers:
            request = RemotingCommand.request(
                RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext_fields()
            )
            response = await pool.invoke(broker.address, request, 10_000)
            invariant(response.code == ResponseCode.SUCCESS, f"create {topic}: {response}")
    finally:
        await pool.close()


async def eventually(predicate: Callable[[], bool], timeout_s: float = WAIT_S) -> None:
    """Yield to the loop until ``predicate()`` holds, for state no event announces (counters
    of background work); at most ``timeout_s``."""
    async with asyncio.timeout(timeout_s):
        # No event announces these counters: yield turn by turn until the work is done.
        while not predicate():  # noqa: ASYNC110
            await asyncio.sleep(0)


def consumer_connection(cluster: Cluster, group: str, client_id: str) -> Connection:
    """The broker's end of ``client_id``'s connection in ``group`` (first broker)."""
    info = cluster.brokers[0].context.consumers.find_channel(group, client_id)
    invariant(info is not None, f"{client_id} is not a consumer of {group}")
    assert info is not None
    return info.channel


class Collector:
    """A listener that records what it consumed; tests wait until a condition holds.

    ``result`` decides the answer per message batch (default SUCCESS).
    """

    def __init__(self, result: Callable[[list[MessageExt]], ConsumeResult] | None = None) -> None:
        self.messages: list[MessageExt] = []
        self.keys: Counter[str] = Counter()
        self._result = result
        self._changed = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None

    def bind(self) -> Collector:
        """Remember the running loop (a sync listener reports from pool threads)."""
        self._loop = asyncio.get_running_loop()
        return self

    def __call__(self, messages: list[MessageExt]) -> ConsumeResult:
        result = self._result(messages) if self._result else ConsumeResult.SUCCESS
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._record, messages)
        else:
            self._record(messages)
        return result

    def _record(self, messages: list[MessageExt]) -> None:
        self.messages.extend(messages)
        for message in messages:
            self.keys[message.keys or ""] += 1
        self._changed.set()

    async def wait_for(self, predicate: Callable[[], bool], timeout_s: float = WAIT_S) -> None:
        """Wait (on arrivals, at most ``timeout_s``) until ``predicate()`` holds."""
        async with asyncio.timeout(timeout_s):
            while not predicate():
                self._changed.clear()
                await self._changed.wait()

    async def wait_count(self, count: int) -> None:
        await self.wait_for(lambda: len(self.messages) >= count)
