"""Crash-safe file writes: a reader sees the old content or the new one, never a mix."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from bolide.base.errors import CorruptDataError

T = TypeVar("T")


def fsync_directory(directory: Path) -> None:
    """fsync a directory so that a rename or a new file in it survives a crash."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data``: write ``path.tmp``, fsync it, rename it, fsync the dir."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    finally:
        os.close(fd)
    temporary.replace(path)
    fsync_directory(path.parent)


def backup_path(path: Path) -> Path:
    return path.with_name(path.name + ".bak")


def atomic_write_with_backup(path: Path, data: bytes) -> None:
    """Keep the current content as ``path.bak`` (atomically), then write ``data`` atomically.

    RocketMQ keeps ``.bak`` beside each metadata file so a damaged main file can be recovered.
    """
    if path.exists():
        with contextlib.suppress(OSError):
            atomic_write(backup_path(path), path.read_bytes())
    atomic_write(path, data)


def read_with_backup(path: Path, parse: Callable[[bytes], T]) -> T | None:
    """Parse ``path``; if it is missing or ``parse`` fails, parse ``path.bak`` instead.

    Returns None when neither file exists. Raises :class:`CorruptDataError` when the files
    that exist all fail to parse. ``parse`` signals damage by raising ValueError.
    """
    failures: list[str] = []
    for candidate in (path, backup_path(path)):
        try:
            raw = candidate.read_bytes()
        except FileNotFoundError:
            continue
        try:
            return parse(raw)
        except ValueError as error:
            failures.append(f"{candidate}: {error}")
    if failures:
        raise CorruptDataError("; ".join(failures))
    return None
