"""Fixtures shared by the store tests: tiny configurations, both store kinds, fault seams."""

from __future__ import annotations

import errno
import os
import shutil
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from bolide.base.clock import ManualClock
from bolide.protocol.address import SocketAddress
from bolide.store.api import MessageStore, PutRequest
from bolide.store.config import StoreConfig
from bolide.store.file_ops import DiskUsage, FileOps
from bolide.store.file_store import FileMessageStore
from bolide.store.memory_store import MemoryMessageStore
from bolide.store.segment import settle_allocate_ahead

STORE_HOST: SocketAddress = ("127.0.0.1", 10911)
BORN_HOST: SocketAddress = ("10.1.2.3", 50000)
ALL_HOURS = frozenset(range(24))


def copy_store_files(source: Path, destination: Path) -> None:
    """Copy a store's directory as a crash would leave it (the store may still be running):
    first the allocate-ahead thread settles, which otherwise may delete a dropped spare while
    the copy lists it."""
    settle_allocate_ahead()
    shutil.copytree(source, destination)


def tiny_config(root: Path, **overrides: Any) -> StoreConfig:
    """Small files so that segments, queue files and index files roll within a test."""
    settings: dict[str, Any] = {
        "commit_log_segment_bytes": 8 * 1024,
        "consume_queue_file_entries": 16,
        "index_hash_slots": 32,
        "index_file_max_entries": 64,
    }
    settings.update(overrides)
    return StoreConfig(root / "store", **settings)


class ControlledFileOps(FileOps):
    """Real system calls, plus switches a test flips to make the disk fail."""

    def __init__(self, *, sync: bool = True) -> None:
        self.real_sync = sync
        self.disk_full = False
        self.preallocate_errno: int | None = None
        self.fail_sync = False
        self.sync_gate: threading.Event | None = None
        self.sync_entered = threading.Event()
        self.synced_paths: list[str] = []
        self.disk = DiskUsage(total_bytes=100 * 2**30, used_bytes=10 * 2**30)

    def preallocate(self, fd: int, offset: int, length: int) -> None:
        if self.disk_full:
            raise OSError(errno.ENOSPC, "No space left on device")
        if self.preallocate_errno is not None:
            raise OSError(self.preallocate_errno, os.strerror(self.preallocate_errno))
        super().preallocate(fd, offset, length)

    def sync(self, fd: int) -> None:
        self.synced_paths.append(os.readlink(f"/proc/self/fd/{fd}"))
        self.sync_entered.set()
        if self.sync_gate is not None:
            self.sync_gate.wait(timeout=30)
        if self.fail_sync:
            raise OSError(errno.EIO, "Input/output error")
        if self.real_sync:
            super().sync(fd)

    def disk_usage(self, path: Path) -> DiskUsage:
        return self.disk


def request(
    topic: str = "orders",
    queue_id: int = 0,
    body: bytes = b"hello",
    **properties: str,
) -> PutRequest:
    return PutRequest(
        topic=topic,
        queue_id=queue_id,
        body=body,
        flag=7,
        properties=dict(properties),
        born_timestamp_ms=1_700_000_000_123,
        born_host=BORN_HOST,
    )


@dataclass
class Harness:
    """One store under test with its clock and the knobs both kinds share."""

    kind: str
    store: MessageStore
    clock: ManualClock
    config: StoreConfig
    file_ops: ControlledFileOps

    def set_disk_used_percent(self, percent: float) -> None:
        total = self.file_ops.disk.total_bytes
        self.file_ops.disk = DiskUsage(total, int(total * percent / 100))


StoreFactory = Callable[..., Awaitable[Harness]]


def make_harness(kind: str, root: Path, clock: ManualClock, **overrides: Any) -> Harness:
    config = tiny_config(root, **overrides)
    file_ops = ControlledFileOps()
    store: MessageStore
    if kind == "file":
        store = FileMessageStore(config, clock=clock, store_host=STORE_HOST, file_ops=file_ops)
    else:
        store = MemoryMessageStore(
            config, clock=clock, store_host=STORE_HOST, disk_usage=lambda: file_ops.disk
        )
    return Harness(kind, store, clock, config, file_ops)


@pytest.fixture(params=["file", "memory"])
async def harness_factory(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[StoreFactory]:
    """Builds started stores of the parametrized kind; stops them all at the end."""
    made: list[Harness] = []
    counter = [0]

    async def build(**overrides: Any) -> Harness:
        counter[0] += 1
        harness = make_harness(
            request.param, tmp_path / f"s{counter[0]}", ManualClock(), **overrides
        )
        await harness.store.start()
        made.append(harness)
        return harness

    yield build
    for harness in made:
        await harness.store.shutdown()


@pytest.fixture
async def harness(harness_factory: StoreFactory) -> Harness:
    return await harness_factory()


def with_changes(config: StoreConfig, **changes: Any) -> StoreConfig:
    return replace(config, **changes)
