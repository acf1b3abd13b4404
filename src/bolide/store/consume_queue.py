"""Consume queues: per topic and queue id, the commit-log position of every message in order.

Files are ``consumequeue/<topic>/<queue id>/<20-digit start byte offset>``, each
``entries_per_file`` entries of 20 bytes; the queue offset of an entry is its byte offset / 20.

```
+------------------------+------------+------------------------+
| commit-log offset      | size       | tags code              |
| int64                  | int32      | int64                  |
+------------------------+------------+------------------------+
  0                        8            12                     20
```

The tags code is Java's ``String.hashCode`` of the TAGS property (0 without tags) or, in
SCHEDULE_TOPIC_XXXX, the delivery time in ms. An entry is written with one pack (offset, size,
tags, in that order) after its record; a file holds no entry past the first of size 0. A crash
can tear only the entry of the put in progress, whose record lies past the checkpoint, and
recovery re-checks every entry past the checkpoint against its record and rebuilds it from the
commit log (recovery.py, steps 3 and 4).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import logging
import shutil
import struct
from collections.abc import Callable
from itertools import starmap
from pathlib import Path
from typing import Final

from bolide.base import limits
from bolide.base.errors import CorruptDataError, StoreIOError, invariant
from bolide.store.config import parse_segment_file_name, segment_file_name
from bolide.store.file_ops import FileOps
from bolide.store.segment import MappedSegment, allocate_pool, remove_leftovers

_log = logging.getLogger("bolide.store.consume_queue")

ENTRY: Final = struct.Struct(">qiq")
ENTRY_BYTES: Final = limits.CONSUME_QUEUE_ENTRY_BYTES
_SIZE: Final = struct.Struct(">i")
_SIZE_POSITION: Final = 8

ConsumeQueueEntry = tuple[int, int, int]
"""(commit-log offset, size, tags code)."""


class ConsumeQueue:
    """One queue's entries. ``max_offset`` is exclusive; ``min_offset`` the first entry whose
    record retention has not deleted."""

    def __init__(
        self,
        topic: str,
        queue_id: int,
        directory: Path,
        entries_per_file: int,
        file_ops: FileOps,
    ) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.directory = directory
        self.entries_per_file = entries_per_file
        self.file_bytes = entries_per_file * ENTRY_BYTES
        self._file_ops = file_ops
        self.segments: list[MappedSegment] = []
        self.min_offset = 0
        self.max_offset = 0
        self.room_end_offset = 0
        """Entries below this queue offset have their blocks reserved: a put appending up to it
        skips :meth:`prepare_append`. Only :meth:`prepare_append` raises it; anything that
        removes or cuts files lowers it to 0. A failed write poisons a file without lowering
        it: the store then refuses every put until recovery (FileMessageStore._write_failure)."""

    # --- opening ------------------------------------------------------------------------------

    def load(self) -> None:
        """Map the queue's files and find its end (the first entry of size 0).

        Raises:
            CorruptDataError: files are misnamed, not contiguous or of the wrong size.
            StoreIOError: a file cannot be opened.
        """
        remove_leftovers(self.directory)
        starts: list[int] = []
        for path in self.directory.iterdir():
            start = parse_segment_file_name(path.name)
            if start is None or start % self.file_bytes != 0:
                raise CorruptDataError(f"unexpected file {path} in a consume queue")
            starts.append(start)
        starts.sort()
        for index in range(1, len(starts)):
            if starts[index] != starts[index - 1] + self.file_bytes:
                raise CorruptDataError(f"consume queue {self.directory} has a gap")
        try:
            for start in starts:
                self.segments.append(self._map_file(start, existing=True))
        except BaseException:
            self.close()
            raise
        if not self.segments:
            return
        for segment in self.segments[:-1]:
            segment.write_position = segment.flushed_position = self.file_bytes
            segment.allocated_position = self.file_bytes
        first, last = self.segments[0], self.segments[-1]
        # A queue rebuilt from the middle of its history starts inside its first file.
        leading = self._leading_empty_entries(first)
        used = self._first_empty_entry(last, leading if last is first else 0) * ENTRY_BYTES
        last.write_position = last.flushed_position = last.allocated_position = used
        self.min_offset = first.start_offset // ENTRY_BYTES + leading
        self.max_offset = max(self.min_offset, (last.start_offset + used) // ENTRY_BYTES)

    def _leading_empty_entries(self, segment: MappedSegment) -> int:
        """Entries of size 0 before the first written one (0 in the usual case)."""
        view = segment.view
        (size,) = _SIZE.unpack_from(view, _SIZE_POSITION)
        if size != 0:
            return 0
        for index, (_, size, _) in enumerate(ENTRY.iter_unpack(view)):
            if size != 0:
                return index
        return 0

    def _first_empty_entry(self, segment: MappedSegment, low: int) -> int:
        """Binary search from ``low`` for the first entry of size 0 (entries are written in
        order, so the written ones form one run)."""
        high = self.entries_per_file
        view = segment.view
        while low < high:
            middle = (low + high) // 2
            (size,) = _SIZE.unpack_from(view, middle * ENTRY_BYTES + _SIZE_POSITION)
            if size != 0:
                low = middle + 1
            else:
                high = middle
        return low

    # --- appending ----------------------------------------------------------------------------

    def check_writable(self) -> None:
        """Raises StoreIOError when the tail file is poisoned (a write failed before)."""
        if self.segments and self.segments[-1].poison is not None:
            raise StoreIOError(f"consume queue refuses appends: {self.segments[-1].poison}")

    def prepare_append(self, count: int) -> None:
        """Make room for ``count`` more entries (new files, reserved blocks) before any
        commit-log byte is written, so the appends themselves cannot fail.

        Raises:
            DiskFullError: no space.
            StoreIOError: a file cannot be made, or the tail file is poisoned.
        """
        end_byte = (self.max_offset + count) * ENTRY_BYTES
        if self.segments:
            last = self.segments[-1]
            if (
                last.poison is None
                and last.start_offset <= self.max_offset * ENTRY_BYTES
                and end_byte - last.start_offset <= last.allocated_position
            ):
                self._note_room()
                return  # room already reserved in the tail file
        self.check_writable()
        while not self.segments or self.segments[-1].end_offset < end_byte:
            if self.segments:
                start = self.segments[-1].end_offset
            else:
                start = self.max_offset * ENTRY_BYTES // self.file_bytes * self.file_bytes
            self._new_file(start)
        first = self._segment_index(self.max_offset)
        for segment in self.segments[first:]:
            needed = min(end_byte - segment.start_offset, self.file_bytes)
            if needed <= 0:
                break
            segment.ensure_allocated(needed)
        self._note_room(end_byte)

    def _note_room(self, end_byte: int = 0) -> None:
        """Raise room_end_offset after the room up to ``end_byte`` was made: files before the
        tail one are whole (allocated to their end), the tail one up to its reservation."""
        last = self.segments[-1]
        if last.start_offset < end_byte or last.start_offset <= self.max_offset * ENTRY_BYTES:
            end_byte = last.start_offset + last.allocated_position
        self.room_end_offset = max(self.room_end_offset, end_byte // ENTRY_BYTES)

    def _new_file(self, start: int) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.segments.append(self._map_file(start, existing=False))

    def _map_file(self, start: int, *, existing: bool) -> MappedSegment:
        """The file of this queue starting at byte ``start``: mapped as it is (``existing``)
        or created at full size.

        Raises:
            CorruptDataError: an existing file of another size.
            DiskFullError: no space for a new file or its first chunk of blocks.
            StoreIOError: the file cannot be created, opened or mapped.
        """
        make = MappedSegment.open_existing if existing else MappedSegment.create
        return make(
            self.directory / segment_file_name(start),
            start,
            self.file_bytes,
            allocation_chunk_bytes=limits.CONSUME_QUEUE_ALLOCATION_CHUNK_BYTES,
            file_ops=self._file_ops,
        )

    def append(self, commit_log_offset: int, size: int, tags_code: int) -> int:
        """Write the next entry (room made by :meth:`prepare_append`); returns its offset."""
        queue_offset = self.max_offset
        byte_offset = queue_offset * ENTRY_BYTES
        segment = self.segments[-1]
        position = byte_offset - segment.start_offset
        if position < 0:  # a file made ahead by a put that then failed: not the tail yet
            segment = self.segments[
                (byte_offset - self.segments[0].start_offset) // self.file_bytes
            ]
            position = byte_offset - segment.start_offset
        if position + ENTRY_BYTES > segment.allocated_position:
            invariant(False, f"append without room in {segment.path}")
        ENTRY.pack_into(segment.view, position, commit_log_offset, size, tags_code)
        segment.write_position = position + ENTRY_BYTES
        self.max_offset = queue_offset + 1
        return queue_offset

    def append_many(self, entries: list[ConsumeQueueEntry]) -> None:
        """Write the next entries (room made by :meth:`prepare_append`), one slice per file."""
        done = 0
        while done < len(entries):
            byte_offset = self.max_offset * ENTRY_BYTES
            segment = self.segments[-1]
            position = byte_offset - segment.start_offset
            if position < 0:  # see append()
                index = (byte_offset - self.segments[0].start_offset) // self.file_bytes
                segment = self.segments[index]
                position = byte_offset - segment.start_offset
            count = min(len(entries) - done, (self.file_bytes - position) // ENTRY_BYTES)
            end = position + count * ENTRY_BYTES
            if count <= 0 or end > segment.allocated_position:
                invariant(False, f"append without room in {segment.path}")
            segment.view[position:end] = b"".join(starmap(ENTRY.pack, entries[done : done + count]))
            segment.write_position = end
            self.max_offset += count
            done += count

    # --- reading ------------------------------------------------------------------------------

    def _segment_index(self, queue_offset: int) -> int:
        if not self.segments:
            return -1
        return (queue_offset * ENTRY_BYTES - self.segments[0].start_offset) // self.file_bytes

    def _locate(self, queue_offset: int) -> tuple[MappedSegment, int] | None:
        """The file holding the entry at ``queue_offset`` and the entry's byte position in
        it; None when ``queue_offset`` is outside [min, max) or no file holds it."""
        if not self.min_offset <= queue_offset < self.max_offset:
            return None
        index = self._segment_index(queue_offset)
        if not 0 <= index < len(self.segments):
            return None
        segment = self.segments[index]
        return segment, queue_offset * ENTRY_BYTES - segment.start_offset

    def entry(self, queue_offset: int) -> ConsumeQueueEntry | None:
        """The entry at ``queue_offset`` if it lies in [min, max); else None."""
        place = self._locate(queue_offset)
        if place is None:
            return None
        segment, position = place
        entry: ConsumeQueueEntry = ENTRY.unpack_from(segment.view, position)
        return entry

    def entries_view(self, queue_offset: int, count: int) -> memoryview | None:
        """Up to ``count`` entries from ``queue_offset`` as one view (never crossing a file,
        so it may hold fewer); None when ``queue_offset`` is outside [min, max)."""
        place = self._locate(queue_offset)
        if place is None:
            return None
        segment, position = place
        available = min(count, self.max_offset - queue_offset)
        end = min(position + available * ENTRY_BYTES, segment.write_position)
        return segment.view[position:end]

    def entries(self, queue_offset: int, count: int) -> list[ConsumeQueueEntry]:
        """Up to ``count`` entries from ``queue_offset``, across files."""
        result: list[ConsumeQueueEntry] = []
        offset = max(queue_offset, self.min_offset)
        while len(result) < count:
            view = self.entries_view(offset, count - len(result))
            if view is None or not view:
                break
            batch: list[ConsumeQueueEntry] = list(ENTRY.iter_unpack(view))
            result += batch
            offset += len(batch)
        return result

    def lower_bound(self, key: Callable[[ConsumeQueueEntry], int], target: int) -> int:
        """The first queue offset in [min, max) whose ``key(entry)`` is >= ``target`` (entries
        must be ordered by ``key``); max offset when there is none."""
        low, high = self.min_offset, self.max_offset
        while low < high:
            middle = (low + high) // 2
            entry = self.entry(middle)
            if entry is None or key(entry) < target:
                low = middle + 1
            else:
                high = middle
        return low

    # --- trimming -----------------------------------------------------------------------------

    def truncate(self, queue_offset: int) -> int:
        """Drop every entry from ``queue_offset`` on (recovery); returns how many went.

        Raises:
            StoreIOError: a file could not be resized or removed.
        """
        queue_offset = max(queue_offset, self.min_offset)
        dropped = max(0, self.max_offset - queue_offset)
        if dropped == 0:
            return 0
        byte_offset = queue_offset * ENTRY_BYTES
        while len(self.segments) > 1 and self.segments[-1].start_offset >= byte_offset:
            self.segments.pop().delete()
        self.room_end_offset = 0
        last = self.segments[-1]
        last.cut(max(0, byte_offset - last.start_offset))
        self.max_offset = queue_offset
        return dropped

    def restart_at(self, queue_offset: int) -> None:
        """Make an empty queue continue at ``queue_offset`` (recovery rebuilding a queue whose
        early records retention already deleted).

        Raises:
            StoreIOError: old files could not be removed.
        """
        invariant(self.max_offset == self.min_offset, "only an empty queue restarts")
        self.room_end_offset = 0
        while self.segments:
            self.segments.pop().delete()
        self.min_offset = self.max_offset = queue_offset

    def advance_min_offset(self, is_kept: Callable[[ConsumeQueueEntry], bool]) -> None:
        """Move min offset to the first entry ``is_kept`` accepts (retention); entries are
        ordered so that the kept ones form a suffix. Whole files before it are deleted (the
        last file always stays).

        Raises:
            StoreIOError: a file could not be removed.
        """
        new_min = self.lower_bound(lambda entry: int(is_kept(entry)), 1)
        if new_min <= self.min_offset:
            return
        self.min_offset = new_min
        while len(self.segments) > 1 and self.segments[0].end_offset <= new_min * ENTRY_BYTES:
            self.segments.pop(0).delete()

    def dirty_segments(self) -> list[MappedSegment]:
        return [s for s in self.segments if s.flushed_position < s.write_position]

    def close(self) -> None:
        self.room_end_offset = 0
        for segment in self.segments:
            segment.close()
        self.segments.clear()

    def destroy(self) -> None:
        """Close and delete every file of this queue.

        Raises:
            StoreIOError: the directory could not be removed.
        """
        self.close()
        try:
            shutil.rmtree(self.directory, ignore_errors=False)
        except FileNotFoundError:
            pass
        except OSError as error:
            raise StoreIOError(f"delete {self.directory}: {error}") from error


class ConsumeQueueTable:
    """Every consume queue of a store, by topic and queue id, under ``consumequeue/``.

    Topic names are directory names; the store refuses names that could escape the directory
    (see :func:`topic_is_storable`).
    """

    def __init__(self, directory: Path, entries_per_file: int, file_ops: FileOps) -> None:
        self.directory = directory
        self.entries_per_file = entries_per_file
        self._file_ops = file_ops
        self.queues: dict[str, dict[int, ConsumeQueue]] = {}
        self._preparing: dict[tuple[str, int], concurrent.futures.Future[MappedSegment]] = {}
        """First files in the making on the allocate-ahead thread (:meth:`prepare_topic`)."""

    def load(self) -> None:
        """Open every queue found on disk.

        Raises:
            CorruptDataError / StoreIOError: a queue cannot be opened.
        """
        self.directory.mkdir(parents=True, exist_ok=True)
        for topic_dir in sorted(self.directory.iterdir()):
            if not topic_dir.is_dir() or not topic_is_storable(topic_dir.name):
                continue
            for queue_dir in sorted(topic_dir.iterdir()):
                if not queue_dir.name.isdigit():
                    continue
                queue = self._make(topic_dir.name, int(queue_dir.name))
                queue.load()

    def _make(self, topic: str, queue_id: int) -> ConsumeQueue:
        queue = ConsumeQueue(
            topic,
            queue_id,
            self.directory / topic / str(queue_id),
            self.entries_per_file,
            self._file_ops,
        )
        self.queues.setdefault(topic, {})[queue_id] = queue
        return queue

    def get(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        by_id = self.queues.get(topic)
        return None if by_id is None else by_id.get(queue_id)

    def get_or_create(self, topic: str, queue_id: int) -> ConsumeQueue:
        """The queue, made (without files: they come with the first append) if new."""
        by_id = self.queues.get(topic)
        if by_id is not None:
            queue = by_id.get(queue_id)
            if queue is not None:
                return queue
        return self._make(topic, queue_id)

    def all_queues(self) -> list[ConsumeQueue]:
        return [queue for by_id in self.queues.values() for queue in by_id.values()]

    # --- warm start: a new topic's first files, made ahead ---------------------------------

    def prepare_topic(self, topic: str, queue_count: int) -> int:
        """Make the first file of each queue ``0 .. queue_count - 1`` of ``topic`` that has
        none yet, on the allocate-ahead thread, and put it in place on the running loop once
        made — unless a put made the queue's file first (the spare is then deleted). The
        first put of each queue then finds its file created, reserved and faulted in.
        Returns how many files were started.
        """
        if not topic_is_storable(topic):
            return 0
        loop = asyncio.get_running_loop()
        started = 0
        for queue_id in range(min(queue_count, limits.TOPIC_QUEUE_NUMS_MAX_COUNT)):
            queue = self.get(topic, queue_id)
            key = (topic, queue_id)
            if key in self._preparing or (queue is not None and _has_started(queue)):
                continue
            future = allocate_pool().submit(
                MappedSegment.create_spare,
                self.directory / topic / str(queue_id) / segment_file_name(0),
                0,
                self.entries_per_file * ENTRY_BYTES,
                allocation_chunk_bytes=limits.CONSUME_QUEUE_ALLOCATION_CHUNK_BYTES,
                file_ops=self._file_ops,
            )
            self._preparing[key] = future
            future.add_done_callback(
                functools.partial(_call_soon_quietly, loop, self._prepared, key)
            )
            started += 1
        return started

    @property
    def preparing_count(self) -> int:
        """First files still in the making (or made, not yet put in place)."""
        return len(self._preparing)

    def _prepared(
        self, key: tuple[str, int], future: concurrent.futures.Future[MappedSegment]
    ) -> None:
        """On the loop: adopt the first file made ahead, or drop it."""
        if self._preparing.get(key) is not future:
            _delete_spare(future)  # the topic was deleted or the table closed meanwhile
            return
        del self._preparing[key]
        try:
            segment = future.result()
        except Exception as error:  # the first put makes the file and meets the failure
            _log.debug("first file of %s/%d not made ahead: %s", *key, error)
            return
        queue = self.get_or_create(*key)
        if _has_started(queue):
            segment.delete_quietly()
            return
        try:
            segment.adopt(queue.directory / segment_file_name(0))
        except StoreIOError:
            segment.delete_quietly()
            return
        queue.segments.append(segment)

    def _drop_prepared(self, topic: str | None) -> None:
        """Forget the first files in the making of ``topic``, or of all: the ones not started
        are cancelled, the one being made (at most one: one allocate-ahead thread) is waited
        for and deleted, so nothing is made in a directory about to be removed."""
        for key in [k for k in self._preparing if topic is None or k[0] == topic]:
            future = self._preparing.pop(key)
            if not future.cancel():
                _delete_spare(future)

    def delete_topic(self, topic: str) -> list[ConsumeQueue]:
        """Close and delete every queue of ``topic``; returns them.

        Raises:
            StoreIOError: files could not be removed.
        """
        self._drop_prepared(topic)
        by_id = self.queues.pop(topic, {})
        for queue in by_id.values():
            queue.destroy()
        topic_dir = self.directory / topic
        try:
            shutil.rmtree(topic_dir)
        except FileNotFoundError:
            pass
        except OSError as error:
            raise StoreIOError(f"delete {topic_dir}: {error}") from error
        return list(by_id.values())

    def close(self) -> None:
        self._drop_prepared(None)
        for queue in self.all_queues():
            queue.close()
        self.queues.clear()


def _has_started(queue: ConsumeQueue) -> bool:
    """Whether ``queue`` has a file or entries (its first file is no longer to be made)."""
    return bool(queue.segments) or queue.max_offset > 0 or queue.min_offset > 0


def _delete_spare(future: concurrent.futures.Future[MappedSegment]) -> None:
    """Wait for a spare in the making (a few ms) and delete it; a failed or cancelled one
    left nothing."""
    with contextlib.suppress(Exception, concurrent.futures.CancelledError):
        future.result().delete_quietly()


def _call_soon_quietly(
    loop: asyncio.AbstractEventLoop,
    callback: Callable[[tuple[str, int], concurrent.futures.Future[MappedSegment]], None],
    key: tuple[str, int],
    future: concurrent.futures.Future[MappedSegment],
) -> None:
    """``callback(key, future)`` on ``loop``; with the loop closed, the spare is deleted."""
    try:
        loop.call_soon_threadsafe(functools.partial(callback, key, future))
    except RuntimeError:
        _delete_spare(future)


def topic_is_storable(topic: str) -> bool:
    """Whether ``topic`` can name a directory safely: not empty, not ``.``/``..``, without
    path separators or NUL. (The broker applies RocketMQ's stricter character rules.)"""
    return (
        bool(topic)
        and topic not in (".", "..")
        and "/" not in topic
        and "\\" not in topic
        and "\0" not in topic
    )
