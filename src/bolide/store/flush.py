"""Getting mapped writes onto the disk: fsync batches and the SYNC_FLUSH group commit.

A :class:`FlushBatch` is captured on the event loop (which segments are dirty, how far they
were written, duplicate descriptors), run in a flush thread (the fsyncs), then committed on
the loop (the flushed positions advance). The thread never touches segment state, so the
loop may keep appending, rolling or even closing segments while a batch runs.

:class:`GroupCommit` is SYNC_FLUSH: a put joins the open flush round and awaits its future
(one per round, shared by its puts); the round captures the commit-log end, fsyncs everything
below it on a flush thread (:class:`FlushThreads`) and resolves every put it covers at once,
so concurrent puts share one fsync.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path

from bolide.base.errors import StoreIOError, invariant
from bolide.base.fileio import fsync_directory
from bolide.base.histogram import BucketCounts
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

    def __init__(
        self,
        segments: Iterable[MappedSegment],
        file_ops: FileOps,
        timings_us: BucketCounts | None = None,
    ) -> None:
        self._file_ops = file_ops
        self._timings_us = timings_us
        """Where :meth:`commit` counts how long :meth:`run` took (µs), when given."""
        self._elapsed_us = 0
        self._tasks: list[_SyncTask] = []
        self._directories: dict[Path, list[MappedSegment]] = {}
        """New files' directories, with the segments that made each one need its fsync."""
        for segment in segments:
            if segment.closed or segment.flushed_position >= segment.write_position:
                continue
            if segment.sealed:
                continue
            if segment.needs_directory_sync:
                self._directories.setdefault(segment.path.parent, []).append(segment)
            self._tasks.append(_SyncTask(segment, segment.duplicate_fd(), segment.write_position))
        self._directory_segments = [
            t.segment for t in self._tasks if t.segment.needs_directory_sync
        ]

    @property
    def empty(self) -> bool:
        return not self._tasks

    def run(self) -> None:
        """fsync the new files' directories, then every captured file (flush thread).

        The duplicate descriptors stay open until :meth:`commit`, :meth:`poison` or
        :meth:`discard` (on the loop): every call that releases the GIL costs the flush
        thread another wait for it while the loop is busy.

        Raises:
            StoreIOError: an fsync failed (the rest are still attempted).
        """
        started_ns = time.perf_counter_ns()
        failures: list[str] = []
        for directory, segments in sorted(self._directories.items()):
            try:
                fsync_directory(directory)
            except FileNotFoundError as error:
                if not all(segment.closed for segment in segments):
                    failures.append(f"fsync of directory {directory} failed: {error}")
                # else: the store deleted these files (a topic deleted after the capture):
                # nothing of theirs is left to make durable.
            except OSError as error:
                failures.append(f"fsync of directory {directory} failed: {error}")
        sync = self._file_ops.sync
        for task in self._tasks:
            try:
                sync(task.fd)
            except OSError as error:
                failures.append(f"fsync of {task.segment.path} failed: {error.strerror or error}")
        self._elapsed_us = (time.perf_counter_ns() - started_ns) // 1000
        if failures:
            raise StoreIOError("; ".join(failures))

    def commit(self) -> None:
        """Advance the flushed positions and close the descriptors (after :meth:`run`
        succeeded)."""
        if self._timings_us is not None and self._tasks:
            self._timings_us.observe(self._elapsed_us)  # on the loop: no lock needed
        self._close_descriptors()
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
        self._close_descriptors()
        for task in self._tasks:
            task.segment.poison = reason

    def discard(self) -> None:
        """Close the duplicate descriptors of a batch that will not run (or whose run ended
        in something other than StoreIOError)."""
        self._close_descriptors()
        self._tasks.clear()

    def _close_descriptors(self) -> None:
        for task in self._tasks:
            if task.fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(task.fd)
                task.fd = -1


class _Round:
    """The puts that one SYNC flush round covers: they share one future."""

    __slots__ = ("callbacks", "deadline_ms", "end_offset", "future")

    def __init__(self, future: asyncio.Future[bool], deadline_ms: int) -> None:
        self.future = future
        self.deadline_ms = deadline_ms
        self.end_offset = -1  # known when the round captures what it flushes
        self.callbacks: list[Callable[[bool], None]] = []
        """Puts waiting without a future (:meth:`GroupCommit.call_when_flushed`)."""

    def resolve(self, durable: bool) -> None:
        if not self.future.done():
            self.future.set_result(durable)
        callbacks, self.callbacks = self.callbacks, []
        for callback in callbacks:
            try:
                callback(durable)
            except Exception:  # one answer's bug must not keep the others from theirs
                _log.exception("a SYNC flush callback failed")


class GroupCommit:
    """SYNC_FLUSH puts waiting for the fsync that covers them, one future per flush round.

    Every put made before a round captures the commit-log end joins the *open* round and
    awaits its future; the capture closes it (its end offset covers all of them) and the next
    put opens a new one. The round's deadline is that of its first put, so no put waits
    longer than its timeout. Rounds are bounded by the puts in flight, which the broker's
    dispatcher bounds (HANDLER_CONCURRENCY_MAX_REQUESTS).
    """

    def __init__(self) -> None:
        self._open: _Round | None = None
        self._captured: deque[_Round] = deque()

    def __len__(self) -> int:
        """Rounds still waiting (open or captured)."""
        return len(self._captured) + (self._open is not None)

    def wait(self, deadline_ms: int) -> asyncio.Future[bool]:
        """The future of the open round: True once an fsync covering everything written so
        far has completed, False on timeout or fsync failure. ``deadline_ms`` is on the store
        clock's monotonic scale."""
        current = self._open
        if current is None:
            current = self._open = _Round(asyncio.get_running_loop().create_future(), deadline_ms)
        return current.future

    def call_when_flushed(self, deadline_ms: int, callback: Callable[[bool], None]) -> None:
        """:meth:`wait` without a future per put: ``callback(True)`` once an fsync covering
        everything written so far completed, ``callback(False)`` on timeout or fsync failure
        — called on the loop when the round resolves, with every other put of the round."""
        current = self._open
        if current is None:
            current = self._open = _Round(asyncio.get_running_loop().create_future(), deadline_ms)
        current.callbacks.append(callback)

    def capture(self, end_offset: int) -> None:
        """Close the open round: a flush of everything below ``end_offset`` starts now."""
        current = self._open
        if current is not None:
            self._open = None
            current.end_offset = end_offset
            self._captured.append(current)

    def flushed_up_to(self, flushed_offset: int) -> None:
        """Resolve (True) every captured round whose end is at or below ``flushed_offset``."""
        captured = self._captured
        while captured and captured[0].end_offset <= flushed_offset:
            captured.popleft().resolve(True)

    def expire(self, now_ms: int) -> int:
        """Resolve (False) every round whose deadline has passed; returns how many."""
        expired = [waiting for waiting in self._captured if waiting.deadline_ms <= now_ms]
        if expired:
            self._captured = deque(w for w in self._captured if w.deadline_ms > now_ms)
        if self._open is not None and self._open.deadline_ms <= now_ms:
            expired.append(self._open)
            self._open = None
        for waiting in expired:
            waiting.resolve(False)
        return len(expired)

    def fail_all(self) -> None:
        """Resolve every round with False (fsync failed or the store is stopping)."""
        self.capture(-1)
        while self._captured:
            self._captured.popleft().resolve(False)


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
    except BaseException:
        batch.discard()
        raise
    batch.commit()


_FlushJob = tuple[FlushBatch, Callable[[StoreIOError | None], None]]
"""A batch to run and what to call, on the loop, with its outcome."""


class FlushThreads:
    """``count`` threads that run the flush batches of SYNC rounds.

    One hop each way — a SimpleQueue put wakes a thread, ``call_soon_threadsafe`` brings the
    outcome back — where a thread-pool executor adds, per round, a concurrent future with its
    lock and condition and an asyncio future wrapping it. Batches wait in an unbounded queue,
    but PipelinedFlusher keeps at most ``count`` of them submitted.
    """

    def __init__(self, count: int, name: str) -> None:
        self._count = count
        self._name = name
        self._queue: queue.SimpleQueue[_FlushJob | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self) -> None:
        """Start the threads; outcomes come back to the running loop."""
        self._loop = asyncio.get_running_loop()
        for number in range(self._count):
            thread = threading.Thread(target=self._run, name=f"{self._name}-{number}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def submit(self, batch: FlushBatch, done: Callable[[StoreIOError | None], None]) -> None:
        """Run ``batch`` on a thread, then call ``done(error or None)`` on the loop."""
        self._queue.put((batch, done))

    def _run(self) -> None:
        loop = self._loop
        invariant(loop is not None, "flush threads run after start()")
        assert loop is not None  # for mypy; the invariant above says why
        while (item := self._queue.get()) is not None:
            batch, done = item
            error: StoreIOError | None = None
            try:
                batch.run()
            except StoreIOError as failure:
                error = failure
            except Exception as failure:  # a bug must still answer the waiting puts
                error = StoreIOError(f"flush thread failed: {failure!r}")
            with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits any more
                loop.call_soon_threadsafe(done, error)

    def stop(self) -> None:
        """Let the threads finish what was submitted, then end them (blocks until then)."""
        for _ in self._threads:
            self._queue.put(None)
        for thread in self._threads:
            thread.join()
        self._threads.clear()


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
        max_rounds: int,
    ) -> None:
        self._capture = capture
        self._on_flushed = on_flushed
        self._on_failed = on_failed
        self._has_waiters = has_waiters
        self._max_rounds = max_rounds
        self._threads = FlushThreads(max_rounds, "bolide-store-sync-flush")
        self._in_flight = 0
        self._idle: asyncio.Event | None = None
        self._scheduled = False
        self._captured_offset = -1
        self._stopped = False

    def start(self) -> None:
        """Start the flush threads (on the loop that will request rounds)."""
        self._idle = asyncio.Event()
        self._idle.set()
        self._threads.start()

    def request(self) -> None:
        """Ask for a round soon (no-op while the maximum is in flight: the end of one asks
        again if puts still wait)."""
        if self._scheduled or self._stopped or self._in_flight >= self._max_rounds:
            return
        self._scheduled = True
        asyncio.get_running_loop().call_soon(self._start_round)

    def _start_round(self) -> None:
        self._scheduled = False
        if self._stopped or self._in_flight >= self._max_rounds:
            return
        end_offset, batch = self._capture()
        if end_offset <= self._captured_offset:
            batch.discard()
            return
        self._captured_offset = end_offset
        self._in_flight += 1
        if self._idle is not None:
            self._idle.clear()
        self._threads.submit(batch, functools.partial(self._round_done, end_offset, batch))

    def _round_done(self, end_offset: int, batch: FlushBatch, error: StoreIOError | None) -> None:
        self._in_flight -= 1
        if self._in_flight == 0 and self._idle is not None:
            self._idle.set()
        if error is not None:
            _log.error("flush failed: %s", error)
            batch.poison(str(error))
            self._on_failed(error)
            return
        batch.commit()
        self._on_flushed(end_offset)
        if self._has_waiters():
            self.request()

    @property
    def stopping(self) -> bool:
        """:meth:`stop` was called: no round starts any more."""
        return self._stopped

    async def stop(self) -> None:
        """Start no more rounds; wait for the ones in flight, then end the threads."""
        self._stopped = True
        if self._idle is None:
            return
        await self._idle.wait()
        self._threads.stop()
