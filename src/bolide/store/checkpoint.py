"""The checkpoint: how far the commit log, the consume queues and the index are known on disk.

Recovery after a crash starts scanning the commit log at the smallest of the three offsets:
everything before it is durable, everything after it is checked record by record and
re-dispatched to the consume queues and the index.

The file is 4 KiB, allocated once, with two slots written in turn (slot = sequence % 2) with
pwrite + fdatasync. A write torn by a crash damages one slot; the other still holds the
previous checkpoint. Writing never needs new disk blocks, so a store on a full disk can still
shut down and start. Each slot (big-endian, 52 bytes):

```
offset  size  field
     0     4  magic                    "BOLC"
     4     4  version                  1
     8     8  sequence                 +1 per write; the valid slot with the larger wins
    16     8  commit_log_flushed       int64 commit-log offset
    24     8  consume_queue_flushed    int64 commit-log offset
    32     8  index_flushed            int64 commit-log offset
    40     8  written_at_ms            int64
    48     4  crc32                    uint32 over bytes 0..47
```

Slot 0 starts at byte 0, slot 1 at byte 512 (another disk sector). Each offset is a
commit-log offset at a record boundary: ``commit_log_flushed`` = all commit-log bytes below it
were fsynced; ``consume_queue_flushed`` = the consume-queue entries of every record below it
were fsynced; ``index_flushed`` likewise for index entries.
"""

from __future__ import annotations

import os
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from bolide.base.errors import StoreIOError
from bolide.base.fileio import fsync_directory
from bolide.store.file_ops import FileOps, translate_os_error

_LAYOUT: Final = struct.Struct(">iiqqqqq")
_CRC: Final = struct.Struct(">I")
CHECKPOINT_MAGIC: Final = 0x424F4C43  # "BOLC"
CHECKPOINT_VERSION: Final = 1
SLOT_BYTES: Final = _LAYOUT.size + _CRC.size
SLOT_POSITIONS: Final = (0, 512)
FILE_BYTES: Final = 4096


@dataclass(frozen=True, slots=True)
class Checkpoint:
    commit_log_flushed_offset: int
    consume_queue_flushed_offset: int
    index_flushed_offset: int
    written_at_ms: int

    @property
    def recovery_start_offset(self) -> int:
        """Where a crash recovery starts scanning: the least advanced of the three."""
        return min(
            self.commit_log_flushed_offset,
            self.consume_queue_flushed_offset,
            self.index_flushed_offset,
        )


def encode_slot(sequence: int, checkpoint: Checkpoint) -> bytes:
    head = _LAYOUT.pack(
        CHECKPOINT_MAGIC,
        CHECKPOINT_VERSION,
        sequence,
        checkpoint.commit_log_flushed_offset,
        checkpoint.consume_queue_flushed_offset,
        checkpoint.index_flushed_offset,
        checkpoint.written_at_ms,
    )
    return head + _CRC.pack(zlib.crc32(head))


def decode_slot(raw: bytes) -> tuple[int, Checkpoint] | None:
    """(sequence, checkpoint) of one slot; None when it is damaged or empty."""
    if len(raw) != SLOT_BYTES:
        return None
    head = raw[: _LAYOUT.size]
    (stored_crc,) = _CRC.unpack_from(raw, _LAYOUT.size)
    if zlib.crc32(head) != stored_crc:
        return None
    magic, version, sequence, commit_log, consume_queue, index, written_at_ms = _LAYOUT.unpack(head)
    if magic != CHECKPOINT_MAGIC or version != CHECKPOINT_VERSION:
        return None
    if min(commit_log, consume_queue, index) < 0:
        return None
    return sequence, Checkpoint(commit_log, consume_queue, index, written_at_ms)


class CheckpointFile:
    """The checkpoint file of one store; writes happen in a flush thread, one at a time."""

    def __init__(self, path: Path, file_ops: FileOps) -> None:
        self.path = path
        self._file_ops = file_ops
        self._sequence = 0

    def read(self) -> Checkpoint | None:
        """The newest intact checkpoint; None when the file is missing or both slots are
        damaged (recovery then scans the whole commit log).

        Raises:
            StoreIOError: the file exists but cannot be read.
        """
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as error:
            raise StoreIOError(f"read {self.path}: {error}") from error
        best: tuple[int, Checkpoint] | None = None
        for position in SLOT_POSITIONS:
            slot = decode_slot(raw[position : position + SLOT_BYTES])
            if slot is not None and (best is None or slot[0] > best[0]):
                best = slot
        if best is None:
            return None
        self._sequence = best[0]
        return best[1]

    def write(self, checkpoint: Checkpoint) -> None:
        """Store ``checkpoint`` durably in the slot the previous write did not use.

        Raises:
            DiskFullError: the file had to be created and there is no space.
            StoreIOError: the write or fdatasync failed (the other slot stays intact).
        """
        sequence = self._sequence + 1
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as error:
            raise translate_os_error(error, f"open {self.path}") from error
        try:
            if os.fstat(fd).st_size != FILE_BYTES:
                os.ftruncate(fd, FILE_BYTES)
                self._file_ops.preallocate(fd, 0, FILE_BYTES)
                self._file_ops.sync(fd)
                fsync_directory(self.path.parent)
            os.pwrite(fd, encode_slot(sequence, checkpoint), SLOT_POSITIONS[sequence % 2])
            self._file_ops.sync(fd)
        except OSError as error:
            raise translate_os_error(error, f"write {self.path}") from error
        finally:
            os.close(fd)
        self._sequence = sequence
