"""The commit-log access replication needs, a part of the file store (`FileMessageStore`).

A master's HA transfer reads raw commit-log bytes from an offset; a slave appends the bytes its
master holds at the same offsets (:class:`~bolide.store.replica.ReplicaWriter`) and reports how
far it got. Kept apart from the put and read paths of the store's main module.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from bolide.base.clock import Clock
from bolide.base.errors import DiskFullError, ReplicaOffsetError, StoreError
from bolide.store.checkpoint import Checkpoint, CheckpointFile
from bolide.store.commit_log import CommitLog
from bolide.store.consume_queue import ConsumeQueue, ConsumeQueueTable
from bolide.store.replica import ReplicaWriter

_log = logging.getLogger("bolide.store.replication")

__all__ = ["ReplicationAccess", "TruncateReport"]


@dataclass(frozen=True, slots=True)
class TruncateReport:
    """What :meth:`ReplicationAccess.truncate_commit_log_to` cut: the commit-log bytes from
    ``offset`` to ``old_max_offset``, whole segment files, and consume-queue entries."""

    offset: int
    old_max_offset: int
    segments_removed: tuple[str, ...]
    queue_entries_dropped: int

    @property
    def bytes_cut(self) -> int:
        return self.old_max_offset - self.offset


class ReplicationAccess:
    """Mixed into the file store (broker/ha: the master reads, the slave appends); uses the
    store's commit log, replica writer and running/failure state."""

    _commit_log: CommitLog
    _replica: ReplicaWriter
    _queues: ConsumeQueueTable
    _checkpoint: CheckpointFile
    _clock: Clock
    _queue_flushed_offset: int
    refuse_puts: str | None
    _running: bool
    _write_failure: str | None

    @property
    def commit_log_max_offset(self) -> int:
        """End of the commit log's data (a slave: of its whole copied records)."""
        return self._commit_log.max_offset

    @property
    def commit_log_min_offset(self) -> int:
        return self._commit_log.min_offset

    @property
    def commit_log_segment_bytes(self) -> int:
        return self._commit_log.segment_bytes

    @property
    def replica(self) -> ReplicaWriter:
        """The slave's writer of replicated bytes (its ``end_offset`` is what a slave reports)."""
        return self._replica

    def read_commit_log(self, offset: int, max_bytes: int) -> bytes | None:
        """Up to ``max_bytes`` of commit-log bytes from ``offset``, never past the end of its
        segment (a master's HA transfer); None when nothing is written there yet (or any more).
        """
        segment = self._commit_log.segment_for(offset) if self._running else None
        if segment is None:
            return None
        position = offset - segment.start_offset
        end = min(segment.write_position, position + max_bytes)
        if end <= position:
            return None
        return bytes(segment.view[position:end])

    def append_replicated(self, offset: int, data: bytes | memoryview) -> int:
        """Write bytes a master holds at ``offset`` (see :class:`ReplicaWriter`); returns
        the offset the next bytes must start at.

        Raises:
            ReplicaOffsetError: out of step or unsound; the caller reconnects.
            StoreError: the store is not running or a write failed (sticky, as for puts).
        """
        if not self._running or self._write_failure is not None:
            raise StoreError(f"store refuses replicated bytes: {self._write_failure or 'stopped'}")
        try:
            return self._replica.append(offset, data)
        except (DiskFullError, ReplicaOffsetError):
            raise  # nothing unknown on disk: the next bytes may succeed
        except StoreError as error:
            self._write_failure = str(error)
            raise

    def store_timestamp_at_offset(self, commit_log_offset: int) -> int:
        """STORETIMESTAMP of the record at ``commit_log_offset``; -1 when there is none."""
        return self._commit_log.store_timestamp(commit_log_offset) if self._running else -1

    def truncate_commit_log_to(self, offset: int) -> TruncateReport:
        """Discard the commit log from ``offset`` on, with every consume-queue entry of a
        record there, and write a checkpoint at once so a restart scans nothing past the cut.

        For a replica whose log parted from its master's (controller mode: a deposed master
        rejoining as a slave). ``offset`` must be a record boundary the replicas agree on; the
        store must refuse puts (a slave). Key-index entries past the cut stay: a key query
        re-checks the record it finds. Nothing is done when ``offset`` is at or past the end.

        Raises:
            ReplicaOffsetError: ``offset`` is before the oldest commit-log byte.
            StoreError: the store is not running, or takes puts; StoreIOError when a file
                could not be cut.
        """
        commit_log = self._commit_log
        old_max = commit_log.max_offset
        if not self._running or self._write_failure is not None:
            raise StoreError(f"store cannot truncate: {self._write_failure or 'stopped'}")
        if not self.refuse_puts:
            raise StoreError("store cannot truncate while it takes puts (a master)")
        if offset >= old_max:
            return TruncateReport(old_max, old_max, (), 0)
        if offset < commit_log.min_offset:
            raise ReplicaOffsetError(
                f"cannot truncate at {offset}: the oldest commit-log byte is at "
                f"{commit_log.min_offset}"
            )
        self._replica.forget_pending()
        removed = tuple(commit_log.cut(offset))
        commit_log.flushed_offset = min(commit_log.flushed_offset, offset)
        dropped = sum(_drop_entries_from(queue, offset) for queue in self._queues.all_queues())
        self._queue_flushed_offset = min(self._queue_flushed_offset, offset)
        self._checkpoint.write(
            Checkpoint(
                commit_log_flushed_offset=commit_log.flushed_offset,
                consume_queue_flushed_offset=self._queue_flushed_offset,
                index_flushed_offset=self._queue_flushed_offset,
                written_at_ms=self._clock.now_ms(),
            )
        )
        report = TruncateReport(offset, old_max, removed, dropped)
        _log.warning(
            "commit log truncated at %d: %d bytes, %d segment(s), %d queue entries discarded",
            offset,
            report.bytes_cut,
            len(removed),
            dropped,
        )
        return report


def _drop_entries_from(queue: ConsumeQueue, offset: int) -> int:
    """Truncate ``queue`` after its last entry whose record starts before ``offset``."""
    end = queue.max_offset
    while end > queue.min_offset:
        entry = queue.entry(end - 1)
        if entry is not None and entry[0] < offset:
            break
        end -= 1
    return queue.truncate(end)
