"""Transactional messages on one broker over real sockets, on a manual clock (no sleeps):
half, commit, rollback, check-back, giving up, bad END_TRANSACTIONs, restarts."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bolide.base.clock import ManualClock
from bolide.broker.broker import Broker
from bolide.broker.topics import (
    TRANS_CHECK_MAX_TIME_TOPIC,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
)
from bolide.broker.transactions import TransactionService
from bolide.broker.transactions.records import (
    TRANSACTION_CONSUMER_GROUP,
    commit_request,
    parse_half,
)
from bolide.protocol.bodies.transaction import ResumeCheckHalfMessageRequestHeader
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.message import MessageSysFlag, PropertyKey, transaction_type
from bolide.protocol.msgid import offset_message_id
from bolide.protocol.record import decode_record
from bolide.testing.cluster import Cluster
from bolide.testing.waiting import until
from tests.broker.transaction_support import (
    COMMIT,
    ROLLBACK,
    WireProducer,
    pull_all,
    topic_messages,
)
from tests.integration.wire import batch_request

TOPIC = "orders"
GROUP = "tx-producers"
SETTINGS = {
    "transaction_check_interval_ms": 3_600_000,  # rounds run when a test says so
    "transaction_timeout_ms": 6_000,
    "transaction_check_max_count": 3,
    "default_topic_queue_nums": 2,
}


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    clock = ManualClock()
    async with Cluster(tmp_path, settings=SETTINGS, clock=clock) as running:
        yield running


@pytest.fixture
async def producer(cluster: Cluster) -> AsyncIterator[WireProducer]:
    wire = WireProducer(cluster.brokers[0].address, GROUP, "10.0.0.1@tx-1")
    await wire.heartbeat()
    yield wire
    await wire.close()


def service_of(broker: Broker) -> TransactionService:
    service = broker.context.transactions
    assert service is not None
    return service


def clock_of(broker: Broker) -> ManualClock:
    clock = broker.context.clock
    assert isinstance(clock, ManualClock)
    return clock


async def test_half_is_invisible_until_commit_then_delivered_once(
    cluster: Cluster, producer: WireProducer
) -> None:
    broker = cluster.brokers[0]
    half = await producer.send_half(TOPIC, b"order-17", queue_id=1)
    assert topic_messages(broker, TOPIC, 1) == []
    assert await pull_all(producer, TOPIC, 1) == []
    [stored] = topic_messages(broker, TRANS_HALF_TOPIC)
    assert stored.properties[PropertyKey.REAL_TOPIC] == TOPIC
    assert stored.properties[PropertyKey.REAL_QID] == "1"
    assert transaction_type(stored.sys_flag) == 0
    assert service_of(broker).pending_count == 1

    assert service_of(broker).half_messages_by_topic() == {TOPIC: 1}
    finished: list[tuple[str, int]] = []
    service_of(broker).on_finish = lambda topic, latency_ms: finished.append((topic, latency_ms))
    clock_of(broker).advance_ms(1_500)
    response = await producer.end(half, COMMIT)
    assert response.code == ResponseCode.SUCCESS
    assert finished == [(TOPIC, 1_500)]
    [delivered] = await pull_all(producer, TOPIC, 1)
    assert delivered.body == b"order-17"
    assert delivered.properties[PropertyKey.UNIQ_KEY] == half.unique_key
    assert transaction_type(delivered.sys_flag) == MessageSysFlag.TRANSACTION_COMMIT
    assert delivered.prepared_transaction_offset == half.commit_log_offset
    for name in (PropertyKey.REAL_TOPIC, PropertyKey.REAL_QID, "TRAN_MSG"):
        assert name not in delivered.properties
    [op] = topic_messages(broker, TRANS_OP_HALF_TOPIC)
    assert op.tags == "d"
    assert op.body == str(half.queue_offset).encode()
    assert service_of(broker).pending_count == 0

    again = await producer.end(half, COMMIT)  # stale: already decided, nothing changes
    assert again.code == ResponseCode.SYSTEM_ERROR
    assert again.remark is not None
    assert again.remark.startswith("Find prepared transaction message failed")
    assert len(topic_messages(broker, TOPIC, 1)) == 1
    assert len(topic_messages(broker, TRANS_OP_HALF_TOPIC)) == 1


async def test_rollback_is_never_delivered(cluster: Cluster, producer: WireProducer) -> None:
    broker = cluster.brokers[0]
    half = await producer.send_half(TOPIC, b"cancelled")
    response = await producer.end(half, ROLLBACK)
    assert response.code == ResponseCode.SUCCESS
    assert topic_messages(broker, TOPIC, 0) == []
    assert len(topic_messages(broker, TRANS_OP_HALF_TOPIC)) == 1
    clock_of(broker).advance_ms(60_000)
    assert await service_of(broker).check_once() == 0
    assert producer.checks.empty()
    assert topic_messages(broker, TOPIC, 0) == []


async def test_unknown_and_oneway_end_leave_the_half_pending(
    cluster: Cluster, producer: WireProducer
) -> None:
    broker = cluster.brokers[0]
    half = await producer.send_half(TOPIC, b"maybe")
    # commitOrRollback 0 (UNKNOW) gets no answer at all, as from a Java broker: send it
    # oneway, then a request that does get an answer, on the same connection, after it.
    await producer.pool.invoke_oneway(broker.address, producer.end_request(half, 0), 1_000)
    listing = service_of(broker).list_pending(broker.config.broker_name)
    assert listing.pending_count == 1
    assert topic_messages(broker, TOPIC, 0) == []
    await producer.pool.invoke_oneway(
        broker.address, producer.end_request(half, COMMIT, oneway=True), 1_000
    )
    await until(lambda: service_of(broker).pending_count == 0)
    assert len(topic_messages(broker, TOPIC, 0)) == 1


async def test_no_end_is_checked_back_then_committed(
    cluster: Cluster, producer: WireProducer
) -> None:
    broker = cluster.brokers[0]
    service = service_of(broker)
    half = await producer.send_half(TOPIC, b"late", queue_id=1)
    clock_of(broker).advance_ms(5_999)
    assert await service.check_once() == 0  # younger than transactionTimeOut
    clock_of(broker).advance_ms(2)
    assert await service.check_once() == 1
    check = await producer.next_check()
    assert check.header.msg_id == half.unique_key
    assert check.header.transaction_id == half.unique_key
    assert check.header.tran_state_table_offset == half.queue_offset + 1  # the re-appended copy
    assert check.header.commit_log_offset > half.commit_log_offset
    assert check.message.topic == TOPIC
    assert check.message.queue_id == 1
    assert check.message.body == b"late"
    assert check.message.properties[PropertyKey.TRANSACTION_CHECK_TIMES] == "1"
    assert check.message.properties["PGROUP"] == GROUP
    await producer.answer(check, COMMIT)
    await until(lambda: service.pending_count == 0)
    [delivered] = topic_messages(broker, TOPIC, 1)
    assert delivered.body == b"late"
    assert service.pending_count == 0
    assert service.list_pending("b").commit_count == 1


async def test_unknown_until_the_max_is_given_up(cluster: Cluster, producer: WireProducer) -> None:
    broker = cluster.brokers[0]
    service, clock = service_of(broker), clock_of(broker)
    await producer.send_half(TOPIC, b"never decided")
    seen = []
    for _ in range(3):  # transactionCheckMax = 3
        clock.advance_ms(6_001)
        assert await service.check_once() == 1
        check = await producer.next_check()
        seen.append(check.message.properties[PropertyKey.TRANSACTION_CHECK_TIMES])
        await producer.answer(check, 0)  # UNKNOW
    assert seen == ["1", "2", "3"]
    listing = service.list_pending(broker.config.broker_name)
    assert listing.half_messages[0].check_times == 3
    clock.advance_ms(6_001)
    assert await service.check_once() == 1
    assert producer.checks.empty()
    [given_up] = topic_messages(broker, TRANS_CHECK_MAX_TIME_TOPIC)
    assert given_up.body == b"never decided"
    assert given_up.properties[PropertyKey.REAL_TOPIC] == TOPIC
    assert service.pending_count == 0
    assert service.discard_count == 1
    assert topic_messages(broker, TOPIC, 0) == []


async def test_check_goes_to_another_producer_when_the_first_is_gone(
    cluster: Cluster, producer: WireProducer
) -> None:
    broker = cluster.brokers[0]
    other = WireProducer(broker.address, GROUP, "10.0.0.2@tx-2")
    try:
        await other.heartbeat()
        await producer.send_half(TOPIC, b"orphan")
        await producer.close()  # the first producer dies: its connection closes
        await until(lambda: len(broker.context.producers.producer_connections(GROUP)) == 1)
        clock_of(broker).advance_ms(6_001)
        assert await service_of(broker).check_once() == 1
        check = await other.next_check()
        await other.answer(check, COMMIT)
        await until(lambda: service_of(broker).pending_count == 0)
        assert len(topic_messages(broker, TOPIC, 0)) == 1
    finally:
        await other.close()


async def test_the_checker_service_runs_every_interval(tmp_path: Path) -> None:
    clock = ManualClock()
    settings = {**SETTINGS, "transaction_check_interval_ms": 10_000}
    async with Cluster(tmp_path, settings=settings, clock=clock) as cluster:
        wire = WireProducer(cluster.brokers[0].address, GROUP, "10.0.0.1@tx-1")
        try:
            await wire.heartbeat()
            await wire.send_half(TOPIC, b"by the loop")
            clock.advance_ms(10_001)  # the checker's sleep ends: a round runs on its own
            check = await wire.next_check()
            assert check.message.body == b"by the loop"
        finally:
            await wire.close()


@pytest.mark.parametrize(
    ("change", "remark"),
    [
        ({"commit_log_offset": 10**9}, "Find prepared transaction message failed"),
        ({"group": "another-group"}, "The producer group wrong"),
        ({"queue_offset": 7}, "The transaction state table offset wrong"),
    ],
)
async def test_wrong_end_transaction_changes_nothing(
    cluster: Cluster, producer: WireProducer, change: dict[str, object], remark: str
) -> None:
    broker = cluster.brokers[0]
    half = await producer.send_half(TOPIC, b"x")
    before = broker.context.store.stats().commit_log_max_offset
    response = await producer.end(half, COMMIT, **change)
    assert (response.code, response.remark) == (ResponseCode.SYSTEM_ERROR, remark)
    assert broker.context.store.stats().commit_log_max_offset == before
    assert service_of(broker).pending_count == 1
    assert topic_messages(broker, TOPIC, 0) == []


async def test_end_naming_an_ordinary_message_is_refused(
    cluster: Cluster, producer: WireProducer
) -> None:
    broker = cluster.brokers[0]
    half = await producer.send_half(TOPIC, b"x")
    await producer.end(half, COMMIT)
    [delivered] = topic_messages(broker, TOPIC, 0)
    response = await producer.end(
        half, ROLLBACK, commit_log_offset=delivered.commit_log_offset, queue_offset=0
    )
    assert response.code == ResponseCode.SYSTEM_ERROR
    assert response.remark == "Find prepared transaction message failed"


async def test_delayed_and_batched_transactional_messages_are_refused(
    cluster: Cluster, producer: WireProducer
) -> None:
    request, _ = producer.half_request(TOPIC, b"x", extra={PropertyKey.DELAY: "3"})
    response = await producer.invoke(request)
    assert response.code == ResponseCode.MESSAGE_ILLEGAL
    request, _ = producer.half_request(TOPIC, b"x", extra={PropertyKey.TIMER_DELAY_MS: "500"})
    assert (await producer.invoke(request)).code == ResponseCode.MESSAGE_ILLEGAL
    batch = batch_request(TOPIC, [b"a", b"b"], extra={"TRAN_MSG": "true"})
    assert (await producer.invoke(batch)).code == ResponseCode.MESSAGE_ILLEGAL
    assert service_of(cluster.brokers[0]).pending_count == 0


async def test_prepared_sys_flag_alone_is_a_half(cluster: Cluster, producer: WireProducer) -> None:
    half = await producer.send_half(TOPIC, b"cpp style", tran_msg=False)
    assert topic_messages(cluster.brokers[0], TOPIC, 0) == []
    assert (await producer.end(half, COMMIT)).code == ResponseCode.SUCCESS
    assert len(topic_messages(cluster.brokers[0], TOPIC, 0)) == 1


async def test_reject_transaction_message(tmp_path: Path) -> None:
    async with Cluster(tmp_path, settings={"reject_transaction_message": True}) as cluster:
        wire = WireProducer(cluster.brokers[0].address, GROUP, "10.0.0.1@tx-1")
        try:
            request, _ = wire.half_request(TOPIC, b"x")
            response = await wire.invoke(request)
            assert response.code == ResponseCode.NO_PERMISSION
            forbidden = "the broker[127.0.0.1] sending transaction message is forbidden"
            assert response.remark == forbidden
        finally:
            await wire.close()


async def test_pending_halves_survive_a_restart(tmp_path: Path) -> None:
    clock = ManualClock()
    async with Cluster(tmp_path, settings=SETTINGS, clock=clock) as cluster:
        wire = WireProducer(cluster.brokers[0].address, GROUP, "10.0.0.1@tx-1")
        committed = await wire.send_half(TOPIC, b"committed")
        pending = await wire.send_half(TOPIC, b"pending")
        await wire.end(committed, COMMIT)
        clock.advance_ms(6_001)
        await wire.heartbeat()
        await service_of(cluster.brokers[0]).check_once()  # one copy, check times 1
        await wire.close()
    offsets = (tmp_path / "broker-a" / "store" / "config" / "consumerOffset.json").read_text()
    assert f"{TRANS_HALF_TOPIC}@{TRANSACTION_CONSUMER_GROUP}" in offsets
    async with Cluster(tmp_path, settings=SETTINGS, clock=clock) as cluster:
        broker = cluster.brokers[0]
        listing = service_of(broker).list_pending(broker.config.broker_name)
        assert [info.msg_id for info in listing.half_messages] == [pending.unique_key]
        assert listing.half_messages[0].check_times == 1
        wire = WireProducer(broker.address, GROUP, "10.0.0.1@tx-1")
        try:
            await wire.heartbeat()
            clock.advance_ms(6_001)
            await service_of(broker).check_once()
            check = await wire.next_check()
            assert check.message.properties[PropertyKey.TRANSACTION_CHECK_TIMES] == "2"
            await wire.answer(check, COMMIT)
            await until(lambda: service_of(broker).pending_count == 0)
            bodies = [message.body for message in topic_messages(broker, TOPIC, 0)]
            assert sorted(bodies) == [b"committed", b"pending"]
        finally:
            await wire.close()


async def test_a_commit_whose_op_was_lost_is_settled_by_the_index_at_restart(
    tmp_path: Path,
) -> None:
    clock = ManualClock()
    async with Cluster(tmp_path, settings=SETTINGS, clock=clock) as cluster:
        broker = cluster.brokers[0]
        wire = WireProducer(broker.address, GROUP, "10.0.0.1@tx-1")
        half = await wire.send_half(TOPIC, b"committed, then the broker died")
        await wire.close()
        # What END_TRANSACTION does up to the crash: the commit is stored, its op is not.
        raw = broker.context.store.read_record(half.commit_log_offset)
        assert raw is not None
        message, _ = decode_record(raw, decompress=False)
        result = await broker.context.store.put_message(
            commit_request(message, parse_half(message))
        )
        assert result.ok
        assert service_of(broker).pending_count == 1
    async with Cluster(tmp_path, settings=SETTINGS, clock=clock) as cluster:
        broker = cluster.brokers[0]
        service = service_of(broker)
        assert service.pending_count == 0
        [op] = topic_messages(broker, TRANS_OP_HALF_TOPIC)
        assert op.body == str(half.queue_offset).encode()
        clock.advance_ms(60_000)
        assert await service.check_once() == 0
        assert len(topic_messages(broker, TOPIC, 0)) == 1


async def test_a_given_up_transaction_can_be_resumed_once(
    cluster: Cluster, producer: WireProducer
) -> None:
    broker = cluster.brokers[0]
    service, clock = service_of(broker), clock_of(broker)
    await producer.send_half(TOPIC, b"resume me")
    for _ in range(4):  # three unanswered checks, then given up
        clock.advance_ms(6_001)
        await service.check_once()
    assert service.discard_count == 1
    [given_up] = service.list_given_up(broker.config.broker_name).half_messages
    assert given_up.check_times == 3
    not_given_up = RemotingCommand.request(
        RequestCode.RESUME_CHECK_HALF_MESSAGE,
        ResumeCheckHalfMessageRequestHeader(
            offset_message_id(("127.0.0.1", broker.port), 0)
        ).to_ext_fields(),
    )
    refused = await producer.invoke(not_given_up)
    assert refused.code == ResponseCode.SYSTEM_ERROR
    assert "is not a message of TRANS_CHECK_MAX_TIME_TOPIC" in (refused.remark or "")

    request = RemotingCommand.request(
        RequestCode.RESUME_CHECK_HALF_MESSAGE,
        ResumeCheckHalfMessageRequestHeader(given_up.offset_msg_id).to_ext_fields(),
    )
    assert (await producer.invoke(request)).code == ResponseCode.SUCCESS
    [pending] = service.list_pending(broker.config.broker_name).half_messages
    assert (pending.check_times, pending.age_ms) == (0, 0)
    again = await producer.invoke(request)  # already pending: refused
    assert again.code == ResponseCode.SYSTEM_ERROR
    while not producer.checks.empty():
        producer.checks.get_nowait()
    clock.advance_ms(6_001)
    assert await service.check_once() == 1
    check = await producer.next_check()
    assert check.message.properties[PropertyKey.TRANSACTION_CHECK_TIMES] == "1"
    await producer.answer(check, COMMIT)
    await until(lambda: service.pending_count == 0)
    assert [m.body for m in topic_messages(broker, TOPIC, 0)] == [b"resume me"]
    committed = await producer.invoke(request)  # committed now: resuming would deliver twice
    assert committed.code == ResponseCode.SYSTEM_ERROR
    assert "was committed" in (committed.remark or "")
    assert len(topic_messages(broker, TOPIC, 0)) == 1


async def test_check_immunity_time_delays_the_first_check(
    cluster: Cluster, producer: WireProducer
) -> None:
    broker = cluster.brokers[0]
    service, clock = service_of(broker), clock_of(broker)
    await producer.send_half(TOPIC, b"slow", extra={"CHECK_IMMUNITY_TIME_IN_SECONDS": "60"})
    clock.advance_ms(59_999)
    assert await service.check_once() == 0  # transactionTimeOut (6 s) does not apply
    clock.advance_ms(1)
    assert await service.check_once() == 1
    check = await producer.next_check()
    assert check.message.properties["CHECK_IMMUNITY_TIME_IN_SECONDS"] == "60"
