"""Controller mode's epoch file helpers: where it lives and what opening it keeps."""

from __future__ import annotations

from pathlib import Path

from bolide.broker.controller_mode.epochs import epoch_file_path, open_epoch_file
from bolide.store.epoch_file import EpochEntry, EpochFile


def test_epoch_file_defaults_under_the_store_root(tmp_path: Path) -> None:
    assert epoch_file_path({}, tmp_path) == tmp_path / "epochFileCheckpoint"
    assert epoch_file_path({"storePathEpochFile": " "}, tmp_path) == (
        tmp_path / "epochFileCheckpoint"
    )


def test_store_path_epoch_file_overrides(tmp_path: Path) -> None:
    given = tmp_path / "elsewhere" / "epochs"
    assert epoch_file_path({"storePathEpochFile": str(given)}, tmp_path) == given
    opened = open_epoch_file(given, 0)
    assert opened.entries == [] and given.parent.is_dir()


def test_opening_drops_entries_past_the_log_end(tmp_path: Path) -> None:
    path = tmp_path / "epochFileCheckpoint"
    written = EpochFile(path)
    for entry in (EpochEntry(1, 0), EpochEntry(2, 500), EpochEntry(4, 900)):
        written.append(entry)
    # the log was cut at 700 (a torn tail): epoch 4 names bytes it no longer holds
    assert open_epoch_file(path, 700).entries == [EpochEntry(1, 0), EpochEntry(2, 500)]
    # an epoch starting exactly at the end wrote nothing yet and stays
    assert open_epoch_file(path, 500).entries == [EpochEntry(1, 0), EpochEntry(2, 500)]
    assert EpochFile(path).entries == [EpochEntry(1, 0), EpochEntry(2, 500)]
