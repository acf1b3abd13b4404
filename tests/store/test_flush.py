"""Flushing: SYNC group commit, timeouts, fsync failures, the ASYNC interval, the checkpoint."""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from pathlib import Path

import pytest

from bolide.base import limits
from bolide.base.clock import ManualClock
from bolide.base.errors import StoreError
from bolide.base.fileio import fsync_directory
from bolide.store import flush as flush_module
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
        # The fsync runs in a flush thread: yield loop turns until its result lands.
        await until(lambda: store.stats().commit_log_flushed_offset == end, max_spins=10**6)
        clock.advance_ms(config.flush_interval_consume_queue_ms)
        await until(lambda: _checkpoint_queue_offset(config) == end, max_spins=10**6)
    finally:
        await store.shutdown()
    checkpoint = CheckpointFile(config.checkpoint_path, FileOps()).read()
    assert checkpoint is not None and checkpoint.recovery_start_offset == end


def _checkpoint_queue_offset(config: StoreConfig) -> int:
    checkpoint = CheckpointFile(config.checkpoint_path, FileOps()).read()
    return -1 if checkpoint is None else checkpoint.consume_queue_flushed_offset


def _open_files_under(directory: Path) -> int:
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        count += target.startswith(str(directory))
    return count


async def test_full_flushed_files_give_back_their_descriptors(tmp_path: Path) -> None:
    file_ops = ControlledFileOps(sync=False)
    config = tiny_config(tmp_path, consume_queue_file_entries=4)
    store = await _open(config, file_ops)
    try:
        for _ in range(100):
            assert (await store.put_message(request(body=bytes(500)))).ok
        await store.flush()
        files = len(list((config.consume_queue_dir / "orders" / "0").iterdir()))
        assert files == 25
        # Python 3.11's mmap keeps a descriptor of its own per mapping: one per file is the
        # floor; the store's own descriptors are closed once a file is full and flushed.
        assert _open_files_under(config.consume_queue_dir) <= files + 1
        segments = len([p for p in config.commit_log_dir.iterdir() if p.suffix != ".tmp"])
        # + the spare segment made ahead (warm start): its descriptor and its mapping's
        assert _open_files_under(config.commit_log_dir) <= segments + 1 + 2
        assert store.get_message("orders", 0, 0, 32, 1 << 20).message_count == 32
    finally:
        await store.shutdown()
    store = await _open(config, file_ops)
    try:
        assert _open_files_under(config.consume_queue_dir) <= 25 + 1
        assert store.max_offset("orders", 0) == 100
    finally:
        await store.shutdown()


async def test_a_put_list_shares_one_fsync_and_keeps_going_past_a_bad_message(
    tmp_path: Path,
) -> None:
    file_ops = ControlledFileOps()
    config = tiny_config(
        tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH, commit_log_segment_bytes=1 << 20
    )
    store = await _open(config, file_ops)
    try:
        before = _commit_log_syncs(file_ops)
        requests = [request(body=f"m{i}".encode()) for i in range(20)]
        requests[7] = request(queue_id=1 << 20)  # MESSAGE_ILLEGAL: this one alone
        results = await store.put_message_list(requests)
        assert results[7] is not None and results[7].status is PutStatus.MESSAGE_ILLEGAL
        stored = [result for i, result in enumerate(results) if i != 7]
        assert all(r is not None and r.status is PutStatus.PUT_OK for r in stored)
        assert [r.queue_offset for r in stored if r is not None] == list(range(19))
        assert _commit_log_syncs(file_ops) - before == 1
        last = stored[-1]
        assert last is not None
        assert store.stats().commit_log_flushed_offset >= last.commit_log_offset + last.wrote_bytes
    finally:
        await store.shutdown()
    after = await store.put_message_list([request(), request(), request()])
    assert after[0] is not None and after[0].status is PutStatus.SERVICE_NOT_AVAILABLE
    assert after[1:] == [None, None]  # not tried after a refusal that is not theirs


async def test_a_put_list_that_does_not_wait_is_flushed_by_a_round_of_its_own(
    tmp_path: Path,
) -> None:
    file_ops = ControlledFileOps()
    config = tiny_config(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH)
    store = await _open(config, file_ops)
    gate = file_ops.sync_gate = threading.Event()  # holds every fsync from here until set
    file_ops.sync_entered.clear()
    try:
        results = await store.put_message_list([request(), request()], wait_flushed=False)
        last = results[-1]
        assert last is not None and last.status is PutStatus.PUT_OK
        end = last.commit_log_offset + last.wrote_bytes
        assert store.stats().commit_log_flushed_offset < end  # answered before the fsync
        await until(file_ops.sync_entered.is_set)
        gate.set()
        await until(lambda: store.stats().commit_log_flushed_offset >= end)
    finally:
        gate.set()
        await store.shutdown()


async def test_a_sync_store_never_puts_at_once(tmp_path: Path) -> None:
    config = tiny_config(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH)
    store = await _open(config, ControlledFileOps())
    try:
        assert not store.puts_at_once
        assert store.put_message_at_once(request()) is None
        assert store.commit_log_max_offset == 0  # nothing was stored
    finally:
        await store.shutdown()


class _GatedSyncs(ControlledFileOps):
    """Each commit-log fsync waits for its own gate (the n-th call for ``gates[n]``), and
    the bytes it made durable are recorded as the file's size at the moment it returned."""

    def __init__(self, count: int) -> None:
        super().__init__()
        self.gates = [threading.Event() for _ in range(count)]
        self.calls = 0
        self._lock = threading.Lock()

    def sync(self, fd: int) -> None:
        if "/commitlog/" not in os.readlink(f"/proc/self/fd/{fd}"):
            super().sync(fd)
            return
        with self._lock:
            number = self.calls
            self.calls += 1
        if number < len(self.gates):
            self.gates[number].wait(timeout=30)
        super().sync(fd)


async def test_a_put_is_answered_only_by_an_fsync_that_started_after_it(tmp_path: Path) -> None:
    """Crash safety of the group commit: a put made while a round's fsync runs is not
    answered when that fsync returns, only when the next round's does; answering follows
    the fsyncs' completion, whichever order they complete in."""
    file_ops = _GatedSyncs(3)
    config = tiny_config(
        tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH, commit_log_segment_bytes=1 << 20
    )
    store = await _open(config, file_ops)
    try:
        first = asyncio.ensure_future(store.put_message(request(body=b"first")))
        await until(lambda: file_ops.calls == 1)  # round 1 runs its fsync: held
        second = asyncio.ensure_future(store.put_message(request(body=b"second")))
        await until(lambda: file_ops.calls == 2)  # round 2 (covers both) runs: held
        assert not first.done() and not second.done()
        file_ops.gates[0].set()  # round 1 done: only the first put is durable
        result = await first
        assert result.status is PutStatus.PUT_OK
        flushed = store.stats().commit_log_flushed_offset
        assert flushed == result.commit_log_offset + result.wrote_bytes
        for _ in range(20):  # nothing but round 2 may answer the second put
            await asyncio.sleep(0)
        assert not second.done()
        file_ops.gates[1].set()
        assert (await second).status is PutStatus.PUT_OK
        third = asyncio.ensure_future(store.put_message(request(body=b"third")))
        await until(lambda: file_ops.calls == 3)
        assert not third.done()
        file_ops.gates[2].set()
        stored = await third
        assert stored.status is PutStatus.PUT_OK
        assert store.stats().commit_log_flushed_offset >= stored.commit_log_offset
    finally:
        for gate in file_ops.gates:
            gate.set()
        await store.shutdown()


async def test_a_later_round_finishing_first_answers_everything_it_covers(
    tmp_path: Path,
) -> None:
    """Round 2's fsync started after both puts were written: when it returns first, both
    are durable (fdatasync also waits for the pages round 1 is still writing back)."""
    file_ops = _GatedSyncs(2)
    config = tiny_config(
        tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH, commit_log_segment_bytes=1 << 20
    )
    store = await _open(config, file_ops)
    try:
        first = asyncio.ensure_future(store.put_message(request(body=b"first")))
        await until(lambda: file_ops.calls == 1)
        second = asyncio.ensure_future(store.put_message(request(body=b"second")))
        await until(lambda: file_ops.calls == 2)
        file_ops.gates[1].set()  # the later round completes first
        results = await asyncio.gather(first, second)
        assert [r.status for r in results] == [PutStatus.PUT_OK, PutStatus.PUT_OK]
        assert not file_ops.gates[0].is_set()  # round 1's fsync still runs
        end = results[1].commit_log_offset + results[1].wrote_bytes
        assert store.stats().commit_log_flushed_offset >= end
    finally:
        for gate in file_ops.gates:
            gate.set()
        await store.shutdown()


async def test_a_topic_deleted_while_its_new_queue_file_is_flushed_fails_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A queue flush captured a new consume-queue file, then the topic was deleted before the
    flush thread fsynced the file's directory (gone: ENOENT). The deleted files need nothing:
    the flush succeeds and the store keeps taking puts (a remoting fuzz run's DELETE_TOPIC
    once left the broker refusing every put until restart)."""
    inside, release = threading.Event(), threading.Event()

    def gated(directory: Path) -> None:
        if "Doomed" in directory.parts:
            inside.set()
            release.wait(timeout=30)
        fsync_directory(directory)

    monkeypatch.setattr(flush_module, "fsync_directory", gated)
    store = await _open(tiny_config(tmp_path), ControlledFileOps())
    try:
        assert (await store.put_message(request(topic="Doomed"))).status is PutStatus.PUT_OK
        flushing = asyncio.ensure_future(store.flush())
        await until(inside.is_set)
        store.delete_topic("Doomed")
        release.set()
        await flushing
        assert (await store.put_message(request(topic="orders"))).status is PutStatus.PUT_OK
    finally:
        release.set()
        await store.shutdown()


async def test_a_new_files_directory_gone_under_a_live_queue_still_fails_the_flush(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same ENOENT for files the store did not delete is a real loss: loud, as before."""

    def vanished(directory: Path) -> None:
        if "Kept" in directory.parts:
            raise FileNotFoundError(2, "No such file or directory", str(directory))

    monkeypatch.setattr(flush_module, "fsync_directory", vanished)
    store = await _open(tiny_config(tmp_path), ControlledFileOps())
    try:
        assert (await store.put_message(request(topic="Kept"))).status is PutStatus.PUT_OK
        with pytest.raises(StoreError, match="fsync of directory"):
            await store.flush()
    finally:
        monkeypatch.undo()
        with contextlib.suppress(StoreError):
            await store.shutdown()
