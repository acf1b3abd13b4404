"""Crash-safe writers of the broker's JSON config files (topics.json, consumerOffset.json,
delayOffset.json, timerProgress.json...), re-exported by :mod:`bolide.broker.config`."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Protocol

from bolide.base.fileio import atomic_write_with_backup

__all__ = ["ConfigFileWriter", "VersionedDocument"]


class VersionedDocument(Protocol):
    """A table whose ``version`` grows with every change and which encodes to file bytes."""

    @property
    def version(self) -> int: ...

    def encode(self) -> bytes: ...


class ConfigFileWriter:
    """Writes one JSON config file (topics.json, consumerOffset.json, ...) crash-safely.

    Each write is :func:`atomic_write_with_backup` (the old content kept as ``.bak``). Writes
    are serialized and skipped when ``source.version`` has not moved since the last one, so
    many changes in a burst cost one or two writes. The bytes are encoded on the caller's
    thread (a consistent snapshot) and written by a worker thread in :meth:`flush`, so the
    event loop keeps serving during fsync.
    """

    def __init__(self, path: Path, source: VersionedDocument) -> None:
        self.path = path
        self._source = source
        self._lock = asyncio.Lock()
        self.written_version = source.version
        """The source version the file holds (or that was loaded from it)."""

    @property
    def pending(self) -> bool:
        """True when the source changed since the last write."""
        return self._source.version != self.written_version

    def mark_written(self) -> None:
        """Record that the file holds the current version (call right after loading it)."""
        self.written_version = self._source.version

    async def flush(self) -> bool:
        """Write the file if the source changed; True if written. Raises OSError on failure."""
        async with self._lock:
            if not self.pending:
                return False
            version, data = self._source.version, self._source.encode()
            await asyncio.to_thread(atomic_write_with_backup, self.path, data)
            self.written_version = version
            return True

    def flush_blocking(self) -> bool:
        """:meth:`flush` on the caller's thread (startup, tools); blocks on fsync."""
        if not self.pending:
            return False
        version, data = self._source.version, self._source.encode()
        atomic_write_with_backup(self.path, data)
        self.written_version = version
        return True
