"""Unit tests of the store's parts: segments, consume queues, index files, read rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from bolide.base.errors import ConfigError, CorruptDataError
from bolide.store.api import GetStatus
from bolide.store.config import StoreConfig, parse_delete_when
from bolide.store.consume_queue import ConsumeQueue, topic_is_storable
from bolide.store.file_ops import FileOps
from bolide.store.index_file import KeyIndex
from bolide.store.queue_reads import check_offset, collect, lower_bound_by_time, scan_limit_entries
from bolide.store.segment import MappedSegment


def test_segment_is_sparse_until_reserved_and_cut_zeroes_the_tail(tmp_path: Path) -> None:
    path = tmp_path / "seg"
    segment = MappedSegment.create(
        path, 0, 1 << 20, allocation_chunk_bytes=4096, file_ops=FileOps()
    )
    assert path.stat().st_size == 1 << 20
    assert path.stat().st_blocks * 512 <= 2 * 4096 + 4096
    segment.ensure_allocated(10_000)
    segment.write(0, b"x" * 10_000)
    segment.write_position = 10_000
    segment.cut(100)
    assert bytes(segment.view[:100]) == b"x" * 100
    assert bytes(segment.view[100:10_000]) == bytes(9_900)
    assert segment.write_position == 100
    held = segment.view[0:10]
    segment.close()
    assert bytes(held) == b"x" * 10, "a view handed out survives close"
    with pytest.raises(CorruptDataError):
        MappedSegment.open_existing(path, 0, 4096, allocation_chunk_bytes=4096, file_ops=FileOps())


def test_consume_queue_rolls_files_and_finds_its_end_again(tmp_path: Path) -> None:
    queue = ConsumeQueue("t", 0, tmp_path / "t" / "0", 4, FileOps())
    for number in range(10):
        queue.prepare_append(1)
        assert queue.append(number * 100, 90 + number, -number) == number
    assert len(list(queue.directory.iterdir())) == 3
    assert queue.entries(3, 4) == [(300, 93, -3), (400, 94, -4), (500, 95, -5), (600, 96, -6)]
    queue.close()
    again = ConsumeQueue("t", 0, tmp_path / "t" / "0", 4, FileOps())
    again.load()
    assert (again.min_offset, again.max_offset) == (0, 10)
    assert again.truncate(6) == 4
    assert again.max_offset == 6 and len(list(again.directory.iterdir())) == 2
    again.advance_min_offset(lambda entry: entry[0] >= 450)
    assert again.min_offset == 5 and len(list(again.directory.iterdir())) == 1
    assert again.entry(4) is None and again.entry(5) == (500, 95, -5)
    again.close()
    third = ConsumeQueue("t", 0, tmp_path / "t" / "0", 4, FileOps())
    third.load()
    assert (third.min_offset, third.max_offset) == (4, 6)
    third.close()


def test_consume_queue_restarted_mid_file_loads_its_min_offset(tmp_path: Path) -> None:
    queue = ConsumeQueue("t", 1, tmp_path / "q", 8, FileOps())
    queue.restart_at(11)
    queue.prepare_append(2)
    queue.append(1000, 100, 0)
    queue.append(1100, 100, 0)
    queue.close()
    again = ConsumeQueue("t", 1, tmp_path / "q", 8, FileOps())
    again.load()
    assert (again.min_offset, again.max_offset) == (11, 13)
    again.close()


def test_index_chains_files_and_bounds_results(tmp_path: Path) -> None:
    index = KeyIndex(tmp_path / "index", slot_count=4, max_entries=5, file_ops=FileOps())
    index.load()
    for number in range(12):
        index.prepare([(number * 10, 2)])
        index.add_record(number * 10, 1_000 * number, [number % 3, 100 + number])
    assert len(index.files) == 6
    everything = index.lookup(1, 0, 1 << 62, lambda offset: True, 100)
    assert everything == [100, 70, 40, 10]
    assert index.lookup(1, 0, 1 << 62, lambda offset: offset != 70, 2) == [100, 40]
    assert index.lookup(1, 3_500, 7_000, lambda offset: True, 100) == [70, 40]
    assert index.delete_files_before(45) == 2
    index.close()
    again = KeyIndex(tmp_path / "index", slot_count=4, max_entries=5, file_ops=FileOps())
    again.load()
    assert again.lookup(1, 0, 1 << 62, lambda offset: True, 100) == [100, 70, 40]
    assert again.end_commit_log_offset == 110
    again.close()


def test_read_rules() -> None:
    empty = check_offset(0, 0, 0)
    assert empty is not None and empty.status is GetStatus.NO_MESSAGE_IN_QUEUE
    assert check_offset(5, 10, 7) is None
    assert scan_limit_entries(32) == 800 and scan_limit_entries(1000) == 1000
    result = collect(
        [(0, 10, 1), (10, 10, 2), (20, 10, 1)],
        lambda offset, size: None if offset == 0 else memoryview(bytes(size)),
        queue_offset=4,
        min_offset=0,
        max_offset=7,
        max_count=5,
        max_bytes=100,
        tag_codes=frozenset({1}),
    )
    assert (result.status, result.next_begin_offset, result.message_count) == (
        GetStatus.FOUND,
        7,
        1,
    )
    gone = collect(
        [(0, 10, 1)],
        lambda o, s: None,
        queue_offset=0,
        min_offset=0,
        max_offset=1,
        max_count=1,
        max_bytes=10,
        tag_codes=None,
    )
    assert gone.status is GetStatus.MESSAGE_WAS_REMOVING
    empty = collect(
        [],
        lambda o, s: None,
        queue_offset=0,
        min_offset=0,
        max_offset=1,
        max_count=1,
        max_bytes=10,
        tag_codes=None,
    )
    assert empty.status is GetStatus.OFFSET_FOUND_NULL
    times = [10, 20, 20, 30]
    assert lower_bound_by_time(0, 4, times.__getitem__, 20) == 1
    assert lower_bound_by_time(0, 4, times.__getitem__, 31) == 4


def test_config_validation(tmp_path: Path) -> None:
    StoreConfig(tmp_path).validate()
    with pytest.raises(ConfigError):
        StoreConfig(tmp_path, commit_log_segment_bytes=100).validate()
    with pytest.raises(ConfigError):
        StoreConfig(tmp_path, disk_max_used_space_ratio_percent=100).validate()
    with pytest.raises(ConfigError):
        StoreConfig(tmp_path, message_delay_levels_ms=()).validate()
    assert parse_delete_when("04") == frozenset({4})
    assert parse_delete_when("02;14") == frozenset({2, 14})
    for bad in ("", "24", "4h", "1;;2"):
        with pytest.raises(ConfigError):
            parse_delete_when(bad)


def test_topic_names_that_could_escape_are_refused() -> None:
    assert topic_is_storable("%RETRY%group") and topic_is_storable("a.b-c_d|e")
    for bad in ("", ".", "..", "a/b", "a\\b", "a\0b"):
        assert not topic_is_storable(bad)
