"""Orderly consumption with a manual clock (RocketMQ's orderly consumption): one listener call per
queue at a time, in
offset order; commits after each batch; suspension and in-memory retry; bounded retries to the
DLQ; the broker lock (taken, renewed, lost, expired) gating consumption; the rebalance's wait
for the batch in flight; shutdown; the queue's retry count and blocked time in running info.

The broker's lock table is the real :class:`RebalanceLockManager`, reached through an
in-memory :class:`LockClient`, so two consumers can contend for one queue."""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from bolide.base import limits
from bolide.base.clock import ManualClock
from bolide.base.errors import ConfigError, ConnectionClosedError
from bolide.broker.locks import RebalanceLockManager
from bolide.client.consumer.consume_orderly import (
    DLQ_DELAY_LEVEL,
    INFO_BLOCKED_MS,
    INFO_DEAD_LETTERED,
    INFO_RETRY_TIMES,
    OrderlyConsumeService,
    OrderlyContext,
    clamp_suspend_ms,
    dead_letter_prefix,
    orderly_result_of,
)
from bolide.client.consumer.listener import ConsumeResult, OrderlyResult, adapt_listener
from bolide.client.consumer.offset_store import ReadOffsetType, RemoteOffsetStore
from bolide.client.consumer.options import ConsumerOptions
from bolide.client.consumer.orderly_locks import QueueLocker
from bolide.client.consumer.process_queue import ProcessQueue
from bolide.client.consumer.push_consumer import PushConsumer
from bolide.protocol.bodies import MessageModel, MessageQueue
from bolide.protocol.message import MessageExt, PropertyKey
from bolide.testing.waiting import until
from tests.client.consumer_peers import MemoryOffsetBroker, MemorySendBack, message, queues

GROUP = "G"
Q0, Q1 = queues("T", 2)


@dataclass
class TableLockClient:
    """LOCK/UNLOCK_BATCH_MQ answered by a real lock table (the broker's)."""

    table: RebalanceLockManager
    client_id: str
    requests: list[tuple[str, frozenset[MessageQueue]]] = field(default_factory=list)
    unreachable: bool = False

    async def lock_batch(
        self, group: str, queues: frozenset[MessageQueue], timeout_ms: int
    ) -> frozenset[MessageQueue]:
        self.requests.append(("lock", queues))
        if self.unreachable:
            raise ConnectionClosedError("broker unreachable")
        return self.table.try_lock_batch(group, queues, self.client_id)

    async def unlock_batch(
        self, group: str, queues: frozenset[MessageQueue], timeout_ms: int, *, oneway: bool
    ) -> None:
        self.requests.append(("unlock", queues))
        if self.unreachable:
            raise ConnectionClosedError("broker unreachable")
        self.table.unlock_batch(group, queues, self.client_id)


class Harness:
    """One orderly consumer over queues Q0 and Q1, with a manual clock. Once started in
    clustering mode its lock renewal is one sleeper of the clock."""

    def __init__(
        self,
        listener: Callable[..., Any],
        *,
        clock: ManualClock | None = None,
        table: RebalanceLockManager | None = None,
        client_id: str = "c1",
        model: MessageModel = MessageModel.CLUSTERING,
        batch: int = 1,
        max_reconsume_times: int | None = None,
    ) -> None:
        self.clock = clock or ManualClock()
        self.table = table or RebalanceLockManager(self.clock)
        self.lock_client = TableLockClient(self.table, client_id)
        self.broker = MemoryOffsetBroker()
        self.store = RemoteOffsetStore(self.broker)
        self.send_back = MemorySendBack()
        self.process_queues: dict[MessageQueue, ProcessQueue] = {}
        self.locker = QueueLocker(
            GROUP, self.lock_client, self.clock, process_queues=lambda: self.process_queues
        )
        self.rebalance_requests = 0
        self.service = OrderlyConsumeService(
            GROUP,
            adapt_listener(listener),
            message_model=model,
            offset_store=self.store,
            send_back=self.send_back,
            locker=self.locker if model is MessageModel.CLUSTERING else None,
            clock=self.clock,
            owned_queues=lambda: self.process_queues,
            request_rebalance=self._rebalance,
            batch_max_size=batch,
            thread_max=4,
            max_reconsume_times=max_reconsume_times,
        )

    def _rebalance(self) -> None:
        self.rebalance_requests += 1

    async def take(self, queue: MessageQueue) -> ProcessQueue:
        """What the rebalance does for a new queue: lock it, then own it."""
        process_queue = ProcessQueue(self.clock.now_ms())
        assert await self.service.admit(queue, process_queue)
        self.process_queues[queue] = process_queue
        return process_queue

    def feed(self, queue: MessageQueue, offsets: range) -> None:
        process_queue = self.process_queues[queue]
        messages = [message(queue.topic, queue.queue_id, offset) for offset in offsets]
        process_queue.put_messages(messages)
        self.service.submit(messages, process_queue, queue)

    async def committed(self, queue: MessageQueue) -> int:
        return await self.store.read_offset(queue, ReadOffsetType.READ_FROM_MEMORY)


class Recorder:
    """An async listener recording (queue id, offset) per call; ``gate`` holds calls."""

    def __init__(self, answer: Callable[[list[MessageExt]], object] | None = None) -> None:
        self.calls: list[list[tuple[int, int]]] = []
        self.running = 0
        self.max_running_per_queue: dict[int, int] = {}
        self._running_per_queue: dict[int, int] = {}
        self.gate: asyncio.Event | None = None
        self._answer = answer

    @property
    def offsets(self) -> list[int]:
        return [offset for call in self.calls for _, offset in call]

    async def __call__(self, messages: list[MessageExt], context: OrderlyContext) -> object:
        queue_id = context.queue_id
        count = self._running_per_queue.get(queue_id, 0) + 1
        self._running_per_queue[queue_id] = count
        self.max_running_per_queue[queue_id] = max(
            count, self.max_running_per_queue.get(queue_id, 0)
        )
        self.running += 1
        try:
            self.calls.append([(m.queue_id, m.queue_offset) for m in messages])
            if self.gate is not None:
                await self.gate.wait()
            return self._answer(messages) if self._answer else OrderlyResult.SUCCESS
        finally:
            self.running -= 1
            self._running_per_queue[queue_id] -= 1


# ---- pure parts ------------------------------------------------------------------------------


def test_dead_letter_prefix_stops_at_the_first_message_still_allowed_a_retry() -> None:
    batch = [message("T", 0, offset) for offset in range(4)]
    for item, times in zip(batch, (3, 5, 2, 3), strict=True):
        item.reconsume_times = times
    assert dead_letter_prefix(batch, None) == []
    assert [m.queue_offset for m in dead_letter_prefix(batch, 3)] == [0, 1]
    assert [m.queue_offset for m in dead_letter_prefix(batch, 2)] == [0, 1, 2, 3]
    assert dead_letter_prefix(batch, 6) == []


def test_suspend_time_is_the_default_or_the_request_clamped() -> None:
    assert clamp_suspend_ms(-1, 1_000) == 1_000
    assert clamp_suspend_ms(0, 1_000) == limits.ORDERLY_SUSPEND_MIN_MS
    assert clamp_suspend_ms(500, 1_000) == 500
    assert clamp_suspend_ms(10**9, 1_000) == limits.ORDERLY_SUSPEND_MAX_MS


def test_listener_answers_map_to_orderly_results() -> None:
    assert orderly_result_of(OrderlyResult.SUCCESS) is OrderlyResult.SUCCESS
    assert orderly_result_of(ConsumeResult.SUCCESS) is OrderlyResult.SUCCESS
    suspend = OrderlyResult.SUSPEND_CURRENT_QUEUE_A_MOMENT
    assert orderly_result_of(ConsumeResult.RECONSUME_LATER) is suspend
    assert orderly_result_of(None) is None
    assert orderly_result_of("SUCCESS") is None


# ---- consuming in order -----------------------------------------------------------------------


async def test_each_queue_is_consumed_in_order_one_call_at_a_time() -> None:
    recorder = Recorder()
    recorder.gate = asyncio.Event()
    harness = Harness(recorder, batch=2)
    await harness.take(Q0)
    await harness.take(Q1)
    harness.service.start()
    harness.feed(Q0, range(5))
    harness.feed(Q1, range(3))
    await until(lambda: recorder.running == 2)  # the two queues run side by side
    harness.feed(Q0, range(5, 9))  # more while a call runs: no second task for Q0
    for _ in range(20):
        await asyncio.sleep(0)
    assert recorder.running == 2
    recorder.gate.set()
    await until(lambda: len(recorder.offsets) == 12)
    q0 = [offset for call in recorder.calls for queue_id, offset in call if queue_id == 0]
    assert q0 == list(range(9))
    assert all(len(call) <= 2 for call in recorder.calls)
    assert recorder.max_running_per_queue == {0: 1, 1: 1}
    assert await harness.committed(Q0) == 9
    assert await harness.committed(Q1) == 3
    assert harness.service.stats.consumed_ok == 12
    await harness.service.shutdown()


async def test_offsets_are_committed_after_each_successful_batch() -> None:
    commits: list[int] = []
    harness: Harness

    async def listener(messages: list[MessageExt]) -> OrderlyResult:
        commits.append(await harness.committed(Q0))
        return OrderlyResult.SUCCESS

    harness = Harness(listener, batch=2)
    await harness.take(Q0)
    harness.service.start()
    harness.feed(Q0, range(10, 15))
    await until(lambda: len(commits) == 3)
    await until(lambda: harness.process_queues[Q0].message_count == 0)
    assert commits == [-1, 12, 14]
    assert await harness.committed(Q0) == 15
    await harness.service.shutdown()


async def test_a_plain_function_listener_runs_on_a_worker_thread() -> None:
    threads: list[str] = []

    def listener(messages: list[MessageExt]) -> OrderlyResult:
        threads.append(threading.current_thread().name)
        return OrderlyResult.SUCCESS

    harness = Harness(listener)
    await harness.take(Q0)
    harness.service.start()
    harness.feed(Q0, range(3))
    await until(lambda: len(threads) == 3)
    assert all(name.startswith("bolide-orderly-G") for name in threads)
    await until(lambda: harness.service.stats.consumed_ok == 3)
    await harness.service.shutdown()


async def test_retry_topic_messages_show_their_original_topic() -> None:
    seen: list[str] = []

    async def listener(messages: list[MessageExt]) -> OrderlyResult:
        seen.extend(m.topic for m in messages)
        return OrderlyResult.SUCCESS

    harness = Harness(listener)
    retry_queue = MessageQueue("%RETRY%G", "broker-a", 0)
    await harness.take(retry_queue)
    harness.service.start()
    item = message("%RETRY%G", 0, 0)
    item.properties[PropertyKey.RETRY_TOPIC] = "orders"
    harness.process_queues[retry_queue].put_messages([item])
    harness.service.submit([item], harness.process_queues[retry_queue], retry_queue)
    await until(lambda: seen == ["orders"])
    await harness.service.shutdown()


# ---- suspension and bounded retries -------------------------------------------------------------


async def test_suspend_blocks_the_queue_and_retries_in_memory_after_the_suspend_time() -> None:
    failures = {1: 2}  # offset 1 fails twice

    def answer(messages: list[MessageExt]) -> object:
        offset = messages[0].queue_offset
        if failures.get(offset, 0) > 0:
            failures[offset] -= 1
            return OrderlyResult.SUSPEND_CURRENT_QUEUE_A_MOMENT
        return OrderlyResult.SUCCESS

    recorder = Recorder(answer)
    harness = Harness(recorder)
    await harness.take(Q0)
    harness.service.start()
    harness.feed(Q0, range(4))
    await until(lambda: recorder.offsets == [0, 1])
    await until(lambda: harness.clock.sleeper_count == 2)
    info = harness.service.queue_info(harness.process_queues[Q0])
    assert info[INFO_RETRY_TIMES] == 1 and info[INFO_BLOCKED_MS] == 0
    assert await harness.committed(Q0) == 1, "nothing past the failing message is committed"
    harness.clock.advance_ms(999)
    for _ in range(20):
        await asyncio.sleep(0)
    assert recorder.offsets == [0, 1], "the queue waits for the whole suspend time"
    harness.clock.advance_ms(1)
    await until(lambda: recorder.offsets == [0, 1, 1])
    await until(lambda: harness.clock.sleeper_count == 2)
    info = harness.service.queue_info(harness.process_queues[Q0])
    assert info[INFO_RETRY_TIMES] == 2 and info[INFO_BLOCKED_MS] == 1_000
    harness.clock.advance_ms(1_000)
    await until(lambda: recorder.offsets == [0, 1, 1, 1, 2, 3])
    assert await harness.committed(Q0) == 4
    assert harness.service.queue_info(harness.process_queues[Q0])[INFO_RETRY_TIMES] == 0
    assert harness.service.stats.suspended == 2
    assert harness.send_back.sent_back == [], "orderly retries stay in memory by default"
    await harness.service.shutdown()


async def test_a_raising_listener_and_the_context_suspend_time() -> None:
    attempts: list[int] = []

    async def listener(messages: list[MessageExt], context: OrderlyContext) -> OrderlyResult:
        attempts.append(messages[0].reconsume_times)
        if len(attempts) == 1:
            raise RuntimeError("boom")
        if len(attempts) == 2:
            context.suspend_time_ms = 5_000
            return OrderlyResult.SUSPEND_CURRENT_QUEUE_A_MOMENT
        return OrderlyResult.SUCCESS

    harness = Harness(listener)
    await harness.take(Q0)
    harness.service.start()
    harness.feed(Q0, range(1))
    await until(lambda: attempts == [0])
    await until(lambda: harness.clock.sleeper_count == 2)
    harness.clock.advance_ms(1_000)  # an exception suspends for the default time
    await until(lambda: attempts == [0, 1])
    await until(lambda: harness.clock.sleeper_count == 2)
    harness.clock.advance_ms(4_999)
    for _ in range(20):
        await asyncio.sleep(0)
    assert attempts == [0, 1]
    harness.clock.advance_ms(1)
    await until(lambda: attempts == [0, 1, 2])
    await harness.service.shutdown()


async def test_after_max_reconsume_times_the_message_goes_to_the_dlq_and_the_queue_moves_on() -> (
    None
):
    def answer(messages: list[MessageExt]) -> object:
        if messages[0].queue_offset == 1:
            return OrderlyResult.SUSPEND_CURRENT_QUEUE_A_MOMENT
        return OrderlyResult.SUCCESS

    recorder = Recorder(answer)
    harness = Harness(recorder, max_reconsume_times=2)
    await harness.take(Q0)
    harness.service.start()
    harness.feed(Q0, range(3))
    for deliveries in (2, 3):  # offset 1 fails with reconsume times 0, then 1
        await until(functools.partial(lambda count: len(recorder.offsets) == count, deliveries))
        await until(lambda: harness.clock.sleeper_count == 2)
        harness.clock.advance_ms(1_000)
    # The third failure (reconsume times 2 = the maximum): dead-lettered, and 2 follows at once.
    await until(lambda: recorder.offsets == [0, 1, 1, 1, 2])
    assert harness.send_back.sent_back == [("ID-T-0-1", "broker-a", DLQ_DELAY_LEVEL, 2)]
    await until(lambda: harness.process_queues[Q0].message_count == 0)
    assert await harness.committed(Q0) == 3
    info = harness.service.queue_info(harness.process_queues[Q0])
    assert info[INFO_DEAD_LETTERED] == 1 and info[INFO_RETRY_TIMES] == 0
    assert harness.service.stats.dead_lettered == 1
    await harness.service.shutdown()


async def test_dlq_falls_back_to_a_resend_and_never_skips_a_message_it_cannot_send() -> None:
    recorder = Recorder(lambda messages: OrderlyResult.SUSPEND_CURRENT_QUEUE_A_MOMENT)
    harness = Harness(recorder, max_reconsume_times=0)
    harness.send_back.broker_fails = True
    await harness.take(Q0)
    harness.service.start()
    harness.feed(Q0, range(1))
    await until(lambda: len(harness.send_back.resent) == 1)
    resent = harness.send_back.resent[0]
    assert resent.topic == "%RETRY%G"
    assert int(resent.properties[PropertyKey.RECONSUME_TIME]) > int(
        resent.properties[PropertyKey.MAX_RECONSUME_TIMES]
    ), "past its maximum: the broker stores it in %DLQ%"
    await until(lambda: harness.process_queues[Q0].message_count == 0)
    assert await harness.committed(Q0) == 1

    harness.send_back.resend_fails = True
    harness.feed(Q0, range(1, 2))
    await until(lambda: harness.service.stats.dead_letter_failed == 1)
    await until(lambda: harness.clock.sleeper_count == 2)
    assert await harness.committed(Q0) == 1, "a message that could not be dead-lettered stays"
    assert harness.process_queues[Q0].message_count == 1
    harness.send_back.resend_fails = False
    harness.clock.advance_ms(1_000)
    await until(lambda: harness.process_queues[Q0].message_count == 0)
    assert await harness.committed(Q0) == 2
    await harness.service.shutdown()


# ---- the broker lock --------------------------------------------------------------------------


async def test_a_queue_locked_by_another_client_is_not_admitted_and_a_rebalance_is_asked() -> None:
    clock = ManualClock()
    table = RebalanceLockManager(clock)
    other = Harness(Recorder(), clock=clock, table=table, client_id="c2")
    await other.take(Q0)
    harness = Harness(Recorder(), clock=clock, table=table)
    assert not await harness.service.admit(Q0, ProcessQueue(clock.now_ms()))
    await until(lambda: clock.sleeper_count == 1)
    clock.advance_ms(limits.ORDERLY_LOCK_RETRY_REBALANCE_DELAY_MS)
    await until(lambda: harness.rebalance_requests == 1)
    assert harness.service.pull_hold_ms(Q1) == 0, "a queue not owned is not held"


async def test_no_lock_no_consumption_until_the_broker_grants_it() -> None:
    clock = ManualClock()
    table = RebalanceLockManager(clock)
    recorder = Recorder()
    harness = Harness(recorder, clock=clock, table=table)
    harness.service.start()
    process_queue = ProcessQueue(clock.now_ms())  # owned, but never locked
    harness.process_queues[Q0] = process_queue
    assert table.try_lock(GROUP, Q0, "c2")  # another member holds it at the broker
    assert harness.service.pull_hold_ms(Q0) == limits.ORDERLY_PULL_DELAY_NOT_LOCKED_MS
    harness.feed(Q0, range(2))
    await until(lambda: clock.sleeper_count == 2)  # the lock renewal, and the re-lock in 100 ms
    clock.advance_ms(limits.ORDERLY_RELOCK_FIRST_DELAY_MS)
    await until(lambda: len(harness.lock_client.requests) == 1)
    await until(lambda: clock.sleeper_count == 2)  # refused: look again in 3 s
    assert recorder.calls == []
    table.unlock_batch(GROUP, [Q0], "c2")
    clock.advance_ms(limits.ORDERLY_RELOCK_RETRY_DELAY_MS)
    await until(lambda: clock.sleeper_count == 2)  # runs, finds no lock, re-locks in 100 ms
    clock.advance_ms(limits.ORDERLY_RELOCK_FIRST_DELAY_MS)
    await until(lambda: process_queue.locked)
    await until(lambda: clock.sleeper_count == 2)  # granted: consume in 10 ms
    clock.advance_ms(limits.ORDERLY_RESUBMIT_DELAY_MS)
    await until(lambda: recorder.offsets == [0, 1])
    assert harness.service.pull_hold_ms(Q0) == 0
    await harness.service.shutdown()


async def test_an_expired_client_lock_stops_consumption_until_renewed() -> None:
    clock = ManualClock()
    recorder = Recorder()
    harness = Harness(recorder, clock=clock)
    process_queue = await harness.take(Q0)
    harness.lock_client.unreachable = True  # renewals fail from now on
    harness.service.start()
    harness.feed(Q0, range(1))
    await until(lambda: recorder.offsets == [0])
    clock.advance_ms(limits.CLIENT_LOCK_MAX_LIVE_MS + 1)  # renewals failed meanwhile
    harness.feed(Q0, range(1, 2))
    await until(lambda: clock.sleeper_count == 2)  # the renewal, and a re-lock in 100 ms
    assert recorder.offsets == [0], "an expired client lock stops consumption"
    assert process_queue.locked, "the flag stays; the lease ran out"
    harness.lock_client.unreachable = False
    clock.advance_ms(limits.ORDERLY_RELOCK_FIRST_DELAY_MS)
    await until(lambda: process_queue.last_lock_timestamp_ms == clock.now_ms())
    await until(lambda: clock.sleeper_count == 2)
    clock.advance_ms(limits.ORDERLY_RESUBMIT_DELAY_MS)
    await until(lambda: recorder.offsets == [0, 1])
    await harness.service.shutdown()


async def test_lock_renewal_runs_every_interval_and_marks_lost_queues() -> None:
    clock = ManualClock()
    table = RebalanceLockManager(clock)
    harness = Harness(Recorder(), clock=clock, table=table)
    q0 = await harness.take(Q0)
    q1 = await harness.take(Q1)
    harness.service.start()
    table.unlock_batch(GROUP, [Q1], "c1")
    assert table.try_lock(GROUP, Q1, "c2")  # Q1 changed hands at the broker
    await until(lambda: clock.sleeper_count == 1)
    clock.advance_ms(limits.CLIENT_LOCK_RENEW_INITIAL_DELAY_MS)
    await until(lambda: len(harness.lock_client.requests) == 3)
    assert harness.lock_client.requests[-1] == ("lock", frozenset({Q0, Q1}))
    await until(lambda: not q1.locked)
    assert q0.locked and q0.last_lock_timestamp_ms == clock.now_ms()
    await until(lambda: clock.sleeper_count == 1)
    clock.advance_ms(limits.CLIENT_LOCK_RENEW_INTERVAL_MS - 1)
    for _ in range(20):
        await asyncio.sleep(0)
    assert len(harness.lock_client.requests) == 3
    clock.advance_ms(1)
    await until(lambda: len(harness.lock_client.requests) == 4)
    await harness.service.shutdown()


# ---- giving a queue up, and shutdown ----------------------------------------------------------


async def test_a_rebalance_waits_for_the_batch_in_flight_before_unlocking() -> None:
    recorder = Recorder()
    recorder.gate = asyncio.Event()
    harness = Harness(recorder)
    process_queue = await harness.take(Q0)
    harness.service.start()
    harness.feed(Q0, range(3))
    await until(lambda: recorder.running == 1)
    process_queue.dropped = True  # the rebalance took Q0 away
    quiesce = asyncio.ensure_future(harness.service.quiesce(Q0, process_queue))
    await until(lambda: harness.clock.sleeper_count == 2)  # the lock renewal, and the wait
    harness.clock.advance_ms(limits.ORDERLY_DROP_WAIT_MS)
    assert await quiesce is False, "still consuming: the queue is not given up yet"
    assert process_queue.try_unlock_times == 1
    assert harness.table.holder(GROUP, Q0) == "c1"
    quiesce = asyncio.ensure_future(harness.service.quiesce(Q0, process_queue))
    recorder.gate.set()
    assert await quiesce is True
    assert await harness.committed(Q0) == 1, "the batch in flight was committed first"
    assert recorder.offsets == [0], "no batch starts on a dropped queue"
    harness.store.update_offset(Q0, 0, increase_only=False)
    await harness.service.release(Q0, process_queue)
    assert harness.table.holder(GROUP, Q0) is None
    assert not process_queue.locked
    await harness.service.shutdown()


async def test_shutdown_lets_the_call_in_flight_finish_and_unlock_all_releases_every_queue() -> (
    None
):
    recorder = Recorder()
    recorder.gate = asyncio.Event()
    harness = Harness(recorder)
    await harness.take(Q0)
    await harness.take(Q1)
    harness.service.start()
    harness.feed(Q0, range(3))
    await until(lambda: recorder.running == 1)
    shutdown = asyncio.ensure_future(harness.service.shutdown())
    for _ in range(20):
        await asyncio.sleep(0)
    assert not shutdown.done()
    recorder.gate.set()
    await shutdown
    assert recorder.offsets == [0], "no batch starts after shutdown began"
    assert await harness.committed(Q0) == 1
    harness.feed(Q0, range(3, 4))  # ignored after shutdown
    await harness.service.unlock_all()
    assert harness.table.locked_queues(GROUP) == {}
    assert recorder.offsets == [0]


async def test_continuous_consumption_yields_after_its_time_slice() -> None:
    harness: Harness
    calls: list[int] = []

    async def slow(messages: list[MessageExt]) -> OrderlyResult:
        calls.append(messages[0].queue_offset)
        harness.clock.advance_ms(20_000)  # each call takes 20 s of the manual clock
        return OrderlyResult.SUCCESS

    harness = Harness(slow)
    harness.service = OrderlyConsumeService(
        GROUP,
        adapt_listener(slow),
        message_model=MessageModel.BROADCASTING,
        offset_store=harness.store,
        send_back=harness.send_back,
        locker=None,
        clock=harness.clock,
        owned_queues=lambda: harness.process_queues,
    )
    harness.process_queues[Q0] = ProcessQueue(harness.clock.now_ms())
    harness.service.start()
    harness.feed(Q0, range(6))
    await until(lambda: len(calls) == 4)  # 0 s, 20 s, 40 s, 60 s: then more than 60 s passed
    await until(lambda: harness.clock.sleeper_count == 1)
    assert calls == [0, 1, 2, 3]
    harness.clock.advance_ms(limits.ORDERLY_RESUBMIT_DELAY_MS)
    await until(lambda: len(calls) == 6)
    await harness.service.shutdown()


@pytest.mark.parametrize("model", [MessageModel.BROADCASTING])
async def test_broadcasting_takes_no_locks(model: MessageModel) -> None:
    recorder = Recorder()
    harness = Harness(recorder, model=model)
    process_queue = ProcessQueue(harness.clock.now_ms())
    assert await harness.service.admit(Q0, process_queue)
    harness.process_queues[Q0] = process_queue
    harness.service.start()
    harness.feed(Q0, range(2))
    await until(lambda: recorder.offsets == [0, 1])
    assert harness.lock_client.requests == []
    assert harness.service.pull_hold_ms(Q0) == 0
    await harness.service.release(Q0, process_queue)
    await harness.service.unlock_all()
    assert harness.lock_client.requests == []
    await harness.service.shutdown()


# ---- the push consumer's orderly options --------------------------------------------------------


def test_push_consumer_orderly_options_are_checked_and_retries_unbounded_by_default() -> None:
    namesrv = "127.0.0.1:9876"
    orderly = PushConsumer("G", namesrv, orderly=True)
    assert orderly.orderly_max_reconsume_times is None, "unlimited, as RocketMQ"
    assert orderly.max_reconsume_times == limits.RECONSUME_DEFAULT_MAX_TIMES  # concurrent: 16
    assert (
        PushConsumer(
            "G", namesrv, orderly=True, options=ConsumerOptions(max_reconsume_times=3)
        ).orderly_max_reconsume_times
        == 3
    )
    assert orderly.running_info().properties["PROP_CONSUMEORDERLY"] == "true"
    assert orderly.running_info().properties["maxReconsumeTimes"] == "-1"
    with pytest.raises(ConfigError):
        ConsumerOptions(suspend_time_ms=5)
    with pytest.raises(ConfigError):
        ConsumerOptions(lock_renew_interval_ms=30_000)
    with pytest.raises(ConfigError):
        orderly.orderly_service  # noqa: B018  (only after start)


# ---- a consume task failing outside the listener ------------------------------------------------


async def test_a_failing_consume_task_rolls_back_and_frees_its_queue(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A failure outside the listener (here the dead-letter send-back raising what no one
    expected) used to kill the task with the batch taken and the queue marked active: nothing
    consumed the queue again until it was re-created. Now the batch is rolled back and the
    queue tried again after the suspend time."""
    answers = [OrderlyResult.SUSPEND_CURRENT_QUEUE_A_MOMENT]
    recorder = Recorder(lambda messages: answers.pop() if answers else OrderlyResult.SUCCESS)
    harness = Harness(recorder, max_reconsume_times=0)
    await harness.take(Q0)
    harness.service.start()
    failures = [RuntimeError("send-back broken")]

    async def failing_once(*args: object) -> None:
        raise failures.pop()

    monkeypatch.setattr(harness.send_back, "send_back", failing_once)
    harness.feed(Q0, range(2))
    await until(lambda: not failures and harness.clock.sleeper_count == 2)
    assert recorder.offsets == [0]
    harness.clock.advance_ms(limits.ORDERLY_SUSPEND_MAX_MS)  # the retry after the suspend time
    await until(lambda: recorder.offsets == [0, 0, 1])
    await until(lambda: harness.process_queues[Q0].message_count == 0)
    assert await harness.committed(Q0) == 2
    harness.feed(Q0, range(2, 3))  # the queue takes new work as before
    await until(lambda: recorder.offsets == [0, 0, 1, 2])
    await harness.service.shutdown()
