"""Warm start: the commit log reserves its next chunk ahead of the writes and makes its next
segment ahead of the roll (a spare, on the allocate-ahead thread), without changing what is
stored or when a put fails."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from bolide.base import limits
from bolide.base.errors import DiskFullError
from bolide.store.commit_log import CommitLog
from bolide.store.config import segment_file_name
from bolide.store.index_file import KeyIndex, index_key_hash
from bolide.store.segment import SPARE_SUFFIX, TEMPORARY_SUFFIX, allocate_pool

from .conftest import ControlledFileOps

AHEAD = limits.COMMIT_LOG_ALLOCATE_AHEAD_BYTES


def _resident_kib(path: Path) -> int:
    """Resident KiB of the mapping of ``path`` in this process (/proc/self/smaps)."""
    lines = Path("/proc/self/smaps").read_text().splitlines()
    for index, line in enumerate(lines):
        if line.endswith(str(path)):
            for detail in lines[index + 1 :]:
                if detail.startswith("Rss:"):
                    return int(detail.split()[1])
    raise AssertionError(f"{path} is not mapped")


def _log(directory: Path, segment_bytes: int, file_ops: ControlledFileOps) -> CommitLog:
    log = CommitLog(directory, segment_bytes, file_ops)
    log.load()
    log.set_write_offset(0)
    log.prepare_next_spare()
    return log


def _append(log: CommitLog, size: int) -> int:
    segment, position = log.reserve(size)
    segment.write_length_last(position, size.to_bytes(4, "big") + bytes(size - 4))
    segment.write_position = position + size
    return segment.start_offset + position


def _spares(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(TEMPORARY_SUFFIX))


def test_a_roll_takes_the_spare_made_and_faulted_in_ahead(tmp_path: Path) -> None:
    segment_bytes = 64 * 1024
    log = _log(tmp_path / "log", segment_bytes, ControlledFileOps())
    try:
        spare = log.wait_spare()
        assert spare is not None  # made ahead for offset 0, under its temporary name
        assert spare.path.name == segment_file_name(0) + SPARE_SUFFIX
        assert _resident_kib(spare.path) >= segment_bytes // 1024  # faulted in before use
        assert _append(log, 1000) == 0
        assert log.spares_adopted == 1
        first = log.segments[0]
        assert first is spare and first.path.name == segment_file_name(0)
        assert first.needs_directory_sync  # the rename reaches the disk with the next flush
        assert log.wait_spare() is not None
        assert _spares(log.directory) == [segment_file_name(segment_bytes) + SPARE_SUFFIX]
        while len(log.segments) < 3:
            log.wait_spare()  # a spare still in the making is not waited for by a roll
            _append(log, 1000)
        assert log.spares_adopted == 3
        assert [s.start_offset for s in log.segments] == [0, segment_bytes, 2 * segment_bytes]
    finally:
        log.close()
    assert _spares(log.directory) == []  # close drops the spare


def test_a_spare_for_another_offset_is_dropped_not_used(tmp_path: Path) -> None:
    segment_bytes = 64 * 1024
    log = _log(tmp_path / "log", segment_bytes, ControlledFileOps())
    try:
        while len(log.segments) < 3:
            log.wait_spare()
            _append(log, 1000)
        log.wait_spare()
        assert _spares(log.directory) == [segment_file_name(3 * segment_bytes) + SPARE_SUFFIX]
        log.cut(segment_bytes + 500)  # a replica's truncation: the tail is segment 1 now
        log.wait_spare()
        assert _spares(log.directory) == [segment_file_name(2 * segment_bytes) + SPARE_SUFFIX]
    finally:
        log.close()


def test_a_failed_spare_leaves_the_roll_to_make_its_file(tmp_path: Path) -> None:
    file_ops = ControlledFileOps()
    file_ops.disk_full = True
    log = _log(tmp_path / "log", 64 * 1024, file_ops)
    try:
        assert log.wait_spare() is None  # no space for it: nothing left behind
        assert _spares(log.directory) == []
        with pytest.raises(DiskFullError):
            log.reserve(1000)  # the put meets the failure itself
        file_ops.disk_full = False
        assert _append(log, 1000) == 0
        assert log.spares_adopted == 0
    finally:
        log.close()


def test_blocks_stay_reserved_ahead_of_every_write(tmp_path: Path) -> None:
    segment_bytes = 8 * AHEAD
    log = _log(tmp_path / "log", segment_bytes, ControlledFileOps())
    record = 64 * 1024
    try:
        for _ in range(segment_bytes // record - 1):
            offset = _append(log, record)
            segment = log.segments[-1]
            end = offset - segment.start_offset + record
            assert segment.allocated_position >= min(segment_bytes, end + AHEAD)
    finally:
        log.close()


def test_no_space_for_the_chunk_ahead_fails_only_the_put_that_needs_it(tmp_path: Path) -> None:
    file_ops = ControlledFileOps()
    segment_bytes = 8 * AHEAD
    log = _log(tmp_path / "log", segment_bytes, file_ops)
    record = 64 * 1024
    try:
        _append(log, record)
        file_ops.disk_full = True
        segment = log.segments[-1]
        reserved = segment.allocated_position
        while segment.write_position + record <= reserved:
            _append(log, record)  # inside the blocks reserved: stored, no space or not
        with pytest.raises(DiskFullError):
            log.reserve(record)
        file_ops.disk_full = False
        _append(log, record)
        assert segment.allocated_position >= segment.write_position + AHEAD
    finally:
        log.close()


def test_the_index_file_comes_made_and_faulted_in_ahead(tmp_path: Path) -> None:
    slots = 64 * 1024  # 256 KiB of slots
    index = KeyIndex(tmp_path / "index", slots, 4, ControlledFileOps())
    index.load()
    index.prepare_spare()
    try:
        spare = index.wait_spare()
        assert spare is not None and spare.path.name == "next" + SPARE_SUFFIX
        assert _resident_kib(spare.path) >= 4 * slots // 1024  # the slots, faulted in
        index.prepare_one(5000, 1)  # the first keyed put: the spare becomes its file
        assert index.files[0].segment is spare
        assert spare.path.name == segment_file_name(5000)
        index.add_record(5000, 1_000, [index_key_hash("T", "k")])
        index.drain()
        assert index.wait_spare() is not None  # the next one is in the making already
        for offset in range(5001, 5005):  # fills the first file (4 entries), opens the second
            index.wait_spare()  # a spare still in the making is not waited for by a put
            index.prepare_one(offset, 1)
            index.add_record(offset, 1_000, [index_key_hash("T", f"k{offset}")])
        index.drain()
        assert [f.segment.path.name for f in index.files] == [
            segment_file_name(5000),
            segment_file_name(5004),
        ]
        index.wait_spare()
        assert sorted(p.name for p in index.directory.iterdir()) == [
            segment_file_name(5000),
            segment_file_name(5004),
            "next" + SPARE_SUFFIX,
        ]
    finally:
        index.close()
    assert "next" + SPARE_SUFFIX not in [p.name for p in index.directory.iterdir()]


def test_a_failed_index_spare_leaves_the_put_to_make_its_file(tmp_path: Path) -> None:
    file_ops = ControlledFileOps()
    file_ops.disk_full = True
    index = KeyIndex(tmp_path / "index", 1024, 4, file_ops)
    index.load()
    index.prepare_spare()
    try:
        assert index.wait_spare() is None
        with pytest.raises(DiskFullError):
            index.prepare_one(0, 1)
        file_ops.disk_full = False
        index.prepare_one(0, 1)
        assert [f.segment.path.name for f in index.files] == [segment_file_name(0)]
    finally:
        index.close()


def test_a_roll_never_waits_for_a_spare_still_in_the_making(tmp_path: Path) -> None:
    gate = threading.Event()
    held = allocate_pool().submit(gate.wait, 30)  # the allocate-ahead thread is busy
    log = _log(tmp_path / "log", 64 * 1024, ControlledFileOps())
    try:
        assert _append(log, 1000) == 0  # made here, at once: the spare has not started
        assert not held.done()
        assert log.spares_adopted == 0
        index = KeyIndex(tmp_path / "index", 1024, 4, ControlledFileOps())
        index.load()
        index.prepare_spare()
        index.prepare_one(0, 1)  # the same for the index's first file
        assert not held.done()
        assert [f.segment.path.name for f in index.files] == [segment_file_name(0)]
        gate.set()
        assert index.wait_spare() is not None  # kept: it becomes the next file
        index.close()
    finally:
        gate.set()
        log.close()
    assert _spares(log.directory) == []  # the stale spare was deleted once made
