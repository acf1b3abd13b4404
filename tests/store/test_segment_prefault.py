"""The pre-fault of reserved commit-log chunks runs on the prefault thread, off the caller's
thread, and stays correct while the segment is written or closed."""

from __future__ import annotations

import threading
from pathlib import Path

from bolide.base import limits
from bolide.store.file_ops import FileOps
from bolide.store.segment import MappedSegment, prefault_pool

CHUNK_BYTES = 4 * limits.MIB


def _resident_kib(path: Path) -> int:
    """Resident KiB of the mapping of ``path`` in this process (/proc/self/smaps)."""
    lines = Path("/proc/self/smaps").read_text().splitlines()
    for index, line in enumerate(lines):
        if line.endswith(str(path)):
            for detail in lines[index + 1 :]:
                if detail.startswith("Rss:"):
                    return int(detail.split()[1])
    raise AssertionError(f"{path} is not mapped")


def _segment(path: Path) -> MappedSegment:
    return MappedSegment.create(
        path, 0, 4 * CHUNK_BYTES, allocation_chunk_bytes=CHUNK_BYTES, file_ops=FileOps()
    )


def test_a_large_chunk_is_faulted_in_on_the_prefault_thread(tmp_path: Path) -> None:
    gate = threading.Event()
    prefault_pool().submit(gate.wait, 30)  # holds the prefault thread: nothing faults in yet
    segment = _segment(tmp_path / "seg")
    try:
        reserved = segment.allocated_position
        assert reserved >= CHUNK_BYTES  # blocks reserved at once
        assert _resident_kib(segment.path) < CHUNK_BYTES // 1024 // 2
        gate.set()
        segment.wait_prefaulted()
        assert _resident_kib(segment.path) >= reserved // 1024
        segment.ensure_allocated(reserved + 1)
        assert segment.allocated_position > reserved
        segment.wait_prefaulted()
        assert _resident_kib(segment.path) >= segment.allocated_position // 1024
    finally:
        gate.set()
        segment.close()


def test_writes_and_close_while_the_prefault_runs(tmp_path: Path) -> None:
    gate = threading.Event()
    prefault_pool().submit(gate.wait, 30)
    segment = _segment(tmp_path / "seg")
    record = bytes(range(256)) * 16
    for position in range(0, CHUNK_BYTES, len(record) * 64):
        segment.write(position, record)  # faults its own pages: the prefault has not run
    gate.set()
    segment.wait_prefaulted()
    assert bytes(segment.view[: len(record)]) == record
    segment.ensure_allocated(
        segment.allocated_position + 1
    )  # a second pre-fault in flight, or done
    segment.close()  # waits for it; the mapping is not unmapped under it
    again = MappedSegment.open_existing(
        segment.path, 0, 4 * CHUNK_BYTES, allocation_chunk_bytes=CHUNK_BYTES, file_ops=FileOps()
    )
    try:
        assert bytes(again.view[len(record) * 64 : len(record) * 65]) == record
    finally:
        again.close()
