"""Bolide's Python client and the real C++ client (rocketmq==0.4.4) on one Bolide cluster:
a Python producer feeding a C++ push consumer, a C++ producer feeding a Python push consumer,
and both kinds of push consumer sharing one group's queues — tags, keys and properties
intact both ways."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bolide.client.config import ConsumeFrom
from bolide.client.consumer.push_consumer import PushConsumer
from bolide.client.message import Message
from bolide.client.producer.producer import Producer
from bolide.protocol.bodies import ConsumerRunningInfo
from bolide.protocol.codes import RequestCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import GetConsumerRunningInfoRequestHeader
from bolide.protocol.message import MessageExt, PropertyKey
from bolide.testing.cluster import Cluster
from tests.compat.cpp_clients import (
    Inbox,
    destroy_push_consumer,
    eventually,
    new_quiet_push_consumer,
)
from tests.compat.cpp_harness import destroy_producer, make_message, new_quiet_producer, send_sync
from tests.integration.client_support import Collector, consumer_connection, create_topic

pytestmark = [pytest.mark.compat, pytest.mark.timeout(180)]

TOPIC = "InteropTopic"


@pytest.fixture
async def cluster(cpp_home: Path, bolide_cluster: Cluster) -> AsyncIterator[Cluster]:
    del cpp_home  # a private HOME before the native library logs anything
    await create_topic(bolide_cluster, TOPIC, 4)
    yield bolide_cluster


@pytest.fixture
async def cpp_consumers() -> AsyncIterator[list[Any]]:
    started: list[Any] = []
    try:
        yield started
    finally:
        for consumer in started:
            await asyncio.to_thread(destroy_push_consumer, consumer)


async def test_python_producer_to_cpp_push_consumer(
    cluster: Cluster, cpp_consumers: list[Any]
) -> None:
    sent: dict[str, str] = {}
    async with Producer("PY_PRODUCERS", namesrv=cluster.namesrv_address) as producer:
        for index in range(9):
            tags = ("TagA", "TagB", "TagC")[index % 3]
            message = Message(TOPIC, f"py-body-{index}".encode(), tags=tags, keys=f"py-{index}")
            message.properties["origin"] = "python"
            message.properties["index"] = str(index)
            result = await producer.send(message)
            sent[f"py-{index}"] = result.msg_id
    inbox = Inbox(asyncio.get_running_loop(), properties=("origin", "index", PropertyKey.UNIQ_KEY))
    consumer = new_quiet_push_consumer("CPP_FROM_PY", cluster.namesrv_address, instance_name="c1")
    consumer.subscribe(TOPIC, inbox.listener("c1"), "TagA || TagB")
    await asyncio.to_thread(consumer.start)
    cpp_consumers.append(consumer)
    received = await inbox.wait_for(lambda messages: len(messages) >= 6)
    expected = [index for index in range(9) if index % 3 != 2]
    assert sorted(m.keys for m in received) == sorted(f"py-{index}" for index in expected)
    for record in received:
        index = int(record.keys.removeprefix("py-"))
        assert record.topic == TOPIC
        assert record.body == f"py-body-{index}"
        assert record.tags == ("TagA", "TagB")[index % 3]
        assert record.properties["origin"] == "python"
        assert record.properties["index"] == str(index)
        assert record.msg_id == sent[record.keys] == record.properties[PropertyKey.UNIQ_KEY]


async def test_cpp_producer_to_python_push_consumer(cluster: Cluster) -> None:
    producer = new_quiet_producer("CPP_PRODUCERS", cluster.namesrv_address)
    producer.start()
    sent: dict[str, str] = {}
    try:
        for index in range(9):
            tags = ("TagA", "TagB", "TagC")[index % 3]
            message = make_message(
                TOPIC,
                f"cpp-body-{index}",
                tags=tags,
                keys=f"cpp-{index}",
                properties={"origin": "c++", "index": str(index)},
            )
            result = await send_sync(producer, message)
            sent[f"cpp-{index}"] = result.msg_id
    finally:
        await asyncio.to_thread(destroy_producer, producer)
    collector = Collector()
    consumer = PushConsumer(
        "PY_FROM_CPP", namesrv=cluster.namesrv_address, consume_from=ConsumeFrom.FIRST_OFFSET
    )
    consumer.subscribe(TOPIC, "TagA || TagB")
    consumer.register_listener(collector.bind())
    async with consumer:
        await collector.wait_count(6)
    by_key: dict[str, MessageExt] = {m.keys or "": m for m in collector.messages}
    expected = [index for index in range(9) if index % 3 != 2]
    assert sorted(by_key) == sorted(f"cpp-{index}" for index in expected)
    for key, message in by_key.items():
        index = int(key.removeprefix("cpp-"))
        assert message.topic == TOPIC
        assert message.body == f"cpp-body-{index}".encode()
        assert message.tags == ("TagA", "TagB")[index % 3]
        assert message.properties["origin"] == "c++"
        assert message.properties["index"] == str(index)
        assert message.msg_id == sent[key]


async def test_cpp_and_python_push_consumers_share_a_group(
    cluster: Cluster, cpp_consumers: list[Any]
) -> None:
    inbox = Inbox(asyncio.get_running_loop())
    cpp = new_quiet_push_consumer("MIXED_GROUP", cluster.namesrv_address, instance_name="c1")
    cpp.subscribe(TOPIC, inbox.listener("c1"), "*")
    await asyncio.to_thread(cpp.start)
    cpp_consumers.append(cpp)
    python_side = Collector()
    python = PushConsumer("MIXED_GROUP", namesrv=cluster.namesrv_address)
    python.subscribe(TOPIC)
    python.register_listener(python_side.bind())
    async with python, Producer("MIXED_PRODUCERS", namesrv=cluster.namesrv_address) as producer:
        # Both members must hold their share before sending: the C++ client rebalances on
        # the broker's notification (or within 10 s) and the Python one at once.
        members = cluster.brokers[0].context.consumers.client_ids("MIXED_GROUP")
        assert len(members) == 2
        await eventually(lambda: sum(q.topic == TOPIC for q in python.process_queues) == 2)
        await asyncio.wait_for(_cpp_holds_the_rest(cluster, cpp_client_id(cluster), python), 60)
        for index in range(40):
            await producer.send(Message(TOPIC, f"m{index}".encode(), keys=f"m{index}"))
        keys = {f"m{index}" for index in range(40)}
        await eventually(lambda: {r.keys for r in inbox.messages} | set(python_side.keys) == keys)
    cpp_queues = {record.queue_id for record in inbox.messages}
    python_queues = {message.queue_id for message in python_side.messages}
    assert cpp_queues and python_queues
    assert not cpp_queues & python_queues  # every queue consumed by one member only
    assert len(inbox.messages) + len(python_side.messages) == 40


def cpp_client_id(cluster: Cluster) -> str:
    ids = cluster.brokers[0].context.consumers.client_ids("MIXED_GROUP")
    (client_id,) = [item for item in ids if "#" not in item]  # Python ids are ip@pid#name
    return client_id


async def _cpp_holds_the_rest(cluster: Cluster, client_id: str, python: PushConsumer) -> None:
    """Ask the C++ consumer (GET_CONSUMER_RUNNING_INFO) until it holds the other half."""
    connection = consumer_connection(cluster, "MIXED_GROUP", client_id)
    header = GetConsumerRunningInfoRequestHeader("MIXED_GROUP", client_id, False)
    python_queues = {queue for queue in python.process_queues if queue.topic == TOPIC}
    while True:  # each round trip yields to the loop
        request = RemotingCommand.request(
            RequestCode.GET_CONSUMER_RUNNING_INFO, header.to_ext_fields()
        )
        response = await connection.invoke(request, 10_000)
        info = ConsumerRunningInfo.from_json(response.body)
        held = {queue for queue in info.mq_table if queue.topic == TOPIC}
        if len(held) == 2 and not held & python_queues:
            return
