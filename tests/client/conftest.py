"""Fixtures for client tests against an in-process cluster (name server + broker on port 0)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from bolide.client import rpc
from bolide.client.instance import ClientInstance
from bolide.protocol.bodies import MessageQueue
from bolide.protocol.codes import RequestCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import CreateTopicRequestHeader, PullMessageRequestHeader, PullSysFlag
from bolide.protocol.message import MessageExt
from bolide.testing.cluster import Cluster


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    async with Cluster(tmp_path) as started:
        yield started


async def pull_all(
    instance: ClientInstance, queue: MessageQueue, offset: int = 0, group: str = "reader"
) -> list[MessageExt]:
    """Every message of ``queue`` from ``offset`` on, read with the client's pull RPC."""
    address = await instance.queue_broker_address(queue)
    messages: list[MessageExt] = []
    while True:
        header = PullMessageRequestHeader(
            group, queue.topic, queue.queue_id, offset, 32, PullSysFlag.SUBSCRIPTION, 0, 0, 0, "*"
        )
        result = await rpc.pull_message(instance.pool, address, header, 3_000)
        if result.status is not rpc.PullStatus.FOUND:
            return messages
        messages.extend(result.messages)
        offset = result.next_begin_offset


EVENTUALLY_DEADLINE_S = 60.0
"""How long ``eventually`` keeps checking once its attempts are spent: the broker's store
works in threads, which a loaded CI machine may not run for seconds."""


async def eventually(check: Callable[[], Awaitable[bool]], attempts: int = 5_000) -> None:
    """Repeat ``check`` (a round trip to a server) until it holds; no wall-clock sleeps.

    Fails once ``attempts`` checks are spent and ``EVENTUALLY_DEADLINE_S`` has passed.
    """
    started = time.monotonic()
    checks = 0
    while checks < attempts or time.monotonic() - started < EVENTUALLY_DEADLINE_S:
        if await check():
            return
        checks += 1
        await asyncio.sleep(0)
    raise AssertionError(f"condition not reached after {checks} checks")


async def create_topic(
    instance: ClientInstance, broker_address: str, topic: str, queue_count: int = 4
) -> None:
    """UPDATE_AND_CREATE_TOPIC on one broker (the broker registers it with the name server)."""
    header = CreateTopicRequestHeader(topic, "TBW102", queue_count, queue_count, 6)
    request = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext_fields())
    await rpc.call(instance.pool, broker_address, request, 3_000)
