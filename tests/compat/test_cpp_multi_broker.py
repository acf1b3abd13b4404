"""The real C++ clients against two Bolide brokers behind one name server: a topic's queues
live on both, the producer spreads messages over both, a push consumer receives them all."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import orjson
import pytest

from bolide.protocol.bodies import TopicConfig
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.remoting import ClientPool
from bolide.testing.cluster import Cluster
from tests.compat.cpp_clients import (
    Inbox,
    destroy_push_consumer,
    new_quiet_push_consumer,
    stored_messages,
)
from tests.compat.cpp_harness import destroy_producer, make_message, new_quiet_producer, send_sync

pytestmark = [pytest.mark.compat, pytest.mark.timeout(180)]

TOPIC = "CppTwoBrokers"


@pytest.fixture
async def two_brokers(tmp_path: Path) -> AsyncIterator[Cluster]:
    async with Cluster(tmp_path / "cluster", broker_names=("broker-a", "broker-b")) as cluster:
        for broker in cluster.brokers:
            await broker.context.topics.update_topic_config(TopicConfig(TOPIC, 2, 2))
            await broker.registration.register_once()
        yield cluster


async def test_messages_spread_over_two_brokers_all_reach_the_consumer(
    cpp_home: Path, two_brokers: Cluster
) -> None:
    del cpp_home
    pool = ClientPool()
    try:
        request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC})
        response = await pool.invoke(two_brokers.namesrv_address, request)
    finally:
        await pool.close()
    assert response.code == ResponseCode.SUCCESS
    route = orjson.loads(response.body)
    assert sorted(q["brokerName"] for q in route["queueDatas"]) == ["broker-a", "broker-b"]
    assert {b["brokerName"]: b["brokerAddrs"]["0"] for b in route["brokerDatas"]} == {
        broker.config.broker_name: broker.address for broker in two_brokers.brokers
    }

    inbox = Inbox(asyncio.get_running_loop())
    consumer = new_quiet_push_consumer(
        "CG_TWO_BROKERS", two_brokers.namesrv_address, instance_name="two-brokers"
    )
    consumer.subscribe(TOPIC, inbox.listener("two-brokers"))
    producer = new_quiet_producer("PG_TWO_BROKERS", two_brokers.namesrv_address)
    producer.start()
    try:
        await asyncio.to_thread(consumer.start)
        bodies = [f"spread {index}" for index in range(16)]
        for body in bodies:
            result = await send_sync(producer, make_message(TOPIC, body))
            assert result.status.name == "OK"
        messages = await inbox.wait_for(lambda ms: len({m.body for m in ms}) >= len(bodies))
    finally:
        await asyncio.to_thread(destroy_producer, producer)
        await asyncio.to_thread(destroy_push_consumer, consumer)
    assert sorted({m.body for m in messages}) == sorted(bodies)
    per_broker = {
        broker.config.broker_name: len(stored_messages(broker, TOPIC))
        for broker in two_brokers.brokers
    }
    assert per_broker["broker-a"] > 0
    assert per_broker["broker-b"] > 0
    assert sum(per_broker.values()) == len(bodies)
