from __future__ import annotations

import itertools
import zlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bolide.base.errors import CorruptDataError
from bolide.store.epoch_file import (
    EpochEntry,
    EpochFile,
    EpochOrderError,
    NoCommonEpochError,
    compute_truncate_offset,
    decode_epoch_file,
    encode_epoch_file,
    end_offsets,
)


def test_file_text_is_rocketmq_epoch_checkpoint_format() -> None:
    entries = [EpochEntry(1, 0), EpochEntry(2, 100)]
    crc = zlib.crc32(b"1-0\n2-100\n") & 0x7FFFFFFF
    assert encode_epoch_file(entries) == f"2\n{crc}\n1-0\n2-100\n".encode()
    assert decode_epoch_file(encode_epoch_file(entries)) == entries
    assert decode_epoch_file(b"0\n0\n") == []


@pytest.mark.parametrize(
    "raw",
    [b"", b"1\n", b"2\n0\n1-0\n", b"1\n5\n1-0\n", b"1\nx\n1-0\n", b"1\n0\n10\n", b"-1\n0\n"],
)
def test_damaged_text_is_refused(raw: bytes) -> None:
    with pytest.raises(ValueError):
        decode_epoch_file(raw)


def test_out_of_order_entries_in_a_file_are_refused() -> None:
    with pytest.raises(ValueError, match="does not follow"):
        decode_epoch_file(encode_epoch_file([EpochEntry(2, 0), EpochEntry(1, 10)]))


def test_append_persists_keeps_backup_and_refuses_stale_epochs(tmp_path: Path) -> None:
    path = tmp_path / "epochFileCheckpoint"
    epochs = EpochFile(path)
    assert epochs.entries == [] and epochs.last_epoch == 0
    epochs.append(EpochEntry(1, 0))
    epochs.append(EpochEntry(3, 500))
    with pytest.raises(EpochOrderError):
        epochs.append(EpochEntry(3, 900))
    with pytest.raises(EpochOrderError):
        epochs.append(EpochEntry(4, 400))
    assert EpochFile(path).entries == [EpochEntry(1, 0), EpochEntry(3, 500)]
    assert decode_epoch_file(path.with_name(path.name + ".bak").read_bytes()) == [EpochEntry(1, 0)]
    # an epoch that wrote nothing is replaced by the next one starting at the same offset
    epochs.append(EpochEntry(4, 500))
    assert EpochFile(path).entries == [EpochEntry(1, 0), EpochEntry(4, 500)]
    assert epochs.entry_for(499) == EpochEntry(1, 0)
    assert epochs.entry_for(500) == EpochEntry(4, 500)
    assert epochs.end_offsets(800) == [500, 800]


def test_damaged_main_file_falls_back_to_backup_and_both_damaged_fails(tmp_path: Path) -> None:
    path = tmp_path / "epochFileCheckpoint"
    epochs = EpochFile(path)
    epochs.append(EpochEntry(1, 0))
    epochs.append(EpochEntry(2, 64))
    path.write_bytes(path.read_bytes().replace(b"2-64", b"2-65"))
    assert EpochFile(path).entries == [EpochEntry(1, 0)]
    path.with_name(path.name + ".bak").write_bytes(b"garbage")
    with pytest.raises(CorruptDataError):
        EpochFile(path)


def test_truncate_from_drops_entries_starting_at_or_after(tmp_path: Path) -> None:
    path = tmp_path / "epochFileCheckpoint"
    epochs = EpochFile(path)
    for entry in (EpochEntry(1, 0), EpochEntry(2, 100), EpochEntry(5, 300)):
        epochs.append(entry)
    epochs.truncate_from(300)
    assert EpochFile(path).entries == [EpochEntry(1, 0), EpochEntry(2, 100)]
    epochs.truncate_from(101)
    assert epochs.entries == [EpochEntry(1, 0), EpochEntry(2, 100)]
    epochs.truncate_from(0)
    assert EpochFile(path).entries == []


def test_truncate_point_examples() -> None:
    master = [EpochEntry(1, 0), EpochEntry(2, 100)]
    # deposed master of epoch 1 wrote up to 150; the new master started epoch 2 at 100
    assert compute_truncate_offset([EpochEntry(1, 0)], 150, master, 400) == 100
    # a slave of epoch 2 behind the master keeps all it has
    assert compute_truncate_offset(master, 250, master, 400) == 250
    assert compute_truncate_offset([], 70, master, 400) == 70
    with pytest.raises(NoCommonEpochError):
        compute_truncate_offset([EpochEntry(7, 0)], 10, master, 400)
    assert end_offsets([], 5) == []


def _history(
    common: list[int], extra: int, own: list[int], first_epoch: int, step: int
) -> tuple[list[EpochEntry], int]:
    """An epoch list and max offset: the common epochs (lengths), ``extra`` more bytes in the
    last common epoch, then own epochs numbered first_epoch, first_epoch + step, ..."""
    entries: list[EpochEntry] = []
    offset = 0
    for epoch, length in enumerate(common, start=1):
        entries.append(EpochEntry(epoch, offset))
        offset += length
    offset += extra
    for index, length in enumerate(own):
        entries.append(EpochEntry(first_epoch + index * step, offset))
        offset += length
    return entries, offset


@settings(max_examples=300, deadline=None)
@given(
    common=st.lists(st.integers(1, 1000), min_size=1, max_size=6),
    local_extra=st.integers(0, 500),
    master_extra=st.integers(0, 500),
    local_own=st.lists(st.integers(1, 500), max_size=4),
    master_own=st.lists(st.integers(1, 500), max_size=4),
)
def test_truncate_point_is_where_the_histories_part(
    common: list[int],
    local_extra: int,
    master_extra: int,
    local_own: list[int],
    master_own: list[int],
) -> None:
    base = len(common) + 1
    # epochs are unique per brokerName: local-only epochs are odd, master-only even
    local, local_max = _history(common, local_extra, local_own, base * 2 + 1, 2)
    master, master_max = _history(common, master_extra, master_own, base * 2 + 2, 2)
    agreed = sum(common) + min(local_extra, master_extra)
    truncate = compute_truncate_offset(local, local_max, master, master_max)
    assert truncate == agreed
    assert truncate <= local_max and truncate <= master_max
    # the slave keeps everything it has when it is just behind the same history
    assert compute_truncate_offset(master, min(master_max, agreed), master, master_max) == min(
        master_max, agreed
    )


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 50), st.integers(0, 1000)), max_size=30))
def test_appended_lists_round_trip_and_stay_ordered(pairs: list[tuple[int, int]]) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "epochFileCheckpoint"
        epochs = EpochFile(path)
        for epoch_step, offset_step in pairs:
            last = epochs.last()
            epoch = (last.epoch if last else 0) + epoch_step
            start = (last.start_offset if last else 0) + offset_step
            epochs.append(EpochEntry(epoch, start))
        loaded = EpochFile(path).entries
        assert loaded == epochs.entries
        assert all(
            a.epoch < b.epoch and a.start_offset < b.start_offset
            for a, b in itertools.pairwise(loaded)
        )
