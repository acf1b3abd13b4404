"""SEND_MESSAGE / SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE over a real socket (docs/protocol.md
§2.2)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bolide.base.clock import ManualClock
from bolide.base.types import Topic
from bolide.protocol.address import parse_socket_address
from bolide.protocol.bodies import PERM_WRITE, TopicConfig
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.message import PropertyKey
from bolide.protocol.msgid import decode_offset_message_id
from bolide.testing.cluster import Cluster
from tests.compat.cpp_clients import stored_messages
from tests.integration.wire import BrokerWire, batch_request, connected, send_request

Connected = tuple[Cluster, BrokerWire]


@pytest.fixture
async def connection(tmp_path: Path) -> AsyncIterator[Connected]:
    async with connected(tmp_path) as pair:
        yield pair


def _assert_strings(fields: dict[str, str]) -> None:
    assert all(isinstance(value, str) for value in fields.values())


async def test_send_answers_ids_and_stores_the_record(connection: Connected) -> None:
    cluster, wire = connection
    broker = cluster.brokers[0]
    response = await wire.send(
        "Orders", b"paid", tags="TagA", keys="o-1 o-2", properties={"color": "blue"}, queue_id=1
    )
    assert response.code == ResponseCode.SUCCESS
    fields = response.ext_fields
    _assert_strings(fields)
    assert fields["queueId"] == "1"
    assert fields["queueOffset"] == "0"
    assert fields["MSG_REGION"] == "DefaultRegion"
    assert fields["TRACE_ON"] == "true"
    [stored] = stored_messages(broker, "Orders")
    assert decode_offset_message_id(fields["msgId"]) == (
        ("127.0.0.1", broker.port),
        stored.commit_log_offset,
    )
    assert (stored.body, stored.tags, stored.keys, stored.queue_id) == (
        b"paid",
        "TagA",
        "o-1 o-2",
        1,
    )
    assert stored.properties["color"] == "blue"
    assert stored.properties[PropertyKey.CLUSTER] == "DefaultCluster"
    assert PropertyKey.WAIT not in stored.properties
    assert stored.store_host == ("127.0.0.1", broker.port)
    [client_connection] = wire.pool.connections.values()
    assert stored.born_host == parse_socket_address(client_connection.local_address)
    assert stored.born_timestamp_ms == 1_700_000_000_000


async def test_send_v2_reads_the_one_letter_header(connection: Connected) -> None:
    cluster, wire = connection
    response = await wire.invoke(
        send_request("OrdersV2", b"v2", tags="T", queue_id=2, code=RequestCode.SEND_MESSAGE_V2)
    )
    assert response.code == ResponseCode.SUCCESS
    assert response.ext_fields["queueId"] == "2"
    [stored] = stored_messages(cluster.brokers[0], "OrdersV2")
    assert (stored.body, stored.tags) == (b"v2", "T")


@pytest.mark.parametrize(
    ("code", "flag_text"),
    [(RequestCode.SEND_BATCH_MESSAGE, "true"), (RequestCode.SEND_MESSAGE, "1")],
    ids=["java-320", "cpp-code-10-batch-1"],
)
async def test_a_batch_stores_each_inner_message(
    connection: Connected, code: int, flag_text: str
) -> None:
    cluster, wire = connection
    bodies = [f"inner {index}".encode() for index in range(4)]
    response = await wire.invoke(
        batch_request("Batched", bodies, tags="B", code=code, batch_text=flag_text)
    )
    assert response.code == ResponseCode.SUCCESS
    stored = stored_messages(cluster.brokers[0], "Batched")
    assert [m.body for m in stored] == bodies
    assert [m.queue_offset for m in stored] == [0, 1, 2, 3]
    assert response.ext_fields["queueOffset"] == "0"
    assert response.ext_fields["msgId"].split(",") == [m.offset_msg_id for m in stored]
    for index, message in enumerate(stored):
        assert message.keys == f"k{index}"
        assert message.tags == "B"
        assert message.properties[PropertyKey.CLUSTER] == "DefaultCluster"
        assert PropertyKey.WAIT not in message.properties


async def test_the_batch_flag_alone_decides(connection: Connected) -> None:
    cluster, wire = connection
    request = batch_request("NotBatched", [b"a", b"b"], code=RequestCode.SEND_BATCH_MESSAGE)
    request.ext_fields["m"] = "false"  # code 320, but the header says "not a batch"
    response = await wire.invoke(request)
    assert response.code == ResponseCode.SUCCESS
    [stored] = stored_messages(cluster.brokers[0], "NotBatched")
    assert stored.body == request.body


async def test_a_missing_header_field_is_named(connection: Connected) -> None:
    _, wire = connection
    request = send_request("Orders", b"x")
    del request.ext_fields["bornTimestamp"]
    response = await wire.invoke(request)
    assert response.code == ResponseCode.SYSTEM_ERROR
    assert "bornTimestamp" in (response.remark or "")
    assert response.ext_fields["MSG_REGION"] == "DefaultRegion"


@pytest.mark.parametrize(
    ("topic", "code"),
    [
        ("has space", ResponseCode.SYSTEM_ERROR),
        ("slash/topic", ResponseCode.SYSTEM_ERROR),
        ("t" * 128, ResponseCode.SYSTEM_ERROR),
        ("SCHEDULE_TOPIC_XXXX", ResponseCode.NO_PERMISSION),
        ("RMQ_SYS_TRANS_HALF_TOPIC", ResponseCode.NO_PERMISSION),
    ],
)
async def test_topic_names_are_checked(connection: Connected, topic: str, code: int) -> None:
    cluster, wire = connection
    response = await wire.send(topic, b"x")
    assert response.code == code
    assert response.ext_fields["TRACE_ON"] == "true"
    assert (
        cluster.brokers[0].context.topics.find(topic) is None or code == ResponseCode.NO_PERMISSION
    )


async def test_oversized_body_and_properties_are_illegal(tmp_path: Path) -> None:
    async with connected(tmp_path, settings={"maxMessageSize": "1024"}) as (_, wire):
        assert (await wire.send("Sized", b"x" * 1024)).code == ResponseCode.SUCCESS
        assert (await wire.send("Sized", b"x" * 1025)).code == ResponseCode.MESSAGE_ILLEGAL
        huge = {"big": "p" * 33_000}
        assert (
            await wire.send("Sized", b"x", properties=huge)
        ).code == ResponseCode.MESSAGE_ILLEGAL


async def test_queue_ids_are_checked_or_chosen(connection: Connected) -> None:
    _, wire = connection
    assert (await wire.send("Queues", b"x", queue_id=3)).code == ResponseCode.SUCCESS
    response = await wire.send("Queues", b"x", queue_id=4)
    assert response.code == ResponseCode.SYSTEM_ERROR
    assert "queueId[4]" in (response.remark or "")
    chosen = {
        int((await wire.send("Queues", b"r", queue_id=-1)).ext_fields["queueId"]) for _ in range(40)
    }
    assert chosen <= {0, 1, 2, 3}
    assert len(chosen) > 1  # random, not fixed


async def test_an_unknown_topic_is_auto_created_and_registered(connection: Connected) -> None:
    cluster, wire = connection
    broker = cluster.brokers[0]
    before = broker.registration.registration_count
    assert (await wire.send("Fresh", b"x")).code == ResponseCode.SUCCESS
    created = broker.context.topics.find("Fresh")
    assert created is not None
    assert (created.read_queue_count, created.write_queue_count, created.perm) == (4, 4, 6)
    assert (
        await wire.send("Narrow", b"x", default_topic_queue_count=2)
    ).code == ResponseCode.SUCCESS
    narrow = broker.context.topics.find("Narrow")
    assert narrow is not None and narrow.write_queue_count == 2
    await broker.registration.register_once()
    assert broker.registration.registration_count > before
    assert cluster.namesrvs[0].routes.route_for_topic(Topic("Fresh")) is not None


async def test_without_auto_create_an_unknown_topic_does_not_exist(tmp_path: Path) -> None:
    async with connected(tmp_path, settings={"autoCreateTopicEnable": "false"}) as (cluster, wire):
        response = await wire.send("Missing", b"x")
        assert response.code == ResponseCode.TOPIC_NOT_EXIST
        assert cluster.brokers[0].context.topics.find("Missing") is None


async def test_retry_topics_need_their_group_and_overflow_to_the_dlq(connection: Connected) -> None:
    cluster, wire = connection
    context = cluster.brokers[0].context
    assert (await wire.send("%RETRY%G1", b"again", reconsume_times=3)).code == ResponseCode.SUCCESS
    assert [m.body for m in stored_messages(cluster.brokers[0], "%RETRY%G1")] == [b"again"]
    assert context.groups.find("G1") is not None
    dead = await wire.send("%RETRY%G1", b"dead", reconsume_times=16, properties={"DELAY": "3"})
    assert dead.code == ResponseCode.SUCCESS
    [in_dlq] = stored_messages(cluster.brokers[0], "%DLQ%G1")
    assert in_dlq.body == b"dead"
    assert PropertyKey.DELAY not in in_dlq.properties
    dlq = context.topics.find("%DLQ%G1")
    assert dlq is not None and dlq.write_queue_count == 1
    assert dlq.perm & PERM_WRITE
    # A client from version 121 on names its own maximum.
    assert (
        await wire.send("%RETRY%G1", b"early", reconsume_times=2, max_reconsume_times=2)
    ).code == 0
    assert sorted(m.body for m in stored_messages(cluster.brokers[0], "%DLQ%G1")) == [
        b"dead",
        b"early",
    ]


async def test_an_old_client_gets_the_group_maximum(connection: Connected) -> None:
    cluster, wire = connection
    request = send_request("%RETRY%G2", b"cpp", reconsume_times=2, max_reconsume_times=2)
    request.version = 63  # the C++ client: its maxReconsumeTimes is not trusted
    assert (await wire.invoke(request)).code == ResponseCode.SUCCESS
    assert [m.body for m in stored_messages(cluster.brokers[0], "%RETRY%G2")] == [b"cpp"]


async def test_delayed_messages_wait_in_the_schedule_topic(tmp_path: Path) -> None:
    clock = ManualClock()
    async with connected(tmp_path, clock=clock) as (cluster, wire):
        broker = cluster.brokers[0]
        response = await wire.send(
            "Later", b"soon", tags="T", queue_id=1, properties={"DELAY": "3"}
        )
        assert response.code == ResponseCode.SUCCESS
        assert stored_messages(broker, "Later") == []
        [waiting] = stored_messages(broker, "SCHEDULE_TOPIC_XXXX")
        assert waiting.queue_id == 2
        assert waiting.properties[PropertyKey.REAL_TOPIC] == "Later"
        assert waiting.properties[PropertyKey.REAL_QID] == "1"
        assert waiting.properties[PropertyKey.DELAY] == "3"
        [(_, _, tags_code)] = broker.context.store.consume_queue_entries(
            "SCHEDULE_TOPIC_XXXX", 2, 0, 1
        )
        assert tags_code == waiting.store_timestamp_ms + 10_000
        await wire.send("Later", b"much later", properties={"DELAY": "40"})
        levels = {m.queue_id for m in stored_messages(broker, "SCHEDULE_TOPIC_XXXX")}
        assert levels == {2, 17}  # level 40 is clamped to the last (18th) level


async def test_an_order_topic_refuses_writes_on_a_read_only_broker(tmp_path: Path) -> None:
    async with connected(tmp_path, settings={"brokerPermission": "4"}) as (cluster, wire):
        topics = cluster.brokers[0].context.topics
        await topics.update_topic_config(TopicConfig("Ordered", 4, 4, order=True))
        await topics.update_topic_config(TopicConfig("Plain", 4, 4))
        assert (await wire.send("Ordered", b"x")).code == ResponseCode.NO_PERMISSION
        assert (await wire.send("Plain", b"x")).code == ResponseCode.SUCCESS


async def test_a_request_without_ext_fields_is_answered(connection: Connected) -> None:
    _, wire = connection
    response = await wire.invoke(RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {}, b"x"))
    assert response.code == ResponseCode.SYSTEM_ERROR
    assert response.ext_fields["MSG_REGION"] == "DefaultRegion"


async def test_concurrent_sends_under_sync_flush_all_succeed(tmp_path: Path) -> None:
    # SYNC puts share one group-commit future; every send must still be answered SUCCESS.
    async with connected(tmp_path, settings={"flushDiskType": "SYNC_FLUSH"}) as (cluster, wire):
        requests = [send_request("Synced", f"m{index}".encode()) for index in range(50)]
        responses = await asyncio.gather(*(wire.invoke(request) for request in requests))
        assert {(r.code, r.remark) for r in responses} == {(ResponseCode.SUCCESS, None)}
        assert len(stored_messages(cluster.brokers[0], "Synced")) == 50
