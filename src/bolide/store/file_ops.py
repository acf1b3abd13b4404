"""The few system calls through which the store meets a failing disk.

Everything that can fail for reasons outside the program (no space, an I/O error, a full
quota) goes through a :class:`FileOps`, so tests inject faults at exactly these points with
a subclass. Ordinary file handling (open, mmap, rename) stays direct.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from pathlib import Path

from bolide.base.errors import DiskFullError, StoreError, StoreIOError

_NO_SPACE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


@dataclass(frozen=True, slots=True)
class DiskUsage:
    """Bytes of the file system that holds the store."""

    total_bytes: int
    used_bytes: int

    @property
    def used_percent(self) -> float:
        if self.total_bytes <= 0:
            return 0.0
        return 100.0 * self.used_bytes / self.total_bytes


class FileOps:
    """Real system calls. Subclasses in tests raise OSError to simulate a failing disk."""

    def preallocate(self, fd: int, offset: int, length: int) -> None:
        """Reserve disk blocks for ``[offset, offset + length)`` of the file.

        Raises:
            OSError: ENOSPC / EDQUOT when the disk is full, anything else on I/O trouble.
        """
        os.posix_fallocate(fd, offset, length)

    def sync(self, fd: int) -> None:
        """fdatasync: file data (mapped writes included) and the size reach the disk.

        Raises:
            OSError: the disk reported a write error.
        """
        os.fdatasync(fd)

    def disk_usage(self, path: Path) -> DiskUsage:
        """Use of the file system holding ``path``, counted as ``df`` and RocketMQ's
        ``UtilAll.getDiskPartitionSpaceUsedPercent`` count it.

        Used is what files hold (blocks less free blocks); the whole is used plus what an
        unprivileged writer may still take. Blocks reserved for root are in neither, and a file
        system whose size says more than its backing store can hold (a thin disk) is measured
        by what can still be written, not by its size.

        Raises:
            OSError: ``path`` cannot be inspected.
        """
        return disk_usage_of(os.statvfs(path))


def disk_usage_of(stat: os.statvfs_result) -> DiskUsage:
    """:meth:`FileOps.disk_usage` of one ``statvfs`` reading."""
    used = (stat.f_blocks - stat.f_bfree) * stat.f_frsize
    available = stat.f_bavail * stat.f_frsize
    return DiskUsage(total_bytes=used + available, used_bytes=max(0, used))


def translate_os_error(error: OSError, what: str) -> StoreError:
    """The store error for an OSError: DiskFullError for no space, StoreIOError otherwise."""
    if error.errno in _NO_SPACE_ERRNOS:
        return DiskFullError(f"{what}: no space left ({error.strerror})")
    return StoreIOError(f"{what}: {error.strerror or error}")
