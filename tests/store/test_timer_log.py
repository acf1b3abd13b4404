"""The timer log: fixed 20-byte entries in index-named files, torn tails cut at open."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bolide.base.errors import StoreIOError
from bolide.store.timer_log import ENTRY_BYTES, TimerEntry, TimerLog


def _entry(number: int) -> TimerEntry:
    return TimerEntry(1_700_000_000_000 + number, number * 100, 90 + number)


def _log(directory: Path, count: int = 0, segment_entries: int = 4) -> TimerLog:
    log = TimerLog(directory, segment_entries=segment_entries)
    log.open()
    for number in range(count):
        assert log.append(_entry(number)) == number
    return log


def test_append_read_across_files_and_reopen(tmp_path: Path) -> None:
    log = _log(tmp_path, 10)
    assert (log.start_index, log.end_index, len(log)) == (0, 10, 10)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "00000000000000000000",
        "00000000000000000004",
        "00000000000000000008",
    ]
    assert log.read(3, 4) == [_entry(n) for n in range(3, 7)]
    assert log.read(8, 100) == [_entry(8), _entry(9)]
    assert log.read(10, 5) == []
    log.sync()
    log.close()
    reopened = _log(tmp_path)
    assert (reopened.start_index, reopened.end_index) == (0, 10)
    assert reopened.read(0, 10) == [_entry(n) for n in range(10)]
    reopened.close()


def test_a_torn_tail_is_cut_at_open(tmp_path: Path) -> None:
    log = _log(tmp_path, 7)
    log.close()
    last = tmp_path / "00000000000000000004"
    with last.open("ab") as file:
        file.write(b"\x00\x01\x02")  # a partial entry
    reopened = _log(tmp_path)
    assert reopened.end_index == 7
    assert last.stat().st_size == 3 * ENTRY_BYTES
    reopened.close()
    with last.open("r+b") as file:  # zeros where the last entry was (a crash in a grown file)
        file.seek(2 * ENTRY_BYTES)
        file.write(bytes(ENTRY_BYTES))
    again = _log(tmp_path)
    assert again.end_index == 6
    assert again.append(_entry(6)) == 6
    again.close()


def test_truncate_and_delete_before(tmp_path: Path) -> None:
    log = _log(tmp_path, 10)
    log.truncate(5)
    assert log.end_index == 5
    assert not (tmp_path / "00000000000000000008").exists()
    assert log.read(0, 10) == [_entry(n) for n in range(5)]
    assert log.append(_entry(5)) == 5
    assert log.delete_before(5) == 1  # only the first file lies wholly before 5
    assert (log.start_index, log.end_index) == (4, 6)
    assert log.read(0, 10) == [_entry(4), _entry(5)]
    log.truncate(0)  # never below the start
    assert (log.start_index, log.end_index) == (4, 4)
    log.close()


def test_reset_starts_anywhere_and_survives_reopen(tmp_path: Path) -> None:
    log = _log(tmp_path, 3)
    log.reset(6)
    assert list(tmp_path.iterdir()) == []
    assert log.append(_entry(6)) == 6
    assert log.append(_entry(7)) == 7
    assert log.append(_entry(8)) == 8
    log.close()
    reopened = _log(tmp_path)
    assert (reopened.start_index, reopened.end_index) == (6, 9)
    assert reopened.read(0, 5) == [_entry(6), _entry(7), _entry(8)]
    reopened.close()


def test_files_cut_off_by_a_gap_are_dropped(tmp_path: Path) -> None:
    log = _log(tmp_path, 12)
    log.close()
    os.unlink(tmp_path / "00000000000000000004")
    reopened = _log(tmp_path)
    assert (reopened.start_index, reopened.end_index) == (8, 12)
    assert not (tmp_path / "00000000000000000000").exists()
    reopened.close()


def test_a_misnamed_file_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "00000000000000000003").write_bytes(b"")
    with pytest.raises(StoreIOError):
        _log(tmp_path)
