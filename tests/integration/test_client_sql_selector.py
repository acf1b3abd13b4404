"""Bolide's consumer with ``MessageSelector.by_sql``: the broker filters by properties, the
consumer checks its expression with the brokers at start (CHECK_CLIENT_CONFIG)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import bolide
import bolide.aio
from bolide.base.errors import ConfigError
from bolide.client.config import ConsumeFrom
from bolide.client.consumer.listener import ConsumeResult
from bolide.client.consumer.push_consumer import PushConsumer
from bolide.client.consumer.selector import MessageSelector
from bolide.client.producer.producer import Producer
from bolide.protocol.bodies import TopicConfig
from bolide.protocol.message import Message, MessageExt
from bolide.testing.cluster import Cluster

pytestmark = pytest.mark.timeout(120)

TOPIC = "SqlOrders"


async def _cluster_with_orders(root: Path, **settings: str) -> Cluster:
    cluster = Cluster(root, settings=settings)
    await cluster.start()
    broker = cluster.broker("broker-a")
    await broker.context.topics.update_topic_config(TopicConfig(TOPIC, 2, 2))
    await broker.registration.register_once()
    async with Producer("PG_SQL", cluster.namesrv_address) as producer:
        for index in range(8):
            message = Message(TOPIC, f"order {index}".encode(), tags="paid")
            message.properties.update({"region": "eu" if index % 2 else "us", "n": str(index)})
            await producer.send(message)
    return cluster


def _consumer(cluster: Cluster, group: str, selector: MessageSelector) -> PushConsumer:
    consumer = PushConsumer(group, cluster.namesrv_address, consume_from=ConsumeFrom.FIRST_OFFSET)
    consumer.subscribe(TOPIC, selector)
    return consumer


async def test_a_sql_selector_gets_only_what_it_selects(tmp_path: Path) -> None:
    cluster = await _cluster_with_orders(tmp_path, enablePropertyFilter="true")
    try:
        seen: list[MessageExt] = []
        got_all = asyncio.Event()

        async def listener(messages: list[MessageExt]) -> ConsumeResult:
            seen.extend(messages)
            if len(seen) >= 2:
                got_all.set()
            return ConsumeResult.SUCCESS

        consumer = _consumer(cluster, "CG_SQL", MessageSelector.by_sql("region = 'eu' AND n > 4"))
        consumer.register_listener(listener)
        async with consumer:
            await asyncio.wait_for(got_all.wait(), 60)
        assert sorted(m.body for m in seen) == [b"order 5", b"order 7"]
    finally:
        await cluster.stop()


async def test_a_bad_selector_or_a_broker_without_filters_fails_the_start(tmp_path: Path) -> None:
    cluster = await _cluster_with_orders(tmp_path / "on", enablePropertyFilter="true")
    try:
        consumer = _consumer(cluster, "CG_BAD", MessageSelector.by_sql("n > > 1"))
        consumer.register_listener(lambda messages: ConsumeResult.SUCCESS)
        with pytest.raises(ConfigError, match="column 5"):
            await consumer.start()
    finally:
        await cluster.stop()
    cluster = await _cluster_with_orders(tmp_path / "off")
    try:
        consumer = _consumer(cluster, "CG_OFF", MessageSelector.by_sql("n > 1"))
        consumer.register_listener(lambda messages: ConsumeResult.SUCCESS)
        with pytest.raises(ConfigError, match="enablePropertyFilter"):
            await consumer.start()
    finally:
        await cluster.stop()


def test_the_selector_is_exported_at_the_package_root_and_in_aio() -> None:
    assert bolide.MessageSelector is MessageSelector is bolide.aio.MessageSelector
    assert bolide.MessageSelector.by_tag().expression == "*"
    with pytest.raises(ConfigError):
        MessageSelector.by_sql(" ")
