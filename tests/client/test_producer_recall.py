"""Producer.recall_message (RECALL_MESSAGE 370) over real sockets: a delayed message's send
result carries the broker's recall handle; recalled with it, the message is never delivered
while one due after it is, and with ``enable_trace`` the producer writes a ``Recall`` record
found on the trace topic by the message's id."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from bolide.base.errors import InvalidMessageError, RemoteError
from bolide.client.admin import AdminClient
from bolide.client.admin.trace import message_trace
from bolide.client.config import ConsumeFrom
from bolide.client.consumer.listener import ConsumeResult
from bolide.client.consumer.push_consumer import PushConsumer
from bolide.client.message import Message
from bolide.client.producer.producer import Producer
from bolide.protocol.codes import ResponseCode
from bolide.protocol.headers.recall import RecallHandle
from bolide.protocol.message import MessageExt
from bolide.protocol.trace import TraceType
from bolide.testing.cluster import Cluster

pytestmark = pytest.mark.timeout(120)

TOPIC, GROUP = "Recallable", "RecallReaders"
DELAY_MS = 3_000
"""Far enough ahead that the recall lands before the message is due on a loaded machine."""
WAIT_S = 60.0


async def test_recalled_message_is_never_delivered_and_traced(tmp_path: Path) -> None:
    received: list[bytes] = []
    kept_seen = asyncio.Event()

    async def listener(messages: list[MessageExt]) -> ConsumeResult:
        for message in messages:
            received.append(message.body)
            if message.body == b"kept":
                kept_seen.set()
        return ConsumeResult.SUCCESS

    settings = {"traceTopicEnable": "true"}
    async with (
        Cluster(tmp_path, settings=settings) as cluster,
        AdminClient(cluster.namesrv_address) as admin,
    ):
        await admin.create_topic(TOPIC, queue_count=1)
        consumer = PushConsumer(
            GROUP, cluster.namesrv_address, consume_from=ConsumeFrom.FIRST_OFFSET
        )
        consumer.subscribe(TOPIC)
        consumer.register_listener(listener)
        await consumer.start()
        try:
            async with Producer(
                "RecallProducers", cluster.namesrv_address, enable_trace=True
            ) as producer:
                due_ms = int(time.time() * 1000) + DELAY_MS
                recalled = Message(TOPIC, b"recalled", deliver_at_ms=due_ms)
                sent = await producer.send(recalled)
                # the kept one is due after the recalled one: once it arrives, the
                # recalled one would have arrived before it
                kept = Message(TOPIC, b"kept", deliver_at_ms=due_ms + 1)
                await producer.send(kept)
                handle = sent.recall_handle  # the broker's recallHandle, as Java's
                assert handle is not None
                assert RecallHandle.decode(handle) == RecallHandle(
                    TOPIC, sent.queue.broker_name, due_ms, sent.msg_id
                )
                assert await producer.recall_message(TOPIC, handle) == sent.msg_id
                with pytest.raises(InvalidMessageError):
                    await producer.recall_message("OtherTopic", handle)
                with pytest.raises(InvalidMessageError):
                    await producer.recall_message(TOPIC, "%%%not a handle")
                stale = RecallHandle(TOPIC, sent.queue.broker_name, 1, "ID-stale").encode()
                with pytest.raises(RemoteError) as refused:
                    await producer.recall_message(TOPIC, stale)
                assert refused.value.code == ResponseCode.SYSTEM_ERROR
                assert producer.trace is not None
                await producer.trace.flush()
            async with asyncio.timeout(WAIT_S):
                await kept_seen.wait()
        finally:
            await consumer.shutdown()
        assert received == [b"kept"]
        async with asyncio.timeout(WAIT_S):
            while True:
                found = await message_trace(admin, sent.msg_id)
                if any(s.record.type is TraceType.RECALL for s in found.steps):
                    break
                await asyncio.sleep(0.05)
    recalls = [s.record for s in found.steps if s.record.type is TraceType.RECALL]
    assert [(r.group, r.topic, r.success) for r in recalls] == [("RecallProducers", TOPIC, True)]
    stale_trace = [s.record for s in found.steps if s.record.type is TraceType.PUB]
    assert len(stale_trace) == 1  # the Pub of the recalled message, found by the same id
