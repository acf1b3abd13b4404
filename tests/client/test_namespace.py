"""Namespace wrapping as Java's NamespaceUtil."""

from __future__ import annotations

import pytest

from bolide.base.errors import ConfigError
from bolide.client.config import ConsumeFrom
from bolide.client.consumer.pull_consumer import PullConsumer
from bolide.client.message import Message, MessageExt
from bolide.client.namespace import check_namespace, with_namespace, without_namespace
from bolide.client.producer.producer import Producer
from bolide.protocol.bodies import MessageQueue
from bolide.testing.cluster import Cluster
from tests.client.conftest import create_topic, pull_all


@pytest.mark.parametrize(
    ("resource", "wrapped"),
    [
        ("orders", "ns%orders"),
        ("ns%orders", "ns%orders"),
        ("%RETRY%billing", "%RETRY%ns%billing"),
        ("%DLQ%billing", "%DLQ%ns%billing"),
        ("%RETRY%ns%billing", "%RETRY%ns%billing"),
        ("TBW102", "TBW102"),
        ("SCHEDULE_TOPIC_XXXX", "SCHEDULE_TOPIC_XXXX"),
        ("rmq_sys_TRACE_DATA", "rmq_sys_TRACE_DATA"),
    ],
)
def test_wrap_and_strip(resource: str, wrapped: str) -> None:
    assert with_namespace("ns", resource) == wrapped
    assert with_namespace(None, resource) == resource
    if wrapped != resource:
        assert without_namespace("ns", wrapped) == resource


def test_strip_leaves_other_namespaces() -> None:
    assert without_namespace("ns", "other%orders") == "other%orders"
    assert without_namespace(None, "ns%orders") == "ns%orders"


@pytest.mark.parametrize("bad", ["a%b", "a b", "a/b"])
def test_bad_namespace_is_refused(bad: str) -> None:
    with pytest.raises(ConfigError, match="namespace"):
        check_namespace(bad)
    assert check_namespace("") is None


async def test_producer_sends_into_its_namespace(cluster: Cluster) -> None:
    producer = Producer("billing", cluster.namesrv_address, namespace="ns")
    await producer.start()
    try:
        assert producer.group == "ns%billing"
        broker_address = cluster.broker("broker-a").config.broker_address
        await create_topic(producer.instance, broker_address, "ns%orders", queue_count=1)
        result = await producer.send(Message("orders", b"one"))
        assert result.queue.topic == "orders"
        queue = MessageQueue("orders", "broker-a", 0)
        second = await producer.send(Message("orders", b"two"), queue=queue)
        assert second.queue == queue
        stored = await pull_all(producer.instance, MessageQueue("ns%orders", "broker-a", 0))
        assert [message.body for message in stored] == [b"one", b"two"]
    finally:
        await producer.shutdown()


async def test_pull_consumer_reads_its_namespace(cluster: Cluster) -> None:
    producer = Producer("billing", cluster.namesrv_address, namespace="ns")
    await producer.start()
    broker_address = cluster.broker("broker-a").config.broker_address
    await create_topic(producer.instance, broker_address, "ns%orders", queue_count=1)
    await create_topic(producer.instance, broker_address, "orders", queue_count=1)
    try:
        await producer.send(Message("orders", b"in-ns"))
    finally:
        await producer.shutdown()
    plain = Producer("plain", cluster.namesrv_address)
    async with plain:
        await plain.send(Message("orders", b"outside"))
    consumer = PullConsumer(
        "readers", cluster.namesrv_address, namespace="ns", consume_from=ConsumeFrom.FIRST_OFFSET
    )
    assert consumer.group == "ns%readers"
    consumer.subscribe("orders")
    queue = MessageQueue("orders", "broker-a", 0)
    async with consumer:
        assert await consumer.fetch_message_queues("orders") == [queue]
        messages: list[MessageExt] = []
        for _ in range(100):  # each poll waits at most its timeout: bounded
            messages += await consumer.poll(timeout_ms=5_000)
            if messages:
                break
        assert [(m.topic, m.body) for m in messages] == [("orders", b"in-ns")]
        assert consumer.assignment() == {queue}
        assert consumer.position(queue) == 1
        await consumer.commit()
        assert await consumer.committed(queue) == 1
    offsets = cluster.broker("broker-a").context.offsets
    assert offsets.query_offset("ns%readers", "ns%orders", 0) == 1
