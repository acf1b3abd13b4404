"""The request coroutines the producer does not exercise, against a real broker: offsets,
time search, key queries, queue locks and send-back; error codes become typed errors."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from bolide.base.errors import RemoteError
from bolide.client import rpc
from bolide.client.message import Message, SendResult
from bolide.client.producer.producer import Producer
from bolide.protocol.bodies import LockBatchRequestBody, MessageQueue
from bolide.protocol.codes import ResponseCode
from bolide.protocol.headers import ConsumerSendMsgBackRequestHeader, QueryMessageRequestHeader
from bolide.testing.cluster import Cluster
from tests.client.conftest import pull_all

pytestmark = pytest.mark.timeout(60)

TIMEOUT_MS = 10_000  # a deadline, never a measurement: generous for a loaded CI machine


@pytest.fixture
async def producer(cluster: Cluster) -> AsyncIterator[Producer]:
    async with Producer("pg", namesrv=cluster.namesrv_address) as started:
        yield started


async def three_messages(producer: Producer) -> tuple[MessageQueue, list[SendResult], str]:
    queue = MessageQueue("rpc-t", "broker-a", 0)
    await producer.send(Message("rpc-t", b"create"), queue=None)
    results = [
        await producer.send(Message("rpc-t", f"m{i}".encode(), keys=f"key-{i}"), queue=queue)
        for i in range(3)
    ]
    address = await producer.instance.queue_broker_address(queue)
    return queue, results, address


async def test_queue_offsets_and_times(producer: Producer) -> None:
    queue, results, address = await three_messages(producer)
    pool = producer.instance.pool
    last = results[-1].queue_offset
    assert await rpc.get_max_offset(pool, address, queue.topic, 0, TIMEOUT_MS) == last + 1
    assert await rpc.get_min_offset(pool, address, queue.topic, 0, TIMEOUT_MS) == 0
    stored = await pull_all(producer.instance, queue)
    earliest = await rpc.get_earliest_store_time(pool, address, queue.topic, 0, TIMEOUT_MS)
    assert earliest == stored[0].store_timestamp_ms
    target = stored[-1].store_timestamp_ms
    found = await rpc.search_offset_by_timestamp(pool, address, queue.topic, 0, target, TIMEOUT_MS)
    assert stored[found].store_timestamp_ms == target


async def test_consumer_offsets_round_trip(producer: Producer) -> None:
    queue, _, address = await three_messages(producer)
    pool = producer.instance.pool
    # A fresh group may read "not found" (None) or, from a Java-like broker, 0.
    fresh = await rpc.query_consumer_offset(pool, address, "cg", queue.topic, 0, TIMEOUT_MS)
    assert fresh in (None, 0)
    await rpc.update_consumer_offset(pool, address, "cg", queue.topic, 0, 2, TIMEOUT_MS)
    assert await rpc.query_consumer_offset(pool, address, "cg", queue.topic, 0, TIMEOUT_MS) == 2
    await rpc.update_consumer_offset(
        pool, address, "cg", queue.topic, 0, 3, TIMEOUT_MS, oneway=True
    )

    async def query() -> int | None:
        return await rpc.query_consumer_offset(pool, address, "cg", queue.topic, 0, TIMEOUT_MS)

    for _ in range(1_000):
        if await query() == 3:
            break
    assert await query() == 3


async def test_query_by_key_and_by_unique_key(producer: Producer) -> None:
    queue, results, address = await three_messages(producer)
    pool = producer.instance.pool
    now_ms = producer.instance.clock.now_ms()
    by_key = QueryMessageRequestHeader(queue.topic, "key-1", 32, 0, now_ms + 60_000)
    found = await rpc.query_message(pool, address, by_key, TIMEOUT_MS)
    assert [m.body for m in found] == [b"m1"]
    by_id = QueryMessageRequestHeader(
        queue.topic, results[2].msg_id, 32, 0, now_ms + 60_000, unique_key_query=True
    )
    assert [m.body for m in await rpc.query_message(pool, address, by_id, TIMEOUT_MS)] == [b"m2"]
    nothing = QueryMessageRequestHeader(queue.topic, "no-such-key", 32, 0, now_ms + 60_000)
    assert await rpc.query_message(pool, address, nothing, TIMEOUT_MS) == []


async def test_locks_are_exclusive_until_released(producer: Producer) -> None:
    queue, _, address = await three_messages(producer)
    pool = producer.instance.pool
    mine = LockBatchRequestBody("cg", "client-1", frozenset({queue}))
    theirs = LockBatchRequestBody("cg", "client-2", frozenset({queue}))
    assert await rpc.lock_batch_mq(pool, address, mine, TIMEOUT_MS) == {queue}
    assert await rpc.lock_batch_mq(pool, address, theirs, TIMEOUT_MS) == frozenset()
    await rpc.unlock_batch_mq(pool, address, mine, TIMEOUT_MS)
    assert await rpc.lock_batch_mq(pool, address, theirs, TIMEOUT_MS) == {queue}


async def test_send_back_and_its_errors(producer: Producer) -> None:
    queue, _, address = await three_messages(producer)
    pool = producer.instance.pool
    stored = await pull_all(producer.instance, queue)
    header = ConsumerSendMsgBackRequestHeader(stored[1].commit_log_offset, "cg", delay_level=-1)
    await rpc.send_message_back(pool, address, header, TIMEOUT_MS)  # straight to %DLQ%cg
    missing = ConsumerSendMsgBackRequestHeader(10**12, "cg", delay_level=0)
    with pytest.raises(RemoteError) as caught:
        await rpc.send_message_back(pool, address, missing, TIMEOUT_MS)
    assert caught.value.code == ResponseCode.SYSTEM_ERROR
    assert "CONSUMER_SEND_MSG_BACK" in str(caught.value) and address in str(caught.value)
