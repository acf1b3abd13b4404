"""The timer log: a durable index of timer messages by delivery time.

Timer messages (TIMER_DELIVER_MS / TIMER_DELAY_MS / TIMER_DELAY_SEC) wait in the commit log
under the timer topic, queue 0. Entry ``i`` of this log describes message ``i`` of that consume
queue and adds what the consume queue cannot hold, its delivery time::

     0                 8                      16           20
     +-----------------+----------------------+------------+
     | deliver_ms      | commit_log_offset    | size       |
     | int64 BE (ms)   | int64 BE             | int32 BE   |
     +-----------------+----------------------+------------+

Files ``<store root>/timerlog/<20-digit index of their first entry>`` hold ``segment_entries``
entries each (the last one fewer); whole files are deleted once everything in them has been
delivered (:meth:`TimerLog.delete_before`).

The commit log stays the truth: the broker's timer service checks the log against the consume
queue at start, cuts entries that point elsewhere (:meth:`TimerLog.truncate`) and re-indexes
missing ones from the records. So the log needs no fsync for safety; :meth:`TimerLog.sync`
makes restarts faster. A torn last entry (a partial write, or zeros a crash left in a grown
file) is cut by :meth:`TimerLog.open`.

Blocking file I/O (pread/pwrite on page cache): cheap per entry; call :meth:`sync` and large
:meth:`read` calls from a thread on a busy loop.
"""

from __future__ import annotations

import logging
import os
import struct
from pathlib import Path
from typing import NamedTuple

from bolide.base import limits
from bolide.base.errors import StoreIOError, invariant
from bolide.base.fileio import fsync_directory
from bolide.store.config import parse_segment_file_name, segment_file_name

__all__ = ["TIMER_LOG_DIR_NAME", "TimerEntry", "TimerLog", "timer_log_dir"]

_log = logging.getLogger("bolide.store.timer_log")

TIMER_LOG_DIR_NAME = "timerlog"
_ENTRY = struct.Struct(">qqi")
ENTRY_BYTES = _ENTRY.size


class TimerEntry(NamedTuple):
    """One timer message: when it is due and where its record is."""

    deliver_ms: int
    commit_log_offset: int
    size: int


def timer_log_dir(store_root: Path) -> Path:
    """``<store root>/timerlog``."""
    return store_root / TIMER_LOG_DIR_NAME


class TimerLog:
    """Append-only, index-addressed entries in fixed-size files; see the module docstring.

    Indexes run from :attr:`start_index` (the first entry kept) to :attr:`end_index`
    (exclusive, the next to append). Raises :class:`StoreIOError` for any file error.
    """

    def __init__(
        self, directory: Path, *, segment_entries: int = limits.TIMER_LOG_SEGMENT_ENTRIES
    ) -> None:
        invariant(segment_entries >= 2, "a timer-log file holds at least two entries")
        self.directory = directory
        self._segment_entries = segment_entries
        self._files: dict[int, int] = {}  # first index -> fd, ordered by first index
        self._dirty: set[int] = set()
        self._start_index = 0
        self._end_index = 0

    @property
    def start_index(self) -> int:
        return self._start_index

    @property
    def end_index(self) -> int:
        return self._end_index

    def __len__(self) -> int:
        return self._end_index - self._start_index

    # --- opening and closing --------------------------------------------------------------------

    def open(self) -> None:
        """Open the files, cut a torn tail; an empty directory gives an empty log at 0."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            starts = sorted(
                start
                for start in (
                    parse_segment_file_name(path.name) for path in self.directory.iterdir()
                )
                if start is not None
            )
            for start in starts:
                self._files[start] = os.open(self.directory / segment_file_name(start), os.O_RDWR)
        except OSError as error:
            self.close()
            raise StoreIOError(f"cannot open timer log {self.directory}: {error}") from error
        if not starts:
            return
        try:
            starts = self._contiguous_run(starts)
            first_skip, _ = self._valid_entries(starts[0])
            self._start_index = starts[0] + first_skip
            skip, count = self._valid_entries(starts[-1])
            self._end_index = max(self._start_index, starts[-1] + skip + count)
            self._cut_file_at(starts[-1], self._end_index)
        except StoreIOError:
            self.close()
            raise

    def _contiguous_run(self, starts: list[int]) -> list[int]:
        """The files from the last gap on (a gap means files were lost: older ones go)."""
        for start in starts:
            if start % self._segment_entries:
                raise StoreIOError(f"timer log file {start} is not at a file boundary")
        keep_from = 0
        for position in range(1, len(starts)):
            if starts[position] - starts[position - 1] != self._segment_entries:
                keep_from = position
        for start in starts[:keep_from]:
            _log.error("timer log file %d is cut off from the newer files; deleted", start)
            self._remove_file(start)
        return starts[keep_from:]

    def _valid_entries(self, start: int) -> tuple[int, int]:
        """(zero entries at the head of file ``start`` — a log reset inside a file leaves
        them —, then whole non-zero entries up to the first torn or zero one)."""
        fd = self._files[start]
        try:
            data = os.pread(fd, self._segment_entries * ENTRY_BYTES, 0)
        except OSError as error:
            raise StoreIOError(f"cannot read timer log file {start}: {error}") from error
        usable = data[: len(data) // ENTRY_BYTES * ENTRY_BYTES]
        skip = count = 0
        for deliver_ms, _, size in _ENTRY.iter_unpack(usable):
            valid = deliver_ms > 0 and size > 0
            if count == 0 and not valid and deliver_ms == size == 0:
                skip += 1
                continue
            if not valid:
                break
            count += 1
        if count == 0:
            return 0, 0
        return skip, count

    def close(self) -> None:
        """Close every file (no flush: see :meth:`sync`)."""
        for fd in self._files.values():
            os.close(fd)
        self._files.clear()
        self._dirty.clear()

    def sync(self) -> None:
        """fsync the files appended to since the last call (blocking)."""
        dirty, self._dirty = self._dirty, set()
        try:
            for start in sorted(dirty):
                fd = self._files.get(start)
                if fd is not None:
                    os.fsync(fd)
        except OSError as error:
            raise StoreIOError(f"cannot sync timer log {self.directory}: {error}") from error

    # --- writing --------------------------------------------------------------------------------

    def reset(self, start_index: int) -> None:
        """Delete every entry; the log then starts, empty, at ``start_index``."""
        for start in list(self._files):
            self._remove_file(start)
        self._start_index = self._end_index = start_index

    def append(self, entry: TimerEntry) -> int:
        """Write ``entry`` at :attr:`end_index`; returns that index."""
        invariant(entry.deliver_ms > 0 and entry.size > 0, "a timer entry has a time and size")
        index = self._end_index
        start = index - index % self._segment_entries
        try:
            fd = self._files.get(start)
            if fd is None:
                fd = self._create_file(start)
            os.pwrite(fd, _ENTRY.pack(*entry), (index - start) * ENTRY_BYTES)
        except OSError as error:
            raise StoreIOError(f"cannot append to timer log {self.directory}: {error}") from error
        self._dirty.add(start)
        self._end_index = index + 1
        return index

    def _create_file(self, start: int) -> int:
        path = self.directory / segment_file_name(start)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        self._files[start] = fd
        fsync_directory(self.directory)
        return fd

    def truncate(self, end_index: int) -> None:
        """Cut every entry at or after ``end_index`` (at least :attr:`start_index`)."""
        end_index = max(end_index, self._start_index)
        if end_index >= self._end_index:
            return
        for start in [start for start in self._files if start >= end_index]:
            self._remove_file(start)
        containing = end_index - end_index % self._segment_entries
        if containing in self._files:
            self._cut_file_at(containing, end_index)
        self._end_index = end_index

    def _cut_file_at(self, start: int, end_index: int) -> None:
        try:
            os.ftruncate(self._files[start], (end_index - start) * ENTRY_BYTES)
        except OSError as error:
            raise StoreIOError(f"cannot cut timer log file {start}: {error}") from error
        self._dirty.add(start)

    def delete_before(self, index: int) -> int:
        """Delete the files whose entries all lie before ``index``; returns how many."""
        limit = min(index, self._end_index)
        deleted = 0
        for start in sorted(self._files):
            if start + self._segment_entries > limit:
                break
            self._remove_file(start)
            self._start_index = max(self._start_index, start + self._segment_entries)
            deleted += 1
        return deleted

    def _remove_file(self, start: int) -> None:
        fd = self._files.pop(start, None)
        if fd is not None:
            os.close(fd)
        self._dirty.discard(start)
        try:
            (self.directory / segment_file_name(start)).unlink(missing_ok=True)
        except OSError as error:
            raise StoreIOError(f"cannot delete timer log file {start}: {error}") from error

    # --- reading --------------------------------------------------------------------------------

    def read(self, from_index: int, count: int) -> list[TimerEntry]:
        """Up to ``count`` entries from ``from_index`` (clamped to [start, end))."""
        index = max(from_index, self._start_index)
        stop = min(self._end_index, index + max(0, count))
        entries: list[TimerEntry] = []
        while index < stop:
            start = index - index % self._segment_entries
            fd = self._files.get(start)
            if fd is None:
                break
            in_file = min(stop, start + self._segment_entries) - index
            try:
                data = os.pread(fd, in_file * ENTRY_BYTES, (index - start) * ENTRY_BYTES)
            except OSError as error:
                raise StoreIOError(f"cannot read timer log file {start}: {error}") from error
            usable = len(data) // ENTRY_BYTES * ENTRY_BYTES
            entries.extend(TimerEntry._make(fields) for fields in _ENTRY.iter_unpack(data[:usable]))
            if usable < in_file * ENTRY_BYTES:
                break
            index += in_file
        return entries
