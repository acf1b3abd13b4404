"""Namespace wrapping as Java's NamespaceUtil."""

from __future__ import annotations

import pytest

from bolide.base.errors import ConfigError
from bolide.client.message import Message
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
