"""Getting mapped writes onto the disk: fsync batches and the SYNC_FLUSH group commit.

A :class:`FlushBatch` is captured on the event loop (which segments are dirty, how far they
were written, duplicate descriptors), run in a flush thread (the fsyncs), then committed on
the loop (the flushed positions advance). The thread never touches segment state, so the
loop may keep appending, rolling or even closing segments while a batch runs.

:class:`GroupCommit` is SYNC_FLUSH: a put registers the commit-log offset its record ends at
and awaits a future; one flush round fsyncs everything written so far and resolves every
waiter it covers at once, so concurrent puts share one fsync.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections import deque
from collections.abc import Iterable
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path

from bolide.base.errors import StoreIOError
from bolide.base.fileio import fsync_directory
from bolide.store.file_ops import FileOps
from bolide.store.segment import MappedSegment

_log = logging.getLogger("bolide.store.flush")


@dataclass(slots=True)
class _SyncTask:
    segment: MappedSegment
    fd: int
    target_position: int


class FlushBatch:
    """The fsyncs that make every write made before its capture durable."""

    def __init__(self, segments: Iterable[MappedSegment], file_ops: FileOps) -> None:
        self._file_ops = file_ops
        self._tasks: list[_SyncTask] = []
        self._directories: set[Path] = set()
        for segment in segments:
            if segment.closed or segment.flushed_position >= segment.write_position:
                continue
            if segment.needs_directory_sync:
                self._directories.add(segment.path.parent)
            self._tasks.append(_SyncTask(segment, segment.duplicate_fd(), segment.write_position))
        self._directory_segments = [
            t.segment for t in self._tasks if t.segment.needs_directory_sync
        ]

    @property
    def empty(self) -> bool:
        return not self._tasks

    def run(self) -> None:
        """fsync the new files' directories, then every captured file (flush thread).

        Every duplicate descriptor is closed, whatever happens.

        Raises:
            StoreIOError: an fsync failed (the rest are still attempted).
        """
        failures: list[str] = []
        for directory in sorted(self._directories):
            try:
                fsync_directory(directory)
            except OSError as error:
                failures.append(f"fsync of directory {directory} failed: {error}")
        for task in self._tasks:
            try:
                self._file_ops.sync(task.fd)
            except OSError as error:
                failures.append(f"fsync of {task.segment.path} failed: {error.strerror or error}")
            finally:
                os.close(task.fd)
        if failures:
            raise StoreIOError("; ".join(failures))

    def commit(self) -> None:
        """Advance the flushed positions (event loop, after :meth:`run` succeeded)."""
        for task in self._tasks:
            segment = task.segment
            segment.flushed_position = max(segment.flushed_position, task.target_position)
        for segment in self._directory_segments:
            segment.needs_directory_sync = False

    def poison(self, reason: str) -> None:
        """Mark every captured segment as failed (event loop, after :meth:`run` raised).

        After a failed fsync the kernel may have dropped the dirty pages: the segment's state
        on disk is unknown until recovery re-reads it.
        """
        for task in self._tasks:
            task.segment.poison = reason

    def discard(self) -> None:
        """Close the duplicate descriptors of a batch that will never run."""
        for task in self._tasks:
            with contextlib.suppress(OSError):
                os.close(task.fd)
        self._tasks.clear()


class GroupCommit:
    """Puts waiting for the fsync that covers them, in commit-log order.

    The number of waiters is bounded by the puts in flight, which the broker's dispatcher
    bounds (HANDLER_CONCURRENCY_MAX_REQUESTS).
    """

    def __init__(self) -> None:
        self._waiters: deque[tuple[int, int, asyncio.Future[bool]]] = deque()

    def __len__(self) -> int:
        return len(self._waiters)

    def wait_for(self, end_offset: int, deadline_ms: int) -> asyncio.Future[bool]:
        """A future that becomes True once ``end_offset`` is flushed, False on timeout or
        fsync failure. ``deadline_ms`` is on the store clock's monotonic scale."""
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._waiters.append((end_offset, deadline_ms, future))
        return future

    def flushed_up_to(self, flushed_offset: int) -> None:
        """Resolve (True) every waiter whose record ends at or below ``flushed_offset``."""
        waiters = self._waiters
        while waiters and waiters[0][0] <= flushed_offset:
            _, _, future = waiters.popleft()
            if not future.done():
                future.set_result(True)

    def expire(self, now_ms: int) -> int:
        """Resolve (False) every waiter whose deadline has passed; returns how many."""
        expired = 0
        remaining: deque[tuple[int, int, asyncio.Future[bool]]] = deque()
        for waiter in self._waiters:
            if waiter[1] <= now_ms:
                if not waiter[2].done():
                    waiter[2].set_result(False)
                expired += 1
            else:
                remaining.append(waiter)
        self._waiters = remaining
        return expired

    def fail_all(self) -> None:
        """Resolve every waiter with False (fsync failed or the store is stopping)."""
        while self._waiters:
            _, _, future = self._waiters.popleft()
            if not future.done():
                future.set_result(False)


async def run_batch(batch: FlushBatch, executor: Executor) -> None:
    """Run ``batch`` in ``executor``, then commit it; poison its segments on failure.

    Raises:
        StoreIOError: an fsync failed.
    """
    if batch.empty:
        return
    try:
        await asyncio.get_running_loop().run_in_executor(executor, batch.run)
    except StoreIOError as error:
        _log.error("flush failed: %s", error)
        batch.poison(str(error))
        raise
    batch.commit()
