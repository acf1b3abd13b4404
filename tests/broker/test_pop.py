"""POP consumption over remoting (POP_MESSAGE 200050, ACK_MESSAGE 200051,
CHANGE_MESSAGE_INVISIBLETIME 200053): in-flight messages, acks, revival with reconsume times,
FIFO blocking, the DLQ after max attempts, long polling, offset reset and crash recovery."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bolide.base.clock import ManualClock
from bolide.broker.pop.service import POP_LOG_FILE_NAME
from bolide.protocol.bodies import SubscriptionGroupConfig
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers.pop import (
    POP_CK_PROPERTY,
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    PopMessageRequestHeader,
    ReceiptHandle,
)
from bolide.protocol.message import MessageExt
from bolide.testing.cluster import Cluster
from tests.integration.wire import BrokerWire, connected, records

Connected = tuple[Cluster, BrokerWire]


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
async def connection(tmp_path: Path, clock: ManualClock) -> AsyncIterator[Connected]:
    async with connected(tmp_path, clock=clock) as pair:
        yield pair


async def _pop(
    wire: BrokerWire,
    topic: str,
    *,
    group: str = "G",
    queue_id: int = -1,
    count: int = 32,
    invisible_ms: int = 10_000,
    poll_ms: int = 0,
    order: bool = False,
    expression: str | None = None,
) -> RemotingCommand:
    header = PopMessageRequestHeader(
        group, topic, queue_id, count, invisible_ms, poll_ms, 0, order=order, expression=expression
    )
    request = RemotingCommand.request(RequestCode.POP_MESSAGE, header.to_ext_fields())
    return await wire.invoke(request)


def _handle(message: MessageExt) -> ReceiptHandle:
    return ReceiptHandle.decode(message.properties[POP_CK_PROPERTY])


async def _ack(wire: BrokerWire, message: MessageExt, group: str = "G") -> RemotingCommand:
    handle = _handle(message)
    header = AckMessageRequestHeader(
        group, message.topic, handle.queue_id, handle.encode(), handle.queue_offset
    )
    return await wire.invoke(
        RemotingCommand.request(RequestCode.ACK_MESSAGE, header.to_ext_fields())
    )


async def _change(
    wire: BrokerWire, message: MessageExt, invisible_ms: int, handle: str | None = None
) -> RemotingCommand:
    parsed = _handle(message)
    header = ChangeInvisibleTimeRequestHeader(
        "G", message.topic, parsed.queue_id, handle or parsed.encode(), parsed.queue_offset,
        invisible_ms,
    )  # fmt: skip
    return await wire.invoke(
        RemotingCommand.request(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, header.to_ext_fields())
    )


async def _revive(cluster: Cluster) -> None:
    pop = cluster.brokers[0].context.pop
    assert pop is not None
    await pop.revive_step()


async def test_pop_ack_and_redelivery_after_the_invisible_time(
    connection: Connected, clock: ManualClock
) -> None:
    cluster, wire = connection
    for index in range(4):
        await wire.send("Popped", f"m{index}".encode(), queue_id=index % 2)
    first = await _pop(wire, "Popped", invisible_ms=5_000)
    assert first.code == ResponseCode.SUCCESS
    got = records(first)
    assert sorted(m.body for m in got) == [b"m0", b"m1", b"m2", b"m3"]
    assert all(m.reconsume_times == 0 for m in got)
    assert (await _pop(wire, "Popped")).code == ResponseCode.PULL_NOT_FOUND  # all invisible
    acked = [m for m in got if m.body in (b"m0", b"m1")]
    for message in acked:
        assert (await _ack(wire, message)).code == ResponseCode.SUCCESS
    clock.advance_ms(5_000)
    await _revive(cluster)
    again = records(await _pop(wire, "Popped"))
    assert sorted(m.body for m in again) == [b"m2", b"m3"]
    assert all(m.reconsume_times == 1 for m in again)
    # the stale handle of the first delivery acks nothing
    stale = next(m for m in got if m.body == b"m2")
    assert (await _ack(wire, stale)).code == ResponseCode.SUCCESS
    clock.advance_ms(10_000)
    await _revive(cluster)
    third = records(await _pop(wire, "Popped"))
    assert sorted(m.body for m in third) == [b"m2", b"m3"]
    assert all(m.reconsume_times == 2 for m in third)


async def test_progress_is_the_lowest_unacked_offset(connection: Connected) -> None:
    cluster, wire = connection
    for index in range(3):
        await wire.send("Progress", f"m{index}".encode(), queue_id=0)
    got = records(await _pop(wire, "Progress", queue_id=0))
    offsets = cluster.brokers[0].context.offsets
    assert offsets.query_offset("G", "Progress", 0) == 0
    await _ack(wire, got[1])
    assert offsets.query_offset("G", "Progress", 0) == 0
    await _ack(wire, got[0])
    assert offsets.query_offset("G", "Progress", 0) == 2
    await _ack(wire, got[2])
    assert offsets.query_offset("G", "Progress", 0) == 3


async def test_change_invisible_time_returns_a_new_handle(
    connection: Connected, clock: ManualClock
) -> None:
    cluster, wire = connection
    await wire.send("Changed", b"x", queue_id=0)
    [message] = records(await _pop(wire, "Changed", invisible_ms=5_000))
    clock.advance_ms(1)
    response = await _change(wire, message, 60_000)
    assert response.code == ResponseCode.SUCCESS
    new_pop_time = int(response.ext_fields["popTime"])
    assert new_pop_time != _handle(message).pop_time_ms
    clock.advance_ms(10_000)
    await _revive(cluster)
    assert (await _pop(wire, "Changed")).code == ResponseCode.PULL_NOT_FOUND  # still hidden
    stale = await _change(wire, message, 1_000)  # the old handle is no longer valid
    assert stale.code == ResponseCode.NO_MESSAGE
    old = _handle(message)
    renewed = ReceiptHandle(
        old.start_offset, new_pop_time, 60_000, old.revive_queue_id, old.topic_type,
        old.broker_name, old.queue_id, old.queue_offset, old.commit_log_offset,
    )  # fmt: skip
    assert (await _change(wire, message, 0, renewed.encode())).code == ResponseCode.SUCCESS
    await _revive(cluster)
    [back] = records(await _pop(wire, "Changed"))
    assert back.body == b"x" and back.reconsume_times == 1


async def test_orderly_pops_block_the_queue_until_the_batch_is_acked(
    connection: Connected,
) -> None:
    _, wire = connection
    for index in range(4):
        await wire.send("Fifo", f"m{index}".encode(), queue_id=0)
    popped = await _pop(wire, "Fifo", count=2, order=True)
    assert popped.ext_fields["startOffsetInfo"] == "0 0 0"
    assert popped.ext_fields["msgOffsetInfo"] == "0 0 0,1"
    assert popped.ext_fields["reviveQid"] == "999"
    first = records(popped)
    assert [m.body for m in first] == [b"m0", b"m1"]
    assert _handle(first[0]).is_order
    assert (await _pop(wire, "Fifo", count=2, order=True)).code == ResponseCode.PULL_NOT_FOUND
    await _ack(wire, first[0])
    assert (await _pop(wire, "Fifo", count=2, order=True)).code == ResponseCode.PULL_NOT_FOUND
    await _ack(wire, first[1])
    second = records(await _pop(wire, "Fifo", count=2, order=True))
    assert [m.body for m in second] == [b"m2", b"m3"]


async def test_max_attempts_move_the_message_to_the_dlq(
    connection: Connected, clock: ManualClock
) -> None:
    cluster, wire = connection
    context = cluster.brokers[0].context
    await context.groups.update(SubscriptionGroupConfig("Failing", retry_max_times=1))
    await wire.send("Doomed", b"poison", queue_id=0)
    for attempt in range(2):
        [message] = records(await _pop(wire, "Doomed", group="Failing", invisible_ms=1_000))
        assert message.reconsume_times == attempt
        clock.advance_ms(1_000)
        await _revive(cluster)
    assert (await _pop(wire, "Doomed", group="Failing")).code == ResponseCode.PULL_NOT_FOUND
    dlq = context.store.get_message("%DLQ%Failing", 0, 0, 10, 1 << 20)
    [dead] = [m for buffer in dlq.buffers for m in records_of(bytes(buffer))]
    assert dead.body == b"poison"
    assert context.offsets.query_offset("Failing", "Doomed", 0) == 1


def records_of(raw: bytes) -> list[MessageExt]:
    from bolide.protocol.record import decode_records

    return decode_records(raw)


async def test_tags_filter_pops(connection: Connected) -> None:
    _, wire = connection
    for tags in ("A", "B", "A"):
        await wire.send("TaggedPop", tags.encode(), tags=tags, queue_id=0)
    got = records(await _pop(wire, "TaggedPop", expression="A"))
    assert [m.body for m in got] == [b"A", b"A"]


async def test_bad_requests_are_answered(connection: Connected) -> None:
    _, wire = connection
    assert (await _pop(wire, "NoSuchTopic")).code == ResponseCode.TOPIC_NOT_EXIST
    await wire.send("Bad", b"x", queue_id=0)
    assert (await _pop(wire, "Bad", queue_id=99)).code == ResponseCode.SYSTEM_ERROR
    assert (await _pop(wire, "Bad", invisible_ms=-1)).code == ResponseCode.SYSTEM_ERROR
    header = AckMessageRequestHeader("G", "Bad", 0, "not a handle", 0)
    response = await wire.invoke(
        RemotingCommand.request(RequestCode.ACK_MESSAGE, header.to_ext_fields())
    )
    assert response.code == ResponseCode.SYSTEM_ERROR
    assert "receipt handle" in (response.remark or "")


async def test_a_pop_waits_for_a_message(tmp_path: Path) -> None:
    async with connected(tmp_path) as (_, wire):
        await wire.send("Waited", b"first", queue_id=0)
        records(await _pop(wire, "Waited"))  # the group starts, nothing left
        waiting = asyncio.ensure_future(_pop(wire, "Waited", poll_ms=20_000))
        await asyncio.sleep(0)
        await wire.send("Waited", b"second", queue_id=0)
        response = await waiting
        assert [m.body for m in records(response)] == [b"second"]


async def test_unacked_messages_survive_a_restart_and_acked_ones_stay_done(
    tmp_path: Path, clock: ManualClock
) -> None:
    async with connected(tmp_path, clock=clock) as (_, wire):
        for index in range(3):
            await wire.send("Durable", f"m{index}".encode(), queue_id=0)
        got = records(await _pop(wire, "Durable", invisible_ms=5_000))
        await _ack(wire, got[0])
        log = tmp_path / "broker-a" / "store" / POP_LOG_FILE_NAME
        with log.open("ab") as file:  # a torn last line, as a crash mid-write leaves
            file.write(b'0000abcd {"t":')
    async with connected(tmp_path, clock=clock) as (cluster, wire):
        assert (await _pop(wire, "Durable")).code == ResponseCode.PULL_NOT_FOUND
        clock.advance_ms(5_000)
        await _revive(cluster)
        again = records(await _pop(wire, "Durable"))
        assert [m.body for m in again] == [b"m1", b"m2"]


async def test_an_offset_reset_reaches_pop_consumers(connection: Connected) -> None:
    cluster, wire = connection
    for index in range(3):
        await wire.send("Reset", f"m{index}".encode(), queue_id=0)
    for message in records(await _pop(wire, "Reset")):
        await _ack(wire, message)
    pop = cluster.brokers[0].context.pop
    assert pop is not None
    pop.reset("G", "Reset", {0: 1})
    assert [m.body for m in records(await _pop(wire, "Reset"))] == [b"m1", b"m2"]


async def test_an_admin_reset_by_time_reaches_pop_consumers(tmp_path: Path) -> None:
    from bolide.client.admin.client import AdminClient

    async with connected(tmp_path) as (cluster, wire):
        for index in range(3):
            await wire.send("ResetByTime", f"m{index}".encode(), queue_id=0)
        for message in records(await _pop(wire, "ResetByTime", group="Rewinder")):
            await _ack(wire, message, group="Rewinder")
        assert (await _pop(wire, "ResetByTime", group="Rewinder")).code == (
            ResponseCode.PULL_NOT_FOUND
        )
        admin = AdminClient(cluster.namesrv_address)
        await admin.start()
        try:
            await admin.reset_offset("Rewinder", "ResetByTime", 0)  # the earliest message
        finally:
            await admin.close()
        again = records(await _pop(wire, "ResetByTime", group="Rewinder"))
        assert [m.body for m in again] == [b"m0", b"m1", b"m2"]


async def test_a_topic_created_again_is_popped_from_its_new_start(connection: Connected) -> None:
    cluster, wire = connection
    for index in range(3):
        await wire.send("Again", f"old-{index}".encode(), queue_id=0)
    for message in records(await _pop(wire, "Again", queue_id=0)):
        await _ack(wire, message)
    context = cluster.brokers[0].context
    await context.topics.delete_topic("Again")
    context.store.delete_topic("Again")
    await wire.send("Again", b"new-0", queue_id=0)
    again = records(await _pop(wire, "Again", queue_id=0))
    assert [m.body for m in again] == [b"new-0"]
