"""Truncating a replica's commit log (a deposed master rejoining as a slave): the cut records,
their consume-queue entries and the log past the cut are gone, also after a restart, and the
log continues from the cut with the new master's bytes."""

from __future__ import annotations

from pathlib import Path

import pytest

from bolide.base.clock import ManualClock
from bolide.base.errors import ReplicaOffsetError, StoreError
from bolide.store.file_store import FileMessageStore
from tests.store.conftest import STORE_HOST, ControlledFileOps, request, tiny_config

SEGMENT_BYTES = 8 * 1024


async def _store(root: Path) -> FileMessageStore:
    store = FileMessageStore(
        tiny_config(root, commit_log_segment_bytes=SEGMENT_BYTES),
        clock=ManualClock(),
        store_host=STORE_HOST,
        file_ops=ControlledFileOps(sync=False),
    )
    await store.start()
    return store


async def _put(store: FileMessageStore, prefix: str, count: int) -> list[int]:
    offsets = []
    for index in range(count):
        body = f"{prefix} {index} ".encode() * (1 + index % 9)
        result = await store.put_message(
            request("orders", index % 2, body, KEYS=f"{prefix}{index}")
        )
        assert result.status.value == "PUT_OK"
        offsets.append(result.commit_log_offset)
    return offsets


def _copy(source: FileMessageStore, replica: FileMessageStore, offset: int) -> None:
    """The source's commit log from ``offset`` into the replica, as an HA stream brings it."""
    while (data := source.read_commit_log(offset, 3000)) is not None:
        replica.append_replicated(offset, data)
        offset += len(data)


def _entries(store: FileMessageStore, queue_id: int) -> list[tuple[int, int, int]]:
    return store.consume_queue_entries("orders", queue_id, 0, 10_000)


async def test_cut_records_are_gone_also_after_a_restart(tmp_path: Path) -> None:
    shared = await _store(tmp_path / "new-master")
    old = await _store(tmp_path / "old-master")
    try:
        common = await _put(shared, "common", 40)
        _copy(shared, old, 0)
        agreed = shared.commit_log_max_offset
        assert old.commit_log_max_offset == agreed
        cut = await _put(old, "old-only", 120)  # written by the deposed master alone
        assert old.commit_log_max_offset > agreed + 2 * SEGMENT_BYTES
        with pytest.raises(StoreError, match="takes puts"):
            old.truncate_commit_log_to(agreed)
        old.refuse_puts = "this broker is a SLAVE"
        with pytest.raises(ReplicaOffsetError):
            old.truncate_commit_log_to(-1)
        report = old.truncate_commit_log_to(agreed)
        assert report.bytes_cut > 2 * SEGMENT_BYTES and report.segments_removed
        assert report.queue_entries_dropped == 120
        assert old.commit_log_max_offset == agreed
        assert old.read_record(cut[0]) is None
        for queue_id in range(2):
            assert _entries(old, queue_id) == _entries(shared, queue_id)
        assert old.truncate_commit_log_to(agreed + 100).bytes_cut == 0
    finally:
        await old.shutdown()
    restarted = await _store(tmp_path / "old-master")
    try:
        assert restarted.commit_log_max_offset == agreed
        for queue_id in range(2):
            assert _entries(restarted, queue_id) == _entries(shared, queue_id)
        assert len(common) == 40
        # the new master's later records continue the truncated log
        await _put(shared, "new-master", 30)
        _copy(shared, restarted, agreed)
        assert restarted.commit_log_max_offset == shared.commit_log_max_offset
        for queue_id in range(2):
            assert _entries(restarted, queue_id) == _entries(shared, queue_id)
    finally:
        await restarted.shutdown()
        await shared.shutdown()
