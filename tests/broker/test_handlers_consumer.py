"""Consumer offsets (14, 15), consumer lists (38), heartbeats (34), unregistration (35) and the
NOTIFY_CONSUMER_IDS_CHANGED the broker sends, over real sockets (docs/protocol.md §2.5, §2.6)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import orjson
import pytest

from bolide.base.clock import ManualClock
from bolide.base.types import Topic
from bolide.broker.handlers import consumer_manage
from bolide.protocol.bodies import ConsumeType, MessageModel
from bolide.protocol.codes import LanguageCode, RequestCode, ResponseCode
from bolide.protocol.command import FLAG_ONEWAY, RemotingCommand
from bolide.protocol.headers import (
    ConsumerGroupRequestHeader,
    QueryConsumerOffsetRequestHeader,
    UnregisterClientRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from bolide.protocol.message import java_string_hash
from bolide.remoting import ClientPool, Connection, Dispatcher
from bolide.testing.cluster import Cluster
from bolide.testing.waiting import until
from tests.integration.wire import BrokerWire, connected, heartbeat_request

Connected = tuple[Cluster, BrokerWire]

CPP_HEARTBEAT = {
    "clientID": "4321-127.0.0.1@inst1",
    "consumerDataSet": [
        {
            "consumeFromWhere": 0,
            "consumeType": 1,
            "groupName": "CG_CPP",
            "messageModel": 1,
            "subscriptionDataSet": [
                {"subString": "*", "subVersion": "1700000000001", "topic": "%RETRY%CG_CPP"},
                {
                    "codeSet": [0, 0],
                    "subString": "TagA || TagB",
                    "subVersion": "1700000000000",
                    "tagsSet": ["TagA", "TagB"],
                    "topic": "TopicTest",
                },
            ],
        }
    ],
    "producerDataSet": [{"groupName": "PG_CPP"}],
}


@pytest.fixture
async def connection(tmp_path: Path) -> AsyncIterator[Connected]:
    async with connected(tmp_path) as pair:
        yield pair


def _query(group: str, topic: str, queue_id: int) -> RemotingCommand:
    header = QueryConsumerOffsetRequestHeader(group, topic, queue_id)
    return RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, header.to_ext_fields())


def _update(group: str, topic: str, queue_id: int, offset: int) -> RemotingCommand:
    header = UpdateConsumerOffsetRequestHeader(group, topic, queue_id, offset)
    return RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, header.to_ext_fields())


def _consumer_list(group: str) -> RemotingCommand:
    fields = ConsumerGroupRequestHeader(group).to_ext_fields()
    return RemotingCommand.request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, fields)


async def test_committed_offsets_are_stored_and_answered(connection: Connected) -> None:
    cluster, wire = connection
    assert (await wire.invoke(_update("CG", "T", 2, 41))).code == ResponseCode.SUCCESS
    response = await wire.invoke(_query("CG", "T", 2))
    assert response.code == ResponseCode.SUCCESS
    assert response.ext_fields == {"offset": "41"}
    assert cluster.brokers[0].context.offsets.query_offset("CG", "T", 2) == 41


async def test_a_new_group_starts_at_zero_while_the_queue_does(connection: Connected) -> None:
    _, wire = connection
    assert (await wire.invoke(_query("NEW", "Nothing", 0))).ext_fields == {"offset": "0"}
    await wire.send("Young", b"first")
    response = await wire.invoke(_query("NEW", "Young", 0))
    assert (response.code, response.ext_fields) == (ResponseCode.SUCCESS, {"offset": "0"})


async def test_a_new_group_is_not_found_once_the_queue_start_is_gone(tmp_path: Path) -> None:
    clock = ManualClock()
    settings = {
        "mapedFileSizeCommitLog": "4096",
        "fileReservedTime": "1",
        "deleteWhen": ";".join(str(hour) for hour in range(24)),
    }
    async with connected(tmp_path, clock=clock, settings=settings) as (cluster, wire):
        store = cluster.brokers[0].context.store
        for index in range(80):
            await wire.send("Aged", f"message {index:03d}".encode() * 4)
        clock.advance_ms(2 * 3_600_000 + 1)
        assert await store.run_retention_once() > 0
        assert store.min_offset("Aged", 0) > 0
        response = await wire.invoke(_query("NEW", "Aged", 0))
        assert response.code == ResponseCode.QUERY_NOT_FOUND
        assert "boot first" in (response.remark or "")


async def test_the_consumer_list_has_every_client_sorted(connection: Connected) -> None:
    _, wire = connection
    unknown = await wire.invoke(_consumer_list("CG_LIST"))
    assert unknown.code == ResponseCode.SYSTEM_ERROR
    assert "no consumer" in (unknown.remark or "")
    other_pool = ClientPool()
    try:
        other = BrokerWire(other_pool, wire.address)
        for client, sender in (("client-b", wire), ("client-a", other)):
            heartbeat = heartbeat_request(client, consumer_groups={"CG_LIST": {"T": "*"}})
            assert (await sender.invoke(heartbeat)).code == ResponseCode.SUCCESS
        response = await wire.invoke(_consumer_list("CG_LIST"))
        assert response.code == ResponseCode.SUCCESS
        assert orjson.loads(response.body) == {"consumerIdList": ["client-a", "client-b"]}
    finally:
        await other_pool.close()


async def test_a_cpp_heartbeat_registers_everything(connection: Connected) -> None:
    cluster, wire = connection
    context = cluster.brokers[0].context
    request = RemotingCommand.request(RequestCode.HEART_BEAT, body=orjson.dumps(CPP_HEARTBEAT))
    request.language = LanguageCode.CPP
    request.version = 63
    response = await wire.invoke(request)
    assert response.code == ResponseCode.SUCCESS
    assert response.version == 401
    group = context.consumers.get_consumer_group_info("CG_CPP")
    assert group is not None
    assert (group.consume_type, group.message_model) == (
        ConsumeType.CONSUME_PASSIVELY,
        MessageModel.CLUSTERING,
    )
    subscription = group.find_subscription("TopicTest")
    assert subscription is not None
    assert set(subscription.code_set) == {java_string_hash("TagA"), java_string_hash("TagB")}
    assert subscription.sub_version == 1_700_000_000_000
    [channel] = group.channels.values()
    assert (channel.client_id, channel.language, channel.version) == (
        "4321-127.0.0.1@inst1",
        LanguageCode.CPP,
        63,
    )
    retry = context.topics.find("%RETRY%CG_CPP")
    assert retry is not None and (retry.write_queue_count, retry.perm) == (1, 6)
    assert context.groups.find("CG_CPP") is not None
    [producer] = context.producers.producer_connections("PG_CPP")
    assert producer.client_id == "4321-127.0.0.1@inst1"
    await cluster.brokers[0].registration.register_once()
    assert cluster.namesrvs[0].routes.route_for_topic(Topic("%RETRY%CG_CPP")) is not None


async def test_a_bad_heartbeat_body_is_a_system_error(connection: Connected) -> None:
    _, wire = connection
    response = await wire.invoke(RemotingCommand.request(RequestCode.HEART_BEAT, body=b"{nope"))
    assert response.code == ResponseCode.SYSTEM_ERROR


class NoticeBox:
    """A client pool that records the NOTIFY_CONSUMER_IDS_CHANGED requests it receives."""

    def __init__(self) -> None:
        self.notices: list[RemotingCommand] = []
        dispatcher = Dispatcher()
        dispatcher.register(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, self._on_notice, family="n")
        self.pool = ClientPool(dispatcher)

    async def _on_notice(self, connection: Connection, request: RemotingCommand) -> None:
        del connection
        self.notices.append(request)


async def test_group_changes_are_notified_to_every_channel(connection: Connected) -> None:
    cluster, wire = connection
    first, second = NoticeBox(), NoticeBox()
    try:
        first_wire = BrokerWire(first.pool, wire.address)
        second_wire = BrokerWire(second.pool, wire.address)
        topics = {"CG_N": {"T": "*"}}
        await first_wire.invoke(heartbeat_request("first", consumer_groups=topics))
        await first_wire.invoke(heartbeat_request("first", consumer_groups=topics))
        await second_wire.invoke(heartbeat_request("second", consumer_groups=topics))
        await until(lambda: len(first.notices) >= 2 and len(second.notices) >= 1)
        notice = first.notices[-1]
        assert notice.ext_fields == {"consumerGroup": "CG_N"}
        assert notice.flag & FLAG_ONEWAY
        seen = len(first.notices)
        await second.pool.close()  # a closed connection leaves the group at once
        await until(lambda: len(first.notices) > seen)
        assert cluster.brokers[0].context.consumers.client_ids("CG_N") == ["first"]
        unregister = UnregisterClientRequestHeader(
            "first", producer_group="", consumer_group="CG_N"
        )
        request = RemotingCommand.request(RequestCode.UNREGISTER_CLIENT, unregister.to_ext_fields())
        request.ext_fields["producerGroup"] = ""  # C++ names the unused group as ""
        assert (await first_wire.invoke(request)).code == ResponseCode.SUCCESS
        assert (await wire.invoke(_consumer_list("CG_N"))).code == ResponseCode.SYSTEM_ERROR
    finally:
        await first.pool.close()
        await second.pool.close()


async def test_a_silent_client_expires_after_120_seconds(tmp_path: Path) -> None:
    clock = ManualClock()
    async with connected(tmp_path, clock=clock) as (cluster, wire):
        consumers = cluster.brokers[0].context.consumers
        heartbeat = heartbeat_request("quiet", consumer_groups={"CG_Q": {"T": "*"}})
        await wire.invoke(heartbeat)
        clock.advance_ms(110_000)
        for _ in range(100):
            await asyncio.sleep(0)
        assert consumers.client_ids("CG_Q") == ["quiet"]
        clock.advance_ms(10_000)
        await until(lambda: consumers.get_consumer_group_info("CG_Q") is None)
        await until(lambda: not wire.pool.connections)


async def test_broker_conf_can_turn_change_notices_off(tmp_path: Path) -> None:
    settings = {"notifyConsumerIdsChangedEnable": "false"}
    async with connected(tmp_path, settings=settings) as (cluster, wire):
        first, second = NoticeBox(), NoticeBox()
        try:
            first_wire = BrokerWire(first.pool, wire.address)
            second_wire = BrokerWire(second.pool, wire.address)
            topics = {"CG_OFF": {"T": "*"}}
            await first_wire.invoke(heartbeat_request("first", consumer_groups=topics))
            await second_wire.invoke(heartbeat_request("second", consumer_groups=topics))
            consumers = cluster.brokers[0].context.consumers
            assert consumers.client_ids("CG_OFF") == ["first", "second"]  # a change...
            # ...whose notice would have been written before the answers to these requests.
            await first_wire.invoke(heartbeat_request("first", consumer_groups=topics))
            await second_wire.invoke(heartbeat_request("second", consumer_groups=topics))
            assert first.notices == [] and second.notices == []
        finally:
            await first.pool.close()
            await second.pool.close()


@pytest.mark.parametrize(
    ("rule", "young", "old"),
    [
        ("MEMORY", "0", None),  # RocketMQ's rule: only while message 0 is in the memory window
        ("QUEUE_START", "0", "0"),  # while the queue starts at 0, however old
        ("CONSUME_FROM", None, None),  # the client's consumeFromWhere always decides
    ],
)
async def test_the_new_group_start_rule(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rule: str, young: str, old: str | None
) -> None:
    # A 2,500-byte machine: the memory window is its last 1,000 bytes of commit log.
    monkeypatch.setattr(consumer_manage, "physical_memory_bytes", lambda: 2_500)
    async with connected(tmp_path, settings={"newGroupStartRule": rule}) as (cluster, wire):
        assert cluster.brokers[0].config.new_group_start.value == rule
        await wire.send("Old", b"first")
        for index in range(20):  # push Old's first message out of the window
            await wire.send("Filler", f"{index:03d}".encode() * 40)
        await wire.send("Young", b"first")  # inside the window
        for topic, expected in (("Young", young), ("Old", old)):
            response = await wire.invoke(_query("NEW", topic, 0))
            if expected is None:
                assert response.code == ResponseCode.QUERY_NOT_FOUND, topic
            else:
                assert response.ext_fields == {"offset": expected}, topic
