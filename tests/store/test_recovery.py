"""Recovery: torn tails and corrupt bytes at every interesting point of a crashed store.

A crash is simulated by copying the directory of a running store (the mapped writes are in the
page cache, so the copy holds exactly what a SIGKILL would leave: ``abort`` present, the last
checkpoint, unflushed data). Each case then damages its own copy and reopens it. Random
choices come from seeded generators, so a failure names a replayable case.
"""

from __future__ import annotations

import os
import random
import shutil
import struct
from dataclasses import dataclass
from pathlib import Path

import pytest

from bolide.base.clock import ManualClock
from bolide.base.errors import CorruptDataError
from bolide.protocol.record import BatchEntry, decode_record
from bolide.store.api import BatchPutRequest, GetStatus, RecoveryReport
from bolide.store.config import StoreConfig, segment_file_name
from bolide.store.file_store import FileMessageStore

from .conftest import (
    BORN_HOST,
    STORE_HOST,
    ControlledFileOps,
    copy_store_files,
    request,
    tiny_config,
)

FOREVER_MS = 1 << 62


@dataclass(frozen=True)
class Stored:
    """One acknowledged record: where it is and what it must read back as."""

    offset: int
    data: bytes
    queue_id: int
    queue_offset: int
    key: str


@dataclass
class Crashed:
    config: StoreConfig
    records: list[Stored]
    checkpoint_offset: int


async def _open(config: StoreConfig) -> tuple[FileMessageStore, RecoveryReport]:
    # Durability is not what these cases test: skipping fdatasync keeps hundreds fast.
    store = FileMessageStore(
        config, clock=ManualClock(), store_host=STORE_HOST, file_ops=ControlledFileOps(sync=False)
    )
    return store, await store.start()


async def _crashed_store(root: Path, *, flush_after: int | None) -> Crashed:
    """Write 30 records over 3 queues (one batch among them), maybe flushing part-way, then
    copy the directory as a crash would leave it."""
    config = tiny_config(root / "live")
    store, _ = await _open(config)
    records: list[Stored] = []
    checkpoint_offset = 0
    for number in range(26):
        if number == flush_after:
            await store.flush()
            checkpoint_offset = store.stats().commit_log_max_offset
        key = f"key-{number}"
        result = await store.put_message(
            request(queue_id=number % 3, body=bytes([number]) * (100 + 37 * number), KEYS=key)
        )
        records.append(_stored(store, result.commit_log_offset, key))
    batch = [BatchEntry(0, bytes([200 + i]) * 300, f"KEYS\x01batch-{i}") for i in range(4)]
    result = await store.put_messages(BatchPutRequest("orders", 1, batch, born_host=BORN_HOST))
    offset = result.commit_log_offset
    for i in range(4):
        records.append(_stored(store, offset, f"batch-{i}"))
        offset += len(records[-1].data)
    snapshot_root = root / "crashed"
    copy_store_files(config.store_path_root_dir, snapshot_root / "store")
    await store.shutdown()
    return Crashed(tiny_config(snapshot_root), records, checkpoint_offset)


def _stored(store: FileMessageStore, offset: int, key: str) -> Stored:
    view = store.read_record(offset)
    assert view is not None
    message, _ = decode_record(view)
    return Stored(offset, bytes(view), message.queue_id, message.queue_offset, key)


def _copy(crashed: Crashed, destination: Path) -> StoreConfig:
    shutil.copytree(crashed.config.store_path_root_dir, destination / "store")
    return tiny_config(destination)


def _segment_path(config: StoreConfig, offset: int) -> tuple[Path, int]:
    start = offset // config.commit_log_segment_bytes * config.commit_log_segment_bytes
    return config.commit_log_dir / segment_file_name(start), offset - start


def _lose_tail(config: StoreConfig, offset: int) -> None:
    """Everything from ``offset`` never reached the disk: zeros, later segments gone."""
    path, position = _segment_path(config, offset)
    with path.open("r+b") as file:
        file.seek(position)
        file.write(bytes(config.commit_log_segment_bytes - position))
    for other in config.commit_log_dir.iterdir():
        # a spare segment made ahead (``*.tmp``) is a leftover recovery deletes
        if other.name.isdigit() and int(other.name) > int(path.name):
            other.unlink()


def _flip(config: StoreConfig, offset: int, rng: random.Random) -> None:
    path, position = _segment_path(config, offset)
    with path.open("r+b") as file:
        file.seek(position)
        original = file.read(1)[0]
        file.seek(position)
        file.write(bytes([original ^ rng.randrange(1, 256)]))


async def _check_survivors(
    config: StoreConfig, survivors: list[Stored], lost: list[Stored]
) -> None:
    """Reopen, then: survivors read back exactly, through queues, ids and keys; nothing of the
    lost records is visible; new puts continue where the survivors end."""
    store, report = await _open(config)
    try:
        end = survivors[-1].offset + len(survivors[-1].data) if survivors else 0
        assert report.commit_log_max_offset >= end
        for record in survivors:
            view = store.read_record(record.offset)
            assert view is not None and bytes(view) == record.data
            got = store.get_message("orders", record.queue_id, record.queue_offset, 1, 1 << 30)
            assert got.status is GetStatus.FOUND and bytes(got.buffers[0]) == record.data
            found = store.query_by_key("orders", record.key, 4, 0, FOREVER_MS)
            assert [bytes(v) for v in found] == [record.data]
        for record in lost:
            assert (
                store.read_record(record.offset) is None
                or bytes(store.read_record(record.offset) or b"") != record.data
            )
            assert store.query_by_key("orders", record.key, 4, 0, FOREVER_MS) == []
        for queue_id in range(3):
            expected = sum(1 for r in survivors if r.queue_id == queue_id)
            assert store.max_offset("orders", queue_id) == expected
        fresh = await store.put_message(request(queue_id=0, KEYS="after"))
        assert fresh.ok and fresh.queue_offset == sum(1 for r in survivors if r.queue_id == 0)
        await store.shutdown()
        store, report = await _open(config)
        assert not report.cut and report.clean_shutdown
        view = store.read_record(fresh.commit_log_offset)
        assert view is not None and decode_record(view)[0].properties["KEYS"] == "after"
    finally:
        await store.shutdown()


@pytest.mark.parametrize("flush_after", [None, 10])
async def test_tail_lost_at_every_record_boundary_and_inside_records(
    tmp_path: Path, flush_after: int | None
) -> None:
    crashed = await _crashed_store(tmp_path, flush_after=flush_after)
    records = crashed.records
    case = 0
    for index, record in enumerate(records):
        if record.offset < crashed.checkpoint_offset:
            continue  # before the checkpoint the disk is trusted by design
        for delta in (0, 1, 4, 8, 20, 88, len(record.data) - 1):
            case += 1
            config = _copy(crashed, tmp_path / f"case{case}")
            _lose_tail(config, record.offset + delta)
            await _check_survivors(config, records[:index], records[index:])
    assert case > 40


async def test_corrupt_bytes_cut_the_log_at_the_damaged_record(tmp_path: Path) -> None:
    crashed = await _crashed_store(tmp_path, flush_after=None)
    records = crashed.records
    rng = random.Random(20241121)
    body_start = 88
    # Fields whose damage recovery must notice: total size, magic, body (CRC), the body length,
    # the physical offset field, topic length byte.
    targets = [0, 1, 2, 3, 4, 5, 6, 7, 28, 30, 35, 84, 85, 86, 87]
    for case in range(60):
        index = rng.randrange(len(records))
        record = records[index]
        body_length = struct.unpack_from(">i", record.data, 84)[0]
        choices = [*targets, body_start + rng.randrange(max(1, body_length))]
        if body_length:
            choices.append(body_start + body_length)  # the topic length byte
        position = rng.choice(choices)
        config = _copy(crashed, tmp_path / f"case{case}")
        _flip(config, record.offset + position, rng)
        await _check_survivors(config, records[:index], records[index:])


async def test_torn_record_with_zero_length_is_cut_and_zeroed(tmp_path: Path) -> None:
    crashed = await _crashed_store(tmp_path, flush_after=None)
    last = crashed.records[-1]
    config = _copy(crashed, tmp_path / "torn")
    path, position = _segment_path(config, last.offset)
    with path.open("r+b") as file:
        file.seek(position)
        file.write(b"\0\0\0\0")  # the length is written last: a kill before it leaves zero
    store, report = await _open(config)
    try:
        assert report.cut and report.cut_offset == last.offset
        assert report.cut_bytes == len(last.data) - _trailing_zeros(last.data)
        assert report.commit_log_max_offset == last.offset
    finally:
        await store.shutdown()
    with path.open("rb") as file:
        file.seek(position)
        assert file.read(len(last.data)) == bytes(len(last.data))
    await _check_survivors(config, crashed.records[:-1], crashed.records[-1:])


def _trailing_zeros(data: bytes) -> int:
    return len(data) - len(data.rstrip(b"\0"))


async def test_damaged_checkpoint_means_a_full_scan(tmp_path: Path) -> None:
    crashed = await _crashed_store(tmp_path, flush_after=20)
    for name, damage in (("garbage", b"\xff" * 4096), ("short", b"abc"), ("gone", None)):
        config = _copy(crashed, tmp_path / name)
        if damage is None:
            config.checkpoint_path.unlink()
        else:
            config.checkpoint_path.write_bytes(damage)
        store, report = await _open(config)
        assert not report.checkpoint_found and report.scan_start_offset == 0
        assert report.records_scanned == len(crashed.records)
        await store.shutdown()
        await _check_survivors(config, crashed.records, [])


async def test_consume_queue_and_index_damage_past_the_checkpoint_is_rebuilt(
    tmp_path: Path,
) -> None:
    crashed = await _crashed_store(tmp_path, flush_after=12)
    rng = random.Random(7)
    for case in range(12):
        config = _copy(crashed, tmp_path / f"case{case}")
        for queue_dir in (config.consume_queue_dir / "orders").iterdir():
            for file in queue_dir.iterdir():
                data = bytearray(file.read_bytes())
                used = len(data.rstrip(b"\0"))
                start = min(used, max(0, used - 20 * rng.randrange(1, 4)))
                for position in range(start, used):
                    data[position] = rng.randrange(256) if case % 2 else 0
                file.write_bytes(bytes(data))
        for file in config.index_dir.iterdir():
            data = bytearray(file.read_bytes())
            for _ in range(30):
                data[rng.randrange(48, len(data))] = rng.randrange(256)
            file.write_bytes(bytes(data))
        store, report = await _open(config)
        assert report.consume_queue_entries_rebuilt > 0
        await store.shutdown()
        # Index damage may hide an old key; what the index returns is always right.
        await _check_queues(config, crashed.records)


async def _check_queues(config: StoreConfig, records: list[Stored]) -> None:
    store, _ = await _open(config)
    try:
        for record in records:
            got = store.get_message("orders", record.queue_id, record.queue_offset, 1, 1 << 30)
            assert got.status is GetStatus.FOUND and bytes(got.buffers[0]) == record.data
            for view in store.query_by_key("orders", record.key, 4, 0, FOREVER_MS):
                assert bytes(view) == record.data
    finally:
        await store.shutdown()


async def test_blank_marker_damage_cuts_the_following_segments(tmp_path: Path) -> None:
    crashed = await _crashed_store(tmp_path, flush_after=None)
    segment = crashed.config.commit_log_segment_bytes
    second = next(i for i, r in enumerate(crashed.records) if r.offset >= segment)
    previous = crashed.records[second - 1]
    config = _copy(crashed, tmp_path / "blank")
    _flip(config, previous.offset + len(previous.data) + 1, random.Random(3))
    await _check_survivors(config, crashed.records[:second], crashed.records[second:])


async def test_clean_restart_scans_nothing(tmp_path: Path) -> None:
    config = tiny_config(tmp_path)
    store, report = await _open(config)
    assert report.clean_shutdown and not report.checkpoint_found
    for number in range(20):
        await store.put_message(request(queue_id=number % 2, body=bytes(300)))
    await store.shutdown()
    assert not config.abort_path.exists()
    store, report = await _open(config)
    assert report.clean_shutdown and report.checkpoint_found and report.records_scanned == 0
    assert config.abort_path.exists()
    assert store.max_offset("orders", 1) == 10
    await store.shutdown()


async def test_files_that_do_not_fit_together_refuse_to_start(tmp_path: Path) -> None:
    config = tiny_config(tmp_path)
    store, _ = await _open(config)
    for _ in range(20):
        await store.put_message(request(body=bytes(900)))
    await store.shutdown()
    segments = sorted(config.commit_log_dir.iterdir())
    assert len(segments) >= 3
    segments[1].unlink()
    with pytest.raises(CorruptDataError):
        await _open(config)
    broken = tiny_config(tmp_path / "other")
    store, _ = await _open(broken)
    await store.put_message(request())
    await store.shutdown()
    first = broken.commit_log_dir / segment_file_name(0)
    os.truncate(first, 100)
    with pytest.raises(CorruptDataError):
        await _open(broken)


async def test_files_half_created_by_a_crash_are_cleaned_up(tmp_path: Path) -> None:
    crashed = await _crashed_store(tmp_path, flush_after=None)
    config = _copy(crashed, tmp_path / "half")
    segment = config.commit_log_segment_bytes
    last_start = max(int(p.name) for p in config.commit_log_dir.iterdir() if p.name.isdigit())
    following = config.commit_log_dir / segment_file_name(last_start + segment)
    following.write_bytes(bytes(segment))  # renamed into place, nothing written yet
    (config.commit_log_dir / (segment_file_name(last_start + 2 * segment) + ".tmp")).touch()
    queue_dir = config.consume_queue_dir / "orders" / "0"
    (queue_dir / (segment_file_name(10**6) + ".tmp")).touch()
    index_size = next(config.index_dir.iterdir()).stat().st_size
    unwritten_index = config.index_dir / segment_file_name(10**9)
    unwritten_index.write_bytes(bytes(index_size))
    store, report = await _open(config)
    try:
        assert report.segments_removed == (following.name,)
        assert report.cut_reason == "empty segment files after the end of the data"
        # only the spare files the running store makes ahead (commit log, index)
        spare = config.commit_log_dir / (segment_file_name(last_start + segment) + ".spare.tmp")
        index_spare = config.index_dir / "next.spare.tmp"
        assert set(config.store_path_root_dir.rglob("*.tmp")) <= {spare, index_spare}
        assert not unwritten_index.exists()
    finally:
        await store.shutdown()
    await _check_survivors(config, crashed.records, [])
