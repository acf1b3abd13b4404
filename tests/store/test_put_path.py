"""The fast send path's pieces agree with their reference versions and keep their promises:
properties picked without parsing, seeded index hashes, records written in place (first length
last), bulk consume-queue appends, index entries written in batches, SYNC rounds that share a
future."""

from __future__ import annotations

import asyncio
import errno
import os
import struct
import threading
import zlib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bolide.base import compiled, limits
from bolide.base.clock import ManualClock
from bolide.base.errors import InvariantViolationError, StoreIOError
from bolide.protocol import record as door
from bolide.protocol.address import SocketAddress, pack_ip
from bolide.protocol.message import MessageSysFlag
from bolide.protocol.record import (
    BatchEntry,
    decode_properties,
    decode_record,
    layout,
    property_value,
)
from bolide.store.api import BatchPutRequest, PutRequest, PutStatus
from bolide.store.config import FlushDiskType
from bolide.store.consume_queue import ConsumeQueue
from bolide.store.file_ops import FileOps
from bolide.store.file_store import FileMessageStore
from bolide.store.flush import FlushBatch, FlushThreads, GroupCommit
from bolide.store.index_file import KeyIndex, index_key_hash, index_key_seed
from bolide.store.records import PreparedRecord, RecordBuilder
from bolide.testing.waiting import until

from .conftest import (
    BORN_HOST,
    STORE_HOST,
    ControlledFileOps,
    copy_store_files,
    request,
    tiny_config,
)

FOREVER_MS = 1 << 62
_NAMES = st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "DELAY", "TAG", "XTAGS", ""])
_VALUES = st.text(alphabet="ab \x01\x02é", max_size=6)


@given(st.lists(st.tuples(_NAMES, _VALUES), max_size=6), st.booleans())
def test_picked_properties_match_the_parser(pairs: list[tuple[str, str]], trailing: bool) -> None:
    text = "\x02".join(f"{name}\x01{value}" for name, value in pairs) + ("\x02" if trailing else "")
    parsed = decode_properties(text)
    for name in ("TAGS", "KEYS", "UNIQ_KEY", "DELAY", "TAG"):
        assert property_value("\x02" + text, f"\x02{name}\x01") == parsed.get(name)


@given(st.text(max_size=20), st.text(max_size=20))
def test_seeded_index_hash_is_the_index_key_hash(topic: str, key: str) -> None:
    data = key.encode("utf-8", "surrogatepass")
    assert zlib.crc32(data, index_key_seed(topic)) == index_key_hash(topic, key)


def _builder(store_host: SocketAddress) -> RecordBuilder:
    return RecordBuilder(
        store_host=store_host,
        max_message_size_bytes=1 << 20,
        segment_bytes=1 << 20,
        index_max_entries=64,
    )


@pytest.mark.parametrize(
    ("store_host", "born_host", "sys_flag"),
    [
        (STORE_HOST, BORN_HOST, 0),
        (("::1", 10911), BORN_HOST, MessageSysFlag.COMPRESSED),
        (STORE_HOST, ("fe80::2", 4000), MessageSysFlag.BORNHOST_V6),  # a bit the hosts decide
        (("::1", 10911), ("fe80::2", 4000), MessageSysFlag.TRANSACTION_PREPARED),
    ],
)
def test_records_written_in_place_are_the_codecs_bytes(
    store_host: SocketAddress, born_host: SocketAddress, sys_flag: int
) -> None:
    builder = _builder(store_host)
    entries = [
        BatchEntry(3, b"first body", "TAGS\x01a\x02UNIQ_KEY\x01u1"),
        BatchEntry(-7, b"", ""),
        BatchEntry(0, bytes(range(256)), "KEYS\x01k1 k2"),
    ]
    batch = BatchPutRequest("orders", 5, entries, sys_flag, 1_700, born_host, 2)
    topic, records, born_ip = builder.batch(batch)
    first_queue_offset = None if sys_flag & MessageSysFlag.TRANSACTION_PREPARED else 40
    buffer = bytearray(8000)
    end = door.write_records(
        memoryview(buffer), 100, records, topic.tail_prefix, 5, first_queue_offset, 5_000,
        sys_flag, 1_700, born_ip, born_host[1], 1_800, pack_ip(store_host[0]), store_host[1],
        2, 0,
    )  # fmt: skip
    expected = b"".join(
        builder.encode_all(
            records,
            topic_bytes=topic.encoded,
            queue_id=5,
            first_queue_offset=first_queue_offset,
            base_offset=5_000,
            sys_flag=sys_flag,
            born_timestamp_ms=1_700,
            born_host=born_host,
            store_timestamp_ms=1_800,
            reconsume_times=2,
            prepared_transaction_offset=0,
        )
    )
    assert bytes(buffer[100:end]) == expected
    assert buffer[:100] == bytes(100) and buffer[end:] == bytes(len(buffer) - end)
    message, _ = decode_record(buffer, 100, decompress=False, verify_crc=True)
    assert (message.body, message.queue_id, message.commit_log_offset) == (b"first body", 5, 5_000)


class _LengthLastCheck:
    """Stands in for the writer's int32 struct: the first record's length must be the last
    thing written, into a span that already holds everything else."""

    def __init__(self, expected_tail: bytes) -> None:
        self.expected_tail = expected_tail
        self.calls = 0

    def pack_into(self, view: Any, position: int, value: int) -> None:
        self.calls += 1
        assert bytes(view[position : position + 4]) == bytes(4), "first length written early"
        assert bytes(view[position + 4 : position + value]) == self.expected_tail
        struct.Struct(">i").pack_into(view, position, value)


def test_a_put_writes_its_first_length_last(monkeypatch: pytest.MonkeyPatch) -> None:
    builder = _builder(STORE_HOST)
    topic, record, born_ip = builder.single(
        PutRequest("orders", 0, b"body", properties="UNIQ_KEY\x01x", born_host=BORN_HOST)
    )
    reference = builder.encode_all(
        [record],
        topic_bytes=topic.encoded,
        queue_id=0,
        first_queue_offset=0,
        base_offset=0,
        sys_flag=0,
        born_timestamp_ms=0,
        born_host=BORN_HOST,
        store_timestamp_ms=9,
        reconsume_times=0,
        prepared_transaction_offset=0,
    )[0]
    check = _LengthLastCheck(reference[4:])
    # Observable in the pure twin only (the compiled one writes with plain stores, in the same
    # order: tests/protocol/test_wire_twins.py holds both to the same bytes).
    monkeypatch.setattr(layout, "INT32", check)
    write_records = compiled.pure_twin("bolide.protocol.record.layout", "write_records")
    buffer = bytearray(len(reference))
    write_records(
        memoryview(buffer), 0, [record], topic.tail_prefix, 0, 0, 0, 0, 0, born_ip,
        BORN_HOST[1], 9, pack_ip(STORE_HOST[0]), STORE_HOST[1], 0, 0,
    )  # fmt: skip
    assert check.calls == 1 and bytes(buffer) == reference


def test_a_record_whose_size_is_wrong_is_a_bug_and_writes_nothing() -> None:
    builder = _builder(STORE_HOST)
    topic, record, born_ip = builder.single(PutRequest("orders", 0, b"body", born_host=BORN_HOST))
    lying = PreparedRecord(record.body, 0, b"", record.size + 1, None, 0, None, [])
    buffer = bytearray(1000)
    with pytest.raises(InvariantViolationError):
        door.write_records(
            memoryview(buffer), 0, [lying], topic.tail_prefix, 0, 0, 0, 0, 0, born_ip, 1, 0,
            pack_ip(STORE_HOST[0]), STORE_HOST[1], 0, 0,
        )  # fmt: skip
    assert buffer == bytes(1000)


def test_bulk_queue_appends_cross_files_and_room_is_tracked(tmp_path: Path) -> None:
    queue = ConsumeQueue("t", 0, tmp_path / "q", 4, FileOps())
    queue.prepare_append(10)
    assert queue.room_end_offset >= 10
    queue.append_many([(n * 100, 50 + n, n) for n in range(10)])
    assert queue.max_offset == 10 and len(list(queue.directory.iterdir())) == 3
    assert queue.entries(0, 10) == [(n * 100, 50 + n, n) for n in range(10)]
    assert queue.truncate(7) == 3 and queue.room_end_offset == 0
    queue.close()
    again = ConsumeQueue("t", 0, tmp_path / "q", 4, FileOps())
    again.load()
    assert (again.min_offset, again.max_offset) == (0, 7)
    again.close()


class _CommitLogDiskFull(ControlledFileOps):
    """A disk that is full for new commit-log blocks only (consume queues still grow)."""

    def __init__(self) -> None:
        super().__init__(sync=False)
        self.commit_log_full = False

    def preallocate(self, fd: int, offset: int, length: int) -> None:
        if self.commit_log_full and "/commitlog/" in os.readlink(f"/proc/self/fd/{fd}"):
            raise OSError(errno.ENOSPC, "No space left on device")
        super().preallocate(fd, offset, length)


async def test_queue_files_made_ahead_by_a_refused_batch_are_filled_in_order(
    tmp_path: Path,
) -> None:
    file_ops = _CommitLogDiskFull()
    config = tiny_config(tmp_path, consume_queue_file_entries=4)
    stored: list[bytes] = []

    async def put(body: bytes) -> None:
        result = await store.put_message(request(body=body))
        assert result.ok
        view = store.read_record(result.commit_log_offset)
        assert view is not None
        stored.append(bytes(view))

    store = FileMessageStore(config, clock=ManualClock(), store_host=STORE_HOST, file_ops=file_ops)
    await store.start()
    try:
        await put(bytes(3000))
        await put(bytes(3000))
        file_ops.commit_log_full = True
        entries = [BatchEntry(0, bytes(200), "") for _ in range(9)]
        refused = await store.put_messages(BatchPutRequest("orders", 0, entries))
        assert refused.status is PutStatus.DISK_FULL
        assert len(list((config.consume_queue_dir / "orders" / "0").iterdir())) == 3
        file_ops.commit_log_full = False
        for number in range(5):
            await put(bytes([number]) * 100)
    finally:
        await store.shutdown()
    store = FileMessageStore(config, clock=ManualClock(), store_host=STORE_HOST, file_ops=file_ops)
    await store.start()
    try:
        assert store.max_offset("orders", 0) == 7
        got = store.get_message("orders", 0, 0, 32, 1 << 20)
        assert [bytes(view) for view in got.buffers] == stored
    finally:
        await store.shutdown()


def test_index_entries_wait_for_a_batch_until_something_reads_the_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = KeyIndex(tmp_path / "index", slot_count=8, max_entries=100, file_ops=FileOps())
    index.load()
    index.prepare([(0, 2)])
    index.add_record(0, 1_000, [1, 2])
    assert index.files[0].entry_count == 0, "written by the next batch"
    assert index.lookup(2, 0, FOREVER_MS, lambda offset: True, 10) == [0]
    assert index.files[0].entry_count == 2
    monkeypatch.setattr(limits, "INDEX_PENDING_MAX_RECORDS", 3)
    for number in range(1, 4):
        assert index.files[0].entry_count == 2
        index.prepare_one(number * 10, 1)
        index.add_record(number * 10, 1_000 + number, [3])
    assert index.files[0].entry_count == 5, "the third pending record wrote the batch"
    index.prepare_one(40, 1)
    index.add_record(40, 2_000, [3])
    assert len(index.dirty_segments()) == 1 and index.files[0].entry_count == 6
    index.prepare_one(50, 1)
    index.add_record(50, 2_000, [4])
    index.close()
    again = KeyIndex(tmp_path / "index", slot_count=8, max_entries=100, file_ops=FileOps())
    again.load()
    assert again.lookup(3, 0, FOREVER_MS, lambda offset: True, 10) == [40, 30, 20, 10]
    assert again.lookup(4, 0, FOREVER_MS, lambda offset: True, 10) == [], "close drops pending"
    again.close()


def test_pending_index_entries_follow_the_file_choice_of_prepare(tmp_path: Path) -> None:
    index = KeyIndex(tmp_path / "index", slot_count=8, max_entries=6, file_ops=FileOps())
    index.load()
    for number, count in enumerate([2, 2, 1, 2, 2, 2, 1, 2]):  # never across two files
        index.prepare_one(number * 10, count)
        index.add_record(number * 10, 1_000 + number, [7] * count)
    index.dirty_segments()
    assert [f.entry_count for f in index.files] == [5, 6, 3]
    assert [f.segment.path.name for f in index.files] == [f"{n:020d}" for n in (0, 30, 60)]
    assert index.lookup(7, 0, FOREVER_MS, lambda offset: True, 20) == [
        number * 10 for number in reversed(range(8))
    ]
    index.close()


async def test_a_crash_before_the_index_batch_is_written_loses_no_key(tmp_path: Path) -> None:
    config = tiny_config(tmp_path / "live", commit_log_segment_bytes=1 << 20)
    store = FileMessageStore(
        config, clock=ManualClock(), store_host=STORE_HOST, file_ops=ControlledFileOps(sync=False)
    )
    await store.start()
    try:
        await store.flush()
        results = [await store.put_message(request(KEYS=f"k{n}")) for n in range(20)]
        # What a SIGKILL leaves: the mapped files as they are (index entries still pending).
        copy_store_files(config.store_path_root_dir, tmp_path / "crashed" / "store")
    finally:
        await store.shutdown()
    crashed = FileMessageStore(
        tiny_config(tmp_path / "crashed", commit_log_segment_bytes=1 << 20),
        clock=ManualClock(),
        store_host=STORE_HOST,
        file_ops=ControlledFileOps(sync=False),
    )
    report = await crashed.start()
    try:
        assert not report.clean_shutdown and report.index_entries_rebuilt >= 20
        for number, result in enumerate(results):
            found = crashed.query_by_key("orders", f"k{number}", 4, 0, FOREVER_MS)
            assert [bytes(view) for view in found] == [
                bytes(crashed.read_record(result.commit_log_offset) or b"")
            ]
    finally:
        await crashed.shutdown()


async def test_puts_before_a_capture_share_a_round_and_later_ones_get_the_next() -> None:
    rounds = GroupCommit()
    first = rounds.wait(deadline_ms=100)
    assert rounds.wait(deadline_ms=150) is first and len(rounds) == 1
    rounds.capture(500)
    second = rounds.wait(deadline_ms=120)
    assert second is not first and len(rounds) == 2
    rounds.capture(900)
    rounds.flushed_up_to(499)
    assert not first.done()
    rounds.flushed_up_to(900)  # a later fsync covers the earlier round too
    assert first.result() is True and second.result() is True and len(rounds) == 0
    late = rounds.wait(deadline_ms=100)
    rounds.capture(1000)
    later = rounds.wait(deadline_ms=200)
    assert rounds.expire(now_ms=150) == 1, "a round's deadline is its first put's"
    assert late.result() is False and not later.done()
    rounds.fail_all()
    assert later.result() is False and len(rounds) == 0


class _Batch(FlushBatch):
    def __init__(self, error: BaseException | None) -> None:
        super().__init__([], FileOps())
        self.error = error

    def run(self) -> None:
        if self.error is not None:
            raise self.error


async def test_flush_threads_bring_back_every_outcome() -> None:
    threads = FlushThreads(2, "test-flush")
    threads.start()
    loop = asyncio.get_running_loop()
    outcomes: list[asyncio.Future[StoreIOError | None]] = []
    try:
        for error in (None, StoreIOError("disk gone"), RuntimeError("bug")):
            outcome: asyncio.Future[StoreIOError | None] = loop.create_future()
            threads.submit(_Batch(error), outcome.set_result)
            outcomes.append(outcome)
        ok, failed, bug = [await outcome for outcome in outcomes]
    finally:
        threads.stop()
    assert ok is None
    assert isinstance(failed, StoreIOError) and str(failed) == "disk gone"
    assert isinstance(bug, StoreIOError) and "bug" in str(bug)


async def test_sync_puts_made_during_an_fsync_share_the_next_round(tmp_path: Path) -> None:
    file_ops = ControlledFileOps()
    config = tiny_config(
        tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH, commit_log_segment_bytes=1 << 20
    )
    store = FileMessageStore(config, clock=ManualClock(), store_host=STORE_HOST, file_ops=file_ops)
    await store.start()
    gate = threading.Event()
    file_ops.sync_gate = gate
    file_ops.sync_entered.clear()
    synced_before = len(file_ops.synced_paths)
    try:
        first = asyncio.ensure_future(store.put_message(request()))
        await until(file_ops.sync_entered.is_set)
        later = [asyncio.ensure_future(store.put_message(request())) for _ in range(20)]
        await until(lambda: len(file_ops.synced_paths) == synced_before + 2)
        assert not first.done() and not any(put.done() for put in later)
        gate.set()
        results = await asyncio.gather(first, *later)
    finally:
        gate.set()
        await store.shutdown()
    assert all(result.ok for result in results)
    syncs = file_ops.synced_paths[synced_before:]
    assert sum("/commitlog/" in path for path in syncs[:2]) == 2, "one round each, no more"
    assert not any("/commitlog/" in path for path in syncs[2:-3]), "before the final flush"


async def test_sync_puts_still_waiting_at_shutdown_are_covered_by_the_final_flush(
    tmp_path: Path,
) -> None:
    file_ops = ControlledFileOps()
    config = tiny_config(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH)
    store = FileMessageStore(config, clock=ManualClock(), store_host=STORE_HOST, file_ops=file_ops)
    await store.start()
    gate = threading.Event()
    file_ops.sync_gate = gate
    synced_before = len(file_ops.synced_paths)
    try:
        in_rounds = [asyncio.ensure_future(store.put_message(request())) for _ in range(2)]
        await until(lambda: len(file_ops.synced_paths) == synced_before + 1)
        in_rounds.append(asyncio.ensure_future(store.put_message(request())))
        await until(lambda: len(file_ops.synced_paths) == synced_before + 2)  # both rounds busy
        waiting = asyncio.ensure_future(store.put_message(request()))
        stopping = asyncio.ensure_future(store.shutdown())
        flusher = store._sync_flusher  # the rounds in flight must end after it stopped
        await until(lambda: flusher is not None and flusher.stopping)
        gate.set()
        await stopping
    finally:
        gate.set()
        await store.shutdown()
    results = [await put for put in (*in_rounds, waiting)]
    assert all(result.ok for result in results), [result.remark for result in results]
