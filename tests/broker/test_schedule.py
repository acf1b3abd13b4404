"""Delay levels and their delivery loops, on a manual clock (no sleeps)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bolide.base.clock import ManualClock
from bolide.base.errors import ConfigError
from bolide.broker.delivery import DELIVERED_FROM, DurableLedger
from bolide.broker.schedule import (
    SCHEDULE_TOPIC,
    DelayLevels,
    ScheduleMessageService,
    correct_deliver_timestamp,
    schedule_target,
)
from bolide.protocol.message import PropertyKey, tags_code
from bolide.store.api import MessageStore, PutRequest, PutResult, PutStatus
from bolide.store.file_store import FileMessageStore
from bolide.store.memory_store import MemoryMessageStore
from bolide.testing.waiting import until

from .delay_support import (
    BORN_HOST,
    SEGMENT_BYTES,
    STORE_HOST,
    put_request,
    read_queue,
    started_store,
    store_config,
)

LEVELS = DelayLevels((1_000, 2_000))


# --- parsing and pure rules -------------------------------------------------------------------


def test_default_levels_parse_as_the_seed_shows() -> None:
    levels = DelayLevels.parse("1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h")
    assert levels.max_level == 18
    assert levels.delay_ms(1) == 1_000
    assert levels.delay_ms(3) == 10_000
    assert levels.delay_ms(5) == 60_000
    assert levels.delay_ms(18) == 7_200_000


def test_any_level_count_and_every_unit() -> None:
    levels = DelayLevels.parse("1s 2m 3h 1d " + " ".join(f"{n}s" for n in range(1, 37)))
    assert levels.max_level == 40
    assert levels.levels_ms[:4] == (1_000, 120_000, 10_800_000, 86_400_000)
    assert levels.clamp(41) == 40
    assert levels.delay_ms(99) == 36_000  # clamped to the highest level


@pytest.mark.parametrize("text", ["", "1x", "0s", "s", "1s 5", " ".join(["1s"] * 65)])
def test_bad_level_lists_are_refused(text: str) -> None:
    with pytest.raises(ConfigError):
        DelayLevels.parse(text)


def test_correct_deliver_timestamp_pulls_back_only_what_exceeds_the_level() -> None:
    now = 1_000_000
    assert correct_deliver_timestamp(now, now + 500, 1_000) == now + 500
    assert correct_deliver_timestamp(now, now + 1_000, 1_000) == now + 1_000
    assert correct_deliver_timestamp(now, now + 1_001, 1_000) == now
    assert correct_deliver_timestamp(now, now - 5, 1_000) == now - 5


def test_schedule_target_keeps_the_real_destination() -> None:
    properties = {PropertyKey.TAGS: "A"}
    assert schedule_target(properties, "orders", 3, 2) == (SCHEDULE_TOPIC, 1)
    assert properties == {"TAGS": "A", "REAL_TOPIC": "orders", "REAL_QID": "3", "DELAY": "2"}


def test_ledger_makes_progress_durable_only_behind_the_flushed_offset() -> None:
    ledger: DurableLedger[int] = DurableLedger(0, max_entries=3)
    ledger.delivered(1, 100)
    ledger.delivered(2, 200)
    ledger.advanced(3)  # skipped record: durable with the delivery before it
    assert ledger.durable(99) == 0
    assert ledger.durable(100) == 1
    assert ledger.durable(250) == 3
    for value, end in ((4, 300), (5, 400), (6, 500), (7, 600)):
        ledger.delivered(value, end)
    # Capped at 3 entries: 7 replaced 6, so 6 never becomes durable on its own, 7 does later.
    assert ledger.durable(500) == 5
    assert ledger.durable(600) == 7


# --- delivery ---------------------------------------------------------------------------------


@dataclass
class Setup:
    clock: ManualClock
    store: MessageStore
    service: ScheduleMessageService
    path: Path
    store_loops: int
    """Loops of the store itself sleeping on the clock (flush, queue flush, retention)."""


def _service(store: MessageStore, path: Path, clock: ManualClock, levels: DelayLevels = LEVELS,
             **kwargs: Any) -> ScheduleMessageService:  # fmt: skip
    return ScheduleMessageService(store, levels, path, clock, segment_bytes=SEGMENT_BYTES, **kwargs)


@pytest.fixture(params=["memory", "file"])
async def setup(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Setup]:
    clock = ManualClock()
    store = await started_store(request.param, tmp_path, clock)
    path = tmp_path / "store" / "config" / "delayOffset.json"
    flush = store.flush if isinstance(store, FileMessageStore) else None
    service = _service(store, path, clock, flush_store=flush)
    service.load()
    await service.start()
    yield Setup(clock, store, service, path, 0 if request.param == "memory" else 3)
    await service.stop()
    await store.shutdown()


async def _put_delayed(
    store: MessageStore, level: int, body: bytes, topic: str = "orders", queue_id: int = 1
) -> PutResult:
    properties = {PropertyKey.TAGS: "paid", PropertyKey.KEYS: body.decode(), "user": "x"}
    store_topic, store_queue = schedule_target(properties, topic, queue_id, level)
    result = await store.put_message(put_request(store_topic, store_queue, body, properties))
    assert result.ok
    return result


async def _settle(setup: Setup) -> None:
    """Let every loop run until it sleeps again (the levels and the persister)."""
    loops = len(setup.service.offset_table()) + 1 + setup.store_loops
    await until(lambda: setup.clock.sleeper_count >= loops)


async def test_a_delayed_message_arrives_at_its_level_and_not_before(setup: Setup) -> None:
    stored = await _put_delayed(setup.store, 2, b"m1")
    assert setup.store.consume_queue_entries(SCHEDULE_TOPIC, 1, 0, 1)[0][2] == (
        stored.store_timestamp_ms + 2_000
    )
    await _settle(setup)
    setup.clock.advance_ms(1_999)
    await _settle(setup)
    assert setup.store.max_offset("orders", 1) == 0
    setup.clock.advance_ms(1)
    await until(lambda: setup.store.max_offset("orders", 1) == 1)
    (delivered,) = read_queue(setup.store, "orders", 1)
    assert delivered.body == b"m1" and delivered.flag == 7
    assert delivered.born_host == BORN_HOST and delivered.born_timestamp_ms == 1_600_000_000_000
    assert delivered.store_timestamp_ms == stored.store_timestamp_ms + 2_000
    assert PropertyKey.DELAY not in delivered.properties
    assert delivered.properties[PropertyKey.WAIT] == "false"
    assert delivered.properties[PropertyKey.REAL_TOPIC] == "orders"
    assert delivered.properties[DELIVERED_FROM] == "L2:0"
    assert delivered.properties["user"] == "x"
    # The real topic's consume queue holds the tag's hash again, not the delivery time.
    assert setup.store.consume_queue_entries("orders", 1, 0, 1)[0][2] == tags_code("paid")
    assert setup.service.offset_table()[2] == 1


async def test_levels_deliver_independently_and_in_order(setup: Setup) -> None:
    for number in range(5):
        await _put_delayed(setup.store, 2, f"slow-{number}".encode())
        await _put_delayed(setup.store, 1, f"fast-{number}".encode())
        setup.clock.advance_ms(10)
    await _settle(setup)
    setup.clock.advance_ms(1_000)
    await until(lambda: setup.store.max_offset("orders", 1) == 5)
    await _settle(setup)
    setup.clock.advance_ms(1_000)
    await until(lambda: setup.store.max_offset("orders", 1) == 10)
    bodies = [message.body.decode() for message in read_queue(setup.store, "orders", 1)]
    assert bodies == [f"fast-{n}" for n in range(5)] + [f"slow-{n}" for n in range(5)]


async def test_a_caught_up_level_wakes_on_arrival(setup: Setup) -> None:
    await _settle(setup)
    setup.clock.advance_ms(60_000)  # idle loops park on their idle interval
    await _settle(setup)
    await _put_delayed(setup.store, 1, b"late")
    await _settle(setup)
    setup.clock.advance_ms(1_000)
    await until(lambda: setup.store.max_offset("orders", 1) == 1)


async def test_delivery_time_beyond_the_level_is_corrected(setup: Setup) -> None:
    # An entry whose delivery time lies an hour ahead (as left by longer levels) is due now.
    properties: dict[str, str] = {}
    topic, queue_id = schedule_target(properties, "orders", 0, 1)
    request = put_request(
        topic, queue_id, b"x", properties, tags_code=setup.clock.now_ms() + 3_600_000
    )
    assert (await setup.store.put_message(request)).ok
    await until(lambda: setup.store.max_offset("orders", 0) == 1)


async def test_many_due_messages_are_delivered_in_batches(tmp_path: Path) -> None:
    clock = ManualClock()
    store = await started_store("memory", tmp_path, clock)
    path = tmp_path / "delayOffset.json"
    for number in range(25):
        await _put_delayed(store, 1, str(number).encode())
    service = _service(store, path, clock, batch_max_messages=4)
    service.load()
    await service.start()
    clock.advance_ms(1_000)
    await until(lambda: store.max_offset("orders", 1) == 25)
    assert [m.body for m in read_queue(store, "orders", 1)] == [str(n).encode() for n in range(25)]
    await service.stop()
    assert json.loads(path.read_bytes())["offsetTable"] == {"1": 25, "2": 0}
    await store.shutdown()


class _FailingStore(MemoryMessageStore):
    """Refuses puts to real topics while ``failing`` is set (a full disk, say)."""

    failing = False
    attempts = 0

    async def put_message(self, request: PutRequest) -> PutResult:
        if request.topic != SCHEDULE_TOPIC:
            self.attempts += 1
            if self.failing:
                return PutResult(PutStatus.DISK_FULL, remark="disk full")
        return await super().put_message(request)


async def test_a_failed_put_is_retried_later_and_nothing_is_lost(tmp_path: Path) -> None:
    clock = ManualClock()
    store = _FailingStore(store_config(tmp_path), clock=clock, store_host=STORE_HOST)
    await store.start()
    service = _service(store, tmp_path / "delayOffset.json", clock, retry_after_failure_ms=10_000)
    service.load()
    await service.start()
    await _put_delayed(store, 1, b"keep-me")
    store.failing = True
    await until(lambda: clock.sleeper_count >= 3)
    clock.advance_ms(1_000)
    await until(lambda: store.attempts == 1)
    assert service.offset_table()[1] == 0
    await until(lambda: clock.sleeper_count >= 3)
    clock.advance_ms(9_999)
    await until(lambda: clock.sleeper_count >= 3)
    assert store.attempts == 1
    store.failing = False
    clock.advance_ms(1)
    await until(lambda: store.max_offset("orders", 1) == 1)
    assert service.offset_table()[1] == 1
    await service.stop()
    await store.shutdown()


async def test_a_record_gone_to_retention_is_skipped(tmp_path: Path) -> None:
    clock = ManualClock()
    store = await started_store("memory", tmp_path, clock)
    properties: dict[str, str] = {}
    topic, queue_id = schedule_target(properties, "orders", 0, 1)
    # Not a record a store holds: no REAL_TOPIC → dropped; the next one is delivered.
    assert (await store.put_message(put_request(topic, queue_id, b"bad", {"DELAY": "1"}))).ok
    assert (await store.put_message(put_request(topic, queue_id, b"good", properties))).ok
    service = _service(store, tmp_path / "d.json", clock)
    service.load()
    await service.start()
    clock.advance_ms(1_000)
    await until(lambda: store.max_offset("orders", 0) == 1)
    assert service.offset_table()[1] == 2
    await service.stop()
    await store.shutdown()


# --- delayOffset.json -------------------------------------------------------------------------


async def test_progress_is_persisted_every_interval_and_at_stop(setup: Setup) -> None:
    await _put_delayed(setup.store, 1, b"a")
    await _settle(setup)
    setup.clock.advance_ms(1_000)
    await until(lambda: setup.service.offset_table()[1] == 1)
    written = json.loads(setup.path.read_bytes())
    assert written["offsetTable"] == {"1": 0, "2": 0}  # written at start
    await _settle(setup)
    setup.clock.advance_ms(1_000)  # the file store's flush loop covers the delivery
    await _settle(setup)
    setup.clock.advance_ms(8_000)  # 10 s after start: the persister runs
    await until(lambda: json.loads(setup.path.read_bytes())["offsetTable"]["1"] == 1)
    assert setup.path.with_name("delayOffset.json.bak").exists()
    await _put_delayed(setup.store, 2, b"b")
    setup.clock.advance_ms(2_000)
    await until(lambda: setup.service.offset_table()[2] == 1)
    await setup.service.stop()
    assert json.loads(setup.path.read_bytes())["offsetTable"] == {"1": 1, "2": 1}


async def test_a_java_delay_offset_file_with_bare_keys_loads(tmp_path: Path) -> None:
    clock = ManualClock()
    store = await started_store("memory", tmp_path, clock)
    for number in range(3):
        await _put_delayed(store, 2, str(number).encode())
    path = tmp_path / "delayOffset.json"
    path.write_text('{"offsetTable":{1:0,2:2}}')
    service = _service(store, path, clock)
    service.load()
    assert service.offset_table() == {1: 0, 2: 2}
    await service.start()
    clock.advance_ms(2_000)
    await until(lambda: store.max_offset("orders", 1) == 1)  # only the third is delivered
    assert read_queue(store, "orders", 1)[0].body == b"2"
    await service.stop()
    await store.shutdown()


async def test_a_damaged_file_falls_back_to_bak(tmp_path: Path) -> None:
    clock = ManualClock()
    store = await started_store("memory", tmp_path, clock)
    path = tmp_path / "delayOffset.json"
    path.with_name("delayOffset.json.bak").write_text('{"offsetTable":{"1":4}}')
    path.write_text('{"offsetTable":')
    service = _service(store, path, clock)
    service.load()
    assert service.offset_table() == {1: 4}
    await store.shutdown()


async def test_restart_with_stale_progress_delivers_each_message_once(tmp_path: Path) -> None:
    """The progress file lags (as after kill -9 between two writes): the commit-log scan
    finds what was delivered since, so nothing is delivered twice."""
    clock = ManualClock()
    store = await started_store("file", tmp_path, clock)
    path = tmp_path / "store" / "config" / "delayOffset.json"
    service = _service(store, path, clock)
    service.load()
    await service.start()
    stale = path.read_bytes()
    for number in range(6):
        await _put_delayed(store, 1 + number % 2, f"m{number}".encode())
    clock.advance_ms(1_000)
    await until(lambda: store.max_offset("orders", 1) == 3)
    await service.stop()
    path.write_bytes(stale)  # as if the broker died before writing the progress again
    restarted = _service(store, path, clock)
    restarted.load()
    assert restarted.offset_table() == {1: 0, 2: 0}
    await restarted.start()
    assert restarted.offset_table() == {1: 3, 2: 0}
    clock.advance_ms(1_000)
    await until(lambda: store.max_offset("orders", 1) == 6)
    await _settle_service(clock)
    bodies = sorted(m.body for m in read_queue(store, "orders", 1))
    assert bodies == [f"m{n}".encode() for n in range(6)]
    await restarted.stop()
    await store.shutdown()


async def _settle_service(clock: ManualClock) -> None:
    await until(lambda: clock.sleeper_count >= 3)


async def test_queues_of_removed_levels_still_drain(tmp_path: Path) -> None:
    clock = ManualClock()
    store = await started_store("memory", tmp_path, clock, levels_ms=(1_000, 2_000, 3_000))
    await _put_delayed(store, 3, b"orphan")
    service = _service(store, tmp_path / "d.json", clock, levels=DelayLevels((1_000,)))
    service.load()
    await service.start()
    assert 3 in service.offset_table()
    clock.advance_ms(1_000)  # level 3 is longer than any configured level: corrected to now
    await until(lambda: store.max_offset("orders", 1) == 1)
    await service.stop()
    await store.shutdown()


class _CountingStore(MemoryMessageStore):
    """Counts the put rounds of deliveries; refuses (DISK_FULL) the ``fail_at``-th delivery."""

    rounds: list[int]
    fail_at = 0
    attempts = 0

    async def put_message(self, request: PutRequest) -> PutResult:
        if request.topic != SCHEDULE_TOPIC:
            self.attempts += 1
            if self.attempts == self.fail_at:
                return PutResult(PutStatus.DISK_FULL, remark="disk full")
        return await super().put_message(request)

    async def put_message_list(
        self, requests: Sequence[PutRequest], *, wait_flushed: bool = True
    ) -> list[PutResult | None]:
        self.rounds.append(len(requests))
        return await super().put_message_list(requests, wait_flushed=wait_flushed)


async def test_due_messages_are_re_put_in_one_round(tmp_path: Path) -> None:
    clock = ManualClock()
    store = _CountingStore(store_config(tmp_path), clock=clock, store_host=STORE_HOST)
    store.rounds = []
    await store.start()
    for number in range(25):
        await _put_delayed(store, 1, str(number).encode())
    service = _service(store, tmp_path / "delayOffset.json", clock)
    service.load()
    await service.start()
    clock.advance_ms(1_000)
    await until(lambda: store.max_offset("orders", 1) == 25)
    assert store.rounds == [25]  # one put round: one group commit under SYNC flush
    assert [m.body for m in read_queue(store, "orders", 1)] == [str(n).encode() for n in range(25)]
    await service.stop()
    await store.shutdown()


async def test_a_refusal_inside_a_round_retries_from_it_and_delivers_each_once(
    tmp_path: Path,
) -> None:
    clock = ManualClock()
    store = _CountingStore(store_config(tmp_path), clock=clock, store_host=STORE_HOST)
    store.rounds, store.fail_at = [], 3
    await store.start()
    for number in range(6):
        await _put_delayed(store, 1, str(number).encode())
    service = _service(store, tmp_path / "delayOffset.json", clock, retry_after_failure_ms=5_000)
    service.load()
    await service.start()
    clock.advance_ms(1_000)
    await until(lambda: store.max_offset("orders", 1) == 2)
    await until(lambda: clock.sleeper_count >= 2)
    assert service.offset_table()[1] == 2  # the first two, stored before the refusal
    clock.advance_ms(5_000)
    await until(lambda: store.max_offset("orders", 1) == 6)
    assert [m.body for m in read_queue(store, "orders", 1)] == [str(n).encode() for n in range(6)]
    assert store.rounds == [6, 4]  # the refused one and those after it, once more
    await service.stop()
    await store.shutdown()
