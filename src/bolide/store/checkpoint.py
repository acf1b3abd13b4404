"""The checkpoint: how far the commit log, the consume queues and the index are known on disk.

Recovery after a crash starts scanning the commit log at the smallest of the three offsets:
everything before it is durable, everything after it is checked record by record and
re-dispatched to the consume queues and the index.

Layout (big-endian, 44 bytes, replaced atomically with tmp + fsync + rename):

```
offset  size  field
     0     4  magic                    "BOLC"
     4     4  version                  1
     8     8  commit_log_flushed       int64 commit-log offset
    16     8  consume_queue_flushed    int64 commit-log offset
    24     8  index_flushed            int64 commit-log offset
    32     8  written_at_ms            int64
    40     4  crc32                    uint32 over bytes 0..39
```

Each offset is a commit-log offset at a record boundary:
``commit_log_flushed`` = all commit-log bytes below it were fsynced; ``consume_queue_flushed``
= the consume-queue entries of every record below it were fsynced; ``index_flushed`` likewise
for index entries.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from bolide.base.errors import StoreIOError
from bolide.base.fileio import atomic_write

_LAYOUT: Final = struct.Struct(">iiqqqq")
_CRC: Final = struct.Struct(">I")
CHECKPOINT_MAGIC: Final = 0x424F4C43  # "BOLC"
CHECKPOINT_VERSION: Final = 1
CHECKPOINT_BYTES: Final = _LAYOUT.size + _CRC.size


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


def encode_checkpoint(checkpoint: Checkpoint) -> bytes:
    head = _LAYOUT.pack(
        CHECKPOINT_MAGIC,
        CHECKPOINT_VERSION,
        checkpoint.commit_log_flushed_offset,
        checkpoint.consume_queue_flushed_offset,
        checkpoint.index_flushed_offset,
        checkpoint.written_at_ms,
    )
    return head + _CRC.pack(zlib.crc32(head))


def decode_checkpoint(raw: bytes) -> Checkpoint | None:
    """The checkpoint in ``raw``; None when it is damaged (wrong length, magic, version or CRC,
    or negative offsets) — recovery then scans the whole commit log."""
    if len(raw) != CHECKPOINT_BYTES:
        return None
    head = raw[: _LAYOUT.size]
    (stored_crc,) = _CRC.unpack_from(raw, _LAYOUT.size)
    if zlib.crc32(head) != stored_crc:
        return None
    magic, version, commit_log, consume_queue, index, written_at_ms = _LAYOUT.unpack(head)
    if magic != CHECKPOINT_MAGIC or version != CHECKPOINT_VERSION:
        return None
    if min(commit_log, consume_queue, index) < 0:
        return None
    return Checkpoint(commit_log, consume_queue, index, written_at_ms)


def read_checkpoint(path: Path) -> Checkpoint | None:
    """The checkpoint stored at ``path``; None when missing or damaged.

    Raises:
        StoreIOError: the file exists but cannot be read.
    """
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as error:
        raise StoreIOError(f"read {path}: {error}") from error
    return decode_checkpoint(raw)


def write_checkpoint(path: Path, checkpoint: Checkpoint) -> None:
    """Replace the checkpoint atomically and durably (blocking: call from a flush thread).

    Raises:
        StoreIOError: the write, fsync or rename failed (the old checkpoint stays).
    """
    try:
        atomic_write(path, encode_checkpoint(checkpoint))
    except OSError as error:
        raise StoreIOError(f"write {path}: {error}") from error
