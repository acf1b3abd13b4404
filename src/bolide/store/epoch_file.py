"""The epoch file: which master epoch wrote which stretch of the commit log.

In controller mode every broker that becomes master appends ``<masterEpoch, maxPhyOffset>``;
a slave appends each new epoch it meets in the HA stream. Two replicas compare their lists to
find where their logs part (:func:`compute_truncate_offset`), so a deposed master can cut the
records its successor never had.

The file is RocketMQ's ``epochFileCheckpoint`` text (UTF-8, ``\\n`` line ends)::

    2                 <- entry count
    1830716262        <- CRC32 of the entry text below (masked to 31 bits, as Java's UtilAll.crc32)
    1-0               <- epoch-startOffset, oldest first
    2-10485

Each write goes through :func:`bolide.base.fileio.atomic_write_with_backup`, so the previous
content stays as ``<name>.bak``; a damaged main file is read from the backup instead.
"""

from __future__ import annotations

import itertools
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from bolide.base.errors import BolideError, StoreError
from bolide.base.fileio import atomic_write_with_backup, read_with_backup
from bolide.base.limits import EPOCH_ENTRIES_MAX_COUNT

EPOCH_FILE_NAME: Final = "epochFileCheckpoint"
_CRC_MASK: Final = 0x7FFFFFFF


class EpochOrderError(StoreError):
    """An appended epoch entry does not have a larger epoch and a larger-or-equal start offset
    than the last one (a stale master's epoch, or offsets going backwards)."""


class NoCommonEpochError(BolideError):
    """Two replicas' epoch lists share no (epoch, startOffset) entry: their logs have nothing
    provably in common, so a slave cannot join this master without losing everything."""


@dataclass(frozen=True, slots=True)
class EpochEntry:
    """One epoch: from ``start_offset`` (commit-log bytes) until the next entry's start."""

    epoch: int
    start_offset: int


def entries_text(entries: Sequence[EpochEntry]) -> str:
    return "".join(f"{entry.epoch}-{entry.start_offset}\n" for entry in entries)


def encode_epoch_file(entries: Sequence[EpochEntry]) -> bytes:
    """The file content for ``entries`` (count, masked CRC32 of the entry lines, the lines)."""
    text = entries_text(entries)
    crc = zlib.crc32(text.encode()) & _CRC_MASK
    return f"{len(entries)}\n{crc}\n{text}".encode()


def decode_epoch_file(raw: bytes) -> list[EpochEntry]:
    """Parse an epoch file. Raises ValueError when the count, CRC or a line is wrong."""
    lines = raw.decode("utf-8").splitlines()
    if len(lines) < 2:
        raise ValueError("epoch file shorter than its two header lines")
    count, crc = int(lines[0]), int(lines[1])
    if not 0 <= count <= EPOCH_ENTRIES_MAX_COUNT or len(lines) - 2 != count:
        raise ValueError(f"epoch file says {lines[0]} entries, holds {len(lines) - 2}")
    entries = [_parse_line(line) for line in lines[2:]]
    if zlib.crc32(entries_text(entries).encode()) & _CRC_MASK != crc:
        raise ValueError("epoch file CRC32 does not match its entries")
    check_order(entries)
    return entries


def _parse_line(line: str) -> EpochEntry:
    epoch, separator, start = line.partition("-")
    if not separator:
        raise ValueError(f"epoch line {line!r} is not epoch-startOffset")
    entry = EpochEntry(int(epoch), int(start))
    if entry.epoch < 0 or entry.start_offset < 0:
        raise ValueError(f"epoch line {line!r} has a negative number")
    return entry


def check_order(entries: Sequence[EpochEntry]) -> None:
    """Raise ValueError unless both epochs and start offsets strictly increase."""
    for earlier, later in itertools.pairwise(entries):
        if later.epoch <= earlier.epoch or later.start_offset <= earlier.start_offset:
            raise ValueError(f"epoch entry {later} does not follow {earlier}")


def end_offsets(entries: Sequence[EpochEntry], max_offset: int) -> list[int]:
    """Each entry's end: the next entry's start; the last one ends at ``max_offset``."""
    ends = [entry.start_offset for entry in entries[1:]]
    if entries:
        ends.append(max_offset)
    return ends


def compute_truncate_offset(
    local: Sequence[EpochEntry],
    local_max_offset: int,
    master: Sequence[EpochEntry],
    master_max_offset: int,
) -> int:
    """Where a joining slave must cut its commit log to agree with the master (AutoSwitch).

    An empty local list truncates nothing: the answer is ``local_max_offset``. Otherwise the
    newest local entry whose (epoch, startOffset) the master also has gives
    ``min(localEnd, masterEnd)`` of that entry. Raises :class:`NoCommonEpochError` when the
    lists share no entry.
    """
    if not local:
        return local_max_offset
    master_ends = dict(zip(master, end_offsets(master, master_max_offset), strict=True))
    local_ends = end_offsets(local, local_max_offset)
    for entry, local_end in zip(reversed(local), reversed(local_ends), strict=True):
        master_end = master_ends.get(entry)
        if master_end is not None:
            return min(local_end, master_end)
    raise NoCommonEpochError(
        f"no common epoch entry: local {list(local)[-3:]}..., master {list(master)[-3:]}..."
    )


class EpochFile:
    """The epoch list of one store, kept in ``<store_dir>/epochFileCheckpoint``.

    Loading falls back to ``.bak`` when the main file is damaged; a missing file is an empty
    list. Raises :class:`CorruptDataError` when both files exist and are damaged.
    """

    def __init__(self, path: Path) -> None:
        self._path = path
        loaded = read_with_backup(path, decode_epoch_file)
        self._entries: list[EpochEntry] = loaded or []

    @property
    def path(self) -> Path:
        return self._path

    @property
    def entries(self) -> list[EpochEntry]:
        return list(self._entries)

    def last(self) -> EpochEntry | None:
        return self._entries[-1] if self._entries else None

    @property
    def last_epoch(self) -> int:
        """The newest epoch, 0 when the list is empty (RocketMQ's lastEpoch default)."""
        return self._entries[-1].epoch if self._entries else 0

    def append(self, entry: EpochEntry) -> None:
        """Add the newest epoch and write the file.

        The list stays strictly increasing in both fields: an entry starting where the last
        one starts replaces it (that epoch wrote nothing, two elections in a row). Raises
        :class:`EpochOrderError` unless the epoch is larger, and the start offset not smaller,
        than the last entry's.
        """
        last = self.last()
        if last is not None and (
            entry.epoch <= last.epoch or entry.start_offset < last.start_offset
        ):
            raise EpochOrderError(f"epoch entry {entry} cannot follow {last}")
        kept = self._entries
        if last is not None and entry.start_offset == last.start_offset:
            kept = kept[:-1]
        if len(kept) >= EPOCH_ENTRIES_MAX_COUNT:
            raise EpochOrderError(f"epoch file full ({EPOCH_ENTRIES_MAX_COUNT} entries)")
        self._write([*kept, entry])

    def truncate_from(self, offset: int) -> None:
        """Drop every entry that starts at or after ``offset`` (the commit log was cut there)."""
        kept = [entry for entry in self._entries if entry.start_offset < offset]
        if len(kept) != len(self._entries):
            self._write(kept)

    def end_offsets(self, max_offset: int) -> list[int]:
        """Each entry's end offset; the last entry ends at ``max_offset`` (the log's end)."""
        return end_offsets(self._entries, max_offset)

    def entry_for(self, offset: int) -> EpochEntry | None:
        """The entry whose stretch holds commit-log ``offset`` (None before the first)."""
        found: EpochEntry | None = None
        for entry in self._entries:
            if entry.start_offset > offset:
                break
            found = entry
        return found

    def _write(self, entries: list[EpochEntry]) -> None:
        atomic_write_with_backup(self._path, encode_epoch_file(entries))
        self._entries = entries


__all__ = [
    "EPOCH_FILE_NAME",
    "EpochEntry",
    "EpochFile",
    "EpochOrderError",
    "NoCommonEpochError",
    "check_order",
    "compute_truncate_offset",
    "decode_epoch_file",
    "encode_epoch_file",
    "end_offsets",
]
