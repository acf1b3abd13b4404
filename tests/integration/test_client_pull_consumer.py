"""The lite pull consumer against an in-process cluster: subscribe with rebalance and
auto-commit, assign by hand, seek, manual commit, pause and resume."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import bolide
from bolide.base.errors import ConfigError
from bolide.client.config import ConsumeFrom
from bolide.client.consumer.options import ConsumerOptions
from bolide.client.consumer.pull_consumer import PullConsumer
from bolide.client.message import Message
from bolide.client.producer.producer import Producer
from bolide.protocol.bodies import MessageQueue
from bolide.protocol.message import MessageExt
from bolide.testing.cluster import Cluster
from tests.integration.client_support import create_topic

TOPIC = "reports"
Q0 = MessageQueue(TOPIC, "broker-a", 0)


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    async with Cluster(tmp_path / "cluster") as running:
        await create_topic(running, TOPIC, 4)
        yield running


@pytest.fixture
async def producer(cluster: Cluster) -> AsyncIterator[Producer]:
    async with Producer("pull-test-producers", namesrv=cluster.namesrv_address) as running:
        yield running


async def poll_until(consumer: PullConsumer, count: int) -> list[MessageExt]:
    received: list[MessageExt] = []
    for _ in range(100):  # each poll waits at most its timeout: bounded
        received.extend(await consumer.poll(timeout_ms=5_000))
        if len(received) >= count:
            break
    return received


def committed(cluster: Cluster, group: str) -> int:
    offsets = cluster.brokers[0].context.offsets
    return sum(max(0, offsets.query_offset(group, TOPIC, queue_id)) for queue_id in range(4))


async def test_subscribe_polls_everything_and_auto_commits(
    cluster: Cluster, producer: Producer
) -> None:
    for index in range(20):
        await producer.send(Message(TOPIC, b"p", tags="a" if index % 2 else "b", keys=f"k{index}"))
    consumer = PullConsumer(
        "lite-sub", namesrv=cluster.namesrv_address, consume_from=ConsumeFrom.FIRST_OFFSET
    )
    consumer.subscribe(TOPIC, "a")
    async with consumer:
        received = await poll_until(consumer, 10)
        assert sorted(m.keys or "" for m in received) == sorted(
            f"k{index}" for index in range(1, 20, 2)
        )
        assert all(len(batch) <= 10 for batch in [received])
        assert consumer.assignment() == {MessageQueue(TOPIC, "broker-a", i) for i in range(4)}
        # Queues holding only tag b answer "no match" with the offset past them; which queues
        # they are depends on where the producer's rotation started (random), so wait until
        # every queue's position has moved past its messages before shutting down.
        for _ in range(100):  # each poll waits at most its timeout: bounded
            positions = sum(consumer.position(queue) for queue in consumer.assignment())
            if positions >= 20:
                break
            assert not await consumer.poll(timeout_ms=200)
    assert committed(cluster, "lite-sub") == 20  # positions committed at shutdown


async def test_assign_seek_commit_pause_resume(cluster: Cluster, producer: Producer) -> None:
    for index in range(6):
        await producer.send(Message(TOPIC, b"q", keys=f"q0-{index}"), queue=Q0)
    await producer.send(
        Message(TOPIC, b"other", keys="other"), queue=MessageQueue(TOPIC, "broker-a", 1)
    )
    consumer = PullConsumer(
        "lite-assign",
        namesrv=cluster.namesrv_address,
        consume_from=ConsumeFrom.FIRST_OFFSET,
        options=ConsumerOptions(auto_commit=False),
    )
    await consumer.assign([Q0])
    async with consumer:
        first = await poll_until(consumer, 6)
        assert [m.keys for m in first] == [f"q0-{index}" for index in range(6)]
        assert consumer.position(Q0) == 6
        await consumer.seek(Q0, 4)
        again = await poll_until(consumer, 2)
        assert [m.queue_offset for m in again] == [4, 5]
        with pytest.raises(ConfigError):
            await consumer.seek(Q0, 99)
        assert await consumer.committed(Q0) in (-1, 0)  # nothing committed yet
        await consumer.commit()
        assert await consumer.committed(Q0) == 6  # asked of the broker, after the update
        consumer.pause([Q0])
        await producer.send(Message(TOPIC, b"late", keys="late"), queue=Q0)
        assert await consumer.poll(timeout_ms=0) == []
        consumer.resume([Q0])
        late = await poll_until(consumer, 1)
        assert [m.keys for m in late] == ["late"]
        await consumer.commit({Q0: 2})
        assert await consumer.committed(Q0) == 2


async def test_subscribe_and_assign_do_not_mix(cluster: Cluster) -> None:
    consumer = PullConsumer("lite-mix", namesrv=cluster.namesrv_address)
    consumer.subscribe(TOPIC)
    with pytest.raises(ConfigError):
        await consumer.assign([Q0])
    with pytest.raises(ConfigError):
        await consumer.poll()


def read_blocking(namesrv: str, count: int) -> list[str]:
    consumer = bolide.PullConsumer(
        "lite-blocking", namesrv=namesrv, consume_from=bolide.ConsumeFrom.FIRST_OFFSET
    )
    consumer.assign([Q0])
    keys: list[str] = []
    with consumer:
        for _ in range(100):  # bounded: each poll waits at most 5 s
            keys += [message.keys or "" for message in consumer.poll(5_000)]
            if len(keys) >= count:
                break
        consumer.commit()
    return keys


async def test_blocking_pull_consumer(cluster: Cluster, producer: Producer) -> None:
    for index in range(3):
        await producer.send(Message(TOPIC, b"b", keys=f"b{index}"), queue=Q0)
    keys = await asyncio.to_thread(read_blocking, cluster.namesrv_address, 3)
    assert keys == ["b0", "b1", "b2"]
    assert cluster.brokers[0].context.offsets.query_offset("lite-blocking", TOPIC, 0) == 3


async def test_async_for_yields_messages_and_ends_at_shutdown(
    cluster: Cluster, producer: Producer
) -> None:
    for index in range(5):
        await producer.send(Message(TOPIC, b"i", keys=f"i{index}"), queue=Q0)
    consumer = PullConsumer(
        "lite-iter", namesrv=cluster.namesrv_address, consume_from=ConsumeFrom.FIRST_OFFSET
    )
    with pytest.raises(ConfigError):
        async for _ in consumer:
            pass
    await consumer.assign([Q0])
    await consumer.start()
    keys: list[str] = []
    got_all = asyncio.Event()

    async def read() -> None:
        async for message in consumer:  # ends once the consumer shuts down
            keys.append(message.keys or "")
            if len(keys) == 5:
                got_all.set()

    reader = asyncio.create_task(read())
    await got_all.wait()
    await consumer.shutdown()
    await reader
    assert keys == [f"i{index}" for index in range(5)]
    assert cluster.brokers[0].context.offsets.query_offset("lite-iter", TOPIC, 0) == 5


def iterate_blocking(namesrv: str, count: int) -> list[str]:
    consumer = bolide.PullConsumer(
        "lite-blocking-iter",
        namesrv=namesrv,
        consume_from=bolide.ConsumeFrom.FIRST_OFFSET,
        options=bolide.ConsumerOptions(auto_commit=False),
    )
    consumer.assign([Q0])
    with pytest.raises(ConfigError):
        next(iter(consumer))
    keys: list[str] = []
    with consumer:
        for message in consumer:
            keys.append(message.keys or "")
            if len(keys) == count:
                break
        consumer.commit()
    return keys


async def test_for_on_the_blocking_pull_consumer(cluster: Cluster, producer: Producer) -> None:
    for index in range(3):
        await producer.send(Message(TOPIC, b"f", keys=f"f{index}"), queue=Q0)
    keys = await asyncio.to_thread(iterate_blocking, cluster.namesrv_address, 3)
    assert keys == ["f0", "f1", "f2"]
    assert cluster.brokers[0].context.offsets.query_offset("lite-blocking-iter", TOPIC, 0) == 3
