"""The commit-log access replication needs, a part of the file store (`FileMessageStore`).

A master's HA transfer reads raw commit-log bytes from an offset; a slave appends the bytes its
master holds at the same offsets (:class:`~bolide.store.replica.ReplicaWriter`) and reports how
far it got. Kept apart from the put and read paths of the store's main module.
"""

from __future__ import annotations

from bolide.base.errors import DiskFullError, ReplicaOffsetError, StoreError
from bolide.store.commit_log import CommitLog
from bolide.store.replica import ReplicaWriter

__all__ = ["ReplicationAccess"]


class ReplicationAccess:
    """Mixed into the file store (broker/ha: the master reads, the slave appends); uses the
    store's commit log, replica writer and running/failure state."""

    _commit_log: CommitLog
    _replica: ReplicaWriter
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
