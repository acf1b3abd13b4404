"""Flushing: SYNC group commit, timeouts, fsync failures, the ASYNC interval, the checkpoint."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from bolide.base import limits
from bolide.base.clock import ManualClock
from bolide.store.api import PutStatus
from bolide.store.checkpoint import CheckpointFile
from bolide.store.config import FlushDiskType, StoreConfig
from bolide.store.file_ops import FileOps
from bolide.store.file_store import FileMessageStore
from bolide.testing.waiting import until

from .conftest import STORE_HOST, ControlledFileOps, request, tiny_config


async def _open(
    config: StoreConfig, file_ops: ControlledFileOps, clock: ManualClock | None = None
) -> FileMessageStore:
    store = FileMessageStore(
        config, clock=clock or ManualClock(), store_host=STORE_HOST, file_ops=file_ops
    )
    await store.start()
    return store


def _commit_log_syncs(file_ops: ControlledFileOps) -> int:
    return sum(1 for path in file_ops.synced_paths if "/commitlog/" in path)


async def test_sync_put_returns_after_the_fsync_that_covers_it(tmp_path: Path) -> None:
    file_ops = ControlledFileOps()
    config = tiny_config(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH)
    store = await _open(config, file_ops)
    try:
        before = _commit_log_syncs(file_ops)
        result = await store.put_message(request())
        assert result.status is PutStatus.PUT_OK
        assert _commit_log_syncs(file_ops) > before
        assert store.stats().commit_log_flushed_offset >= result.wrote_bytes
    finally:
        await store.shutdown()


async def test_concurrent_sync_puts_share_fsyncs(tmp_path: Path) -> None:
    file_ops = ControlledFileOps()
    config = tiny_config(
        tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH, commit_log_segment_bytes=1 << 20
    )
    store = await _open(config, file_ops)
    try:
        before = _commit_log_syncs(file_ops)
        results = await asyncio.gather(
            *(store.put_message(request(queue_id=i % 4)) for i in range(64))
        )
        assert all(r.status is PutStatus.PUT_OK for r in results)
        fsyncs = _commit_log_syncs(file_ops) - before
        assert 1 <= fsyncs < 64 // 4
        end = max(r.commit_log_offset + r.wrote_bytes for r in results)
        assert store.stats().commit_log_flushed_offset >= end
    finally:
        await store.shutdown()


async def test_failed_fsync_answers_and_poisons_until_recovery(tmp_path: Path) -> None:
    file_ops = ControlledFileOps()
    config = tiny_config(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH)
    store = await _open(config, file_ops)
    stored = await store.put_message(request(KEYS="before"))
    file_ops.fail_sync = True
    failed = await store.put_message(request(KEYS="during"))
    assert failed.status is PutStatus.FLUSH_DISK_TIMEOUT
    assert "fsync" in failed.remark
    refused = await store.put_message(request(KEYS="after"))
    assert refused.status is PutStatus.SERVICE_NOT_AVAILABLE
    await store.shutdown()
    assert config.abort_path.exists(), "an unclean shutdown leaves abort for recovery"
    file_ops.fail_sync = False
    store = await _open(config, file_ops)
    try:
        assert store.max_offset("orders", 0) == 2
        again = await store.put_message(request())
        assert again.status is PutStatus.PUT_OK and again.queue_offset == 2
        assert store.read_record(stored.commit_log_offset) is not None
    finally:
        await store.shutdown()


async def test_sync_put_times_out_when_fsync_hangs(tmp_path: Path) -> None:
    file_ops = ControlledFileOps()
    clock = ManualClock()
    config = tiny_config(
        tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH, sync_flush_timeout_ms=2_000
    )
    store = await _open(config, file_ops, clock)
    gate = threading.Event()
    file_ops.sync_gate = gate
    file_ops.sync_entered.clear()
    try:
        put = asyncio.ensure_future(store.put_message(request()))
        await until(file_ops.sync_entered.is_set)
        clock.advance_ms(1_900)
        for _ in range(200):
            await asyncio.sleep(0)
        assert not put.done(), "before its deadline a SYNC put keeps waiting"
        clock.advance_ms(100 + limits.SYNC_FLUSH_TIMEOUT_CHECK_INTERVAL_MS)
        result = await put
        assert result.status is PutStatus.FLUSH_DISK_TIMEOUT
        assert store.max_offset("orders", 0) == 1, "the record itself is stored"
    finally:
        gate.set()
        await store.shutdown()


async def test_async_flush_follows_its_interval_and_writes_the_checkpoint(
    tmp_path: Path,
) -> None:
    file_ops = ControlledFileOps(sync=False)
    clock = ManualClock()
    config = tiny_config(tmp_path)
    store = await _open(config, file_ops, clock)
    try:
        result = await store.put_message(request())
        end = result.commit_log_offset + result.wrote_bytes
        assert store.stats().commit_log_flushed_offset == 0
        await until(lambda: clock.sleeper_count >= 3)
        clock.advance_ms(config.flush_interval_commit_log_ms)
        await _until_async(lambda: store.stats().commit_log_flushed_offset == end)
        clock.advance_ms(config.flush_interval_consume_queue_ms)
        await _until_async(lambda: _checkpoint_queue_offset(config) == end)
    finally:
        await store.shutdown()
    checkpoint = CheckpointFile(config.checkpoint_path, FileOps()).read()
    assert checkpoint is not None and checkpoint.recovery_start_offset == end


def _checkpoint_queue_offset(config: StoreConfig) -> int:
    checkpoint = CheckpointFile(config.checkpoint_path, FileOps()).read()
    return -1 if checkpoint is None else checkpoint.consume_queue_flushed_offset


async def _until_async(predicate: object) -> None:
    """Wait for flush-thread work: yields to the loop, which lets executor results land."""
    check = predicate if callable(predicate) else None
    assert check is not None
    for _ in range(2_000):
        if check():
            return
        await asyncio.sleep(0.001 if _ % 100 == 99 else 0)
    raise AssertionError("flush did not happen")
