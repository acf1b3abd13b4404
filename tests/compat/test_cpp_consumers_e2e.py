"""Real C++ consumers (rocketmq==0.4.4) against a real Bolide name server and broker.

Push consumers in clustering mode (two instances sharing a topic's queues, tag filter),
broadcasting mode, restart from the committed offset, a new group reading existing messages
from the start (the Java rule for QUERY_CONSUMER_OFFSET), and the PullConsumer.

The C++ consumer rebalances every 10 s and on NOTIFY_CONSUMER_IDS_CHANGED, and persists its
offsets every 5 s and at shutdown; the tests wait on what the broker and the listeners see,
with generous bounds, never on time.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from bolide.broker.broker import Broker
from bolide.protocol.bodies import TopicConfig
from bolide.testing.cluster import Cluster
from tests.compat.cpp_clients import (
    Inbox,
    Received,
    destroy_push_consumer,
    eventually,
    new_quiet_push_consumer,
)
from tests.compat.cpp_harness import (
    destroy_producer,
    destroy_pull_consumer,
    make_message,
    new_quiet_producer,
    new_quiet_pull_consumer,
    send_sync,
)

pytestmark = [pytest.mark.compat, pytest.mark.timeout(180)]

QUEUES = 4
SEND_TIMEOUT_MS = 20_000
"""Bounds each attempt of a C++ send_sync (librocketmq's default is 3 s, the harness's 5 s).
A guard, not a measurement: these tests send dozens of messages while C++ consumers pull
from the same in-process broker, and a loaded CI machine can hold an answer past 5 s; on a
single broker librocketmq then fails the send ("No route info of this topic") instead of
waiting. A broker that never answers still fails the send, after three attempts."""


@pytest.fixture
async def producer(cpp_home: Path, bolide_cluster: Cluster) -> AsyncIterator[Any]:
    del cpp_home  # a private HOME must be in place before the native library logs
    client = new_quiet_producer(
        "PG_CONSUMER_TESTS", bolide_cluster.namesrv_address, send_timeout_ms=SEND_TIMEOUT_MS
    )
    client.start()
    try:
        yield client
    finally:
        await asyncio.to_thread(destroy_producer, client)


class Consumers:
    """Push consumers started by a test, all shut down (and freed) when it ends."""

    def __init__(self, cluster: Cluster, inbox: Inbox) -> None:
        self._cluster = cluster
        self.inbox = inbox
        self._started: list[Any] = []
        self._names: Iterator[int] = itertools.count()

    async def start(
        self, group: str, topic: str, expression: str = "*", *, broadcasting: bool = False
    ) -> tuple[str, Any]:
        name = f"instance-{next(self._names)}"
        consumer = new_quiet_push_consumer(
            group, self._cluster.namesrv_address, instance_name=name, broadcasting=broadcasting
        )
        consumer.subscribe(topic, self.inbox.listener(name), expression)
        await asyncio.to_thread(consumer.start)
        self._started.append(consumer)
        return name, consumer

    async def stop(self, consumer: Any) -> None:
        self._started.remove(consumer)
        await asyncio.to_thread(destroy_push_consumer, consumer)

    async def stop_all(self) -> None:
        for consumer in list(self._started):
            await self.stop(consumer)


@pytest.fixture
async def consumers(cpp_home: Path, bolide_cluster: Cluster) -> AsyncIterator[Consumers]:
    del cpp_home
    started = Consumers(bolide_cluster, Inbox(asyncio.get_running_loop(), ("color",)))
    try:
        yield started
    finally:
        await started.stop_all()


async def _create_topic(broker: Broker, topic: str) -> None:
    await broker.context.topics.update_topic_config(TopicConfig(topic, QUEUES, QUEUES))
    await broker.registration.register_once()


async def _send(producer: Any, topic: str, body: str, tags: str | None = None) -> None:
    """One send_sync (a failure's report carries librocketmq's warnings: see conftest)."""
    result = await send_sync(producer, make_message(topic, body, tags=tags))
    assert result.status.name == "OK"


def _consumers_pulling(broker: Broker, group: str) -> int:
    """How many registered consumers of ``group`` have a pull parked on the broker."""
    consumers, polling = broker.context.consumers, broker.context.long_polling
    channels = [consumers.find_channel(group, client) for client in consumers.client_ids(group)]
    return sum(1 for c in channels if c is not None and polling.count_for_owner(c.channel) > 0)


def _parked_on_every_queue(broker: Broker, topic: str, count: int) -> bool:
    polling = broker.context.long_polling
    return all(polling.count_for_queue(topic, queue_id) >= count for queue_id in range(QUEUES))


async def test_clustering_consumers_share_the_queues_and_filter_tags(
    producer: Any, consumers: Consumers, bolide_cluster: Cluster
) -> None:
    broker = bolide_cluster.broker("broker-a")
    await _create_topic(broker, "CppCluster")
    first, _ = await consumers.start("CG_CLUSTER", "CppCluster", "A || B")
    second, _ = await consumers.start("CG_CLUSTER", "CppCluster", "A || B")
    # Both hold queues once each has a pull parked on the broker: NOTIFY_CONSUMER_IDS_CHANGED
    # makes the first give queues up at once (at the latest, its 10 s rebalance does).
    await eventually(lambda: _consumers_pulling(broker, "CG_CLUSTER") == 2)
    wanted: set[str] = set()
    rounds = itertools.count()
    # Until the second consumer's rebalance lands, the first may hold every queue: keep
    # sending rounds that cover all queues until both have received something.
    while {m.consumer for m in consumers.inbox.messages} != {first, second}:
        assert next(rounds) < 20, "the two consumers never shared the queues"
        for index in range(QUEUES):
            body = f"round message {len(wanted)}-{index}"
            tags = "A" if index % 2 else "B"
            await _send(producer, "CppCluster", body, tags)
            wanted.add(body)
            await _send(producer, "CppCluster", f"{body} unwanted", "C")
        await consumers.inbox.wait_for(lambda ms: wanted <= {m.body for m in ms})
    received = consumers.inbox.messages
    assert {m.body for m in received} == wanted  # nothing tagged C, every A and B
    assert {m.tags for m in received} <= {"A", "B"}
    by_consumer = {
        name: {m.queue_id for m in received if m.consumer == name} for name in (first, second)
    }
    assert by_consumer[first] and by_consumer[second]
    assert broker.context.consumers.client_ids("CG_CLUSTER") == sorted(
        broker.context.consumers.client_ids("CG_CLUSTER")
    )
    assert len(broker.context.consumers.client_ids("CG_CLUSTER")) == 2


async def test_broadcasting_consumers_each_receive_everything(
    producer: Any, consumers: Consumers, bolide_cluster: Cluster
) -> None:
    broker = bolide_cluster.broker("broker-a")
    await _create_topic(broker, "CppBroadcast")
    first, _ = await consumers.start("CG_BROADCAST", "CppBroadcast", broadcasting=True)
    second, _ = await consumers.start("CG_BROADCAST", "CppBroadcast", broadcasting=True)
    # Broadcasting consumers start at the max offset: send once both poll every queue.
    await eventually(lambda: _parked_on_every_queue(broker, "CppBroadcast", 2))
    bodies = {f"broadcast {index}" for index in range(8)}
    for body in sorted(bodies):
        await _send(producer, "CppBroadcast", body)

    def everyone_has_all(messages: list[Received]) -> bool:
        return all(
            bodies <= {m.body for m in messages if m.consumer == name} for name in (first, second)
        )

    await consumers.inbox.wait_for(everyone_has_all)
    # Broadcasting offsets live in the client: the broker keeps none for the group.
    assert broker.context.offsets.topics_of_group("CG_BROADCAST") == []


async def test_a_new_group_reads_existing_messages_from_the_start(
    producer: Any, consumers: Consumers, bolide_cluster: Cluster
) -> None:
    bodies = [f"early {index}" for index in range(6)]
    for body in bodies:
        await _send(producer, "CppEarly", body, "T")
    await consumers.start("CG_LATECOMER", "CppEarly")
    messages = await consumers.inbox.wait_for(lambda ms: len(ms) >= len(bodies))
    assert sorted(m.body for m in messages) == sorted(bodies)
    assert {m.tags for m in messages} == {"T"}


async def test_a_restarted_consumer_resumes_from_its_committed_offset(
    producer: Any, consumers: Consumers, bolide_cluster: Cluster
) -> None:
    broker = bolide_cluster.broker("broker-a")
    first_batch = [f"before restart {index}" for index in range(5)]
    for body in first_batch:
        await _send(producer, "CppRestart", body)
    name, consumer = await consumers.start("CG_RESTART", "CppRestart")
    await consumers.inbox.wait_for(lambda ms: len(ms) >= len(first_batch))
    await consumers.stop(consumer)  # persists its offsets, then unregisters
    committed = broker.context.offsets.queue_offsets("CG_RESTART", "CppRestart")
    assert sum(committed.values()) == len(first_batch)
    second_batch = [f"after restart {index}" for index in range(5)]
    for body in second_batch:
        await _send(producer, "CppRestart", body)
    again, _ = await consumers.start("CG_RESTART", "CppRestart")
    await consumers.inbox.wait_for(
        lambda ms: len([m for m in ms if m.consumer == again]) >= len(second_batch)
    )
    assert sorted(consumers.inbox.bodies(name)) == sorted(first_batch)
    assert sorted(consumers.inbox.bodies(again)) == sorted(second_batch)


async def test_pull_consumer_reads_every_queue(
    producer: Any, cpp_home: Path, bolide_cluster: Cluster
) -> None:
    del cpp_home
    broker = bolide_cluster.broker("broker-a")
    await _create_topic(broker, "CppPull")
    sent = []
    for index in range(8):
        tags = "A" if index % 2 else "B"
        await _send(producer, "CppPull", f"pull {index}", tags)
        sent.append((f"pull {index}", tags))
    consumer = new_quiet_pull_consumer("CG_PULL", bolide_cluster.namesrv_address)
    consumer.start()
    try:
        everything = await asyncio.to_thread(
            lambda: [(m.body.decode(), m.tags.decode()) for m in consumer.pull("CppPull")]
        )
        assert sorted(everything) == sorted(sent)
        type(consumer).offset_table.clear()  # the wrapper shares offsets between instances
        only_a = await asyncio.to_thread(
            lambda: [m.body.decode() for m in consumer.pull("CppPull", "A")]
        )
        assert sorted(only_a) == sorted(body for body, tags in sent if tags == "A")
    finally:
        type(consumer).offset_table.clear()
        await asyncio.to_thread(destroy_pull_consumer, consumer)
    # The pull consumer never asks to be held: nothing may stay parked.
    assert broker.context.long_polling.count == 0
