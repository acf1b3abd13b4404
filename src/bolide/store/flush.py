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
from collections.abc import Callable, Iterable
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
            if segment.sealed:
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
            if not segment.closed:
                segment.seal_if_complete()
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


class PipelinedFlusher:
    """SYNC_FLUSH rounds: each fsyncs everything written when it starts; up to ``max_rounds``
    run at once, so puts that arrive during an fsync start the next one instead of waiting
    for it to end (journaling file systems merge concurrent fsyncs into one commit).

    A round starts on the loop turn after a request, so every put made in the same turn
    joins it. ``capture`` returns (commit-log end offset, batch) on the loop;
    ``on_flushed(end)`` runs after a round's fsync; ``on_failed(error)`` when one fails;
    ``has_waiters`` says whether puts still wait (then another round follows).
    """

    def __init__(
        self,
        *,
        capture: Callable[[], tuple[int, FlushBatch]],
        on_flushed: Callable[[int], None],
        on_failed: Callable[[StoreIOError], None],
        has_waiters: Callable[[], bool],
        executor: Executor,
        max_rounds: int,
    ) -> None:
        self._capture = capture
        self._on_flushed = on_flushed
        self._on_failed = on_failed
        self._has_waiters = has_waiters
        self._executor = executor
        self._max_rounds = max_rounds
        self._rounds: set[asyncio.Task[None]] = set()
        self._scheduled = False
        self._captured_offset = -1
        self._stopped = False

    def request(self) -> None:
        """Ask for a round soon (no-op while the maximum is in flight: the end of one asks
        again if puts still wait)."""
        if self._scheduled or self._stopped or len(self._rounds) >= self._max_rounds:
            return
        self._scheduled = True
        asyncio.get_running_loop().call_soon(self._start_round)

    def _start_round(self) -> None:
        self._scheduled = False
        if self._stopped or len(self._rounds) >= self._max_rounds:
            return
        end_offset, batch = self._capture()
        if end_offset <= self._captured_offset:
            batch.discard()
            return
        self._captured_offset = end_offset
        task = asyncio.get_running_loop().create_task(
            self._round(end_offset, batch), name="store-sync-flush-round"
        )
        self._rounds.add(task)
        task.add_done_callback(self._rounds.discard)

    async def _round(self, end_offset: int, batch: FlushBatch) -> None:
        try:
            await run_batch(batch, self._executor)
        except StoreIOError as error:
            self._on_failed(error)
            return
        finally:
            # Out of the count before asking for the next round (a done callback runs too
            # late: two rounds ending in one loop turn would both see the maximum in flight).
            current = asyncio.current_task()
            if current is not None:
                self._rounds.discard(current)
        self._on_flushed(end_offset)
        if self._has_waiters():
            self.request()

    async def stop(self) -> None:
        """Start no more rounds; wait for the ones in flight."""
        self._stopped = True
        if self._rounds:
            await asyncio.gather(*self._rounds, return_exceptions=True)
