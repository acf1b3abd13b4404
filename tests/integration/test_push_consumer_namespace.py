"""The push consumer in a namespace (Java's withNamespace), concurrent and orderly: the group
and topics go out wrapped, retries come back through ``%RETRY%<namespace>%<group>`` and the
listener sees topics as the user named them."""

from __future__ import annotations

from pathlib import Path

import pytest

from bolide.base.errors import ConfigError
from bolide.client.admin.client import AdminClient
from bolide.client.config import ConsumeFrom
from bolide.client.consumer.consume_orderly import OrderlyContext
from bolide.client.consumer.listener import ConsumeResult, OrderlyResult
from bolide.client.consumer.push_consumer import PushConsumer
from bolide.client.message import Message
from bolide.client.producer.producer import Producer
from bolide.protocol.bodies import SubscriptionGroupConfig
from bolide.protocol.message import MessageExt, PropertyKey
from bolide.testing.cluster import Cluster
from tests.integration.client_support import Collector, create_topic, eventually


async def test_push_consumer_retries_inside_its_namespace(tmp_path: Path) -> None:
    # Delay levels of 1 s (level 3, the first send-back's, is clamped to the last one).
    async with Cluster(tmp_path, settings={"messageDelayLevel": "1s 1s"}) as cluster:
        await create_topic(cluster, "ns%orders", 2)
        await create_topic(cluster, "orders", 2)
        async with Producer("plain", namesrv=cluster.namesrv_address) as plain:
            await plain.send(Message("orders", b"outside"))
        async with Producer("billing", namesrv=cluster.namesrv_address, namespace="ns") as inside:
            await inside.send(Message("orders", b"inside", tags="paid"))
        attempts: list[tuple[str, int, bytes]] = []

        def fail_once(messages: list[MessageExt]) -> ConsumeResult:
            attempts.extend((m.topic, m.reconsume_times, m.body) for m in messages)
            return ConsumeResult.RECONSUME_LATER if len(attempts) == 1 else ConsumeResult.SUCCESS

        collector = Collector(fail_once)
        push = PushConsumer(
            "readers",
            namesrv=cluster.namesrv_address,
            namespace="ns",
            consume_from=ConsumeFrom.FIRST_OFFSET,
        )
        assert push.group == "ns%readers"
        push.register_listener(collector.bind())
        push.subscribe("orders", "paid")
        assert list(push.subscriptions) == ["orders"]
        assert set(push.subscribed_topics()) == {"ns%orders"}
        async with push:
            assert set(push.subscribed_topics()) == {"ns%orders", "%RETRY%ns%readers"}
            await collector.wait_count(2)
            broker = cluster.brokers[0].context
            assert broker.consumers.client_ids("ns%readers") == [push.instance.client_id]
            await eventually(
                lambda: (
                    sum(
                        max(broker.offsets.query_offset("ns%readers", "ns%orders", queue_id), 0)
                        for queue_id in range(2)
                    )
                    == 1
                )
            )
        assert attempts == [("orders", 0, b"inside"), ("orders", 1, b"inside")]
        retried = collector.messages[1]
        # The broker keeps the wrapped original topic; the listener saw the user's name.
        assert retried.properties[PropertyKey.RETRY_TOPIC] == "ns%orders"
        assert "%RETRY%ns%readers" in cluster.brokers[0].context.topics.topic_names()


async def test_orderly_push_consumer_in_a_namespace(tmp_path: Path) -> None:
    async with Cluster(tmp_path) as cluster:
        await create_topic(cluster, "ns%orders", 1)
        async with Producer("billing", namesrv=cluster.namesrv_address, namespace="ns") as inside:
            for index in range(3):
                await inside.send(Message("orders", f"m{index}".encode()))
        seen: list[tuple[str, str, bytes]] = []

        def record(messages: list[MessageExt], context: OrderlyContext) -> OrderlyResult:
            seen.extend((m.topic, context.topic, m.body) for m in messages)
            return OrderlyResult.SUCCESS

        push = PushConsumer(
            "sequencers",
            namesrv=cluster.namesrv_address,
            namespace="ns",
            orderly=True,
            consume_from=ConsumeFrom.FIRST_OFFSET,
        )
        push.register_listener(record)
        push.subscribe("orders")
        async with push:
            await eventually(lambda: len(seen) == 3)
        assert seen == [("orders", "orders", f"m{index}".encode()) for index in range(3)]
        offsets = cluster.brokers[0].context.offsets
        assert offsets.query_offset("ns%sequencers", "ns%orders", 0) == 3


def test_push_consumer_refuses_a_bad_namespace() -> None:
    with pytest.raises(ConfigError, match="namespace"):
        PushConsumer("readers", namesrv="127.0.0.1:9876", namespace="a%b")


async def test_admin_client_works_inside_its_namespace(tmp_path: Path) -> None:
    async with Cluster(tmp_path) as cluster:
        broker = cluster.brokers[0].context
        async with AdminClient(cluster.namesrv_address, namespace="ns") as admin:
            assert admin.namespace == "ns"
            await admin.create_topic("orders", queue_count=2)
            assert "ns%orders" in broker.topics.topic_names()
            assert "orders" not in broker.topics.topic_names()
            await admin.create_group(SubscriptionGroupConfig("readers", retry_max_times=2))
            assert "ns%readers" in await admin.group_configs()
            async with Producer("billing", namesrv=cluster.namesrv_address, namespace="ns") as p:
                await p.send(Message("orders", b"one"))
            collector = Collector()
            push = PushConsumer(
                "readers",
                namesrv=cluster.namesrv_address,
                namespace="ns",
                consume_from=ConsumeFrom.FIRST_OFFSET,
            )
            push.register_listener(collector.bind())
            push.subscribe("orders")
            async with push:
                await collector.wait_count(1)
                connection = await admin.consumer_connections("readers")
                assert connection is not None
                assert [c.client_id for c in connection.connection_set] == [push.instance.client_id]
                assert await admin.topic_consumer_groups("orders") == ["readers"]
                await admin.ensure_group("readers")
            progress = await admin.group_progress("readers", topic="orders")
            assert {row.queue.topic for row in progress.queues} == {"ns%orders"}
            assert sum(row.consumer_offset for row in progress.queues) == 1
            assert sum(row.broker_offset for row in progress.queues) == 1
            statuses = await admin.topic_status("orders")
            assert sum(row.max_offset for row in statuses) == 1
        async with AdminClient(cluster.namesrv_address) as outside:
            assert await outside.topic_consumer_groups("ns%orders") == ["ns%readers"]
