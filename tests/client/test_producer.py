"""The producer against a real in-process cluster: every kind of send lands in the broker and
reads back through the client's own pull RPC; errors are typed and clear."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from bolide.base import limits
from bolide.base.errors import (
    InvalidMessageError,
    MessageTooLargeError,
    NameServerUnavailableError,
    TopicNotFoundError,
)
from bolide.client import rpc
from bolide.client.config import ClientConfig
from bolide.client.instance import ClientInstance
from bolide.client.message import Message, SendResult, SendStatus
from bolide.client.producer.producer import Producer
from bolide.protocol.bodies import MessageQueue
from bolide.protocol.command import RemotingCommand
from bolide.protocol.message import PropertyKey
from bolide.protocol.msgid import decode_offset_message_id
from bolide.remoting import Connection, Dispatcher, RemotingServer
from bolide.testing.cluster import Cluster
from tests.client.conftest import create_topic, eventually, pull_all

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def producer(cluster: Cluster) -> AsyncIterator[Producer]:
    async with Producer("pg", namesrv=cluster.namesrv_address) as started:
        yield started


async def test_a_send_lands_with_tags_keys_and_properties(producer: Producer) -> None:
    message = Message("orders", b'{"id": 17}', tags="paid", keys=["order-17", "cust-3"])
    message.put_user_property("region", "eu")
    result = await producer.send(message)
    assert result.status is SendStatus.SEND_OK
    assert result.queue.topic == "orders" and result.queue_offset == 0
    stored = await pull_all(producer.instance, result.queue)
    assert len(stored) == 1
    got = stored[0]
    assert (got.topic, got.body, got.tags, got.key_list) == (
        "orders",
        b'{"id": 17}',
        "paid",
        ["order-17", "cust-3"],
    )
    assert got.properties["region"] == "eu"
    assert got.msg_id == result.msg_id == got.properties[PropertyKey.UNIQ_KEY]
    assert got.offset_msg_id == result.offset_msg_id
    store_host, _ = decode_offset_message_id(result.offset_msg_id)
    assert f"{store_host[0]}:{store_host[1]}" == producer.instance.broker_address("broker-a")


async def test_view_by_offset_id_and_query_by_key(producer: Producer) -> None:
    result = await producer.send(Message("lookup", b"find me", keys="k-42"))
    viewed = await rpc.view_message_by_id(producer.instance.pool, result.offset_msg_id, 3_000)
    assert viewed.body == b"find me" and viewed.msg_id == result.msg_id


async def test_unknown_topic_is_created_through_tbw102(producer: Producer) -> None:
    instance = producer.instance
    assert await instance.update_route("fresh-topic") is None  # unknown to the name server
    result = await producer.send(Message("fresh-topic", b"first"))
    assert result.status is SendStatus.SEND_OK
    route = instance.routes.get("fresh-topic")
    assert route is not None and route.borrowed

    # The broker created the topic and registered it: the topic's own route replaces TBW102's.
    async def own_route() -> bool:
        fresh = await instance.update_route("fresh-topic")
        return fresh is not None and not fresh.borrowed

    await eventually(own_route)
    fresh = instance.routes.get("fresh-topic")
    assert fresh is not None
    assert len(fresh.publish_queues) == limits.PRODUCER_DEFAULT_TOPIC_QUEUE_COUNT


async def test_batch_lands_as_consecutive_messages(producer: Producer) -> None:
    messages = [Message("batch", f"m{i}".encode(), tags="b", keys=f"k{i}") for i in range(5)]
    queue = MessageQueue("batch", "broker-a", 1)
    await producer.send(Message("batch", b"warm-up"))  # creates the topic
    result = await producer.send_batch(messages, queue=queue)
    ids = result.msg_id.split(",")
    assert len(ids) == 5 and len(result.offset_msg_id.split(",")) == 5
    stored = await pull_all(producer.instance, queue, result.queue_offset)
    assert [m.body for m in stored] == [f"m{i}".encode() for i in range(5)]
    assert [m.queue_offset for m in stored] == list(
        range(result.queue_offset, result.queue_offset + 5)
    )
    assert [m.msg_id for m in stored] == ids


async def test_async_sends_with_many_in_flight(cluster: Cluster) -> None:
    # One request per send (auto_batch off): each request picks the next queue.
    async with Producer("pg", namesrv=cluster.namesrv_address, auto_batch=False) as producer:
        await _many_in_flight(producer)


async def _many_in_flight(producer: Producer) -> None:
    results = await asyncio.gather(
        *(producer.send(Message("many", f"{i}".encode())) for i in range(64))
    )
    assert len({r.msg_id for r in results}) == 64
    positions = {(r.queue.queue_id, r.queue_offset) for r in results}
    assert len(positions) == 64
    assert {r.queue.queue_id for r in results} == {0, 1, 2, 3}  # round robin over the queues
    bodies = []
    for queue_id in range(4):
        bodies += [
            m.body
            for m in await pull_all(producer.instance, MessageQueue("many", "broker-a", queue_id))
        ]
    assert sorted(bodies) == sorted(f"{i}".encode() for i in range(64))


async def test_oneway_send_lands(producer: Producer) -> None:
    await producer.send(Message("oneway", b"create"))  # the topic exists after this
    queue = MessageQueue("oneway", "broker-a", 2)
    before = await producer.instance.max_offset(queue)
    await producer.send_oneway(Message("oneway", b"fire and forget"), queue=queue)

    async def landed() -> bool:
        return await producer.instance.max_offset(queue) == before + 1

    await eventually(landed)
    stored = await pull_all(producer.instance, queue, before)
    assert [m.body for m in stored] == [b"fire and forget"]


async def test_orderly_sends_keep_a_key_on_one_queue_in_order(producer: Producer) -> None:
    sent: dict[str, list[tuple[int, int]]] = {}
    for step in range(6):
        for key in ("order-1", "order-2", "order-3"):
            result = await producer.send_orderly(Message("ordered", f"{key}:{step}".encode()), key)
            sent.setdefault(key, []).append((result.queue.queue_id, result.queue_offset))
    for key, places in sent.items():
        assert len({queue_id for queue_id, _ in places}) == 1, key
        offsets = [offset for _, offset in places]
        assert offsets == sorted(offsets)
        queue = MessageQueue("ordered", "broker-a", places[0][0])
        mine = [
            m.body
            for m in await pull_all(producer.instance, queue)
            if m.body.startswith(key.encode())
        ]
        assert mine == [f"{key}:{step}".encode() for step in range(6)]


async def test_compressed_bodies_read_back_whole(producer: Producer) -> None:
    body = bytes(range(256)) * 64  # 16 KiB, over the 4 KiB threshold
    result = await producer.send(Message("big", body))
    stored = await pull_all(producer.instance, result.queue, result.queue_offset)
    assert stored[0].body == body and stored[0].sys_flag & 0x1


async def test_send_to_a_chosen_queue(producer: Producer) -> None:
    await producer.send(Message("chosen", b"create"))
    queue = MessageQueue("chosen", "broker-a", 3)
    result = await producer.send(Message("chosen", b"here"), queue=queue)
    assert result.queue == queue and hash(result.queue) == hash(queue)
    rebuilt = SendResult(
        result.status,
        result.msg_id,
        result.offset_msg_id,
        queue,
        result.queue_offset,
        result.transaction_id,
        result.region_id,
    )  # the result is built without the frozen __init__: the same value all the same
    assert result == rebuilt and hash(result) == hash(rebuilt) and type(result) is SendResult
    with pytest.raises(InvalidMessageError, match="belongs to topic"):
        await producer.send(Message("other", b"x"), queue=queue)


async def test_too_big_is_refused_before_sending(producer: Producer) -> None:
    with pytest.raises(MessageTooLargeError, match="at most"):
        await producer.send(Message("big", b"x" * (limits.MESSAGE_BODY_MAX_BYTES + 1)))


async def test_topic_that_cannot_be_created_is_a_clear_error(tmp_path: Path) -> None:
    settings = {"auto_create_topic_enable": False}
    async with (
        Cluster(tmp_path, settings=settings) as cluster,
        Producer("pg", namesrv=cluster.namesrv_address) as producer,
    ):
        with pytest.raises(TopicNotFoundError, match="does not exist"):
            await producer.send(Message("nowhere", b"x"))


async def test_retries_go_to_another_broker_when_one_dies(tmp_path: Path) -> None:
    async with (
        Cluster(tmp_path, broker_names=("broker-a", "broker-b")) as cluster,
        Producer("pg", namesrv=cluster.namesrv_address) as producer,
    ):
        for broker in cluster.brokers:
            await create_topic(producer.instance, broker.address, "spread")

        async def on_both() -> bool:
            route = await producer.instance.update_route("spread")
            return route is not None and len(route.publish_queues) == 8

        await eventually(on_both)
        results = [await producer.send(Message("spread", f"{i}".encode())) for i in range(8)]
        assert {r.queue.broker_name for r in results} == {"broker-a", "broker-b"}
        await cluster.broker("broker-b").stop()
        results = [await producer.send(Message("spread", f"after-{i}".encode())) for i in range(8)]
        assert {r.queue.broker_name for r in results} == {"broker-a"}
        now_ms = producer.instance.clock.monotonic_ms()
        assert not producer.selector.faults.is_available("broker-b", now_ms)


@pytest.fixture
def refusing_address() -> Iterator[str]:
    """An address whose port is bound but not listening: connects are refused."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    yield f"127.0.0.1:{sock.getsockname()[1]}"
    sock.close()


async def test_name_server_down_is_a_clear_error(refusing_address: str) -> None:
    config = ClientConfig((refusing_address,), "127.0.0.1", 1, instance_name="down")
    async with Producer("pg", instance=ClientInstance(config)) as producer:
        with pytest.raises(NameServerUnavailableError, match="no name server answered") as caught:
            await producer.send(Message("T", b"x"))
        assert refusing_address in str(caught.value)


async def test_silent_name_server_fails_within_the_api_timeout() -> None:
    async def never(connection: Connection, request: RemotingCommand) -> None:
        await asyncio.Event().wait()  # accepts the request, never answers

    dispatcher = Dispatcher()
    dispatcher.register(105, never, family="route")
    server = RemotingServer(dispatcher)
    await server.start()
    try:
        config = ClientConfig(
            (server.address,), "127.0.0.1", 1, instance_name="s", api_timeout_ms=200
        )
        async with Producer("pg", instance=ClientInstance(config)) as producer:
            with pytest.raises(NameServerUnavailableError, match="within 200 ms"):
                await producer.send(Message("T", b"x"))
    finally:
        await dispatcher.cancel_handlers(0)
        await server.stop()
