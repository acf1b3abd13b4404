"""SYNC flush without a future per put: put_messages_then stores at once and calls back once
the group-commit round covering the batch completed — never before its fsync, FLUSH_DISK_TIMEOUT
on timeout or fsync failure, exactly as put_messages answers."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from bolide.base import limits
from bolide.base.clock import ManualClock
from bolide.protocol.record import BatchEntry
from bolide.store.api import BatchPutRequest, PutResult, PutStatus
from bolide.store.config import FlushDiskType
from bolide.store.file_store import FileMessageStore
from bolide.testing.waiting import until

from .conftest import STORE_HOST, ControlledFileOps, tiny_config
from .test_flush import _GatedSyncs, _open


def _batch(label: str, count: int = 3) -> BatchPutRequest:
    entries = [BatchEntry(0, f"{label}{i}".encode(), f"KEYS\x01{label}{i}") for i in range(count)]
    return BatchPutRequest("orders", 0, entries, born_timestamp_ms=7)


class _Answers:
    def __init__(self) -> None:
        self.results: list[PutResult] = []

    def __call__(self, result: PutResult) -> None:
        self.results.append(result)


async def test_a_batch_is_answered_only_by_an_fsync_that_started_after_it(tmp_path: Path) -> None:
    file_ops = _GatedSyncs(2)
    config = tiny_config(
        tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH, commit_log_segment_bytes=1 << 20
    )
    store = await _open(config, file_ops)
    first, second = _Answers(), _Answers()
    try:
        assert store.put_messages_then(_batch("a"), first) is None  # stored, waiting
        assert store.max_offset("orders", 0) == 3
        await until(lambda: file_ops.calls == 1)  # round 1 runs its fsync: held
        assert store.put_messages_then(_batch("b"), second) is None
        await until(lambda: file_ops.calls == 2)  # round 2 (covers both): held
        for _ in range(20):
            await asyncio.sleep(0)
        assert not first.results and not second.results, "no answer before an fsync returned"
        file_ops.gates[0].set()
        await until(lambda: len(first.results) == 1)
        result = first.results[0]
        assert result.status is PutStatus.PUT_OK and result.message_count == 3
        assert store.stats().commit_log_flushed_offset == (
            result.commit_log_offset + result.wrote_bytes
        )
        for _ in range(20):  # only round 2 may answer the second batch
            await asyncio.sleep(0)
        assert not second.results
        file_ops.gates[1].set()
        await until(lambda: len(second.results) == 1)
        assert second.results[0].status is PutStatus.PUT_OK
        assert second.results[0].queue_offset == 3
    finally:
        for gate in file_ops.gates:
            gate.set()
        await store.shutdown()


async def test_a_batch_already_durable_or_refused_is_answered_at_once(tmp_path: Path) -> None:
    config = tiny_config(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH)
    store = await _open(config, ControlledFileOps())
    answers = _Answers()
    try:
        empty = store.put_messages_then(BatchPutRequest("orders", 0, []), answers)
        assert empty is not None and empty.status is PutStatus.MESSAGE_ILLEGAL
        assert store.commit_log_max_offset == 0
    finally:
        await store.shutdown()
    refused = store.put_messages_then(_batch("late"), answers)  # store stopped
    assert refused is not None and refused.status is PutStatus.SERVICE_NOT_AVAILABLE
    assert not answers.results


async def test_an_async_store_answers_a_batch_at_once(tmp_path: Path) -> None:
    config = tiny_config(tmp_path, flush_disk_type=FlushDiskType.ASYNC_FLUSH)
    store = await _open(config, ControlledFileOps())
    answers = _Answers()
    try:
        result = store.put_messages_then(_batch("a"), answers)
        assert result is not None and result.status is PutStatus.PUT_OK
        assert (result.queue_offset, result.message_count) == (0, 3)
        assert not answers.results
    finally:
        await store.shutdown()


async def test_a_batch_times_out_like_put_messages_when_fsync_hangs(tmp_path: Path) -> None:
    file_ops = ControlledFileOps()
    clock = ManualClock()
    config = tiny_config(
        tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH, sync_flush_timeout_ms=2_000
    )
    store = await _open(config, file_ops, clock)
    gate = file_ops.sync_gate = threading.Event()
    file_ops.sync_entered.clear()
    answers = _Answers()
    try:
        assert store.put_messages_then(_batch("a"), answers) is None
        general = asyncio.ensure_future(store.put_messages(_batch("b")))
        await until(file_ops.sync_entered.is_set)
        clock.advance_ms(1_900)
        for _ in range(200):
            await asyncio.sleep(0)
        assert not answers.results and not general.done()
        clock.advance_ms(100 + limits.SYNC_FLUSH_TIMEOUT_CHECK_INTERVAL_MS)
        await until(lambda: len(answers.results) == 1)
        timed_out = answers.results[0]
        other = await general
        assert timed_out.status is other.status is PutStatus.FLUSH_DISK_TIMEOUT
        assert timed_out.remark == other.remark and "2000 ms" in timed_out.remark
        assert store.max_offset("orders", 0) == 6, "the records themselves are stored"
    finally:
        gate.set()
        await store.shutdown()


async def test_a_failed_fsync_answers_the_waiting_batches(tmp_path: Path) -> None:
    file_ops = ControlledFileOps()
    config = tiny_config(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH)
    store: FileMessageStore = FileMessageStore(
        config, clock=ManualClock(), store_host=STORE_HOST, file_ops=file_ops
    )
    await store.start()
    answers = _Answers()
    try:
        file_ops.fail_sync = True
        assert store.put_messages_then(_batch("a"), answers) is None
        await until(lambda: len(answers.results) == 1)
        assert answers.results[0].status is PutStatus.FLUSH_DISK_TIMEOUT
        assert "fsync" in answers.results[0].remark
        refused = store.put_messages_then(_batch("b"), answers)
        assert refused is not None and refused.status is PutStatus.SERVICE_NOT_AVAILABLE
    finally:
        file_ops.fail_sync = False
        await store.shutdown()
