"""The pull loop's reaction to every pull status (docs/protocol.md §2.4), flow control, the
client-side tag re-filter and the request it sends — on a manual clock."""

from __future__ import annotations

import asyncio

from bolide.base import limits
from bolide.base.clock import ManualClock
from bolide.base.errors import ConnectionClosedError
from bolide.client.consumer.offset_store import ReadOffsetType, RemoteOffsetStore
from bolide.client.consumer.process_queue import ProcessQueue
from bolide.client.consumer.pull_loop import PullLoop, PullSettings, build_pull_sys_flag
from bolide.client.rpc import PullResult, PullStatus
from bolide.protocol.bodies import MessageQueue, SubscriptionData
from bolide.protocol.codes import ResponseCode
from bolide.protocol.headers import PullMessageRequestHeader, PullSysFlag
from bolide.protocol.message import MessageExt, java_string_hash
from bolide.testing.waiting import until
from tests.client.consumer_peers import (
    MemoryOffsetBroker,
    ScriptedPullClient,
    message,
    queues,
    remote,
)

QUEUE = queues("T", 1)[0]


def found(next_offset: int, *messages: MessageExt) -> PullResult:
    return PullResult(PullStatus.FOUND, next_offset, 0, next_offset, 0, list(messages))


def status(kind: PullStatus, next_offset: int) -> PullResult:
    return PullResult(kind, next_offset, 0, next_offset, 0, [])


class _Harness:
    def __init__(self, expression: str = "*", settings: PullSettings | None = None) -> None:
        self.clock = ManualClock()
        self.client = ScriptedPullClient()
        self.store = RemoteOffsetStore(MemoryOffsetBroker())
        self.delivered: list[MessageExt] = []
        self.fixes: list[tuple[MessageQueue, int]] = []
        self.subscription = SubscriptionData.from_expression("T", expression, 77)
        self.process_queue = ProcessQueue(0)
        self.loop = PullLoop(
            "G",
            client=self.client,
            offset_store=self.store,
            subscription=lambda topic: self.subscription if topic == "T" else None,
            sink=lambda messages, pq, queue: self.delivered.extend(messages),
            fix_offset=self._fix,
            clock=self.clock,
            settings=settings,
        )

    async def _fix(self, queue: MessageQueue, process_queue: ProcessQueue, offset: int) -> None:
        self.fixes.append((queue, offset))

    def start(self, offset: int = 0) -> None:
        self.loop.start(QUEUE, self.process_queue, offset)

    async def pulls(self, count: int) -> None:
        """Wait until ``count`` pull requests were sent."""
        await until(lambda: len(self.client.requests) >= count)


def test_sys_flag_bits() -> None:
    assert build_pull_sys_flag(commit_offset=False, suspend=True, subscription=False) == 2
    assert build_pull_sys_flag(commit_offset=True, suspend=True, subscription=True) == 7


async def test_found_messages_are_cached_filtered_and_pulled_again_at_once() -> None:
    harness = _Harness("Aa")
    # "Aa" and "BB" share a Java hash code: the broker lets both through, the client must not.
    assert java_string_hash("Aa") == java_string_hash("BB")
    harness.client.answer(
        found(3, message("T", 0, 0, tags="Aa"), message("T", 0, 1, tags="BB"), message("T", 0, 2))
    )
    harness.start()
    try:
        await harness.pulls(2)
        assert [m.queue_offset for m in harness.delivered] == [0]
        assert harness.process_queue.message_count == 1
        first, second = harness.client.requests
        assert (first.queue_offset, second.queue_offset) == (0, 3)
        assert first.flags == PullSysFlag.SUSPEND  # no committed offset yet, no subscription
        assert first.suspend_timeout_ms == limits.PULL_SUSPEND_TIMEOUT_MS
        assert first.max_messages == limits.PULL_BATCH_SIZE_MESSAGES
        assert (first.subscription, first.sub_version) == ("Aa", 77)
    finally:
        await harness.loop.shutdown()


async def test_committed_offset_is_piggybacked() -> None:
    harness = _Harness()
    harness.store.update_offset(QUEUE, 12, increase_only=True)
    harness.start(12)
    try:
        await harness.pulls(1)
        request = harness.client.requests[0]
        assert request.flags == PullSysFlag.SUSPEND | PullSysFlag.COMMIT_OFFSET
        assert request.commit_offset == 12
    finally:
        await harness.loop.shutdown()


async def test_no_new_and_no_matched_move_the_offset_when_nothing_is_cached() -> None:
    harness = _Harness()
    harness.client.answer(
        status(PullStatus.NO_MATCHED_MSG, 5),
        found(6, message("T", 0, 5)),
        status(PullStatus.NO_NEW_MSG, 6),
    )
    harness.start()
    try:
        await harness.pulls(2)
        read = ReadOffsetType.READ_FROM_MEMORY
        assert await harness.store.read_offset(QUEUE, read) == 5  # filtered entries skipped
        await harness.pulls(4)
        assert [r.queue_offset for r in harness.client.requests] == [0, 5, 6, 6]
        # Offset 5 is cached (not consumed yet): NO_NEW_MSG must not commit past it.
        assert await harness.store.read_offset(QUEUE, read) == 5
    finally:
        await harness.loop.shutdown()


async def test_offset_illegal_drops_the_queue_and_fixes_it_10_s_later() -> None:
    harness = _Harness()
    harness.client.answer(status(PullStatus.OFFSET_ILLEGAL, 40))
    harness.start(99)
    await until(lambda: harness.process_queue.dropped)
    await until(lambda: harness.clock.sleeper_count == 1)
    harness.clock.advance_ms(limits.PULL_OFFSET_ILLEGAL_FIX_DELAY_MS - 1)
    for _ in range(20):
        await asyncio.sleep(0)
    assert harness.fixes == []
    harness.clock.advance_ms(1)
    await until(lambda: harness.fixes == [(QUEUE, 40)])
    assert len(harness.client.requests) == 1  # the loop of a dropped queue stops
    await harness.loop.shutdown()


async def test_errors_wait_3_s_and_broker_flow_control_20_ms() -> None:
    """SYSTEM_BUSY (a full long-poll table) is an error: 3 s, never an immediate re-pull."""
    harness = _Harness()
    harness.client.answer(
        remote(ResponseCode.SYSTEM_BUSY),
        remote(ResponseCode.FLOW_CONTROL),
        ConnectionClosedError("gone"),
    )
    harness.start()
    try:
        await harness.pulls(1)
        await until(lambda: harness.clock.sleeper_count == 1)
        harness.clock.advance_ms(limits.PULL_DELAY_ON_ERROR_MS - 1)
        await asyncio.sleep(0)
        assert len(harness.client.requests) == 1
        harness.clock.advance_ms(1)
        await harness.pulls(2)
        await until(lambda: harness.clock.sleeper_count == 1)
        harness.clock.advance_ms(limits.PULL_DELAY_ON_BROKER_FLOW_CONTROL_MS)
        await harness.pulls(3)
        await until(lambda: harness.clock.sleeper_count == 1)
        harness.clock.advance_ms(limits.PULL_DELAY_ON_ERROR_MS)
        await harness.pulls(4)
        assert {r.queue_offset for r in harness.client.requests} == {0}
    finally:
        await harness.loop.shutdown()


async def test_flow_control_waits_until_the_cache_drains() -> None:
    settings = PullSettings(max_cached_messages=1)
    harness = _Harness(settings=settings)
    harness.client.answer(found(2, message("T", 0, 0), message("T", 0, 1)))
    harness.start()
    try:
        await until(lambda: harness.process_queue.message_count == 2)
        await until(lambda: harness.clock.sleeper_count == 1)  # over the threshold: waiting
        assert len(harness.client.requests) == 1
        harness.process_queue.remove_messages(harness.delivered, harness.clock.now_ms())
        harness.clock.advance_ms(limits.PULL_DELAY_ON_FLOW_CONTROL_MS)
        await harness.pulls(2)
    finally:
        await harness.loop.shutdown()


async def test_span_and_bytes_thresholds_also_block() -> None:
    harness = _Harness(settings=PullSettings(max_span_offsets=10, max_cached_bytes=1_000))
    harness.client.answer(found(30, message("T", 0, 0), message("T", 0, 20)))
    harness.start()
    try:
        await until(lambda: harness.clock.sleeper_count == 1)
        assert len(harness.client.requests) == 1
    finally:
        await harness.loop.shutdown()


async def test_dropped_queue_result_is_discarded_and_stop_abandons_a_parked_pull() -> None:
    harness = _Harness()
    harness.start()
    await harness.pulls(1)  # parked: the script has no answer
    harness.process_queue.dropped = True
    harness.client.answer(found(1, message("T", 0, 0)))
    await until(lambda: not harness.loop.pulling)
    assert harness.delivered == []
    fresh = ProcessQueue(0)
    harness.loop.start(QUEUE, fresh, 0)
    await harness.pulls(2)
    harness.loop.stop(QUEUE)
    await until(lambda: not harness.loop.pulling)
    await harness.loop.shutdown()


async def test_pull_round_trips_and_found_messages_are_measured_per_topic() -> None:
    harness = _Harness("*")
    harness.start()
    try:
        await harness.pulls(1)  # parked: the long poll answers 40 ms later
        harness.clock.advance_ms(40)
        harness.client.answer(found(2, message("T", 0, 0), message("T", 0, 1)))
        await harness.pulls(2)  # the second pull parks with nothing to answer
        harness.clock.advance_ms(1_000)
        pull_tps, _, pull_rt_ms = harness.loop.rates.status("T", harness.clock.now_ms())
        assert (pull_tps, pull_rt_ms) == (2.0, 40.0)  # 2 messages in 1 s; one 40 ms trip
        assert harness.loop.rates.status("Other", harness.clock.now_ms()) == (0.0, 0.0, 0.0)
    finally:
        await harness.loop.shutdown()


async def test_what_the_sink_wakes_runs_before_the_next_pull_is_sent() -> None:
    """A FOUND pull hands its messages on, then lets the woken consume work run before it
    builds the next pull (the listener must not wait for it)."""
    harness = _Harness()
    events: list[str] = []
    loop = asyncio.get_running_loop()

    def sink(messages: list[MessageExt], pq: ProcessQueue, queue: MessageQueue) -> None:
        loop.call_soon(events.append, f"consumed {len(messages)}")  # a worker's wake-up

    harness.loop._sink = sink
    pull_message = harness.client.pull_message

    async def recorded(
        queue: MessageQueue, header: PullMessageRequestHeader, timeout_ms: int
    ) -> PullResult:
        events.append("pull")
        return await pull_message(queue, header, timeout_ms)

    harness.client.pull_message = recorded  # type: ignore[method-assign]
    harness.client.answer(found(2, message("T", 0, 0), message("T", 0, 1)))
    harness.start()
    try:
        await until(lambda: events.count("pull") >= 2)
        assert events[:3] == ["pull", "consumed 2", "pull"]
    finally:
        await harness.loop.shutdown()
