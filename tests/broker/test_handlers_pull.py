"""PULL_MESSAGE over a real socket: checks, subscriptions, the status table, broker-side tag
filtering, long polling and the piggybacked commit offset (docs/protocol.md §2.4)."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bolide.base.clock import ManualClock
from bolide.base.errors import ConnectionClosedError
from bolide.broker.handlers.pull import PullHandlers, _response_code
from bolide.protocol.bodies import MessageModel, SubscriptionGroupConfig, TopicConfig
from bolide.protocol.codes import ResponseCode
from bolide.protocol.headers import PullMessageRequestHeader, PullSysFlag
from bolide.protocol.message import MessageExt, java_string_hash
from bolide.store.api import PutRequest
from bolide.testing.cluster import Cluster
from bolide.testing.waiting import until
from tests.integration.wire import (
    BrokerWire,
    connected,
    heartbeat_request,
    pull_request,
    records,
)

Connected = tuple[Cluster, BrokerWire]
HOLD = PullSysFlag.SUSPEND | PullSysFlag.SUBSCRIPTION


@pytest.fixture
async def connection(tmp_path: Path) -> AsyncIterator[Connected]:
    async with connected(tmp_path) as pair:
        yield pair


def _offsets(fields: dict[str, str]) -> tuple[str, str, str, str]:
    return (
        fields["suggestWhichBrokerId"],
        fields["nextBeginOffset"],
        fields["minOffset"],
        fields["maxOffset"],
    )


def _bodies(messages: list[MessageExt]) -> list[bytes]:
    return [message.body for message in messages]


async def test_a_pull_returns_the_stored_records_as_they_are(connection: Connected) -> None:
    cluster, wire = connection
    for index in range(3):
        await wire.send("Pulled", f"m{index}".encode(), tags="T")
    response = await wire.pull("Pulled", 0, 0)
    assert response.code == ResponseCode.SUCCESS
    assert _offsets(response.ext_fields) == ("0", "3", "0", "3")
    found = records(response)
    assert _bodies(found) == [b"m0", b"m1", b"m2"]
    store = cluster.brokers[0].context.store
    expected = b"".join(bytes(store.read_record(m.commit_log_offset) or b"") for m in found)
    assert response.body == expected  # byte for byte what the commit log holds


async def test_tags_are_filtered_on_the_broker_by_hash(connection: Connected) -> None:
    _, wire = connection
    for tags in ("A", "B", "C", "A"):
        await wire.send("Tagged", tags.encode(), tags=tags)
    response = await wire.pull("Tagged", 0, 0, subscription="A || B")
    assert response.code == ResponseCode.SUCCESS
    assert _bodies(records(response)) == [b"A", b"B", b"A"]
    assert response.ext_fields["nextBeginOffset"] == "4"
    nothing = await wire.pull("Tagged", 0, 0, subscription="Z")
    assert nothing.code == ResponseCode.PULL_RETRY_IMMEDIATELY
    assert _offsets(nothing.ext_fields) == ("0", "4", "0", "4")


@pytest.mark.parametrize(
    ("stored", "offset", "code", "next_offset"),
    [
        (0, 0, ResponseCode.PULL_NOT_FOUND, 0),
        (0, 5, ResponseCode.PULL_OFFSET_MOVED, 0),
        (2, 2, ResponseCode.PULL_NOT_FOUND, 2),
        (2, 9, ResponseCode.PULL_OFFSET_MOVED, 2),
        (2, 1, ResponseCode.SUCCESS, 2),
    ],
)
async def test_the_status_table(
    connection: Connected, stored: int, offset: int, code: int, next_offset: int
) -> None:
    _, wire = connection
    await wire.send("Status", b"create the topic", queue_id=1)
    for index in range(stored):
        await wire.send("Status", f"m{index}".encode())
    response = await wire.pull("Status", 0, offset)
    assert response.code == code
    fields = response.ext_fields
    assert fields["nextBeginOffset"] == str(next_offset)
    assert fields["maxOffset"] == str(stored)
    assert all(isinstance(value, str) for value in fields.values())


async def test_refusals_carry_the_offset_fields(tmp_path: Path) -> None:
    async with connected(tmp_path, settings={"autoCreateSubscriptionGroup": "false"}) as (
        cluster,
        wire,
    ):
        context = cluster.brokers[0].context
        await wire.send("Checked", b"x")
        await context.topics.update_topic_config(TopicConfig("WriteOnly", 4, 4, perm=2))
        await context.groups.update(SubscriptionGroupConfig("G"))
        unknown_group = await wire.pull("Checked", 0, 0, group="NoSuchGroup")
        assert unknown_group.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
        assert _offsets(unknown_group.ext_fields) == ("0", "0", "0", "1")
        assert (await wire.pull("Nowhere", 0, 0, group="G")).code == ResponseCode.TOPIC_NOT_EXIST
        assert (await wire.pull("WriteOnly", 0, 0, group="G")).code == ResponseCode.NO_PERMISSION
        out_of_range = await wire.pull("Checked", 4, 0, group="G")
        assert out_of_range.code == ResponseCode.SYSTEM_ERROR
        assert "queueId[4]" in (out_of_range.remark or "")
        await context.groups.disable_consume("G")
        assert (await wire.pull("Checked", 0, 0, group="G")).code == ResponseCode.NO_PERMISSION


async def test_a_write_only_broker_refuses_pulls(tmp_path: Path) -> None:
    async with connected(tmp_path, settings={"brokerPermission": "2"}) as (_, wire):
        await wire.send("Any", b"x")
        assert (await wire.pull("Any", 0, 0)).code == ResponseCode.NO_PERMISSION


async def test_subscriptions_come_from_the_heartbeat_without_the_flag(
    connection: Connected,
) -> None:
    _, wire = connection
    for tags in ("A", "B"):
        await wire.send("Subscribed", tags.encode(), tags=tags)
    plain = {"sys_flag": 0, "subscription": None, "group": "HB"}
    assert (
        await wire.pull("Subscribed", 0, 0, **plain)
    ).code == ResponseCode.SUBSCRIPTION_NOT_EXIST
    heartbeat = heartbeat_request(
        "client-1", consumer_groups={"HB": {"Subscribed": "A"}}, sub_version=5
    )
    assert (await wire.invoke(heartbeat)).code == ResponseCode.SUCCESS
    registered = await wire.pull("Subscribed", 0, 0, sub_version=5, **plain)
    assert registered.code == ResponseCode.SUCCESS
    assert _bodies(records(registered)) == [b"A"]
    newer = await wire.pull("Subscribed", 0, 0, sub_version=6, **plain)
    assert newer.code == ResponseCode.SUBSCRIPTION_NOT_LATEST
    other = await wire.pull("Elsewhere", 0, 0, **plain)
    assert other.code in (ResponseCode.SUBSCRIPTION_NOT_EXIST, ResponseCode.TOPIC_NOT_EXIST)
    await wire.send("Elsewhere", b"x")
    assert (await wire.pull("Elsewhere", 0, 0, **plain)).code == ResponseCode.SUBSCRIPTION_NOT_EXIST


async def test_a_broadcasting_group_needs_permission(connection: Connected) -> None:
    cluster, wire = connection
    context = cluster.brokers[0].context
    await wire.send("Broadcast", b"x")
    heartbeat = heartbeat_request("client-b", consumer_groups={"BG": {"Broadcast": "*"}})
    assert (await wire.invoke(heartbeat)).code == ResponseCode.SUCCESS
    group_info = context.consumers.get_consumer_group_info("BG")
    assert group_info is not None
    group_info.message_model = MessageModel.BROADCASTING
    plain = {"sys_flag": 0, "subscription": None, "group": "BG"}
    assert (await wire.pull("Broadcast", 0, 0, **plain)).code == ResponseCode.SUCCESS
    config = context.groups.find("BG")
    assert config is not None
    await context.groups.update(dataclasses.replace(config, consume_broadcast_enable=False))
    assert (await wire.pull("Broadcast", 0, 0, **plain)).code == ResponseCode.NO_PERMISSION


async def test_bad_expressions_are_refused(connection: Connected) -> None:
    _, wire = connection
    await wire.send("Expr", b"x")
    parse = await wire.pull("Expr", 0, 0, subscription="||")
    assert parse.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
    sql = await wire.pull("Expr", 0, 0, subscription="a > 1", expression_type="SQL92")
    assert sql.code == ResponseCode.SYSTEM_ERROR


async def test_without_the_suspend_bit_nothing_is_held(connection: Connected) -> None:
    cluster, wire = connection
    await wire.send("NoHold", b"x")
    response = await wire.pull("NoHold", 0, 1, suspend_timeout_ms=20_000)
    assert response.code == ResponseCode.PULL_NOT_FOUND
    assert cluster.brokers[0].context.long_polling.count == 0


async def test_a_held_pull_wakes_on_a_matching_arrival(connection: Connected) -> None:
    cluster, wire = connection
    polling = cluster.brokers[0].context.long_polling
    await wire.send("Held", b"first", tags="A")
    held = asyncio.ensure_future(wire.pull("Held", 0, 1, sys_flag=HOLD, subscription="A"))
    await until(lambda: polling.count == 1)
    await wire.send("Held", b"not for us", tags="B")
    assert polling.count == 1 and not held.done()
    await wire.send("Held", b"second", tags="A")
    response = await held
    assert response.code == ResponseCode.SUCCESS
    assert _bodies(records(response)) == [b"second"]
    assert response.ext_fields["nextBeginOffset"] == "3"
    assert polling.count == 0


async def test_a_held_pull_ends_at_its_suspend_timeout(tmp_path: Path) -> None:
    clock = ManualClock()
    async with connected(tmp_path, clock=clock) as (cluster, wire):
        polling = cluster.brokers[0].context.long_polling
        await wire.send("Timed", b"x")
        held = asyncio.ensure_future(
            wire.pull("Timed", 0, 1, sys_flag=HOLD, suspend_timeout_ms=15_000)
        )
        await until(lambda: polling.count == 1)
        clock.advance_ms(14_999)
        for _ in range(100):
            await asyncio.sleep(0)
        assert not held.done()
        clock.advance_ms(1)
        response = await held
        assert response.code == ResponseCode.PULL_NOT_FOUND
        assert _offsets(response.ext_fields) == ("0", "1", "0", "1")


async def test_a_held_pull_of_a_closed_connection_is_dropped(connection: Connected) -> None:
    cluster, wire = connection
    polling = cluster.brokers[0].context.long_polling
    await wire.send("Dropped", b"x")
    held = asyncio.ensure_future(wire.pull("Dropped", 0, 1, sys_flag=HOLD))
    await until(lambda: polling.count == 1)
    [client_connection] = wire.pool.connections.values()
    client_connection.close()
    with pytest.raises(ConnectionClosedError):
        await held
    await until(lambda: polling.count == 0)


async def test_the_commit_offset_rides_on_the_pull(connection: Connected) -> None:
    cluster, wire = connection
    offsets = cluster.brokers[0].context.offsets
    await wire.send("Committed", b"x")
    await wire.pull("Committed", 0, 1, group="CG", commit_offset=7)
    assert offsets.query_offset("CG", "Committed", 0) == -1  # no COMMIT_OFFSET bit
    flags = PullSysFlag.SUBSCRIPTION | PullSysFlag.COMMIT_OFFSET
    await wire.invoke(pull_request("Committed", 0, 1, group="CG", sys_flag=flags, commit_offset=1))
    assert offsets.query_offset("CG", "Committed", 0) == 1


async def test_an_offset_below_the_retained_start_moves_to_it(tmp_path: Path) -> None:
    clock = ManualClock()
    settings = {
        "mapedFileSizeCommitLog": "4096",
        "fileReservedTime": "1",
        "deleteWhen": ";".join(str(hour) for hour in range(24)),
    }
    async with connected(tmp_path, clock=clock, settings=settings) as (cluster, wire):
        store = cluster.brokers[0].context.store
        for index in range(80):
            await wire.send("Retained", f"message {index:03d}".encode() * 4)
        clock.advance_ms(2 * 3_600_000 + 1)
        assert await store.run_retention_once() > 0
        first = store.min_offset("Retained", 0)
        assert first > 0
        response = await wire.pull("Retained", 0, 0)
        assert response.code == ResponseCode.PULL_OFFSET_MOVED
        assert _offsets(response.ext_fields) == ("0", str(first), str(first), "80")
        resumed = await wire.pull("Retained", 0, first)
        assert resumed.code == ResponseCode.SUCCESS
        assert records(resumed)[0].queue_offset == first


async def test_a_full_long_poll_table_answers_system_busy(
    connection: Connected, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the table full a pull used to be answered PULL_NOT_FOUND at once, and clients
    pulled again at once: a busy loop. SYSTEM_BUSY makes them wait (test_consumer_pull_loop)."""
    cluster, wire = connection
    polling = cluster.brokers[0].context.long_polling
    monkeypatch.setattr(polling, "_max_parked_requests", 1)
    await wire.send("Busy", b"x")
    held = asyncio.ensure_future(wire.pull("Busy", 0, 1, sys_flag=HOLD))
    await until(lambda: polling.count == 1)
    refused = await wire.pull("Busy", 0, 1, sys_flag=HOLD)
    assert refused.code == ResponseCode.SYSTEM_BUSY
    assert "[PULL_BUSY]" in (refused.remark or "")
    assert _offsets(refused.ext_fields) == ("0", "1", "0", "1")
    await wire.send("Busy", b"y")
    assert (await held).code == ResponseCode.SUCCESS


async def test_a_held_pull_is_answered_by_the_put_that_wakes_it(connection: Connected) -> None:
    """A parked pull is a callback, not a suspended handler task: the put that stores a
    matching message reads and answers it before returning (no loop turn in between)."""
    cluster, wire = connection
    broker = cluster.brokers[0]
    context = broker.context
    polling = context.long_polling
    await wire.send("Woken", b"first")
    held = asyncio.ensure_future(wire.pull("Woken", 0, 1, sys_flag=HOLD))
    await until(lambda: polling.count == 1)
    # No handler task waits for the parked pull (the first pass may have needed one).
    await until(lambda: broker._dispatcher.suspended_handlers == 0)
    answered_before = context.stats.get_found_requests
    result = context.store.put_message_at_once(PutRequest(topic="Woken", queue_id=0, body=b"2nd"))
    assert result is not None and result.ok
    # Read and answered inside the put: nothing ran on the loop since.
    assert polling.count == 0
    assert context.stats.get_found_requests == answered_before + 1
    response = await held
    assert response.code == ResponseCode.SUCCESS
    assert _bodies(records(response)) == [b"2nd"]
    assert response.ext_fields["nextBeginOffset"] == "2"


async def test_a_woken_pull_whose_read_fails_is_answered_system_error(
    connection: Connected, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As the dispatcher answers a handler that raised: the client hears at once instead of
    waiting for its pull to time out."""
    cluster, wire = connection
    polling = cluster.brokers[0].context.long_polling
    await wire.send("Broken", b"x")
    held = asyncio.ensure_future(wire.pull("Broken", 0, 1, sys_flag=HOLD))
    await until(lambda: polling.count == 1)

    def broken_read(*args: object) -> None:
        raise OSError("the disk went away")

    monkeypatch.setattr(PullHandlers, "_read", broken_read)
    await wire.send("Broken", b"y")
    response = await held
    assert response.code == ResponseCode.SYSTEM_ERROR
    assert response.remark == "the disk went away"


async def test_the_caught_up_shortcut_only_skips_reads_that_find_nothing(
    tmp_path: Path,
) -> None:
    """The pull handler parks a pull at the queue's max offset without reading the store;
    the read it skips must answer PULL_NOT_FOUND there, for every queue state and filter —
    including a queue whose every message retention removed (min = max)."""
    clock = ManualClock()
    settings = {
        "mapedFileSizeCommitLog": "4096",
        "fileReservedTime": "1",
        "deleteWhen": ";".join(str(hour) for hour in range(24)),
    }
    async with connected(tmp_path, clock=clock, settings=settings) as (cluster, wire):
        store = cluster.brokers[0].context.store
        handlers = PullHandlers(cluster.brokers[0].context)
        for index in range(3):
            await wire.send("Short", f"m{index}".encode(), tags="A")
        for index in range(60):  # fills and rolls commit-log segments for retention
            await wire.send("Gone", f"old message {index:03d}".encode() * 4)
        for index in range(30):  # rolls the segment holding the last of them
            await wire.send("Filler", f"filler {index:03d}".encode() * 4)
        clock.advance_ms(2 * 3_600_000 + 1)
        await store.run_retention_once()
        await wire.send("Short", b"other queue", queue_id=2)
        assert store.min_offset("Gone", 0) == store.max_offset("Gone", 0) == 60
        cases = 0
        for topic, queue_id in [("Short", 0), ("Short", 1), ("Short", 2), ("Gone", 0), ("No", 0)]:
            top = store.max_offset(topic, queue_id) + 2
            for offset in range(top):
                for expression in ("*", "A", "B"):
                    header = PullMessageRequestHeader.from_ext_fields(
                        pull_request(topic, queue_id, offset, subscription=expression).ext_fields
                    )
                    codes = None if expression == "*" else frozenset({java_string_hash(expression)})
                    general = _response_code(handlers._read(header, codes, None), offset)
                    if handlers.caught_up(header):
                        cases += 1
                        assert general == ResponseCode.PULL_NOT_FOUND, (topic, queue_id, offset)
        assert cases == 15  # each queue's max offset, three filters


async def test_a_pull_brings_at_most_the_transfer_limits(tmp_path: Path) -> None:
    """maxTransferCountOnMessageInMemory / maxTransferBytesOnMessageInMemory bound one answer:
    32 messages and 256 KiB by default, as set in broker.conf otherwise."""
    async with connected(tmp_path) as (_, wire):
        for index in range(40):
            await wire.send("Capped", b"%02d" % index, queue_id=0)
        assert len(records(await wire.pull("Capped", 0, 0, max_messages=64))) == 32
    settings = {
        "maxTransferCountOnMessageInMemory": "50",
        "maxTransferBytesOnMessageInMemory": str(10 * 1024),
    }
    async with connected(tmp_path / "raised", settings=settings) as (_, wire):
        for index in range(60):
            await wire.send("Capped", b"%02d" % index, queue_id=0)
        assert len(records(await wire.pull("Capped", 0, 0, max_messages=64))) == 50
        assert len(records(await wire.pull("Capped", 0, 0, max_messages=7))) == 7
        big = b"x" * 4096
        for _ in range(4):
            await wire.send("Large", big, queue_id=0)
        found = records(await wire.pull("Large", 0, 0, max_messages=64))
        assert [len(message.body) for message in found] == [4096, 4096]  # 10 KiB: two fit
