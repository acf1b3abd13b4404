"""Concurrent consumption (RocketMQ's offset management processConsumeResult, RocketMQ's consumption
progress): commit of the smallest
unacknowledged offset, ackIndex, send-back and its fallbacks, broadcasting, consume timeout,
retry topic restored, listeners on threads and on the loop."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

from bolide.base import limits
from bolide.base.clock import ManualClock
from bolide.client.consumer.consume_concurrently import (
    ConcurrentConsumeService,
    ack_index_for,
    retry_message,
)
from bolide.client.consumer.listener import ConsumeContext, ConsumeResult, adapt_listener
from bolide.client.consumer.offset_store import ReadOffsetType, RemoteOffsetStore
from bolide.client.consumer.process_queue import ProcessQueue
from bolide.protocol.bodies import MessageModel
from bolide.protocol.message import MessageExt, PropertyKey
from bolide.testing.waiting import until
from tests.client.consumer_peers import MemoryOffsetBroker, MemorySendBack, message, queues

QUEUE = queues("T", 1)[0]


class _Harness:
    def __init__(
        self,
        listener: Callable[..., Any],
        *,
        model: MessageModel = MessageModel.CLUSTERING,
        batch: int = 1,
        threads: int = 4,
    ) -> None:
        self.clock = ManualClock()
        self.store = RemoteOffsetStore(MemoryOffsetBroker())
        self.send_back = MemorySendBack()
        self.process_queue = ProcessQueue(0)
        self.service = ConcurrentConsumeService(
            "G",
            adapt_listener(listener),
            message_model=model,
            offset_store=self.store,
            send_back=self.send_back,
            clock=self.clock,
            owned_queues=lambda: {QUEUE: self.process_queue},
            batch_max_size=batch,
            thread_max=threads,
        )

    def feed(self, messages: list[MessageExt]) -> None:
        self.process_queue.put_messages(messages)
        self.service.submit(messages, self.process_queue, QUEUE)

    async def committed(self) -> int:
        return await self.store.read_offset(QUEUE, ReadOffsetType.READ_FROM_MEMORY)

    async def settle(self) -> None:
        await until(lambda: self.service.in_flight == 0 and self.service.queued == 0)


def test_ack_index_rules() -> None:
    assert ack_index_for(ConsumeResult.SUCCESS, 9, 3) == 2  # clamped to the batch
    assert ack_index_for(ConsumeResult.SUCCESS, 0, 3) == 0
    assert ack_index_for(ConsumeResult.RECONSUME_LATER, 2, 3) == -1
    assert ack_index_for(None, 2, 3) == -1


async def test_commit_is_the_smallest_unacknowledged_offset() -> None:
    gates = {offset: asyncio.Event() for offset in range(3)}

    async def listener(messages: list[MessageExt]) -> ConsumeResult:
        await gates[messages[0].queue_offset].wait()
        return ConsumeResult.SUCCESS

    harness = _Harness(listener)
    harness.service.start()
    try:
        harness.feed([message("T", 0, offset) for offset in range(3)])
        await until(lambda: harness.service.in_flight == 3)
        gates[2].set()
        gates[1].set()
        await until(lambda: harness.process_queue.message_count == 1)
        assert await harness.committed() == 0  # offset 0 is still in the listener's hands
        gates[0].set()
        await harness.settle()
        assert await harness.committed() == 3
        assert harness.service.stats.consumed_ok == 3
    finally:
        await harness.service.shutdown()


async def test_ack_index_sends_the_rest_back() -> None:
    def listener(messages: list[MessageExt], context: ConsumeContext) -> ConsumeResult:
        context.ack_index = 0
        context.delay_level_when_next_consume = 5
        return ConsumeResult.SUCCESS

    harness = _Harness(listener, batch=3)
    harness.service.start()
    try:
        batch = [message("T", 0, offset) for offset in range(3)]
        harness.feed(batch)
        await harness.settle()
        assert harness.send_back.sent_back == [
            (batch[1].msg_id, "broker-a", 5, limits.RECONSUME_DEFAULT_MAX_TIMES),
            (batch[2].msg_id, "broker-a", 5, limits.RECONSUME_DEFAULT_MAX_TIMES),
        ]
        assert await harness.committed() == 3  # sent back counts as done
        assert harness.service.stats.consumed_ok == 1
    finally:
        await harness.service.shutdown()


async def test_failed_send_back_falls_back_to_a_retry_message() -> None:
    harness = _Harness(lambda messages: ConsumeResult.RECONSUME_LATER)
    harness.send_back.broker_fails = True
    harness.service.start()
    try:
        original = message("T", 0, 0, tags="paid")
        original.reconsume_times = 2
        harness.feed([original])
        await harness.settle()
        (resent,) = harness.send_back.resent
        assert resent.topic == "%RETRY%G"
        assert resent.body == original.body
        assert resent.properties[PropertyKey.RETRY_TOPIC] == "T"
        assert resent.properties[PropertyKey.ORIGIN_MESSAGE_ID] == original.msg_id
        assert resent.properties[PropertyKey.RECONSUME_TIME] == "3"
        assert resent.properties[PropertyKey.MAX_RECONSUME_TIMES] == "16"
        assert resent.properties[PropertyKey.DELAY] == "5"  # 3 + reconsume times
        assert resent.properties[PropertyKey.TAGS] == "paid"
        assert await harness.committed() == 1
    finally:
        await harness.service.shutdown()


async def test_when_both_send_backs_fail_the_message_is_consumed_again_locally() -> None:
    calls: list[tuple[int, int]] = []

    def listener(messages: list[MessageExt]) -> ConsumeResult:
        calls.append((messages[0].queue_offset, messages[0].reconsume_times))
        return ConsumeResult.RECONSUME_LATER if len(calls) == 1 else ConsumeResult.SUCCESS

    harness = _Harness(listener)
    harness.send_back.broker_fails = harness.send_back.resend_fails = True
    harness.service.start()
    try:
        harness.feed([message("T", 0, 0)])
        await harness.settle()
        assert await harness.committed() == 0  # the offset cannot pass the failed message
        assert harness.process_queue.message_count == 1
        await until(lambda: harness.clock.sleeper_count >= 2)  # sweep + the retry timer
        harness.clock.advance_ms(limits.CONSUME_RETRY_LATER_DELAY_MS)
        await until(lambda: len(calls) == 2)
        await harness.settle()
        assert calls == [(0, 0), (0, 1)]
        assert await harness.committed() == 1
    finally:
        await harness.service.shutdown()


async def test_broadcasting_failures_are_dropped() -> None:
    harness = _Harness(
        lambda messages: ConsumeResult.RECONSUME_LATER, model=MessageModel.BROADCASTING
    )
    harness.service.start()
    try:
        harness.feed([message("T", 0, 0), message("T", 0, 1)])
        await harness.settle()
        assert harness.send_back.sent_back == [] and harness.send_back.resent == []
        assert await harness.committed() == 2
        assert harness.service.stats.consumed_failed == 2
    finally:
        await harness.service.shutdown()


async def test_sync_listener_runs_on_pool_threads_and_exceptions_mean_later() -> None:
    threads: set[str] = set()

    def listener(messages: list[MessageExt]) -> ConsumeResult:
        threads.add(threading.current_thread().name)
        if messages[0].queue_offset == 1:
            raise ValueError("boom")
        return ConsumeResult.SUCCESS

    harness = _Harness(listener)
    harness.service.start()
    try:
        harness.feed([message("T", 0, offset) for offset in range(3)])
        await harness.settle()
        assert threads and all(name.startswith("bolide-consume-G") for name in threads)
        assert [entry[0] for entry in harness.send_back.sent_back] == ["ID-T-0-1"]
        assert await harness.committed() == 3
    finally:
        await harness.service.shutdown()


async def test_bad_return_value_counts_as_reconsume_later() -> None:
    harness = _Harness(lambda messages: "ok")
    harness.service.start()
    try:
        harness.feed([message("T", 0, 0)])
        await harness.settle()
        assert len(harness.send_back.sent_back) == 1
    finally:
        await harness.service.shutdown()


async def test_retry_messages_show_their_original_topic() -> None:
    seen: list[str] = []

    def listener(messages: list[MessageExt]) -> ConsumeResult:
        seen.extend(m.topic for m in messages)
        return ConsumeResult.SUCCESS

    harness = _Harness(listener)
    harness.service.start()
    try:
        retried = message("%RETRY%G", 0, 0)
        retried.properties[PropertyKey.RETRY_TOPIC] = "orders"
        foreign = message("%RETRY%Other", 0, 1)
        foreign.properties[PropertyKey.RETRY_TOPIC] = "orders"  # not this group's: kept
        harness.feed([retried, foreign])
        await harness.settle()
        assert seen == ["orders", "%RETRY%Other"]
    finally:
        await harness.service.shutdown()


async def test_results_of_a_dropped_queue_are_not_committed() -> None:
    gate = asyncio.Event()

    async def listener(messages: list[MessageExt]) -> ConsumeResult:
        await gate.wait()
        return ConsumeResult.RECONSUME_LATER

    harness = _Harness(listener)
    harness.service.start()
    try:
        harness.feed([message("T", 0, 0)])
        await until(lambda: harness.service.in_flight == 1)
        harness.process_queue.dropped = True
        gate.set()
        await harness.settle()
        assert await harness.committed() == -1
        assert harness.send_back.sent_back == []  # the new owner consumes it
    finally:
        await harness.service.shutdown()


async def test_consume_timeout_sends_the_stuck_message_back() -> None:
    gate = asyncio.Event()

    async def listener(messages: list[MessageExt]) -> ConsumeResult:
        if messages[0].queue_offset == 0:
            await gate.wait()
        return ConsumeResult.SUCCESS

    harness = _Harness(listener)
    harness.service.start()
    try:
        harness.feed([message("T", 0, 0), message("T", 0, 1)])
        await until(
            lambda: harness.service.in_flight == 1 and harness.process_queue.message_count == 1
        )
        assert await harness.committed() == 0  # pinned by the stuck offset 0
        await until(lambda: harness.clock.sleeper_count == 1)  # the sweep waits
        harness.clock.advance_ms(limits.CONSUME_TIMEOUT_MS + 1)
        await until(lambda: harness.service.stats.timed_out == 1)
        await until(lambda: harness.process_queue.message_count == 0)
        assert harness.send_back.sent_back == [("ID-T-0-0", "broker-a", 3, 16)]
        gate.set()
        await harness.settle()
        assert await harness.committed() == 2
    finally:
        await harness.service.shutdown()


async def test_shutdown_waits_for_calls_in_progress_and_drops_queued_ones() -> None:
    started = asyncio.Event()
    gate = asyncio.Event()
    finished: list[int] = []

    async def listener(messages: list[MessageExt]) -> ConsumeResult:
        started.set()
        await gate.wait()
        finished.append(messages[0].queue_offset)
        return ConsumeResult.SUCCESS

    harness = _Harness(listener, threads=1)
    harness.service.start()
    harness.feed([message("T", 0, 0), message("T", 0, 1)])
    await started.wait()
    stopping = asyncio.ensure_future(harness.service.shutdown())
    await until(lambda: harness.service.queued == 0)
    assert not stopping.done()
    gate.set()
    await stopping
    assert finished == [0]
    assert await harness.committed() == 1


def test_retry_message_keeps_an_existing_origin_id() -> None:
    original = message("T", 0, 0)
    original.properties[PropertyKey.ORIGIN_MESSAGE_ID] = "FIRST"
    original.properties[PropertyKey.TRAN_MSG] = "true"
    resent = retry_message(original, "G", 16)
    assert resent.properties[PropertyKey.ORIGIN_MESSAGE_ID] == "FIRST"
    assert PropertyKey.TRAN_MSG not in resent.properties
