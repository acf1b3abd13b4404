"""A full disk or a failing disk answers puts with a status; nothing half-written shows."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from bolide.base.clock import ManualClock
from bolide.protocol.record import decode_record
from bolide.store.api import GetStatus, PutResult, PutStatus
from bolide.store.config import StoreConfig
from bolide.store.file_ops import FileOps
from bolide.store.file_store import FileMessageStore

from .conftest import STORE_HOST, ControlledFileOps, request, tiny_config


async def _open(config: StoreConfig, file_ops: FileOps) -> FileMessageStore:
    store = FileMessageStore(config, clock=ManualClock(), store_host=STORE_HOST, file_ops=file_ops)
    await store.start()
    return store


async def _assert_nothing_changed(store: FileMessageStore, max_offset: int, queues: int) -> None:
    assert store.stats().commit_log_max_offset == max_offset
    assert store.max_offset("orders", 0) == queues
    got = store.get_message("orders", 0, queues, 1, 1 << 20)
    assert got.status is GetStatus.OFFSET_OVERFLOW_ONE


async def test_disk_full_on_a_new_commit_log_segment(tmp_path: Path) -> None:
    file_ops = ControlledFileOps(sync=False)
    config = tiny_config(tmp_path)
    store = await _open(config, file_ops)
    try:
        results = []
        while True:
            result = await store.put_message(request(body=bytes(700)))
            results.append(result)
            end = result.commit_log_offset + result.wrote_bytes
            if end % config.commit_log_segment_bytes + result.wrote_bytes + 8 > (
                config.commit_log_segment_bytes
            ):
                break
        file_ops.disk_full = True
        refused = await store.put_message(request(body=bytes(700)))
        assert refused.status is PutStatus.DISK_FULL and "no space" in refused.remark
        await _assert_nothing_changed(store, end, len(results))
        file_ops.disk_full = False
        accepted = await store.put_message(request(body=bytes(700)))
        assert accepted.ok and accepted.queue_offset == len(results)
        assert accepted.commit_log_offset == config.commit_log_segment_bytes
    finally:
        await store.shutdown()
    store = await _open(config, file_ops)
    try:
        assert store.max_offset("orders", 0) == len(results) + 1
    finally:
        await store.shutdown()


async def test_disk_full_on_a_new_consume_queue_file(tmp_path: Path) -> None:
    file_ops = ControlledFileOps(sync=False)
    config = tiny_config(tmp_path, consume_queue_file_entries=16)
    store = await _open(config, file_ops)
    try:
        for _ in range(16):
            last = await store.put_message(request())
        end = last.commit_log_offset + last.wrote_bytes
        file_ops.disk_full = True
        assert (await store.put_message(request())).status is PutStatus.DISK_FULL
        await _assert_nothing_changed(store, end, 16)
        file_ops.disk_full = False
        assert (await store.put_message(request())).queue_offset == 16
    finally:
        await store.shutdown()


async def test_disk_full_on_a_new_index_file(tmp_path: Path) -> None:
    file_ops = ControlledFileOps(sync=False)
    config = tiny_config(tmp_path, consume_queue_file_entries=1000, index_file_max_entries=8)
    store = await _open(config, file_ops)
    try:
        for number in range(8):
            last = await store.put_message(request(KEYS=f"k{number}"))
        end = last.commit_log_offset + last.wrote_bytes
        file_ops.disk_full = True
        assert (await store.put_message(request(KEYS="k8"))).status is PutStatus.DISK_FULL
        assert (await store.put_message(request())).ok, "a put without keys needs no index room"
        file_ops.disk_full = False
        assert (await store.put_message(request(KEYS="k9"))).ok
        assert len(store.query_by_key("orders", "k9", 4, 0, 1 << 62)) == 1
        assert len(store.query_by_key("orders", "k3", 4, 0, 1 << 62)) == 1
        assert store.query_by_key("orders", "k8", 4, 0, 1 << 62) == []
        assert end < store.stats().commit_log_max_offset
    finally:
        await store.shutdown()


async def test_io_error_poisons_the_segment_until_restart(tmp_path: Path) -> None:
    file_ops = ControlledFileOps(sync=False)
    config = tiny_config(tmp_path)
    store = await _open(config, file_ops)
    stored: list[PutResult] = []
    while len(stored) < 8:
        stored.append(await store.put_message(request(body=bytes(900))))
    file_ops.preallocate_errno = errno.EIO
    while True:
        result = await store.put_message(request(body=bytes(900)))
        if not result.ok:
            break
        stored.append(result)
    assert result.status is PutStatus.SERVICE_NOT_AVAILABLE
    file_ops.preallocate_errno = None
    still = await store.put_message(request(body=bytes(900)))
    assert still.status is PutStatus.SERVICE_NOT_AVAILABLE and "recovery" in still.remark
    await store.shutdown()
    store = await _open(config, file_ops)
    try:
        assert store.max_offset("orders", 0) == len(stored)
        assert (await store.put_message(request())).ok
    finally:
        await store.shutdown()


@pytest.fixture
def small_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A real 1 MiB file system, when this process may mount one (root); skipped otherwise."""
    mount_point = tmp_path / "tmpfs"
    mount_point.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount_point)],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace')}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


async def test_a_really_full_disk(small_tmpfs: Path) -> None:
    config = StoreConfig(
        small_tmpfs / "store",
        commit_log_segment_bytes=128 * 1024,
        consume_queue_file_entries=1024,
        index_hash_slots=64,
        index_file_max_entries=4096,
    )
    store = await _open(config, FileOps())
    acknowledged = []
    try:
        for number in range(10_000):
            result = await store.put_message(request(queue_id=number % 2, body=bytes(2000)))
            if result.status is PutStatus.DISK_FULL:
                break
            assert result.ok, result
            acknowledged.append(result)
        else:
            pytest.fail("a 1 MiB file system never filled up")
    finally:
        await store.shutdown()
    assert len(acknowledged) > 100
    store = await _open(config, FileOps())
    try:
        for result in acknowledged:
            view = store.read_record(result.commit_log_offset)
            assert view is not None
            assert decode_record(view, verify_crc=True)[0].queue_offset == result.queue_offset
        assert store.max_offset("orders", 0) + store.max_offset("orders", 1) == len(acknowledged)
    finally:
        await store.shutdown()
