"""POP retries through the group's retry topic (issue 29, finding 6): an expired message comes
back as a copy in ``%RETRY%<group>_<topic>`` (1 queue, perm 6) with one more reconsume time,
its first pop time and its origin, so the group's offset on the normal queue moves on; acks
and invisible-time changes of the copy reach the retry topic through the handle's topic type;
after max attempts the DLQ copy carries the number of deliveries."""

from __future__ import annotations

from pathlib import Path

from bolide.base.clock import ManualClock
from bolide.protocol.bodies import SubscriptionGroupConfig
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers.pop import (
    FIRST_POP_TIME_PROPERTY,
    POP_CK_PROPERTY,
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    PopMessageRequestHeader,
    PopTopicType,
    ReceiptHandle,
)
from bolide.protocol.message import MessageExt, PropertyKey
from bolide.testing.cluster import Cluster
from tests.integration.wire import BrokerWire, connected, records

RETRY = "%RETRY%G_Orders"


async def _pop(
    wire: BrokerWire, topic: str = "Orders", invisible_ms: int = 5_000, count: int = 32
) -> list[MessageExt]:
    header = PopMessageRequestHeader("G", topic, -1, count, invisible_ms, 0, 0)
    response = await wire.invoke(
        RemotingCommand.request(RequestCode.POP_MESSAGE, header.to_ext_fields())
    )
    if response.code == ResponseCode.PULL_NOT_FOUND:
        return []
    assert response.code == ResponseCode.SUCCESS, response.remark
    return records(response)


def _handle(message: MessageExt) -> ReceiptHandle:
    return ReceiptHandle.decode(message.properties[POP_CK_PROPERTY])


async def _ack(wire: BrokerWire, message: MessageExt) -> None:
    handle = _handle(message)
    header = AckMessageRequestHeader(
        "G", "Orders", handle.queue_id, handle.encode(), handle.queue_offset
    )
    response = await wire.invoke(
        RemotingCommand.request(RequestCode.ACK_MESSAGE, header.to_ext_fields())
    )
    assert response.code == ResponseCode.SUCCESS


async def _expire(cluster: Cluster, clock: ManualClock, ms: int) -> None:
    clock.advance_ms(ms)
    pop = cluster.brokers[0].context.pop
    assert pop is not None
    await pop.revive_step()


async def test_an_expired_message_comes_back_through_the_retry_topic(tmp_path: Path) -> None:
    clock = ManualClock()
    async with connected(tmp_path, clock=clock) as (cluster, wire):
        context = cluster.brokers[0].context
        for index in range(3):
            await wire.send("Orders", f"m{index}".encode(), tags="t", queue_id=0)
        first = await _pop(wire)
        assert [m.body for m in first] == [b"m0", b"m1", b"m2"]
        await _ack(wire, first[0])
        assert context.offsets.query_offset("G", "Orders", 0) == 1  # m1 holds it back
        await _expire(cluster, clock, 5_000)
        # the group's offset on the normal queue moved on: m1 and m2 are retry copies now
        assert context.offsets.query_offset("G", "Orders", 0) == 3
        retry = context.topics.find(RETRY)
        assert retry is not None
        assert (retry.read_queue_count, retry.write_queue_count, retry.perm) == (1, 1, 6)
        again = await _pop(wire)
        assert [m.body for m in again] == [b"m1", b"m2"]
        assert all(m.topic == RETRY for m in again)  # as Java's broker hands them over
        assert [m.reconsume_times for m in again] == [1, 1]
        assert [m.msg_id for m in again] == [m.msg_id for m in first[1:]]
        m1 = again[0]
        assert m1.properties[PropertyKey.RETRY_TOPIC] == "Orders"
        assert m1.properties[PropertyKey.TAGS] == "t"
        assert int(m1.properties[FIRST_POP_TIME_PROPERTY]) == _handle(first[1]).pop_time_ms
        handle = _handle(m1)
        assert handle.topic_type == PopTopicType.RETRY and handle.queue_id == 0
        await _ack(wire, m1)  # reaches the retry topic through the handle's topic type
        assert context.offsets.query_offset("G", RETRY, 0) == 1
        change = ChangeInvisibleTimeRequestHeader(
            "G", "Orders", 0, _handle(again[1]).encode(), _handle(again[1]).queue_offset, 60_000
        )
        response = await wire.invoke(
            RemotingCommand.request(
                RequestCode.CHANGE_MESSAGE_INVISIBLETIME, change.to_ext_fields()
            )
        )
        assert response.code == ResponseCode.SUCCESS
        await _expire(cluster, clock, 10_000)
        assert await _pop(wire) == []  # m2 stays hidden for its new minute
        await _expire(cluster, clock, 60_000)
        third = await _pop(wire)
        assert [(m.body, m.reconsume_times) for m in third] == [(b"m2", 2)]
        assert (
            context.store.max_offset(RETRY, 0) == 3
        )  # the copy of a copy stays in the retry topic


async def test_the_dead_letter_copy_counts_the_deliveries(tmp_path: Path) -> None:
    clock = ManualClock()
    async with connected(tmp_path, clock=clock) as (cluster, wire):
        context = cluster.brokers[0].context
        await context.groups.update(SubscriptionGroupConfig("G", retry_max_times=1))
        await wire.send("Orders", b"poison", keys="poison", queue_id=0)
        assert [m.reconsume_times for m in await _pop(wire)] == [0]
        await _expire(cluster, clock, 5_000)
        assert [m.reconsume_times for m in await _pop(wire)] == [1]
        await _expire(cluster, clock, 5_000)  # two deliveries = retryMaxTimes + 1
        assert await _pop(wire) == []
        assert context.store.max_offset("%DLQ%G", 0) == 1
        dead = context.store.get_message("%DLQ%G", 0, 0, 1, 1 << 20, None)
        (copy,) = records_of(dead.buffers)
        assert copy.body == b"poison" and copy.reconsume_times == 2
        assert context.offsets.query_offset("G", RETRY, 0) == 1
        assert context.offsets.query_offset("G", "Orders", 0) == 1


async def test_a_pop_tops_its_batch_up_from_the_retry_topic(tmp_path: Path) -> None:
    clock = ManualClock()
    async with connected(tmp_path, clock=clock) as (cluster, wire):
        await wire.send("Orders", b"old", queue_id=0)
        await _pop(wire)
        await _expire(cluster, clock, 5_000)
        await wire.send("Orders", b"new", queue_id=1)
        got = await _pop(wire)
        assert sorted(m.body for m in got) == [b"new", b"old"]


async def test_orderly_groups_get_expired_messages_back_in_place(tmp_path: Path) -> None:
    clock = ManualClock()
    async with connected(tmp_path, clock=clock) as (cluster, wire):
        context = cluster.brokers[0].context
        await context.groups.update(SubscriptionGroupConfig("G", consume_orderly_enable=True))
        await wire.send("Orders", b"a", queue_id=0)
        header = PopMessageRequestHeader("G", "Orders", 0, 32, 5_000, 0, 0, order=True)
        request = RemotingCommand.request(RequestCode.POP_MESSAGE, header.to_ext_fields())
        assert [m.body for m in records(await wire.invoke(request))] == [b"a"]
        await _expire(cluster, clock, 5_000)
        assert context.topics.find(RETRY) is None
        again = records(await wire.invoke(request))
        assert [(m.body, m.reconsume_times) for m in again] == [(b"a", 1)]


def records_of(buffers: list[memoryview]) -> list[MessageExt]:
    from bolide.protocol.record import decode_records

    return decode_records(b"".join(buffers))


async def test_a_pop_reads_the_retry_topic_first_one_time_in_five(tmp_path: Path) -> None:
    """popFromRetryProbability 20 %: with both the retry topic and the queue full, pops of one
    message take the retry copy first about one time in five (the broker's seeded rng)."""
    clock = ManualClock()
    async with connected(tmp_path, clock=clock, seed=7) as (cluster, wire):
        for index in range(60):
            await wire.send("Orders", f"old{index}".encode(), queue_id=0)
        assert len(await _pop(wire)) == 32
        assert len(await _pop(wire)) == 28
        await _expire(cluster, clock, 5_000)  # all 60 are retry copies now
        for index in range(60):
            await wire.send("Orders", f"new{index}".encode(), queue_id=0)
        kinds = []
        for _ in range(50):
            (message,) = await _pop(wire, count=1)
            kinds.append(_handle(message).topic_type)
        retried_first = kinds.count(PopTopicType.RETRY)
        assert 3 <= retried_first <= 20, kinds


async def test_a_message_past_its_attempts_goes_to_the_dlq_instead_of_out(tmp_path: Path) -> None:
    """A message whose reconsume times already reach the group's max attempts (here stored
    with 5, retryMaxTimes 1) is not handed over: it goes to the DLQ, as Apache's proxy does
    (TO_DLQ); the others popped with it are delivered."""
    clock = ManualClock()
    async with connected(tmp_path, clock=clock) as (cluster, wire):
        context = cluster.brokers[0].context
        await context.groups.update(SubscriptionGroupConfig("G", retry_max_times=1))
        await wire.send("Orders", b"fine", queue_id=0)
        await wire.send("Orders", b"spent", queue_id=0, reconsume_times=5)
        assert [m.body for m in await _pop(wire)] == [b"fine"]
        await _expire(cluster, clock, 0)
        assert context.store.max_offset("%DLQ%G", 0) == 1
        dead = context.store.get_message("%DLQ%G", 0, 0, 1, 1 << 20, None)
        assert [m.body for m in records_of(dead.buffers)] == [b"spent"]
        assert context.offsets.query_offset("G", "Orders", 0) == 0  # "fine" is in flight


async def test_an_ack_naming_the_retry_topic_reaches_it(tmp_path: Path) -> None:
    """Java's POP clients ack a retry copy under its retry topic's name."""
    clock = ManualClock()
    async with connected(tmp_path, clock=clock) as (cluster, wire):
        await wire.send("Orders", b"again", queue_id=0)
        await _pop(wire)
        await _expire(cluster, clock, 5_000)
        (copy,) = await _pop(wire)
        handle = _handle(copy)
        header = AckMessageRequestHeader("G", RETRY, 0, handle.encode(), handle.queue_offset)
        response = await wire.invoke(
            RemotingCommand.request(RequestCode.ACK_MESSAGE, header.to_ext_fields())
        )
        assert response.code == ResponseCode.SUCCESS
        assert cluster.brokers[0].context.offsets.query_offset("G", RETRY, 0) == 1
        await _expire(cluster, clock, 10_000)
        assert await _pop(wire) == []  # acked: it does not come back


async def test_retry_topic_v2_names_and_still_reads_v1(tmp_path: Path) -> None:
    """enableRetryTopicV2: copies go to ``%RETRY%G+Orders`` (handle topic type 2, acks reach
    it); what the V1 topic held before the switch is still delivered."""
    clock = ManualClock()
    settings = {"enableRetryTopicV2": "true"}
    async with connected(tmp_path, clock=clock, settings=settings) as (cluster, wire):
        context = cluster.brokers[0].context
        await wire.send("Orders", b"old", queue_id=0)
        # a copy left in the V1 topic before the switch (stored as the V1 service did)
        await context.topics.create_topic_in_send_back(RETRY, 1, 6)
        await wire.send(RETRY, b"from-v1", queue_id=0)
        await wire.send("Orders", b"m0", queue_id=0)
        first = await _pop(wire)
        bodies = sorted(m.body for m in first)
        assert bodies == [b"from-v1", b"m0", b"old"]
        await _expire(cluster, clock, 5_000)
        v2 = "%RETRY%G+Orders"
        config = context.topics.find(v2)
        assert config is not None and (config.read_queue_count, config.perm) == (1, 6)
        # the three expired: the two from Orders are copied to V2, the V1 copy stays in V1
        assert context.store.max_offset(v2, 0) == 2
        assert context.store.max_offset(RETRY, 0) == 2
        again = await _pop(wire)
        assert sorted(m.body for m in again) == [b"from-v1", b"m0", b"old"]
        by_body = {m.body: m for m in again}
        assert by_body[b"m0"].topic == v2
        assert _handle(by_body[b"m0"]).topic_type == PopTopicType.RETRY_V2
        assert _handle(by_body[b"from-v1"]).topic_type == PopTopicType.RETRY
        for message in again:
            await _ack(wire, message)
        assert context.offsets.query_offset("G", v2, 0) == 2
        assert context.offsets.query_offset("G", RETRY, 0) == 2


async def test_retry_topic_v2_can_leave_v1_unread(tmp_path: Path) -> None:
    clock = ManualClock()
    settings = {"enableRetryTopicV2": "true", "retrieveMessageFromPopRetryTopicV1": "false"}
    async with connected(tmp_path, clock=clock, settings=settings) as (cluster, wire):
        await cluster.brokers[0].context.topics.create_topic_in_send_back(RETRY, 1, 6)
        await wire.send(RETRY, b"from-v1", queue_id=0)
        await wire.send("Orders", b"m0", queue_id=0)
        assert [m.body for m in await _pop(wire)] == [b"m0"]
