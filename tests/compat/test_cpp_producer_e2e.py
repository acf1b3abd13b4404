"""The real C++ producer (rocketmq==0.4.4) against a real Bolide name server and broker.

Each test runs a Bolide cluster on its own event loop and drives the native producer from a
worker thread; what the broker stored is read back from its store.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.message import PropertyKey
from bolide.protocol.msgid import decode_offset_message_id
from bolide.remoting import ClientPool
from bolide.testing.cluster import Cluster
from tests.compat.cpp_clients import stored_messages
from tests.compat.cpp_harness import destroy_producer, make_message, new_quiet_producer, send_sync

pytestmark = [pytest.mark.compat, pytest.mark.timeout(120)]


@pytest.fixture
async def producer(
    cpp_home: Path, bolide_cluster: Cluster, request: pytest.FixtureRequest
) -> AsyncIterator[Any]:
    del cpp_home  # a private HOME must be in place before the native library logs
    client = new_quiet_producer(f"PG_{request.node.name}"[:60], bolide_cluster.namesrv_address)
    client.start()
    try:
        yield client
    finally:
        await asyncio.to_thread(destroy_producer, client)


async def _route(cluster: Cluster, topic: str) -> RemotingCommand:
    pool = ClientPool()
    try:
        request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
        return await pool.invoke(cluster.namesrv_address, request)
    finally:
        await pool.close()


async def test_send_sync_stores_tags_keys_and_properties(
    producer: Any, bolide_cluster: Cluster
) -> None:
    broker = bolide_cluster.broker("broker-a")
    message = make_message(
        "CppSync", "hello bolide", tags="TagA", keys="order-1 order-2", properties={"color": "blue"}
    )
    result = await send_sync(producer, message)
    assert result.status.name == "OK"
    [stored] = stored_messages(broker, "CppSync")
    assert stored.body == b"hello bolide"
    assert stored.tags == "TagA"
    assert stored.keys == "order-1 order-2"
    assert stored.properties["color"] == "blue"
    assert stored.properties[PropertyKey.CLUSTER] == "DefaultCluster"
    assert PropertyKey.WAIT not in stored.properties
    assert result.msg_id == stored.properties[PropertyKey.UNIQ_KEY]  # C++ reports UNIQ_KEY
    assert result.offset == stored.queue_offset
    assert stored.store_host == ("127.0.0.1", broker.port)
    assert stored.born_host[0] == "127.0.0.1"
    offset_id = stored.offset_msg_id
    assert decode_offset_message_id(offset_id) == (
        ("127.0.0.1", broker.port),
        stored.commit_log_offset,
    )


async def test_send_oneway_is_stored_in_order_with_later_sends(
    producer: Any, bolide_cluster: Cluster
) -> None:
    broker = bolide_cluster.broker("broker-a")
    await send_sync(producer, make_message("CppOneway", "first"))
    await asyncio.to_thread(producer.send_oneway, make_message("CppOneway", "oneway", tags="O"))
    # One connection, frames handled in order: once this answer is back, the oneway is stored.
    await send_sync(producer, make_message("CppOneway", "last"))
    bodies = sorted(m.body for m in stored_messages(broker, "CppOneway"))
    assert bodies == [b"first", b"last", b"oneway"]


async def test_send_orderly_picks_the_queue_by_argument(
    producer: Any, bolide_cluster: Cluster
) -> None:
    broker = bolide_cluster.broker("broker-a")
    for index in range(8):
        message = make_message("CppOrderly", f"order {index}", keys=f"k{index}")
        result = await asyncio.to_thread(producer.send_orderly, message, index)
        assert result.status.name == "OK"
    stored = stored_messages(broker, "CppOrderly")
    assert {(m.body.decode(), m.queue_id) for m in stored} == {
        (f"order {index}", index % 4) for index in range(8)
    }
    for queue_id in range(4):
        in_queue = [m for m in stored if m.queue_id == queue_id]
        assert [m.body for m in in_queue] == [
            f"order {queue_id}".encode(),
            f"order {queue_id + 4}".encode(),
        ]
        assert [m.queue_offset for m in in_queue] == [0, 1]


async def test_send_batch_stores_each_message(producer: Any, bolide_cluster: Cluster) -> None:
    broker = bolide_cluster.broker("broker-a")
    batch = [
        make_message(
            "CppBatch",
            f"batch {index}",
            tags="TagB",
            keys=f"b{index}",
            properties={"n": str(index)},
        )
        for index in range(5)
    ]
    result = await asyncio.to_thread(producer.send_batch, batch)
    assert result.status.name == "OK"
    stored = stored_messages(broker, "CppBatch")
    assert [m.body for m in stored] == [f"batch {index}".encode() for index in range(5)]
    assert [m.queue_offset for m in stored] == list(range(5))
    assert len({m.queue_id for m in stored}) == 1
    for index, message in enumerate(stored):
        assert message.tags == "TagB"
        assert message.keys == f"b{index}"
        assert message.properties["n"] == str(index)
        assert message.properties[PropertyKey.CLUSTER] == "DefaultCluster"
        assert PropertyKey.WAIT not in message.properties
    assert len({m.properties[PropertyKey.UNIQ_KEY] for m in stored}) == 5


async def test_a_topic_that_does_not_exist_is_auto_created(
    producer: Any, bolide_cluster: Cluster
) -> None:
    broker = bolide_cluster.broker("broker-a")
    assert broker.context.topics.find("CppBrandNew") is None
    before = await _route(bolide_cluster, "CppBrandNew")
    assert before.code == ResponseCode.TOPIC_NOT_EXIST
    result = await send_sync(producer, make_message("CppBrandNew", "first"))
    assert result.status.name == "OK"
    created = broker.context.topics.find("CppBrandNew")
    assert created is not None
    assert (created.read_queue_count, created.write_queue_count, created.perm) == (4, 4, 6)
    # The broker re-registered at once: the name server routes the new topic.
    while (after := await _route(bolide_cluster, "CppBrandNew")).code != ResponseCode.SUCCESS:
        await broker.registration.register_once()
    route = orjson.loads(after.body)
    assert route["queueDatas"] == [
        {
            "brokerName": "broker-a",
            "perm": 6,
            "readQueueNums": 4,
            "topicSynFlag": 0,
            "topicSysFlag": 0,
            "writeQueueNums": 4,
        }
    ]
    assert [m.body for m in stored_messages(broker, "CppBrandNew")] == [b"first"]
