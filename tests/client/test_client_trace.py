"""Bolide's own client trace (``enable_trace=True``) against a broker that writes none: the
producer's Pub and the push consumer's SubBefore / SubAfter records decode with the 4.x
layout and are found on the trace topic by message id and by user key; a transaction producer
traces its halves and its END_TRANSACTIONs (check-back answers too), an orderly push consumer
each listener call."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bolide.client.admin import AdminClient
from bolide.client.admin.trace import message_trace
from bolide.client.config import ConsumeFrom
from bolide.client.consumer.listener import ConsumeResult, OrderlyResult
from bolide.client.consumer.options import ConsumerOptions
from bolide.client.consumer.push_consumer import PushConsumer
from bolide.client.message import Message as ClientMessage
from bolide.client.producer.producer import Producer
from bolide.client.producer.transaction import LocalTransactionState, TransactionProducer
from bolide.protocol.message import Message, MessageExt, PropertyKey
from bolide.protocol.system_topics import DEFAULT_TRACE_TOPIC
from bolide.protocol.trace import TraceMessageType, TraceRecord, TraceType, decode_records
from bolide.testing.cluster import Cluster

pytestmark = pytest.mark.timeout(120)

TOPIC, GROUP = "ClientTraced", "ClientTraceReaders"
WAIT_S = 30.0


async def test_producer_and_consumer_write_their_own_trace(tmp_path: Path) -> None:
    attempts: list[int] = []
    done = asyncio.Event()

    async def listener(messages: list[MessageExt]) -> ConsumeResult:
        attempts.append(messages[0].reconsume_times)
        done.set()
        return ConsumeResult.SUCCESS

    settings = {"traceTopicEnable": "true"}  # as a Java broker needs it for client trace
    async with Cluster(tmp_path, settings=settings) as cluster:
        broker = cluster.broker("broker-a")
        assert broker.context.trace is None  # the broker writes nothing
        async with AdminClient(cluster.namesrv_address) as admin:
            await admin.create_topic(TOPIC, queue_count=1)
            consumer = PushConsumer(
                GROUP,
                cluster.namesrv_address,
                consume_from=ConsumeFrom.FIRST_OFFSET,
                enable_trace=True,
            )
            consumer.subscribe(TOPIC)
            consumer.register_listener(listener)
            await consumer.start()
            try:
                async with Producer(
                    "ClientTraceProducers", cluster.namesrv_address, enable_trace=True
                ) as producer:
                    sent = await producer.send(
                        Message(TOPIC, b"traced by the client", keys="ct-1", tags="T")
                    )
                    assert producer.trace is not None
                    assert await producer.trace.flush() == 1  # its Pub, now (not in 5 s)
                async with asyncio.timeout(WAIT_S):
                    await done.wait()
            finally:
                await consumer.shutdown()  # sends what it gathered
            assert consumer.trace is not None and consumer.trace.sent_records == 2
            found = await message_trace(admin, sent.msg_id)
            by_key = await admin.query_by_key(DEFAULT_TRACE_TOPIC, "ct-1")
    steps = [(s.record.type, s.record.group, s.status) for s in found.steps]
    assert steps == [
        (TraceType.PUB, "ClientTraceProducers", "success"),
        (TraceType.SUB_BEFORE, GROUP, "delivered"),
        (TraceType.SUB_AFTER, GROUP, "success"),
    ]
    pub, before, after = (s.record for s in found.steps)
    assert (pub.topic, pub.tags, pub.keys, pub.body_length) == (TOPIC, "T", "ct-1", 20)
    assert pub.message_type is TraceMessageType.NORMAL_MSG
    assert pub.offset_msg_id == sent.offset_msg_id
    assert pub.store_host == broker.address
    assert before.request_id == after.request_id and before.retry_times == 0
    assert after.context_code == 0 and after.timestamp_ms >= before.timestamp_ms
    assert attempts == [0]
    mentioned = {
        (record.type, record.msg_id)
        for message in by_key
        for record in decode_records(message.body.decode())
    }
    assert (TraceType.PUB, sent.msg_id) in mentioned
    assert (TraceType.SUB_AFTER, sent.msg_id) in mentioned


async def _client_trace(admin: AdminClient, msg_id: str, count: int) -> list[TraceRecord]:
    """The trace of ``msg_id`` once it holds ``count`` records (trace sends are async)."""
    async with asyncio.timeout(WAIT_S):
        while True:
            found = await message_trace(admin, msg_id)
            if len(found.steps) >= count:
                return [step.record for step in found.steps]
            await asyncio.sleep(0.05)


async def test_transaction_producer_traces_its_halves_and_ends(tmp_path: Path) -> None:
    async def check(message: MessageExt) -> LocalTransactionState:
        return LocalTransactionState.COMMIT_MESSAGE

    def decide_by_key(message: ClientMessage, arg: object) -> LocalTransactionState:
        return LocalTransactionState[message.properties[PropertyKey.KEYS]]

    settings = {"traceTopicEnable": "true", "transactionTimeOut": "0"}
    async with Cluster(tmp_path, settings=settings) as cluster:
        broker = cluster.broker("broker-a")
        async with AdminClient(cluster.namesrv_address) as admin:
            await admin.create_topic(TOPIC, queue_count=1)
            producer = TransactionProducer(
                "TracedTxProducers", cluster.namesrv_address, checker=check, enable_trace=True
            )
            async with producer:
                sent = {}
                service = broker.context.transactions
                assert service is not None
                for state in ("UNKNOW", "COMMIT_MESSAGE", "ROLLBACK_MESSAGE"):
                    message = ClientMessage(TOPIC, b"tx", keys=state, tags="TX")
                    result = await producer.send_in_transaction(message, decide_by_key)
                    sent[state] = result.msg_id
                    if state == "UNKNOW":  # the only half so far: checked back now
                        assert await service.check_once() == 1
                traced = {
                    state: await _client_trace(admin, msg_id, 2 if state != "UNKNOW" else 3)
                    for state, msg_id in sent.items()
                }
    for state, records in traced.items():
        half, *ends = records
        assert (half.type, half.message_type) == (TraceType.PUB, TraceMessageType.TRANS_MSG_HALF)
        assert (half.group, half.keys, half.tags) == ("TracedTxProducers", state, "TX")
        for end in ends:
            assert end.type is TraceType.END_TRANSACTION
            assert end.message_type is TraceMessageType.TRANS_MSG_COMMIT
            assert (end.topic, end.keys, end.store_host) == (TOPIC, state, broker.address)
            assert end.transaction_id
    assert [e.transaction_state for e in traced["COMMIT_MESSAGE"][1:]] == ["COMMIT_MESSAGE"]
    assert [e.from_transaction_check for e in traced["ROLLBACK_MESSAGE"][1:]] == [False]
    unknown = traced["UNKNOW"][1:]
    assert [(e.transaction_state, e.from_transaction_check) for e in unknown] == [
        ("UNKNOW", False),
        ("COMMIT_MESSAGE", True),  # the check-back's answer
    ]


async def test_orderly_push_consumer_traces_each_call(tmp_path: Path) -> None:
    calls: list[int] = []
    done = asyncio.Event()

    async def listener(messages: list[MessageExt]) -> OrderlyResult:
        calls.append(len(messages))
        if len(calls) == 1:
            return OrderlyResult.SUSPEND_CURRENT_QUEUE_A_MOMENT  # then again, and success
        done.set()
        return OrderlyResult.SUCCESS

    settings = {"traceTopicEnable": "true"}
    async with (
        Cluster(tmp_path, settings=settings) as cluster,
        AdminClient(cluster.namesrv_address) as admin,
    ):
        await admin.create_topic(TOPIC, queue_count=1)
        async with Producer("OrderlyTraceProducers", cluster.namesrv_address) as producer:
            sent = await producer.send(Message(TOPIC, b"in order", keys="ord-1"))
        consumer = PushConsumer(
            "OrderlyTraceReaders",
            cluster.namesrv_address,
            consume_from=ConsumeFrom.FIRST_OFFSET,
            orderly=True,
            options=ConsumerOptions(suspend_time_ms=10),
            enable_trace=True,
        )
        consumer.subscribe(TOPIC)
        consumer.register_listener(listener)
        await consumer.start()
        try:
            async with asyncio.timeout(WAIT_S):
                await done.wait()
        finally:
            await consumer.shutdown()  # sends what it gathered
        records = await _client_trace(admin, sent.msg_id, 4)
    assert [(r.type, r.success) for r in records] == [
        (TraceType.SUB_BEFORE, True),
        (TraceType.SUB_AFTER, False),
        (TraceType.SUB_BEFORE, True),
        (TraceType.SUB_AFTER, True),
    ]
    assert {r.group for r in records} == {"OrderlyTraceReaders"}
    assert records[0].request_id == records[1].request_id != records[2].request_id
    assert [r.context_code for r in records if r.type is TraceType.SUB_AFTER] == [4, 0]
