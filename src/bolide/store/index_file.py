"""The key index: find records by ``topic#key`` (KEYS entries and UNIQ_KEY) within a time range.

Files are ``index/<20-digit commit-log offset of the first record they index>``; each is a hash
table whose buckets are chains of entries linked newest to oldest (as RocketMQ's index):

```
header (48 bytes)
offset  size  field
     0     4  magic                    "BOLI"
     4     4  version                  1
     8     8  begin_time_ms            store time of the first entry
    16     8  end_time_ms              latest store time indexed
    24     8  begin_commit_log_offset  record of the first entry
    32     8  end_commit_log_offset    record of the last entry (-1 none)
    40     4  slot_count
    44     4  entry_count
slots: slot_count x int32          newest entry number of the bucket, 0 = empty
entries: entry n (n >= 1) at 48 + 4 * slot_count + 20 * (n - 1)
+----------+--------------------+------------------+----------------+
| key hash | commit-log offset  | seconds since    | previous entry |
| uint32   | int64              | begin (int32)    | int32 (0 none) |
+----------+--------------------+------------------+----------------+
```

Entries are written in batches (:meth:`KeyIndex.add_record` queues, :meth:`KeyIndex.drain`
writes): each entry of a record, then its slot, then the header, so a crash leaves at worst
one record's entries unreferenced (past the header's count; recovery re-adds them, and the
chains of its keys lose their older entries, as with one add per put). Chains only point
backwards (previous < current); a reader stops at anything else, so damage can lose results
but never loop. Every hit is checked against the record itself before it is returned, so hash
collisions and stale entries never leak out.

Warm start: the next file is made ahead on the allocate-ahead thread (a spare, as the commit
log's: store/segment.py), its 20 MB of slots reserved and faulted in there, and renamed to its
final name when a put first needs it; without it, puts that come at once write their random
slots while the prefault thread is still faulting the table in, and take the faults
themselves.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import struct
import zlib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Final

from bolide.base import compiled, limits
from bolide.base.errors import CorruptDataError, StoreIOError, invariant
from bolide.store.config import parse_segment_file_name, segment_file_name
from bolide.store.file_ops import FileOps
from bolide.store.segment import MappedSegment, allocate_pool, remove_leftovers, wait_made

_log = logging.getLogger("bolide.store.index")

_HEADER: Final = struct.Struct(">iiqqqqii")
_ENTRY: Final = struct.Struct(">Iqii")
_SLOT: Final = struct.Struct(">i")
_INT32_MAX: Final = 2**31 - 1
"""The largest seconds offset an index entry holds (a signed 32-bit field)."""
_HEADER_TAIL: Final = struct.Struct(">qqqqii")
"""Header bytes 8..47: times, offsets, slot count, entry count (one pack per add)."""
INDEX_MAGIC: Final = 0x424F4C49  # "BOLI"
INDEX_VERSION: Final = 1
HEADER_BYTES: Final = _HEADER.size
ENTRY_BYTES: Final = _ENTRY.size
SPARE_NAME: Final = "next"
"""The name an index file made ahead is made under (plus ``.spare.tmp``): its final name,
the commit-log offset of its first record, is known only when a put needs it."""

PendingRecord = tuple[int, int, list[int]]
"""(commit-log offset, store time ms, key hashes) of a record to index."""


def index_key_hash(topic: str, key: str) -> int:
    """The bucket hash of ``topic#key`` (CRC-32 of its UTF-8 bytes)."""
    return zlib.crc32(f"{topic}#{key}".encode("utf-8", "surrogatepass"))


def index_key_seed(topic: str) -> int:
    """CRC-32 of ``topic#``: ``zlib.crc32(key_bytes, index_key_seed(topic))`` equals
    :func:`index_key_hash` without building the ``topic#key`` string (the put path)."""
    return zlib.crc32(f"{topic}#".encode("utf-8", "surrogatepass"))


class IndexFile:
    """One mapped index file."""

    def __init__(self, segment: MappedSegment, slot_count: int, max_entries: int) -> None:
        self.segment = segment
        self.slot_count = slot_count
        self.max_entries = max_entries
        self._entries_at = HEADER_BYTES + 4 * slot_count
        self.begin_time_ms = 0
        self.end_time_ms = 0
        self.begin_commit_log_offset = 0
        self.end_commit_log_offset = -1
        self.entry_count = 0

    @staticmethod
    def file_bytes(slot_count: int, max_entries: int) -> int:
        return HEADER_BYTES + 4 * slot_count + ENTRY_BYTES * max_entries

    @staticmethod
    def make_spare(
        directory: Path, slot_count: int, max_entries: int, file_ops: FileOps
    ) -> MappedSegment:
        """The segment of a file made ahead (allocate-ahead thread): sized, header and slots
        reserved and faulted in on the calling thread, under a temporary name; the owner
        gives it its name and header with :meth:`adopt_spare`.

        Raises:
            DiskFullError: no space. StoreIOError: other failures (nothing left behind).
        """
        segment = MappedSegment.create_spare(
            directory / SPARE_NAME,
            0,
            IndexFile.file_bytes(slot_count, max_entries),
            allocation_chunk_bytes=limits.CONSUME_QUEUE_ALLOCATION_CHUNK_BYTES,
            file_ops=file_ops,
        )
        try:
            segment.ensure_allocated(HEADER_BYTES + 4 * slot_count, populate_here=True)
        except BaseException:
            segment.delete_quietly()
            raise
        return segment

    @classmethod
    def adopt_spare(
        cls, segment: MappedSegment, path: Path, slot_count: int, max_entries: int
    ) -> IndexFile:
        """A new, empty file at ``path`` from a spare :meth:`make_spare` made.

        Raises:
            StoreIOError: ``path`` exists or the rename failed (the spare is left as it was).
        """
        segment.adopt(path)
        return cls._started(segment, slot_count, max_entries)

    @classmethod
    def _started(cls, segment: MappedSegment, slot_count: int, max_entries: int) -> IndexFile:
        index_file = cls(segment, slot_count, max_entries)
        segment.write(0, _HEADER.pack(INDEX_MAGIC, INDEX_VERSION, 0, 0, 0, -1, slot_count, 0))
        segment.write_position = HEADER_BYTES
        return index_file

    @classmethod
    def create(cls, path: Path, slot_count: int, max_entries: int, file_ops: FileOps) -> IndexFile:
        """A new, empty file.

        Raises:
            DiskFullError: no space. StoreIOError: other failures.
        """
        size = cls.file_bytes(slot_count, max_entries)
        segment = MappedSegment.create(
            path,
            0,
            size,
            allocation_chunk_bytes=limits.CONSUME_QUEUE_ALLOCATION_CHUNK_BYTES,
            file_ops=file_ops,
        )
        try:
            # Header and slots are written at random places: reserve them all now.
            segment.ensure_allocated(HEADER_BYTES + 4 * slot_count)
        except BaseException:
            segment.delete()
            raise
        return cls._started(segment, slot_count, max_entries)

    @classmethod
    def open_existing(
        cls, path: Path, slot_count: int, max_entries: int, file_ops: FileOps
    ) -> IndexFile:
        """Map an existing file.

        Raises:
            CorruptDataError: wrong size or header. StoreIOError: cannot open.
        """
        segment = MappedSegment.open_existing(
            path,
            0,
            cls.file_bytes(slot_count, max_entries),
            allocation_chunk_bytes=limits.CONSUME_QUEUE_ALLOCATION_CHUNK_BYTES,
            file_ops=file_ops,
        )
        fields = _HEADER.unpack_from(segment.view, 0)
        magic, version, begin_ms, end_ms, begin_offset, end_offset, slots, count = fields
        if magic != INDEX_MAGIC or version != INDEX_VERSION or slots != slot_count:
            segment.close()
            raise CorruptDataError(f"{path} is not an index file of {slot_count} slots")
        index_file = cls(segment, slot_count, max_entries)
        index_file.begin_time_ms, index_file.end_time_ms = begin_ms, end_ms
        index_file.begin_commit_log_offset = begin_offset
        index_file.end_commit_log_offset = end_offset
        index_file.entry_count = max(0, min(count, max_entries))
        end = index_file._entries_at + ENTRY_BYTES * index_file.entry_count
        segment.write_position = segment.flushed_position = end
        segment.allocated_position = end
        return index_file

    @property
    def free_entries(self) -> int:
        return self.max_entries - self.entry_count

    def reserve(self, count: int) -> None:
        """Blocks for ``count`` more entries. Raises DiskFullError / StoreIOError."""
        self.segment.ensure_allocated(self._entries_at + ENTRY_BYTES * (self.entry_count + count))

    def add(self, records: Sequence[PendingRecord]) -> None:
        """Index ``records`` = [(commit-log offset, store time ms, key hashes)] in order (room
        made by :meth:`reserve`): each entry, then its slot, then the header after each
        record, so a crash cuts at most the chains of one record's keys (as one add did)."""
        count = self.entry_count
        adding = sum([len(record[2]) for record in records])
        entry_at = self._entries_at + ENTRY_BYTES * count
        if count + adding > self.max_entries or (
            entry_at + ENTRY_BYTES * adding > self.segment.allocated_position
        ):
            invariant(False, f"{adding} index entries added without room")
        if count == 0:
            self.begin_time_ms = records[0][1]
            self.begin_commit_log_offset = records[0][0]
        count, entry_at, end_time_ms = write_index_entries(
            self.segment.view, records, entry_at, count, self.slot_count, self.begin_time_ms,
            self.end_time_ms, self.begin_commit_log_offset,
        )  # fmt: skip
        self.end_time_ms = end_time_ms
        self.end_commit_log_offset = records[-1][0]
        self.entry_count = count
        self.segment.write_position = entry_at

    @property
    def room_entries(self) -> int:
        """Entries that can still be added without reserving blocks."""
        reserved = (self.segment.allocated_position - self._entries_at) // ENTRY_BYTES
        return min(self.max_entries, reserved) - self.entry_count

    def candidates(
        self, key_hash: int, begin_ms: int, end_ms: int, budget: list[int]
    ) -> Iterator[int]:
        """Commit-log offsets whose entry has ``key_hash`` and a time that may lie in
        [begin_ms, end_ms] (second granularity), newest first. ``budget[0]`` counts down the
        entries walked; the walk stops at 0."""
        if self.entry_count == 0 or self.end_time_ms < begin_ms or self.begin_time_ms > end_ms:
            return
        view = self.segment.view
        (number,) = _SLOT.unpack_from(view, HEADER_BYTES + 4 * (key_hash % self.slot_count))
        low_s = (begin_ms - self.begin_time_ms) // 1000
        high_s = (end_ms - self.begin_time_ms) // 1000
        while 0 < number <= self.entry_count and budget[0] > 0:
            budget[0] -= 1
            entry_at = self._entries_at + ENTRY_BYTES * (number - 1)
            entry_hash, commit_log_offset, delta_s, previous = _ENTRY.unpack_from(view, entry_at)
            if entry_hash == key_hash and low_s <= delta_s <= high_s:
                yield commit_log_offset
            if previous >= number:
                return  # damaged chain
            number = previous


class KeyIndex:
    """The index files, oldest first; the last one takes new entries."""

    def __init__(
        self, directory: Path, slot_count: int, max_entries: int, file_ops: FileOps
    ) -> None:
        self.directory = directory
        self.slot_count = slot_count
        self.max_entries = max_entries
        self._file_ops = file_ops
        self.files: list[IndexFile] = []
        self._active = -1
        """Position in ``files`` of the file taking entries (later ones are prepared, empty)."""
        self._pending: list[PendingRecord] = []
        """Records indexed but not yet written to the files (see :meth:`add_record`)."""
        self._room = 0
        """Entries that can still be queued for the active file without :meth:`prepare`
        doing any work: its reserved room less the pending entries (0 or below: unknown)."""
        self._spare: concurrent.futures.Future[MappedSegment] | None = None
        """The next file in the making (warm start), or None."""

    def prepare_spare(self) -> None:
        """Start making the next file on the allocate-ahead thread (no-op if one is)."""
        if self._spare is None:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._spare = allocate_pool().submit(
                IndexFile.make_spare,
                self.directory,
                self.slot_count,
                self.max_entries,
                self._file_ops,
            )

    def wait_spare(self) -> MappedSegment | None:
        """The spare once made (tests and benches); None when none or it failed."""
        return wait_made(self._spare)

    def load(self) -> None:
        """Map every index file.

        Raises:
            CorruptDataError / StoreIOError: a file cannot be used.
        """
        self.directory.mkdir(parents=True, exist_ok=True)
        remove_leftovers(self.directory)
        names = sorted(
            path.name
            for path in self.directory.iterdir()
            if parse_segment_file_name(path.name) is not None
        )
        try:
            for name in names:
                path = self.directory / name
                try:
                    index_file = IndexFile.open_existing(
                        path, self.slot_count, self.max_entries, self._file_ops
                    )
                except CorruptDataError as error:
                    # Derived data: a file cut short by a crash while it was being made (or
                    # otherwise damaged) is dropped; its keys are no longer findable, the
                    # messages are untouched.
                    _log.warning("dropping index file %s: %s", path, error)
                    path.unlink()
                    continue
                self.files.append(index_file)
        except BaseException:
            self.close()
            raise
        self._active = len(self.files) - 1
        while self._active > 0 and self.files[self._active].entry_count == 0:
            self._active -= 1

    @property
    def end_commit_log_offset(self) -> int:
        """Commit-log offset of the last record indexed; -1 when none."""
        self.drain()
        for index_file in reversed(self.files):
            if index_file.entry_count:
                return index_file.end_commit_log_offset
        return -1

    def prepare(self, groups: list[tuple[int, int]]) -> None:
        """Room for ``groups`` = [(commit-log offset, entry count)] of one put, in order; each
        group stays in one file (a new file starts at a group's record). Mirrors the file
        choice of :meth:`add_record`.

        Raises:
            DiskFullError: no space. StoreIOError: a file cannot be made.
        """
        if not groups:
            return
        if sum([count for _, count in groups]) <= self._room:
            return  # the usual case: room already reserved in the active file
        self.drain()
        active = max(self._active, 0)
        if not self.files:
            self._new_file(groups[0][0])
        free = self.files[active].free_entries
        pending = 0
        for commit_log_offset, count in groups:
            invariant(0 < count <= self.max_entries, "index entries per record are clamped")
            if count > free:
                if pending:
                    self.files[active].reserve(pending)
                active += 1
                if active == len(self.files):
                    self._new_file(commit_log_offset)
                free, pending = self.files[active].free_entries, 0
            free -= count
            pending += count
        self.files[active].reserve(pending)
        # Queued next, these groups count against the room of the active file if they all
        # go there; if some open the next file, the next put drains them first.
        self._room = self.files[active].room_entries if active == max(self._active, 0) else 0

    def prepare_one(self, commit_log_offset: int, count: int) -> None:
        """:meth:`prepare` of one record's ``count`` entries, the usual case without lists.

        Raises:
            DiskFullError: no space. StoreIOError: a file cannot be made.
        """
        if count > self._room:
            self.prepare([(commit_log_offset, count)])

    def _new_file(self, commit_log_offset: int) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / segment_file_name(commit_log_offset)
        made = self._take_spare(path)
        if made is None:
            made = IndexFile.create(path, self.slot_count, self.max_entries, self._file_ops)
        self.files.append(made)
        self.prepare_spare()

    def _take_spare(self, path: Path) -> IndexFile | None:
        """The spare as the file at ``path`` when it is made, or None: none, still in the
        making (never waited for on the loop: it stays the spare of the next file), or it
        failed (then the caller makes the file itself and meets any failure first hand)."""
        spare, self._spare = self._spare, None
        if spare is None:
            return None
        if not spare.done():
            self._spare = spare
            return None
        try:
            segment = spare.result()
        except Exception as error:
            _log.debug("index file not made ahead: %s", error)
            return None
        try:
            return IndexFile.adopt_spare(segment, path, self.slot_count, self.max_entries)
        except StoreIOError:
            segment.delete_quietly()
            return None

    def add_record(
        self, commit_log_offset: int, store_timestamp_ms: int, key_hashes: list[int]
    ) -> None:
        """Index one record under each hash (room made by :meth:`prepare`).

        The entries are written in batches, by :meth:`drain` (docs/architecture.md, "Sending and
        storing": no per-message
        work that can be batched): every read of the index (lookup, flush, retention) drains
        first, so a query finds every record put before it, and the queue flush writes them
        before the checkpoint says so; a crash loses only what recovery rebuilds anyway.
        """
        self._pending.append((commit_log_offset, store_timestamp_ms, key_hashes))
        self._room -= len(key_hashes)
        if len(self._pending) >= limits.INDEX_PENDING_MAX_RECORDS:
            self.drain()

    def add_records(self, records: list[PendingRecord]) -> None:
        """:meth:`add_record` of each of ``records`` (a batch's), in order."""
        if not records:
            return
        self._pending += records
        self._room -= sum([len(record[2]) for record in records])
        if len(self._pending) >= limits.INDEX_PENDING_MAX_RECORDS:
            self.drain()

    def drain(self) -> None:
        """Write the pending entries, in order, following the file choice of :meth:`prepare`
        (a record that does not fit the active file starts the next one)."""
        records = self._pending
        if not records:
            return
        self._pending = []
        if self._active < 0:
            self._active = 0
        current = self.files[self._active]
        free = current.max_entries - current.entry_count
        start = 0
        for number, record in enumerate(records):
            count = len(record[2])
            if count > free:
                if number > start:
                    current.add(records[start:number])
                self._active += 1
                current = self.files[self._active]
                free, start = current.max_entries - current.entry_count, number
            free -= count
        current.add(records[start:] if start else records)

    def lookup(
        self,
        key_hash: int,
        begin_ms: int,
        end_ms: int,
        accept: Callable[[int], bool],
        max_count: int,
    ) -> list[int]:
        """Commit-log offsets ``accept`` agrees to, newest first, at most ``max_count``;
        walks at most INDEX_QUERY_SCAN_MAX_ENTRIES entries."""
        self.drain()
        found: list[int] = []
        seen: set[int] = set()
        budget = [limits.INDEX_QUERY_SCAN_MAX_ENTRIES]
        for index_file in reversed(self.files):
            for commit_log_offset in index_file.candidates(key_hash, begin_ms, end_ms, budget):
                if commit_log_offset in seen:
                    continue
                seen.add(commit_log_offset)
                if accept(commit_log_offset):
                    found.append(commit_log_offset)
                    if len(found) >= max_count:
                        return found
            if budget[0] <= 0:
                break
        return found

    def delete_files_before(self, commit_log_min_offset: int) -> int:
        """Delete files whose every record is gone (never the newest); returns how many.

        Raises:
            StoreIOError: a file could not be removed.
        """
        self.drain()
        deleted = 0
        while (
            self._active > 0
            and self.files[0].entry_count
            and self.files[0].end_commit_log_offset < commit_log_min_offset
        ):
            self.files.pop(0).segment.delete()
            self._active -= 1
            deleted += 1
        return deleted

    def dirty_segments(self) -> list[MappedSegment]:
        """Files written past their flushed position, after writing the pending entries."""
        self.drain()
        return [
            f.segment for f in self.files if f.segment.flushed_position < f.segment.write_position
        ]

    def close(self) -> None:
        """Close the files; pending entries are dropped (recovery rebuilds them)."""
        self._pending.clear()
        self._room = 0
        for index_file in self.files:
            index_file.segment.close()
        self.files.clear()
        self._active = -1
        spare, self._spare = self._spare, None
        if spare is not None:
            with contextlib.suppress(Exception):
                spare.result().delete_quietly()


def write_index_entries(
    view: memoryview,
    records: Sequence[PendingRecord],
    entry_at: int,
    count: int,
    slot_count: int,
    begin_time_ms: int,
    end_time_ms: int,
    begin_offset: int,
) -> tuple[int, int, int]:
    """Write the entries of ``records`` into the index file mapped at ``view`` (layout in the
    module docstring; room checked by the caller), entry number ``count + 1`` at byte
    ``entry_at``: each entry, then its slot, then the header after each record. Returns the
    new entry count, the next entry's position and the end time (ms)."""
    read_slot, write_slot, write_entry = _SLOT.unpack_from, _SLOT.pack_into, _ENTRY.pack_into
    write_header = _HEADER_TAIL.pack_into
    for commit_log_offset, store_timestamp_ms, key_hashes in records:
        # Clamped into an int32 of seconds, as RocketMQ's index does (an index file spans
        # minutes; a clock jump must not fail the put).
        delta_s = min(max((store_timestamp_ms - begin_time_ms) // 1000, 0), _INT32_MAX)
        if store_timestamp_ms > end_time_ms:
            end_time_ms = store_timestamp_ms
        for key_hash in key_hashes:
            count += 1
            slot_at = HEADER_BYTES + 4 * (key_hash % slot_count)
            previous = read_slot(view, slot_at)[0]
            if not 0 <= previous < count:
                previous = 0  # a slot written just before a crash, past the entry count
            write_entry(view, entry_at, key_hash, commit_log_offset, delta_s, previous)
            write_slot(view, slot_at, count)
            entry_at += ENTRY_BYTES
        write_header(
            view, 8, begin_time_ms, end_time_ms, begin_offset, commit_log_offset, slot_count,
            count,
        )  # fmt: skip
    return count, entry_at, end_time_ms


# The compiled twin (bolide/store/_index_file.pyx), unless BOLIDE_PURE_PYTHON=1 or not built.
compiled.install(globals(), "bolide.store._compiled", ("write_index_entries",))
