"""The POP checkpoint log: an append-only file that makes POP consumption survive kill -9.

Each line is one change of :class:`~bolide.broker.pop.state.PopState`::

    <crc32 of the JSON, 8 hex digits> <JSON object>\\n

Appends are buffered writes; :meth:`PopLog.sync` makes everything appended so far durable
with one fsync in a worker thread, shared by every caller waiting at that moment (group
commit). The POP service syncs before it answers an ack or an invisible-time change, so an
acknowledged message is never delivered again after a crash. A pop is answered without
waiting: losing its record only means the messages are delivered again (at least once).

Opening replays the file; a torn or corrupt tail (bad CRC, cut line) ends the replay there and
is cut off, with a warning. When the file passes POP_LOG_COMPACT_BYTES the service rewrites it
from a snapshot (atomic replace, directory fsynced).
"""

from __future__ import annotations

import asyncio
import logging
import os
import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson

from bolide.base.fileio import atomic_write

__all__ = ["PopLog"]

_log = logging.getLogger("bolide.broker.pop")


def _line(record: dict[str, Any]) -> bytes:
    body = orjson.dumps(record)
    return b"%08x %s\n" % (zlib.crc32(body), body)


class PopLog:
    """The log file at ``path`` (its directory is created)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: Any = None
        self._written = 0
        """Lines appended (a sequence number for group commit)."""
        self._synced = 0
        self._sync_task: asyncio.Task[None] | None = None
        self.size_bytes = 0

    def open(self) -> list[dict[str, Any]]:
        """Read every intact record, cut a torn tail, and open the file for appending."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        records: list[dict[str, Any]] = []
        good_bytes = 0
        raw = self.path.read_bytes() if self.path.exists() else b""
        for line in raw.splitlines(keepends=True):
            record = _parse(line)
            if record is None:
                break
            records.append(record)
            good_bytes += len(line)
        if good_bytes < len(raw):
            _log.warning(
                "POP log %s: cut %d bytes of torn or corrupt tail after %d records",
                self.path,
                len(raw) - good_bytes,
                len(records),
            )
            with self.path.open("r+b") as file:
                file.truncate(good_bytes)
                os.fsync(file.fileno())
        self._file = self.path.open("ab")
        self.size_bytes = good_bytes
        return records

    def append(self, record: dict[str, Any]) -> None:
        """Write one record (buffered; see :meth:`sync`)."""
        line = _line(record)
        self._file.write(line)
        self._written += 1
        self.size_bytes += len(line)

    async def sync(self) -> None:
        """Return once every record appended before the call is on disk (fsync).

        Raises OSError when the write or fsync fails.
        """
        target = self._written
        while self._synced < target:
            task = self._sync_task
            if task is None or task.done():
                task = self._sync_task = asyncio.ensure_future(self._sync_once())
            await asyncio.shield(task)

    async def _sync_once(self) -> None:
        target = self._written
        self._file.flush()
        await asyncio.get_running_loop().run_in_executor(None, os.fsync, self._file.fileno())
        self._synced = max(self._synced, target)

    def rewrite(self, records: Iterable[dict[str, Any]]) -> None:
        """Replace the file by ``records`` (atomically: temporary file, fsync, rename)."""
        data = b"".join(_line(record) for record in records)
        self._file.flush()
        self._file.close()
        atomic_write(self.path, data)
        self._file = self.path.open("ab")
        self.size_bytes = len(data)
        self._synced = self._written

    def close(self) -> None:
        """Flush, fsync and close (idempotent)."""
        if self._file is None:
            return
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
        self._file = None
        self._synced = self._written


def _parse(line: bytes) -> dict[str, Any] | None:
    if not line.endswith(b"\n") or len(line) < 11 or line[8:9] != b" ":
        return None
    body = line[9:-1]
    try:
        if int(line[:8], 16) != zlib.crc32(body):
            return None
        record = orjson.loads(body)
    except (ValueError, orjson.JSONDecodeError):
        return None
    return record if isinstance(record, dict) and "t" in record else None
