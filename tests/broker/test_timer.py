"""Timer messages: parsing, time-ordered delivery to the millisecond, the load window, the timer
log against the queue, and restarts — on a manual clock (no sleeps)."""

from __future__ import annotations

import json
import shutil
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bolide.base.clock import ManualClock
from bolide.broker.delivery import DELIVERED_FROM
from bolide.broker.timer import (
    TIMER_OUT_MS,
    TIMER_TOPIC,
    TimerMessageService,
    TimerPropertyError,
    timer_deliver_ms,
)
from bolide.protocol.message import PropertyKey
from bolide.store.api import MessageStore, PutRequest, PutResult, PutStatus
from bolide.store.file_store import FileMessageStore
from bolide.store.memory_store import MemoryMessageStore
from bolide.store.timer_log import TimerLog, timer_log_dir
from bolide.testing.waiting import until

from .delay_support import (
    SEGMENT_BYTES,
    STORE_HOST,
    put_request,
    read_queue,
    started_store,
    store_config,
)

NOW = 1_700_000_000_000
DAY_MS = 86_400_000


# --- the properties ---------------------------------------------------------------------------


def test_timer_properties_give_a_delivery_time() -> None:
    assert timer_deliver_ms({}, NOW, DAY_MS) is None
    assert timer_deliver_ms({"TIMER_DELAY_SEC": "3"}, NOW, DAY_MS) == NOW + 3_000
    assert timer_deliver_ms({"TIMER_DELAY_MS": "1500"}, NOW, DAY_MS) == NOW + 1_500
    assert timer_deliver_ms({"TIMER_DELIVER_MS": str(NOW + 7)}, NOW, DAY_MS) == NOW + 7
    both = {"TIMER_DELAY_MS": "5", "TIMER_DELIVER_MS": str(NOW + 9)}
    assert timer_deliver_ms(both, NOW, DAY_MS) == NOW + 5  # RocketMQ 5's order
    assert timer_deliver_ms({"TIMER_DELAY_MS": str(DAY_MS)}, NOW, DAY_MS) == NOW + DAY_MS


@pytest.mark.parametrize(
    "properties",
    [
        {"TIMER_DELAY_MS": "soon"},
        {"TIMER_DELAY_SEC": "-1"},
        {"TIMER_DELAY_MS": str(DAY_MS + 1)},
        {"TIMER_DELIVER_MS": str(NOW + DAY_MS + 1)},
    ],
)
def test_bad_or_too_distant_timers_are_refused(properties: dict[str, str]) -> None:
    with pytest.raises(TimerPropertyError):
        timer_deliver_ms(properties, NOW, DAY_MS)


# --- the service ------------------------------------------------------------------------------


@dataclass
class Setup:
    clock: ManualClock
    store: MessageStore
    service: TimerMessageService
    root: Path
    store_loops: int

    async def settle(self) -> None:
        """Every loop (delivery, persist and the store's own) asleep again."""
        await until(lambda: self.clock.sleeper_count >= 2 + self.store_loops)

    async def advance(self, duration_ms: int) -> None:
        await self.settle()
        self.clock.advance_ms(duration_ms)

    async def send(self, body: str, properties: dict[str, str], queue_id: int = 0) -> None:
        properties = {PropertyKey.TAGS: "t", **properties}
        topic, target_queue = self.service.plan(properties, "orders", queue_id)
        assert (await self.store.put_message(put_request(topic, target_queue, body.encode(),
                                                         properties))).ok  # fmt: skip

    def delivered(self, queue_id: int = 0) -> list[str]:
        return [m.body.decode() for m in read_queue(self.store, "orders", queue_id)]


def _service(
    store: MessageStore, root: Path, clock: ManualClock, **kwargs: Any
) -> TimerMessageService:
    return TimerMessageService(
        store,
        TimerLog(timer_log_dir(root / "store"), segment_entries=8),
        root / "store" / "config" / "timerProgress.json",
        clock,
        segment_bytes=SEGMENT_BYTES,
        max_delay_ms=DAY_MS,
        **kwargs,
    )


async def _start(
    store: MessageStore, root: Path, clock: ManualClock, **kwargs: Any
) -> TimerMessageService:
    flush = store.flush if isinstance(store, FileMessageStore) else None
    service = _service(store, root, clock, flush_store=flush, **kwargs)
    service.load()
    await service.start()
    return service


@pytest.fixture(params=["memory", "file"])
async def setup(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Setup]:
    clock = ManualClock(NOW)
    store = await started_store(request.param, tmp_path, clock)
    service = await _start(store, tmp_path, clock)
    yield Setup(clock, store, service, tmp_path, 0 if request.param == "memory" else 3)
    await service.stop()
    await store.shutdown()


async def test_plan_retargets_only_future_times(setup: Setup) -> None:
    properties = {"TIMER_DELAY_MS": "250", "k": "v"}
    assert setup.service.plan(properties, "orders", 3) == (TIMER_TOPIC, 0)
    assert properties[PropertyKey.REAL_TOPIC] == "orders"
    assert properties[PropertyKey.REAL_QID] == "3"
    assert properties[TIMER_OUT_MS] == str(NOW + 250)
    past = {"TIMER_DELIVER_MS": str(NOW - 5), "k": "v"}
    assert setup.service.plan(past, "orders", 3) == ("orders", 3)
    assert past == {"k": "v"}  # delivered at once, without the trigger
    with pytest.raises(TimerPropertyError):
        setup.service.plan({"TIMER_DELAY_SEC": str(2 * 86_400)}, "orders", 3)


async def test_delivered_in_time_order_to_the_millisecond(setup: Setup) -> None:
    delays = [700, 5, 300, 301, 1_000, 300, 42]
    for number, delay in enumerate(delays):
        await setup.send(f"m{number}-{delay}", {"TIMER_DELAY_MS": str(delay)})
    expected = sorted(range(len(delays)), key=lambda n: (delays[n], n))
    elapsed = 0
    for position, number in enumerate(expected):
        due = delays[number]
        if due > elapsed:
            await setup.advance(due - 1 - elapsed)
            await setup.settle()
            assert len(setup.delivered()) == position, f"{number} early"
            await setup.advance(1)
            elapsed = due
        count = position + 1
        await until(lambda: len(setup.delivered()) >= count)  # noqa: B023 (awaited at once)
    await setup.settle()
    assert setup.delivered() == [f"m{n}-{delays[n]}" for n in expected]
    messages = read_queue(setup.store, "orders")
    for message in messages:
        assert message.store_timestamp_ms == int(message.properties[TIMER_OUT_MS])
        assert PropertyKey.TIMER_DELAY_MS not in message.properties
        assert message.properties[DELIVERED_FROM].startswith("T:")
        assert message.properties[PropertyKey.WAIT] == "false"
    assert setup.service.delivered_key == (NOW + 1_000, 4)


async def test_an_earlier_timer_arriving_later_wakes_the_loop(setup: Setup) -> None:
    await setup.send("late", {"TIMER_DELAY_MS": "10000"})
    await setup.settle()
    await setup.send("early", {"TIMER_DELAY_MS": "10"})
    await setup.advance(10)
    await until(lambda: setup.delivered() == ["early"])
    await setup.advance(9_990)
    await until(lambda: setup.delivered() == ["early", "late"])


async def test_absolute_delivery_time_and_real_queue(setup: Setup) -> None:
    await setup.send("at", {"TIMER_DELIVER_MS": str(NOW + 2_500)}, queue_id=2)
    await setup.advance(2_500)
    await until(lambda: setup.delivered(2) == ["at"])


async def test_far_timers_wait_on_disk_until_the_window_reaches_them(tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    store = await started_store("memory", tmp_path, clock)
    service = await _start(store, tmp_path, clock, load_window_ms=1_000)
    setup = Setup(clock, store, service, tmp_path, 0)
    await setup.send("near", {"TIMER_DELAY_MS": "400"})
    await setup.send("far", {"TIMER_DELAY_MS": "5000"})
    assert service.pending_in_memory == 1  # "far" is only in the timer log
    for _ in range(9):
        await setup.advance(500)
    await setup.settle()
    assert setup.delivered() == ["near"]
    assert service.pending_in_memory == 1
    await setup.advance(500)
    await until(lambda: setup.delivered() == ["near", "far"])
    await service.stop()
    await store.shutdown()


async def test_progress_file_and_log_cleanup(tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    store = await started_store("file", tmp_path, clock)
    service = await _start(store, tmp_path, clock, load_window_ms=2_000)
    setup = Setup(clock, store, service, tmp_path, 3)
    for number in range(20):
        await setup.send(str(number), {"TIMER_DELAY_MS": str(100 + number)})
    log_dir = timer_log_dir(tmp_path / "store")
    assert len(list(log_dir.iterdir())) == 3  # 8 entries per file
    await setup.advance(200)
    await until(lambda: len(setup.delivered()) == 20)
    path = tmp_path / "store" / "config" / "timerProgress.json"
    assert json.loads(path.read_bytes())["deliveredQueueOffset"] == -1  # written at start
    await setup.advance(1_000)  # the store's flush loop covers the deliveries
    await setup.advance(9_000)  # 10 s: the persister writes the progress
    await until(lambda: json.loads(path.read_bytes())["deliveredQueueOffset"] == 19)
    assert json.loads(path.read_bytes())["deliveredDeliverMs"] == NOW + 119
    assert len(list(log_dir.iterdir())) == 3
    # The next window rescan sees entries 0..19 durably delivered and deletes the two files
    # that hold nothing else (the third one is still being filled).
    await setup.advance(1_000)
    await until(lambda: len(list(log_dir.iterdir())) == 1)
    await service.stop()
    await store.shutdown()


# --- restarts ---------------------------------------------------------------------------------


async def _restart_case(tmp_path: Path, *, stale_progress: bool, drop_log: bool) -> None:
    clock = ManualClock(NOW)
    store = await started_store("file", tmp_path, clock)
    service = await _start(store, tmp_path, clock)
    setup = Setup(clock, store, service, tmp_path, 3)
    progress = tmp_path / "store" / "config" / "timerProgress.json"
    before = progress.read_bytes()
    for number in range(12):
        await setup.send(f"m{number}", {"TIMER_DELAY_MS": str(100 * (number + 1))})
    await setup.advance(600)
    await until(lambda: len(setup.delivered()) == 6)
    await setup.settle()
    await service.stop()
    await store.shutdown()
    if stale_progress:
        progress.write_bytes(before)  # as if killed before the progress was written again
    if drop_log:
        shutil.rmtree(timer_log_dir(tmp_path / "store"))
    store = await started_store("file", tmp_path, clock)
    restarted = await _start(store, tmp_path, clock)
    setup = Setup(clock, store, restarted, tmp_path, 3)
    assert restarted.delivered_key == (NOW + 600, 5)
    await setup.advance(600)
    await until(lambda: len(setup.delivered()) == 12)
    await setup.advance(1_000)
    await setup.settle()
    assert setup.delivered() == [f"m{n}" for n in range(12)]
    await restarted.stop()
    await store.shutdown()


async def test_restart_resumes_where_it_stopped(tmp_path: Path) -> None:
    await _restart_case(tmp_path, stale_progress=False, drop_log=False)


async def test_restart_with_stale_progress_delivers_each_once(tmp_path: Path) -> None:
    await _restart_case(tmp_path, stale_progress=True, drop_log=False)


async def test_a_lost_timer_log_is_rebuilt_from_the_records(tmp_path: Path) -> None:
    await _restart_case(tmp_path, stale_progress=True, drop_log=True)


async def test_a_log_that_disagrees_with_the_queue_is_reindexed(tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    store = await started_store("file", tmp_path, clock)
    service = await _start(store, tmp_path, clock)
    setup = Setup(clock, store, service, tmp_path, 3)
    for number in range(5):
        await setup.send(f"m{number}", {"TIMER_DELAY_MS": str(1_000 + number)})
    await service.stop()
    log = TimerLog(timer_log_dir(tmp_path / "store"), segment_entries=8)
    log.open()
    log.truncate(2)
    entry = log.read(1, 1)[0]
    log.truncate(1)
    log.append(entry._replace(commit_log_offset=entry.commit_log_offset + 1))  # wrong
    log.close()
    restarted = await _start(store, tmp_path, clock)
    setup = Setup(clock, store, restarted, tmp_path, 3)
    await setup.advance(1_004)
    await until(lambda: len(setup.delivered()) == 5)
    assert setup.delivered() == [f"m{n}" for n in range(5)]
    await restarted.stop()
    await store.shutdown()


class _RoundCountingStore(MemoryMessageStore):
    """Records the size of each put round; refuses (DISK_FULL) the ``fail_at``-th delivery."""

    def __init__(self, *args: Any, fail_at: int = 0, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.rounds: list[int] = []
        self.fail_at = fail_at
        self.deliveries = 0

    async def put_message(self, request: PutRequest) -> PutResult:
        if request.topic != TIMER_TOPIC:
            self.deliveries += 1
            if self.deliveries == self.fail_at:
                return PutResult(PutStatus.DISK_FULL, remark="disk full")
        return await super().put_message(request)

    async def put_message_list(
        self, requests: Sequence[PutRequest], *, wait_flushed: bool = True
    ) -> list[PutResult | None]:
        self.rounds.append(len(requests))
        return await super().put_message_list(requests, wait_flushed=wait_flushed)


@pytest.mark.parametrize("fail_at", [0, 4])
async def test_due_timers_are_re_put_in_one_round(tmp_path: Path, fail_at: int) -> None:
    clock = ManualClock(NOW)
    store = _RoundCountingStore(
        store_config(tmp_path), clock=clock, store_host=STORE_HOST, fail_at=fail_at
    )
    await store.start()
    service = await _start(store, tmp_path, clock, retry_after_failure_ms=5_000)
    setup = Setup(clock, store, service, tmp_path, 0)
    for number in range(10):
        await setup.send(f"m{number}", {"TIMER_DELAY_MS": str(100 + number)})
    await setup.advance(200)
    await until(lambda: len(setup.delivered()) == (10 if not fail_at else fail_at - 1))
    if fail_at:
        await setup.advance(5_000)  # the refused one and those after it, once more
        await until(lambda: len(setup.delivered()) == 10)
    assert setup.delivered() == [f"m{number}" for number in range(10)]  # each once, in order
    assert store.rounds == ([10] if not fail_at else [10, 10 - fail_at + 1])
    await service.stop()
    await store.shutdown()


async def test_a_recalled_timer_message_is_dropped_and_others_delivered(setup: Setup) -> None:
    for body in ("kept", "recalled", "also-kept"):
        await setup.send(body, {"TIMER_DELAY_MS": "500", PropertyKey.UNIQ_KEY: f"ID-{body}"})
    marker = await setup.service.recall("orders", "ID-recalled", NOW + 500)
    assert marker is not None and marker.ok
    await setup.advance(499)
    await setup.settle()
    assert setup.delivered() == []
    await setup.advance(1)
    await until(lambda: len(setup.delivered()) == 2)
    await setup.settle()
    assert setup.delivered() == ["kept", "also-kept"]
    # too late: due already
    assert await setup.service.recall("orders", "ID-kept", NOW + 500) is None
