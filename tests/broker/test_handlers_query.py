"""Queue offsets (29-32), message lookups (33, 12) and the admin requests issue 4 needs
(17, 21, 28) over a real socket (docs/protocol.md §2.6, §2.7, §2.11)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import orjson
import pytest

from bolide.base.clock import ManualClock
from bolide.base.types import Topic
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import (
    CreateTopicRequestHeader,
    QueryMessageRequestHeader,
    QueueRequestHeader,
    SearchOffsetRequestHeader,
    ViewMessageRequestHeader,
)
from bolide.protocol.msgid import decode_offset_message_id
from bolide.testing.cluster import Cluster
from bolide.testing.waiting import until
from tests.integration.wire import BrokerWire, connected, pull_request, records

Connected = tuple[Cluster, BrokerWire]


@pytest.fixture
async def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
async def connection(tmp_path: Path, clock: ManualClock) -> AsyncIterator[Connected]:
    async with connected(tmp_path, clock=clock) as pair:
        yield pair


def _queue(code: int, topic: str, queue_id: int) -> RemotingCommand:
    return RemotingCommand.request(code, QueueRequestHeader(topic, queue_id).to_ext_fields())


async def test_queue_offsets_and_times(connection: Connected, clock: ManualClock) -> None:
    _, wire = connection
    assert (await wire.invoke(_queue(RequestCode.GET_MAX_OFFSET, "Q", 0))).ext_fields == {
        "offset": "0"
    }
    earliest = await wire.invoke(_queue(RequestCode.GET_EARLIEST_MSG_STORETIME, "Q", 0))
    assert earliest.ext_fields == {"timestamp": "-1"}
    stored_at = []
    for index in range(3):
        stored_at.append(clock.now_ms())
        await wire.send("Q", f"m{index}".encode())
        clock.advance_ms(1_000)
    max_offset = await wire.invoke(_queue(RequestCode.GET_MAX_OFFSET, "Q", 0))
    assert (max_offset.code, max_offset.ext_fields) == (ResponseCode.SUCCESS, {"offset": "3"})
    min_offset = await wire.invoke(_queue(RequestCode.GET_MIN_OFFSET, "Q", 0))
    assert min_offset.ext_fields == {"offset": "0"}
    earliest = await wire.invoke(_queue(RequestCode.GET_EARLIEST_MSG_STORETIME, "Q", 0))
    assert earliest.ext_fields == {"timestamp": str(stored_at[0])}
    for index, timestamp_ms in enumerate(stored_at):
        header = SearchOffsetRequestHeader("Q", 0, timestamp_ms)
        request = RemotingCommand.request(
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, header.to_ext_fields()
        )
        assert (await wire.invoke(request)).ext_fields == {"offset": str(index)}


async def test_view_message_by_id_returns_the_record(connection: Connected) -> None:
    _, wire = connection
    sent = await wire.send("Viewed", b"look at me", tags="V")
    _, commit_log_offset = decode_offset_message_id(sent.ext_fields["msgId"])
    request = RemotingCommand.request(
        RequestCode.VIEW_MESSAGE_BY_ID, ViewMessageRequestHeader(commit_log_offset).to_ext_fields()
    )
    response = await wire.invoke(request)
    assert response.code == ResponseCode.SUCCESS
    [message] = records(response)
    assert (message.body, message.tags, message.commit_log_offset) == (
        b"look at me",
        "V",
        commit_log_offset,
    )
    missing = RemotingCommand.request(
        RequestCode.VIEW_MESSAGE_BY_ID, ViewMessageRequestHeader(123_456).to_ext_fields()
    )
    answer = await wire.invoke(missing)
    assert answer.code == ResponseCode.SYSTEM_ERROR
    assert "123456" in (answer.remark or "")


async def test_query_message_by_key_and_unique_key(
    connection: Connected, clock: ManualClock
) -> None:
    _, wire = connection
    start_ms = clock.now_ms()
    await wire.send("Keyed", b"one", keys="order-1 shared", properties={"UNIQ_KEY": "U" * 32})
    await wire.send("Keyed", b"two", keys="order-2 shared")
    end_ms = clock.now_ms() + 1

    async def query(key: str, *, unique: bool = False, topic: str = "Keyed") -> RemotingCommand:
        header = QueryMessageRequestHeader(topic, key, 32, start_ms, end_ms, unique)
        return await wire.invoke(
            RemotingCommand.request(RequestCode.QUERY_MESSAGE, header.to_ext_fields())
        )

    shared = await query("shared")
    assert shared.code == ResponseCode.SUCCESS
    assert sorted(m.body for m in records(shared)) == [b"one", b"two"]
    assert set(shared.ext_fields) == {"indexLastUpdateTimestamp", "indexLastUpdatePhyoffset"}
    assert [m.body for m in records(await query("order-2"))] == [b"two"]
    assert [m.body for m in records(await query("U" * 32, unique=True))] == [b"one"]
    assert (await query("nobody")).code == ResponseCode.QUERY_NOT_FOUND
    assert (await query("shared", topic="Elsewhere")).code == ResponseCode.QUERY_NOT_FOUND


async def test_create_topic_registers_it_before_answering(connection: Connected) -> None:
    cluster, wire = connection
    header = CreateTopicRequestHeader("Created", "TBW102", 3, 3, 6)
    request = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext_fields())
    assert (await wire.invoke(request)).code == ResponseCode.SUCCESS
    route = cluster.namesrvs[0].routes.route_for_topic(Topic("Created"))
    assert route is not None
    [queue_data] = route.queue_datas
    assert (queue_data.read_queue_count, queue_data.write_queue_count) == (3, 3)
    system = CreateTopicRequestHeader("TBW102", "TBW102", 3, 3, 6)
    refused = await wire.invoke(
        RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, system.to_ext_fields())
    )
    assert refused.code == ResponseCode.SYSTEM_ERROR
    everything = await wire.invoke(RemotingCommand.request(RequestCode.GET_ALL_TOPIC_CONFIG))
    table = orjson.loads(everything.body)["topicConfigTable"]
    assert table["Created"]["readQueueNums"] == 3
    assert "TBW102" in table


async def test_runtime_info_counts_puts_and_gets(connection: Connected) -> None:
    _, wire = connection
    for index in range(3):
        await wire.send("Counted", f"m{index}".encode())
    await wire.invoke(pull_request("Counted", 0, 0))
    response = await wire.invoke(RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO))
    assert response.code == ResponseCode.SUCCESS
    table = orjson.loads(response.body)["table"]
    assert all(isinstance(value, str) for value in table.values())
    assert table["brokerVersion"] == "401"
    assert table["brokerVersionDesc"] == "V4_9_4"
    assert table["msgPutTotalTodayNow"] == "3"
    assert table["msgGetTotalTodayNow"] == "3"


async def test_unknown_codes_are_not_supported(connection: Connected) -> None:
    _, wire = connection
    response = await wire.invoke(RemotingCommand.request(9_999))  # no request has this code
    assert response.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert response.remark == " request type 9999 not supported"


async def test_create_topic_makes_its_queue_files_ahead(connection: Connected) -> None:
    cluster, wire = connection
    header = CreateTopicRequestHeader("Warm", "TBW102", 3, 3, 6)
    request = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext_fields())
    assert (await wire.invoke(request)).code == ResponseCode.SUCCESS
    store = cluster.brokers[0].context.store
    queue_root = cluster.brokers[0].config.store_path_root_dir / "consumequeue" / "Warm"

    def made() -> bool:
        names = [sorted(p.name for p in queue_root.glob(f"{q}/*")) for q in range(3)]
        return names == [["00000000000000000000"]] * 3

    await until(made)  # before any send: the first sends find their files
    assert (await wire.send("Warm", b"first")).code == ResponseCode.SUCCESS
    assert sum(store.max_offset("Warm", queue_id) for queue_id in range(3)) == 1
    assert not list(queue_root.rglob("*.tmp"))
