"""The slave side of the commit log: bytes a master holds, cut at any point, rebuilt into the
same log, consume queues and index; a restart mid-record; refusals of unsound streams."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from bolide.base.clock import ManualClock
from bolide.base.errors import ReplicaOffsetError
from bolide.protocol.record import read_record_header
from bolide.store.api import PutStatus
from bolide.store.file_store import FileMessageStore
from tests.store.conftest import STORE_HOST, ControlledFileOps, request, tiny_config

SEGMENT_BYTES = 8 * 1024


async def _store(root: Path) -> FileMessageStore:
    store = FileMessageStore(
        tiny_config(root, commit_log_segment_bytes=SEGMENT_BYTES),
        clock=ManualClock(),
        store_host=STORE_HOST,
        file_ops=ControlledFileOps(sync=False),
    )
    await store.start()
    return store


async def _filled_master(root: Path, count: int) -> FileMessageStore:
    master = await _store(root)
    for index in range(count):
        body = f"message {index} ".encode() * (1 + index % 7)
        result = await master.put_message(
            request("orders", index % 3, body, KEYS=f"key-{index}", TAGS=f"t{index % 2}")
        )
        assert result.status.value == "PUT_OK"
    return master


def _chunks(master: FileMessageStore, start: int, rng: random.Random) -> list[tuple[int, bytes]]:
    """The master's log from ``start`` as an HA stream would cut it: random sizes, never
    across a segment end."""
    chunks = []
    offset = start
    while (data := master.read_commit_log(offset, rng.randint(1, 3000))) is not None:
        chunks.append((offset, data))
        offset += len(data)
    return chunks


def _queue(store: FileMessageStore, queue_id: int) -> list[tuple[int, int, int]]:
    return store.consume_queue_entries("orders", queue_id, 0, 10_000)


async def test_random_cuts_rebuild_the_same_log_queues_and_index(tmp_path: Path) -> None:
    master = await _filled_master(tmp_path / "master", 200)
    slave = await _store(tmp_path / "slave")
    try:
        assert master.commit_log_max_offset > 3 * SEGMENT_BYTES  # several segments, blanks
        for offset, data in _chunks(master, 0, random.Random(7)):
            slave.append_replicated(offset, data)
        assert slave.commit_log_max_offset == master.commit_log_max_offset
        for queue_id in range(3):
            assert _queue(slave, queue_id) == _queue(master, queue_id)
        assert len(slave.query_by_key("orders", "key-17", 10, 0, 2**62)) == 1
        slave.refuse_puts = "this broker is a SLAVE"
        refused = await slave.put_message(request())
        assert refused.status is PutStatus.SERVICE_NOT_AVAILABLE
        assert refused.remark == "this broker is a SLAVE"
    finally:
        await master.shutdown()
        await slave.shutdown()


async def test_a_slave_restarted_mid_record_continues_from_its_last_whole_record(
    tmp_path: Path,
) -> None:
    master = await _filled_master(tmp_path / "master", 120)
    slave = await _store(tmp_path / "slave")
    chunks = _chunks(master, 0, random.Random(3))
    half = len(chunks) // 2
    for offset, data in chunks[:half]:
        slave.append_replicated(offset, data)
    whole = slave.commit_log_max_offset
    assert slave.replica.end_offset > whole  # a record is half received
    await slave.shutdown()
    slave = await _store(tmp_path / "slave")
    try:
        assert slave.commit_log_max_offset == whole
        for offset, data in _chunks(master, whole, random.Random(4)):
            slave.append_replicated(offset, data)
        for queue_id in range(3):
            assert _queue(slave, queue_id) == _queue(master, queue_id)
    finally:
        await master.shutdown()
        await slave.shutdown()


async def test_out_of_step_or_corrupt_bytes_are_refused_and_nothing_is_written(
    tmp_path: Path,
) -> None:
    master = await _filled_master(tmp_path / "master", 10)
    slave = await _store(tmp_path / "slave")
    try:
        data = master.read_commit_log(0, 4096)
        assert data is not None
        with pytest.raises(ReplicaOffsetError):
            slave.append_replicated(100, data)  # not where the log ends
        corrupt = bytearray(data)
        corrupt[read_record_header(data).body_offset] ^= 0xFF  # first body: CRC mismatch
        with pytest.raises(ReplicaOffsetError):
            slave.append_replicated(0, bytes(corrupt))
        with pytest.raises(ReplicaOffsetError):
            slave.append_replicated(0, b"GET / HTTP/1.1\r\n\r\n")
        assert slave.commit_log_max_offset == 0
        slave.append_replicated(0, data)  # the sound bytes are taken afterwards
        assert slave.commit_log_max_offset > 0
    finally:
        await master.shutdown()
        await slave.shutdown()


async def test_an_empty_replica_starts_at_the_segment_the_master_names(tmp_path: Path) -> None:
    master = await _filled_master(tmp_path / "master", 200)
    slave = await _store(tmp_path / "slave")
    try:
        end = master.commit_log_max_offset
        start = end - end % SEGMENT_BYTES  # what a master streams to a brand-new slave
        for offset, data in _chunks(master, start, random.Random(5)):
            slave.append_replicated(offset, data)
        assert slave.commit_log_min_offset == start
        assert slave.commit_log_max_offset == end
        tail = [entry for entry in _queue(master, 0) if entry[0] >= start]
        assert _queue(slave, 0) == tail
    finally:
        await master.shutdown()
        await slave.shutdown()
