from __future__ import annotations

from pathlib import Path

from bolide.store.checkpoint import (
    FILE_BYTES,
    SLOT_POSITIONS,
    Checkpoint,
    CheckpointFile,
    decode_slot,
    encode_slot,
)
from bolide.store.file_ops import FileOps


def test_slot_round_trip_and_damage_detection() -> None:
    checkpoint = Checkpoint(10, 20, 30, 1_700_000_000_000)
    raw = encode_slot(7, checkpoint)
    assert decode_slot(raw) == (7, checkpoint)
    assert checkpoint.recovery_start_offset == 10
    for position in range(len(raw)):
        damaged = bytearray(raw)
        damaged[position] ^= 0x40
        assert decode_slot(bytes(damaged)) is None
    assert decode_slot(raw[:-1]) is None
    assert decode_slot(encode_slot(1, Checkpoint(-1, 0, 0, 0))) is None


def test_writes_alternate_slots_and_a_torn_slot_falls_back(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint"
    file = CheckpointFile(path, FileOps())
    assert file.read() is None
    first, second = Checkpoint(1, 1, 1, 1), Checkpoint(2, 2, 2, 2)
    file.write(first)
    file.write(second)
    assert path.stat().st_size == FILE_BYTES
    assert CheckpointFile(path, FileOps()).read() == second
    data = bytearray(path.read_bytes())
    data[SLOT_POSITIONS[0] + 20] ^= 0xFF  # second went to slot 0 (sequence 2)
    path.write_bytes(bytes(data))
    reader = CheckpointFile(path, FileOps())
    assert reader.read() == first
    third = Checkpoint(3, 3, 3, 3)
    reader.write(third)  # sequence 2 again, into the damaged slot 0
    assert CheckpointFile(path, FileOps()).read() == third
