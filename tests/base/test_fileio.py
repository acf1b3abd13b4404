import json
from pathlib import Path

import pytest

from bolide.base.errors import CorruptDataError
from bolide.base.fileio import (
    atomic_write,
    atomic_write_with_backup,
    backup_path,
    read_with_backup,
)


def _parse(raw: bytes) -> dict[str, int]:
    return dict(json.loads(raw))


def test_atomic_write_replaces_content_and_leaves_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "offsets.json"
    atomic_write(target, b"one")
    atomic_write(target, b"two")
    assert target.read_bytes() == b"two"
    assert sorted(p.name for p in target.parent.iterdir()) == ["offsets.json"]


def test_backup_keeps_previous_content(tmp_path: Path) -> None:
    target = tmp_path / "topics.json"
    atomic_write_with_backup(target, b'{"a": 1}')
    atomic_write_with_backup(target, b'{"a": 2}')
    assert backup_path(target).read_bytes() == b'{"a": 1}'
    assert read_with_backup(target, _parse) == {"a": 2}


def test_damaged_main_file_falls_back_to_backup(tmp_path: Path) -> None:
    target = tmp_path / "topics.json"
    atomic_write_with_backup(target, b'{"a": 1}')
    atomic_write_with_backup(target, b'{"a": 2}')
    target.write_bytes(b'{"a": ')
    assert read_with_backup(target, _parse) == {"a": 1}


def test_missing_files_read_as_none_and_all_damaged_is_an_error(tmp_path: Path) -> None:
    target = tmp_path / "x.json"
    assert read_with_backup(target, _parse) is None
    target.write_bytes(b"{")
    with pytest.raises(CorruptDataError):
        read_with_backup(target, _parse)
