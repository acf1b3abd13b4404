"""Broker-side trace (traceOnBrokerEnable=true) with clients that write no trace themselves:
the broker records the put, each delivery and its result, send-backs and the dead letter,
and QUERY_MESSAGE on RMQ_SYS_TRACE_TOPIC by message id finds them."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bolide.client.admin import AdminClient
from bolide.client.admin.trace import message_trace
from bolide.client.config import ConsumeFrom
from bolide.client.consumer.listener import ConsumeResult
from bolide.client.consumer.options import ConsumerOptions
from bolide.client.consumer.push_consumer import PushConsumer
from bolide.client.message import Message as ClientMessage
from bolide.client.producer.producer import Producer
from bolide.client.producer.transaction import LocalTransactionState, TransactionProducer
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers.recall import RecallHandle, RecallMessageRequestHeader
from bolide.protocol.message import Message, MessageExt
from bolide.protocol.system_topics import DEFAULT_TRACE_TOPIC
from bolide.protocol.trace import TraceMessageType, TraceType, decode_records
from bolide.remoting import ClientPool
from bolide.testing.cluster import Cluster
from bolide.testing.waiting import until

pytestmark = pytest.mark.timeout(120)

TOPIC = "TracedOrders"
WAIT_S = 30.0
SETTINGS = {
    "traceOnBrokerEnable": "true",
    "messageDelayLevel": "1s 1s 1s 1s 1s 1s",  # send-backs use levels 3 + retry count
}


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    async with Cluster(tmp_path, settings=SETTINGS) as running:
        yield running


async def _consume(
    cluster: Cluster, group: str, result: ConsumeResult, max_reconsume_times: int = -1
) -> tuple[PushConsumer, asyncio.Queue[MessageExt]]:
    seen: asyncio.Queue[MessageExt] = asyncio.Queue()

    async def listener(messages: list[MessageExt]) -> ConsumeResult:
        for message in messages:
            seen.put_nowait(message)
        return result

    consumer = PushConsumer(
        group,
        cluster.namesrv_address,
        consume_from=ConsumeFrom.FIRST_OFFSET,
        options=ConsumerOptions(max_reconsume_times=max_reconsume_times),
    )
    consumer.subscribe(TOPIC)
    consumer.register_listener(listener)
    await consumer.start()
    return consumer, seen


async def test_put_delivery_and_consume_result_are_traced(cluster: Cluster) -> None:
    broker = cluster.broker("broker-a")
    trace = broker.context.trace
    assert trace is not None
    async with AdminClient(cluster.namesrv_address) as admin:
        await admin.create_topic(TOPIC, queue_count=1)
        async with Producer("TracedProducers", cluster.namesrv_address) as producer:
            sent = await producer.send(Message(TOPIC, b"hello", keys="order-7 vip", tags="T"))
        consumer, seen = await _consume(cluster, "TracedBilling", ConsumeResult.SUCCESS)
        try:
            async with asyncio.timeout(WAIT_S):
                await seen.get()
            offsets = broker.context.offsets
            await until(lambda: offsets.query_offset("TracedBilling", TOPIC, 0) == 1,
                        deadline_s=WAIT_S)  # fmt: skip
        finally:
            await consumer.shutdown()
        await trace.flush()
        found = await message_trace(admin, sent.msg_id)
        # the trace message is found by the user key too, as by the msgId
        by_key = await admin.query_by_key(DEFAULT_TRACE_TOPIC, "order-7")
    assert found.undecodable == []
    kinds = [step.record.type for step in found.steps]
    assert kinds == [TraceType.PUB, TraceType.SUB_BEFORE, TraceType.SUB_AFTER]
    pub, before, after = (step.record for step in found.steps)
    assert (pub.topic, pub.msg_id, pub.keys, pub.tags) == (TOPIC, sent.msg_id, "order-7 vip", "T")
    assert pub.message_type is TraceMessageType.NORMAL_MSG
    assert pub.offset_msg_id == sent.offset_msg_id and pub.body_length == 5
    assert pub.store_host == broker.address
    assert (before.group, before.retry_times) == ("TracedBilling", 0)
    assert (after.group, after.success, after.context_code) == ("TracedBilling", True, 0)
    assert after.request_id == before.request_id != ""
    assert after.timestamp_ms >= before.timestamp_ms >= pub.timestamp_ms
    assert [step.status for step in found.steps] == ["success", "delivered", "success"]
    assert any(
        record.msg_id == sent.msg_id
        for message in by_key
        for record in decode_records(message.body.decode())
    )


async def test_retried_twice_then_dead_lettered(cluster: Cluster) -> None:
    broker = cluster.broker("broker-a")
    trace = broker.context.trace
    assert trace is not None
    group = "TracedFailures"
    async with AdminClient(cluster.namesrv_address) as admin:
        await admin.create_topic(TOPIC, queue_count=1)
        async with Producer("TracedProducers", cluster.namesrv_address) as producer:
            sent = await producer.send(Message(TOPIC, b"poison", keys="bad-1"))
        consumer, seen = await _consume(
            cluster, group, ConsumeResult.RECONSUME_LATER, max_reconsume_times=2
        )
        store = broker.context.store
        try:
            async with asyncio.timeout(WAIT_S):
                for _ in range(3):  # the first delivery and two retries
                    await seen.get()
            await until(lambda: store.max_offset(f"%DLQ%{group}", 0) == 1, deadline_s=WAIT_S)
        finally:
            await consumer.shutdown()
        await trace.flush()
        found = await message_trace(admin, sent.msg_id)
    kinds = [(step.record.type, step.status) for step in found.steps]
    assert kinds == [
        (TraceType.PUB, "success"),
        (TraceType.SUB_BEFORE, "delivered"),
        (TraceType.SUB_AFTER, "failed"),
        (TraceType.SUB_BEFORE, "delivered"),
        (TraceType.SUB_AFTER, "failed"),
        (TraceType.SUB_BEFORE, "delivered"),
        (TraceType.SUB_AFTER, "failed"),
        (TraceType.PUB, "success"),
    ]
    records = [step.record for step in found.steps]
    assert [r.retry_times for r in records if r.type is TraceType.SUB_BEFORE] == [0, 1, 2]
    befores = [r.request_id for r in records if r.type is TraceType.SUB_BEFORE]
    afters = [r.request_id for r in records if r.type is TraceType.SUB_AFTER]
    assert befores == afters and len(set(befores)) == 3  # each result closes its delivery
    assert all(r.context_code == 4 for r in records if r.type is TraceType.SUB_AFTER)
    assert records[-1].topic == f"%DLQ%{group}" and records[-1].group == group


async def test_trace_off_by_default_and_trace_topic_not_traced(tmp_path: Path) -> None:
    async with Cluster(tmp_path) as plain:
        assert plain.broker("broker-a").context.trace is None
    async with Cluster(tmp_path / "on", settings=SETTINGS) as cluster:
        trace = cluster.broker("broker-a").context.trace
        assert trace is not None
        async with Producer("TracedProducers", cluster.namesrv_address) as producer:
            await producer.send(Message(TOPIC, b"one"))
        assert await trace.flush() == 1  # its Pub
        assert await trace.flush() == 0  # the trace message itself gives no record
        assert trace.records_written == 1 and trace.dropped == 0


async def test_transaction_ends_are_traced(cluster: Cluster) -> None:
    trace = cluster.broker("broker-a").context.trace
    assert trace is not None

    def never_asked(message: MessageExt) -> LocalTransactionState:
        raise AssertionError("no check expected")

    sent: dict[LocalTransactionState, str] = {}
    async with TransactionProducer(
        "TracedTx", cluster.namesrv_address, checker=never_asked
    ) as producer:
        for state in (LocalTransactionState.COMMIT_MESSAGE, LocalTransactionState.ROLLBACK_MESSAGE):

            def decide(
                message: ClientMessage, arg: object, decided: LocalTransactionState = state
            ) -> LocalTransactionState:
                return decided

            result = await producer.send_in_transaction(
                ClientMessage(TOPIC, b"tx", keys=f"tx-{state.name}"), decide
            )
            sent[state] = result.msg_id
    async with AdminClient(cluster.namesrv_address) as admin:
        ends: dict[str, list[tuple[TraceType, str]]] = {}
        async with asyncio.timeout(WAIT_S):  # END_TRANSACTION is oneway: until both settled
            while len(ends) < 2:
                await trace.flush()
                for state, msg_id in sent.items():
                    found = await message_trace(admin, msg_id)
                    steps = [(s.record.type, s.status) for s in found.steps]
                    if len(steps) == 2:
                        ends[state.name] = steps
                await asyncio.sleep(0.05)  # the oneway request's turn on the broker
    assert ends["COMMIT_MESSAGE"] == [
        (TraceType.PUB, "success"), (TraceType.END_TRANSACTION, "COMMIT_MESSAGE")
    ]  # fmt: skip
    assert ends["ROLLBACK_MESSAGE"] == [
        (TraceType.PUB, "success"), (TraceType.END_TRANSACTION, "ROLLBACK_MESSAGE")
    ]  # fmt: skip
    async with AdminClient(cluster.namesrv_address) as admin:
        found = await message_trace(admin, sent[LocalTransactionState.COMMIT_MESSAGE])
    pub, end = (step.record for step in found.steps)
    assert pub.message_type is TraceMessageType.TRANS_MSG_HALF and pub.topic == TOPIC
    assert (end.group, end.topic, end.keys) == ("TracedTx", TOPIC, "tx-COMMIT_MESSAGE")
    assert end.transaction_id == end.msg_id and end.from_transaction_check is False


async def test_delayed_message_put_and_arrival(cluster: Cluster) -> None:
    broker = cluster.broker("broker-a")
    trace = broker.context.trace
    assert trace is not None
    async with AdminClient(cluster.namesrv_address) as admin:
        await admin.create_topic(TOPIC, queue_count=1)
        async with Producer("TracedProducers", cluster.namesrv_address) as producer:
            sent = await producer.send(Message(TOPIC, b"later", keys="late-1", delay_level=1))
        store = broker.context.store
        await until(lambda: store.max_offset(TOPIC, 0) == 1, deadline_s=WAIT_S)  # arrived
        await trace.flush()
        found = await message_trace(admin, sent.msg_id)
    put, arrival = (step.record for step in found.steps)
    assert (put.type, put.topic, put.message_type) == (
        TraceType.PUB, TOPIC, TraceMessageType.DELAY_MSG
    )  # fmt: skip
    assert (arrival.type, arrival.topic, arrival.message_type) == (
        TraceType.PUB, TOPIC, TraceMessageType.DELAY_MSG
    )  # fmt: skip
    assert arrival.timestamp_ms >= put.timestamp_ms + 1_000  # level 1 waits 1 s
    assert arrival.offset_msg_id != put.offset_msg_id  # the record consumers read


async def _recall(cluster: Cluster, topic: str, handle: str) -> RemotingCommand:
    header = RecallMessageRequestHeader(topic, handle, producer_group="Recallers")
    pool = ClientPool()
    try:
        request = RemotingCommand.request(RequestCode.RECALL_MESSAGE, header.to_ext_fields())
        return await pool.invoke(cluster.broker("broker-a").address, request, 10_000)
    finally:
        await pool.close()


async def test_a_recalled_timer_message_shows_its_put_and_its_recall(cluster: Cluster) -> None:
    broker = cluster.broker("broker-a")
    trace = broker.context.trace
    assert trace is not None
    due_ms = int(time.time() * 1000) + 600_000
    async with AdminClient(cluster.namesrv_address) as admin:
        await admin.create_topic(TOPIC, queue_count=1)
        async with Producer("Recallers", cluster.namesrv_address) as producer:
            message = ClientMessage(TOPIC, b"never", keys="recall-1")
            message.deliver_at_ms = due_ms
            sent = await producer.send(message)
        handle = RecallHandle(TOPIC, broker.context.config.broker_name, due_ms, sent.msg_id)
        recalled = await _recall(cluster, TOPIC, handle.encode())
        assert recalled.code == ResponseCode.SUCCESS, recalled.remark
        assert recalled.ext_fields["MSG_REGION"] == "DefaultRegion"
        late = RecallHandle(TOPIC, handle.broker_name, int(time.time() * 1000) - 1, "ID-LATE")
        refused = await _recall(cluster, TOPIC, late.encode())
        assert refused.code == ResponseCode.SYSTEM_ERROR
        assert refused.ext_fields["MSG_REGION"] == "DefaultRegion"
        await trace.flush()
        found = await message_trace(admin, sent.msg_id)
        failed = await message_trace(admin, "ID-LATE")
    put, recall = (step.record for step in found.steps)
    assert (put.type, put.message_type) == (TraceType.PUB, TraceMessageType.DELAY_MSG)
    assert (recall.type, recall.group, recall.topic, recall.success) == (
        TraceType.RECALL, "Recallers", TOPIC, True
    )  # fmt: skip
    assert recall.region_id == "DefaultRegion"
    assert [(s.record.type, s.status) for s in failed.steps] == [(TraceType.RECALL, "failed")]
