"""Bolide's own client trace (``enable_trace=True``) against a broker that writes none: the
producer's Pub and the push consumer's SubBefore / SubAfter records decode with the 4.x
layout and are found on the trace topic by message id and by user key."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bolide.client.admin import AdminClient
from bolide.client.admin.trace import message_trace
from bolide.client.config import ConsumeFrom
from bolide.client.consumer.listener import ConsumeResult
from bolide.client.consumer.push_consumer import PushConsumer
from bolide.client.producer.producer import Producer
from bolide.protocol.message import Message, MessageExt
from bolide.protocol.system_topics import DEFAULT_TRACE_TOPIC
from bolide.protocol.trace import TraceMessageType, TraceType, decode_records
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
