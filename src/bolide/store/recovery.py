"""Opening a store directory: find where good data ends, cut what is torn, rebuild queues.

1. Map the commit log, the consume queues and the index.
2. Start at the checkpoint's recovery offset (the whole log without a usable checkpoint).
   Everything before it is durable and trusted.
3. Trim every consume queue back to its last entry that points before that offset and whose
   record confirms it (magic, size, queue id and queue offset fields).
4. Scan the commit log from there, record by record: magic, TOTALSIZE, the field lengths
   adding up, the PHYSICALOFFSET field, the body CRC, a topic that can be stored, and no
   zero byte at the end of non-empty properties (which puts refuse, so zeros there mean
   the record's tail was lost). Every sound record is re-dispatched to
   its consume queue and the index. The first unsound one ends the data: it and everything
   after it is cut (the segment's tail zeroed, later segments deleted). The scan itself is
   store/recovery_scan.py (compiled as _recovery_scan.pyx).

After a clean shutdown the checkpoint sits at the end of the data, so steps 3 and 4 touch
almost nothing; after a crash they cover what the last flush had not made durable.
Blocking file work: the store runs it in a flush thread before it starts serving.
"""

from __future__ import annotations

import logging
import struct
from typing import Final

from bolide.base import limits
from bolide.protocol.record import (
    PHYSICAL_OFFSET_POSITION,
    QUEUE_ID_POSITION,
    QUEUE_OFFSET_POSITION,
    RECORD_PREFIX,
)
from bolide.store.api import RecoveryReport
from bolide.store.checkpoint import Checkpoint
from bolide.store.commit_log import CommitLog
from bolide.store.consume_queue import (
    ConsumeQueue,
    ConsumeQueueEntry,
    ConsumeQueueTable,
)
from bolide.store.index_file import KeyIndex
from bolide.store.recovery_scan import SegmentScanner

_log = logging.getLogger("bolide.store.recovery")

_PREFIX: Final = RECORD_PREFIX
_QUEUE_ID: Final = struct.Struct(">i")
_INT64: Final = struct.Struct(">q")
_ZERO_CHUNK_BYTES: Final = 64 * 1024


class Recovery:
    """One run of the procedure above over already-constructed store parts."""

    def __init__(
        self,
        *,
        commit_log: CommitLog,
        queues: ConsumeQueueTable,
        index: KeyIndex,
        delay_levels_ms: tuple[int, ...],
    ) -> None:
        self._commit_log = commit_log
        self._queues = queues
        self._index = index
        self._delay_levels_ms = delay_levels_ms
        self._scanner = SegmentScanner(queues, index, delay_levels_ms)

    def run(self, *, checkpoint: Checkpoint | None, abort_present: bool) -> RecoveryReport:
        """Load, trim, scan and cut; returns what was found.

        Raises:
            StoreError: files cannot be opened, do not fit together, or cannot be repaired.
        """
        commit_log = self._commit_log
        commit_log.load()
        self._queues.load()
        self._index.load()
        segments_end = commit_log.segments[-1].end_offset if commit_log.segments else 0
        start = commit_log.min_offset
        if checkpoint is not None:
            start = min(max(checkpoint.recovery_start_offset, start), segments_end)
        commit_log.set_write_offset(start)
        dropped = sum(self._trim(queue, start) for queue in self._queues.all_queues())
        end, cut_reason = self._scan(start)
        commit_log.set_write_offset(end)
        cut_bytes = self._nonzero_bytes_after(end)
        removed: list[str] = []
        if (
            cut_reason is not None
            or cut_bytes
            or segments_end > _segment_end_after(commit_log, end)
        ):
            removed = commit_log.cut(end)
            if cut_reason is None:
                cut_reason = (
                    "bytes after the last whole record"
                    if cut_bytes
                    else "empty segment files after the end of the data"
                )
            _log.warning(
                "commit log cut at %d (%s): %d bytes and %d segment(s) discarded",
                end,
                cut_reason,
                cut_bytes,
                len(removed),
            )
        self._correct_min_offsets()
        counters = self._scanner
        return RecoveryReport(
            clean_shutdown=not abort_present,
            checkpoint_found=checkpoint is not None,
            scan_start_offset=start,
            commit_log_min_offset=commit_log.min_offset,
            commit_log_max_offset=commit_log.max_offset,
            records_scanned=counters.records,
            cut_offset=end if cut_reason is not None else None,
            cut_reason=cut_reason,
            cut_bytes=cut_bytes,
            segments_removed=tuple(removed),
            consume_queue_entries_dropped=dropped,
            consume_queue_entries_rebuilt=counters.queue_entries,
            consume_queue_gaps=counters.gaps,
            index_entries_rebuilt=counters.index_entries,
        )

    # --- consume queues -----------------------------------------------------------------------

    def _trim(self, queue: ConsumeQueue, start: int) -> int:
        end = queue.max_offset
        while end > queue.min_offset:
            entry = queue.entry(end - 1)
            if entry is not None and self._entry_is_sound(queue, end - 1, entry, start):
                break
            end -= 1
        return queue.truncate(end)

    def _entry_is_sound(
        self, queue: ConsumeQueue, queue_offset: int, entry: ConsumeQueueEntry, start: int
    ) -> bool:
        commit_log_offset, size, _ = entry
        if size <= 0 or commit_log_offset < 0 or commit_log_offset + size > start:
            return False
        if commit_log_offset < self._commit_log.min_offset:
            return True  # its record is gone to retention; nothing left to compare with
        record = self._commit_log.read(commit_log_offset, size)
        if record is None:
            return False
        total_size, _ = _PREFIX.unpack_from(record, 0)
        (queue_id,) = _QUEUE_ID.unpack_from(record, QUEUE_ID_POSITION)
        (stored_queue_offset,) = _INT64.unpack_from(record, QUEUE_OFFSET_POSITION)
        (physical_offset,) = _INT64.unpack_from(record, PHYSICAL_OFFSET_POSITION)
        return bool(
            total_size == size
            and queue_id == queue.queue_id
            and stored_queue_offset == queue_offset
            and physical_offset == commit_log_offset
        )

    def _correct_min_offsets(self) -> None:
        min_offset = self._commit_log.min_offset
        for queue in self._queues.all_queues():
            queue.advance_min_offset(lambda entry: entry[0] >= min_offset)

    # --- commit-log scan ------------------------------------------------------------------------

    def _scan(self, start: int) -> tuple[int, str | None]:
        """Dispatch every sound record from ``start``; returns (end of data, cut reason)."""
        commit_log = self._commit_log
        offset = start
        while True:
            segment = commit_log.segment_for(offset)
            if segment is None:
                return offset, None
            offset, reason, next_segment = self._scanner.scan(
                segment.view, segment.size_bytes, offset - segment.start_offset, offset
            )
            if not next_segment:
                return offset, reason

    def _nonzero_bytes_after(self, end: int) -> int:
        """Bytes from ``end`` to the last non-zero byte before a run of zeros (what a cut
        discards), looking at most RECOVERY_CUT_SCAN_MAX_BYTES ahead, in its segment."""
        segment = self._commit_log.segment_for(end)
        if segment is None:
            return 0
        position = end - segment.start_offset
        limit = min(segment.size_bytes, position + limits.RECOVERY_CUT_SCAN_MAX_BYTES)
        last_nonzero_end = position
        cursor = position
        while cursor < limit:
            chunk = bytes(segment.view[cursor : min(limit, cursor + _ZERO_CHUNK_BYTES)])
            stripped = len(chunk.rstrip(b"\0"))
            if stripped == 0:
                break
            last_nonzero_end = cursor + stripped
            cursor += len(chunk)
        return last_nonzero_end - position


def _segment_end_after(commit_log: CommitLog, end: int) -> int:
    """End offset of the segment that holds ``end`` (where data may legitimately stop)."""
    segment = commit_log.segment_for(end)
    if segment is not None:
        return segment.end_offset
    return end
