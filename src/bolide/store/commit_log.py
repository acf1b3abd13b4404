"""The commit log: every record of every topic, appended in one sequence of segment files.

Segments are ``commitlog/<20-digit start offset>``, all of the same size, contiguous. A record
never spans two segments: one that does not fit (keeping room for the 8-byte blank marker)
closes the segment with a blank marker and goes to the start of the next one:

```
segment 0 (start 0)                               segment 1 (start = segment size)
+----------+----------+-----+----------+--------+ +----------+----------+---- ...
| record   | record   | ... | record   | blank  | | record   | record   |
+----------+----------+-----+----------+--------+ +----------+----------+---- ...
                                        ^ TOTALSIZE = bytes left, MAGICCODE = BLANK_MAGIC_CODE
```

Records are in RocketMQ's layout (docs/protocol.md §3.1, drawn in protocol/record/layout.py), so a
read hands out the exact bytes that go onto the wire.

Warm start: the commit log keeps one *spare* segment in the making on the allocate-ahead
thread, for the offset the next roll will need (segment.py); a roll onto it is one rename, not a
file made, reserved and faulted in on the event loop. The spare lives under a ``.spare.tmp``
name, so recovery never sees it (a crash leaves a leftover that load deletes).
"""

from __future__ import annotations

import bisect
import concurrent.futures
import contextlib
import logging
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Final

from bolide.base import limits
from bolide.base.errors import (
    CorruptDataError,
    DiskFullError,
    ReplicaOffsetError,
    StoreIOError,
    invariant,
)
from bolide.protocol.record import (
    IPV6_HOST_EXTRA_BYTES,
    MESSAGE_MAGIC_CODE,
    PHYSICAL_OFFSET_POSITION,
    RECORD_OVERHEAD_BYTES,
    RECORD_PREFIX,
    STORE_TIMESTAMP_POSITION,
    SYS_FLAG_BORNHOST_V6,
    SYS_FLAG_POSITION,
    encode_blank_marker,
)
from bolide.store.config import parse_segment_file_name, segment_file_name
from bolide.store.file_ops import FileOps
from bolide.store.segment import (
    MappedSegment,
    allocate_pool,
    discard_when_made,
    remove_leftovers,
    wait_made,
)

_log = logging.getLogger("bolide.store.commit_log")

_PREFIX: Final = RECORD_PREFIX
_INT32: Final = struct.Struct(">i")
_INT64: Final = struct.Struct(">q")
_BLANK_MIN_BYTES: Final = limits.COMMIT_LOG_BLANK_MIN_BYTES
_AHEAD_BYTES: Final = limits.COMMIT_LOG_ALLOCATE_AHEAD_BYTES


class CommitLog:
    """The segments of the commit log and the append position.

    ``max_offset`` is where the next record goes (exclusive end of data); ``min_offset`` the
    start of the oldest segment still kept. Nothing here knows topics or queues.
    """

    def __init__(self, directory: Path, segment_bytes: int, file_ops: FileOps) -> None:
        self.directory = directory
        self.segment_bytes = segment_bytes
        self._file_ops = file_ops
        self.segments: list[MappedSegment] = []
        self._starts: list[int] = []
        self.flushed_offset = 0
        self._spare: concurrent.futures.Future[MappedSegment] | None = None
        self._spare_start = -1
        self.spares_adopted = 0
        """Rolls that found their segment made ahead (warm start), for tests and benches."""

    # --- opening ------------------------------------------------------------------------------

    def load(self) -> None:
        """Map every segment file. Write positions are set later by :meth:`set_write_offset`.

        Raises:
            CorruptDataError: segments are not contiguous or have the wrong size.
            StoreIOError: a file cannot be opened.
        """
        self.directory.mkdir(parents=True, exist_ok=True)
        remove_leftovers(self.directory)
        starts: list[tuple[int, Path]] = []
        for path in self.directory.iterdir():
            start = parse_segment_file_name(path.name)
            if start is None:
                _log.warning("ignoring stray file %s in the commit log", path)
                continue
            starts.append((start, path))
        starts.sort()
        for index, (start, path) in enumerate(starts):
            if start % self.segment_bytes != 0:
                raise CorruptDataError(f"{path} does not start at a segment boundary")
            if index and start != starts[index - 1][0] + self.segment_bytes:
                raise CorruptDataError(f"commit log has a gap before {path}")
        try:
            for start, path in starts:
                self._add_segment(self._segment_file(MappedSegment.open_existing, path, start))
        except BaseException:
            self.close()
            raise

    def set_write_offset(self, offset: int) -> None:
        """Make ``offset`` the end of data (recovery): earlier segments count as full and
        flushed, the one holding ``offset`` is written up to it."""
        for segment in self.segments:
            if segment.end_offset <= offset:
                position = segment.size_bytes
            elif segment.start_offset <= offset:
                position = offset - segment.start_offset
            else:
                position = 0
            segment.write_position = position
            segment.flushed_position = position
            segment.set_allocated_position(max(segment.allocated_position, position))
        self.flushed_offset = offset

    def _add_segment(self, segment: MappedSegment) -> None:
        self.segments.append(segment)
        self._starts.append(segment.start_offset)

    # --- positions ----------------------------------------------------------------------------

    @property
    def min_offset(self) -> int:
        return self.segments[0].start_offset if self.segments else 0

    @property
    def max_offset(self) -> int:
        if not self.segments:
            return 0
        last = self.segments[-1]
        return last.start_offset + last.write_position

    def segment_for(self, offset: int) -> MappedSegment | None:
        """The segment holding ``offset``, or None."""
        segments = self.segments
        if not segments:
            return None
        last = segments[-1]
        if last.start_offset <= offset:
            return last if offset < last.end_offset else None
        index = bisect.bisect_right(self._starts, offset) - 1
        return segments[index] if index >= 0 else None

    # --- appending ----------------------------------------------------------------------------

    def reserve(self, size: int) -> tuple[MappedSegment, int]:
        """Room for ``size`` bytes (one record or a whole batch) in one segment.

        Rolls to a new segment when the current one cannot take ``size`` plus the blank
        marker. Returns the segment and the position in it; the caller writes, then moves the
        segment's ``write_position`` past what it wrote. Nothing is written when this raises.

        Raises:
            DiskFullError: no space for the blocks or a new segment.
            StoreIOError: the current segment is poisoned or a new one cannot be made.
        """
        if self.segments:
            segment = self.segments[-1]
            position = segment.write_position
            end = position + size + _BLANK_MIN_BYTES
            if segment.poison is None and end <= segment.refill_position:
                return segment, position  # the usual case: blocks reserved ahead in chunks
            if segment.poison is None and end <= segment.allocated_position:
                self._reserve_ahead(segment, end)
                return segment, position
        else:
            segment = self._new_segment(0)
        invariant(
            size + _BLANK_MIN_BYTES <= self.segment_bytes,
            "caller checks that a record fits in a segment",
        )
        if segment.poison is not None:
            raise StoreIOError(f"commit log refuses appends until recovery: {segment.poison}")
        position = segment.write_position
        if position + size + limits.COMMIT_LOG_BLANK_MIN_BYTES > segment.size_bytes:
            segment = self._roll(segment)
            position = 0
        segment.ensure_allocated(position + size)
        self._reserve_ahead(segment, position + size)
        return segment, position

    @staticmethod
    def _reserve_ahead(segment: MappedSegment, end: int) -> None:
        """Reserve (and start faulting in) the next chunk while ``end`` still fits the
        reserved blocks. No space yet is not this put's failure: the put that needs the
        blocks gets DiskFullError."""
        with contextlib.suppress(DiskFullError):
            segment.ensure_allocated(min(segment.size_bytes, end + _AHEAD_BYTES))

    def _roll(self, full: MappedSegment) -> MappedSegment:
        position = full.write_position
        if position + limits.COMMIT_LOG_BLANK_MIN_BYTES > full.size_bytes:
            # Already closed by its blank marker (recovery ended exactly there).
            return self._new_segment(full.end_offset)
        full.ensure_allocated(position + limits.COMMIT_LOG_BLANK_MIN_BYTES)
        # The new segment first: if it cannot be made, the full one stays open and intact.
        fresh = self._new_segment(full.end_offset)
        full.write_length_last(position, encode_blank_marker(full.size_bytes - position))
        full.write_position = full.size_bytes
        return fresh

    def _new_segment(self, start_offset: int) -> MappedSegment:
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / segment_file_name(start_offset)
        segment = self._take_spare(start_offset)
        if segment is not None:
            try:
                segment.adopt(path)
            except StoreIOError:
                segment.delete_quietly()
                segment = None
            else:
                self.spares_adopted += 1
        if segment is None:
            segment = self._segment_file(MappedSegment.create, path, start_offset)
        self._add_segment(segment)
        self.prepare_spare(segment.end_offset)
        return segment

    def _segment_file(
        self, make: Callable[..., MappedSegment], path: Path, start_offset: int
    ) -> MappedSegment:
        """The segment at ``path`` starting at byte ``start_offset``, with this log's sizes,
        made by ``make``: MappedSegment.open_existing, create or create_spare (whose errors
        it raises)."""
        return make(
            path,
            start_offset,
            self.segment_bytes,
            allocation_chunk_bytes=limits.COMMIT_LOG_ALLOCATION_CHUNK_BYTES,
            file_ops=self._file_ops,
            ahead_bytes=_AHEAD_BYTES,
        )

    # --- the spare segment (warm start) -----------------------------------------------------

    def prepare_next_spare(self) -> None:
        """:meth:`prepare_spare` for the segment the next roll makes (after recovery)."""
        self.prepare_spare(self.segments[-1].end_offset if self.segments else 0)

    def prepare_spare(self, start_offset: int) -> None:
        """Start making the segment that starts at ``start_offset`` on the allocate-ahead
        thread (no-op when that one is already in the making); a spare for another offset
        is dropped."""
        if self._spare is not None:
            if self._spare_start == start_offset:
                return
            spare, self._spare = self._spare, None
            discard_when_made(spare)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._spare_start = start_offset
        self._spare = allocate_pool().submit(
            self._segment_file,
            MappedSegment.create_spare,
            self.directory / segment_file_name(start_offset),
            start_offset,
        )

    def wait_spare(self) -> MappedSegment | None:
        """The spare once made (tests and benches); None when there is none or it failed."""
        return wait_made(self._spare)

    def _take_spare(self, start_offset: int) -> MappedSegment | None:
        """The spare for ``start_offset`` when it is made, or None: none, another offset,
        still in the making (never waited for on the loop: it is deleted once made), or it
        failed (then the caller makes the file itself and meets the failure first hand)."""
        spare, self._spare = self._spare, None
        if spare is None:
            return None
        if self._spare_start != start_offset or not spare.done():
            discard_when_made(spare)
            return None
        try:
            return spare.result()
        except Exception as error:  # the inline create that follows reports it
            _log.debug("spare segment for %d was not made: %s", start_offset, error)
            return None

    def _drop_spare(self) -> None:
        """Delete the spare, waiting for it if it is still in the making (closing)."""
        spare, self._spare = self._spare, None
        if spare is None:
            return
        with contextlib.suppress(Exception):
            spare.result().delete_quietly()

    def append_copied(self, offset: int, record: memoryview, *, blank: bool) -> None:
        """Copy one whole record (or a segment's blank marker) that a master stored at
        ``offset`` to the same offset here (a slave's log, broker/ha): the end of data, or the
        start of a segment when the log is empty. A blank marker closes its segment.

        Raises:
            ReplicaOffsetError: ``offset`` is not where the data ends, or the record does not
                fit where the master put it (the two logs have different segment sizes).
            DiskFullError, StoreIOError: as :meth:`reserve`; nothing was written.
        """
        size = len(record)
        if not self.segments:
            if offset % self.segment_bytes:
                raise ReplicaOffsetError(f"an empty log cannot start at {offset}, mid-segment")
            self._new_segment(offset)
        if offset != self.max_offset:
            raise ReplicaOffsetError(f"copied record at {offset}, log ends at {self.max_offset}")
        segment = self.segments[-1]
        if offset == segment.end_offset:
            segment = self._new_segment(offset)
        position = offset - segment.start_offset
        if segment.poison is not None:
            raise StoreIOError(f"commit log refuses appends until recovery: {segment.poison}")
        if blank:
            if position + size != segment.size_bytes:
                raise ReplicaOffsetError(f"blank marker at {offset} does not end its segment")
            segment.ensure_allocated(position + _BLANK_MIN_BYTES)
            segment.write_length_last(position, encode_blank_marker(size))
            segment.write_position = segment.size_bytes
            return
        if position + size + _BLANK_MIN_BYTES > segment.size_bytes:
            raise ReplicaOffsetError(
                f"record of {size} bytes at {offset} overruns its segment of "
                f"{self.segment_bytes} bytes: master and slave segment sizes differ"
            )
        segment.ensure_allocated(position + size)
        segment.write_length_last(position, record)
        segment.write_position = position + size

    # --- reading ------------------------------------------------------------------------------

    def read(self, offset: int, size: int) -> memoryview | None:
        """``size`` bytes at ``offset`` as a view (a consume-queue entry's record); None when
        that range is not (or no longer) written."""
        segment = self.segment_for(offset)
        if segment is None:
            return None
        position = offset - segment.start_offset
        if size <= 0 or position + size > segment.write_position:
            return None
        return segment.view[position : position + size]

    def read_record(self, offset: int) -> memoryview | None:
        """The record starting at ``offset``, checked: its magic, a size inside the written
        data, and a PHYSICALOFFSET field equal to ``offset`` (so an offset inside another
        record is refused). None otherwise."""
        segment = self.segment_for(offset)
        if segment is None:
            return None
        position = offset - segment.start_offset
        written = segment.write_position
        if position + RECORD_OVERHEAD_BYTES > written:
            return None
        view = segment.view
        total_size, magic = _PREFIX.unpack_from(view, position)
        if magic != MESSAGE_MAGIC_CODE or total_size < RECORD_OVERHEAD_BYTES:
            return None
        if position + total_size > written:
            return None
        (physical_offset,) = _INT64.unpack_from(view, position + PHYSICAL_OFFSET_POSITION)
        if physical_offset != offset:
            return None
        return view[position : position + total_size]

    def store_timestamp(self, offset: int) -> int:
        """STORETIMESTAMP of the record at ``offset``; -1 when it cannot be read."""
        segment = self.segment_for(offset)
        if segment is None:
            return -1
        position = offset - segment.start_offset
        if position + RECORD_OVERHEAD_BYTES > segment.write_position:
            return -1
        view = segment.view
        (sys_flag,) = _INT32.unpack_from(view, position + SYS_FLAG_POSITION)
        timestamp_at = position + STORE_TIMESTAMP_POSITION
        if sys_flag & SYS_FLAG_BORNHOST_V6:
            timestamp_at += IPV6_HOST_EXTRA_BYTES
        (timestamp_ms,) = _INT64.unpack_from(view, timestamp_at)
        return int(timestamp_ms)

    # --- retention and recovery ---------------------------------------------------------------

    def delete_leading_segments(self, count: int) -> list[MappedSegment]:
        """Delete the ``count`` oldest segments (never the last one); returns them.

        Raises:
            StoreIOError: a file could not be removed (the ones before it are gone).
        """
        count = min(count, len(self.segments) - 1)
        removed: list[MappedSegment] = []
        for _ in range(max(0, count)):
            segment = self.segments.pop(0)
            self._starts.pop(0)
            removed.append(segment)
            segment.delete()
        return removed

    def cut(self, offset: int) -> list[str]:
        """Discard everything from ``offset`` on: zero the tail of its segment and delete the
        segments after it. Returns the names of the deleted segment files.

        Raises:
            StoreIOError: a file could not be resized or removed.
        """
        removed: list[str] = []
        while self.segments and self.segments[-1].start_offset > offset:
            last = self.segments.pop()
            self._starts.pop()
            removed.append(last.path.name)
            last.delete()
        holder = self.segment_for(offset)
        if holder is not None:
            holder.cut(offset - holder.start_offset)
        self.prepare_next_spare()
        return removed

    def dirty_segments(self) -> list[MappedSegment]:
        """Segments written past their flushed position, oldest first (always a suffix: a
        flush covers every dirty segment at once)."""
        dirty: list[MappedSegment] = []
        for segment in reversed(self.segments):
            if segment.flushed_position >= segment.write_position:
                break
            dirty.append(segment)
        dirty.reverse()
        return dirty

    def close(self) -> None:
        self._drop_spare()
        for segment in self.segments:
            segment.close()
        self.segments.clear()
        self._starts.clear()
