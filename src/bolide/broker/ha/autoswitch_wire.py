"""The HA stream in controller mode (RocketMQ 5.x AutoSwitchHAService), sans-IO.

Same raw TCP as the 4.x stream (wire.py), but every message starts with the sender's
connection state (READY 0, HANDSHAKE 1, TRANSFER 2) and the two sides exchange epochs.
All integers big-endian.

Slave -> master, first (16 B)::

    state=1 (i32) | isSyncFromLastFile (i16) | isAsyncLearner (i16) | slaveBrokerId (i64)

Master -> slave, the answer (20 B + 12 B per epoch entry, oldest first)::

    state=1 (i32) | bodySize=12n (i32) | maxPhyOffset (i64) | lastEpoch (i32)
    then n x: epoch (i32) | startOffset (i64)

Slave -> master, after truncating, after each append and as a heartbeat (12 B)::

    state=2 (i32) | maxPhyOffset (i64)

Master -> slave, transfer frames (36 B header + body)::

    state=2 (i32) | bodySize (i32) | offset (i64) | epoch (i32) | epochStartOffset (i64)
    | confirmOffset (i64) | commit-log bytes

A body never spans two epochs; bodySize 0 is a heartbeat.
"""

from __future__ import annotations

import itertools
import struct
from dataclasses import dataclass
from typing import Final

from bolide.base import limits
from bolide.base.errors import ProtocolError
from bolide.store.epoch_file import EpochEntry

__all__ = [
    "MASTER_HANDSHAKE",
    "SLAVE_HANDSHAKE",
    "SLAVE_REPORT",
    "STATE_HANDSHAKE",
    "STATE_TRANSFER",
    "TRANSFER_HEADER",
    "MasterHandshake",
    "MasterStreamDecoder",
    "SlaveHandshake",
    "SlaveStreamDecoder",
    "TransferFrame",
    "encode_master_handshake",
    "encode_slave_handshake",
    "encode_slave_report",
    "encode_transfer_header",
]

STATE_HANDSHAKE: Final = 1
STATE_TRANSFER: Final = 2

SLAVE_HANDSHAKE: Final = struct.Struct(">ihhq")
MASTER_HANDSHAKE: Final = struct.Struct(">iiqi")
EPOCH_ENTRY: Final = struct.Struct(">iq")
SLAVE_REPORT: Final = struct.Struct(">iq")
TRANSFER_HEADER: Final = struct.Struct(">iiqiqq")


@dataclass(frozen=True, slots=True)
class SlaveHandshake:
    sync_from_last_file: bool
    async_learner: bool
    slave_broker_id: int


@dataclass(frozen=True, slots=True)
class MasterHandshake:
    max_offset: int
    last_epoch: int
    epochs: tuple[EpochEntry, ...]


@dataclass(frozen=True, slots=True)
class TransferFrame:
    offset: int
    epoch: int
    epoch_start_offset: int
    confirm_offset: int
    body: bytes


def encode_slave_handshake(
    slave_broker_id: int, *, sync_from_last_file: bool = False, async_learner: bool = False
) -> bytes:
    return SLAVE_HANDSHAKE.pack(
        STATE_HANDSHAKE, int(sync_from_last_file), int(async_learner), slave_broker_id
    )


def encode_master_handshake(max_offset: int, epochs: list[EpochEntry]) -> bytes:
    last_epoch = epochs[-1].epoch if epochs else 0
    head = MASTER_HANDSHAKE.pack(
        STATE_HANDSHAKE, EPOCH_ENTRY.size * len(epochs), max_offset, last_epoch
    )
    return head + b"".join(EPOCH_ENTRY.pack(e.epoch, e.start_offset) for e in epochs)


def encode_slave_report(max_offset: int) -> bytes:
    return SLAVE_REPORT.pack(STATE_TRANSFER, max_offset)


def encode_transfer_header(
    offset: int, size: int, epoch: int, epoch_start_offset: int, confirm_offset: int
) -> bytes:
    return TRANSFER_HEADER.pack(
        STATE_TRANSFER, size, offset, epoch, epoch_start_offset, confirm_offset
    )


class MasterStreamDecoder:
    """The master's reader of one slave: a handshake first, then 12-byte reports."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self.handshake: SlaveHandshake | None = None

    def feed(self, data: bytes) -> int | None:
        """Take bytes; returns the last complete report's offset (None: none yet).

        Raises:
            ProtocolError: a wrong state word, a negative offset or id (garbage).
        """
        buffer = self._buffer
        buffer += data
        if self.handshake is None:
            if len(buffer) < SLAVE_HANDSHAKE.size:
                return None
            state, last_file, learner, broker_id = SLAVE_HANDSHAKE.unpack_from(buffer)
            if state != STATE_HANDSHAKE or broker_id < 0:
                raise ProtocolError(f"HA handshake with state {state}, slave id {broker_id}")
            self.handshake = SlaveHandshake(bool(last_file), bool(learner), int(broker_id))
            del buffer[: SLAVE_HANDSHAKE.size]
        whole = len(buffer) - len(buffer) % SLAVE_REPORT.size
        if whole == 0:
            return None
        offset: int | None = None
        for position in range(0, whole, SLAVE_REPORT.size):
            state, reported = SLAVE_REPORT.unpack_from(buffer, position)
            if state != STATE_TRANSFER or reported < 0:
                raise ProtocolError(f"HA report with state {state}, offset {reported}")
            offset = int(reported)
        del buffer[:whole]
        return offset


class SlaveStreamDecoder:
    """The slave's reader: the master's handshake first, then transfer frames."""

    def __init__(self, max_body_bytes: int = limits.HA_TRANSFER_BATCH_BYTES) -> None:
        self._buffer = bytearray()
        self._max_body_bytes = max_body_bytes
        self.handshake: MasterHandshake | None = None

    def feed(self, data: bytes) -> list[TransferFrame]:
        """Take bytes; returns every complete frame after the handshake, in order.

        Raises:
            ProtocolError: a wrong state word, a size out of bounds, negative offsets, or an
                epoch list out of order.
        """
        buffer = self._buffer
        buffer += data
        if self.handshake is None and not self._take_handshake():
            return []
        frames: list[TransferFrame] = []
        cursor = 0
        size_of_header = TRANSFER_HEADER.size
        while len(buffer) - cursor >= size_of_header:
            state, size, offset, epoch, start, confirm = TRANSFER_HEADER.unpack_from(buffer, cursor)
            if state != STATE_TRANSFER or offset < 0 or not 0 <= size <= self._max_body_bytes:
                raise ProtocolError(f"HA frame with state {state}, offset {offset}, size {size}")
            end = cursor + size_of_header + size
            if len(buffer) < end:
                break
            body = bytes(buffer[cursor + size_of_header : end])
            frames.append(TransferFrame(int(offset), int(epoch), int(start), int(confirm), body))
            cursor = end
        del buffer[:cursor]
        return frames

    def _take_handshake(self) -> bool:
        buffer = self._buffer
        if len(buffer) < MASTER_HANDSHAKE.size:
            return False
        state, body_size, max_offset, last_epoch = MASTER_HANDSHAKE.unpack_from(buffer)
        bound = EPOCH_ENTRY.size * limits.EPOCH_ENTRIES_MAX_COUNT
        if (
            state != STATE_HANDSHAKE
            or not 0 <= body_size <= bound
            or body_size % EPOCH_ENTRY.size
            or max_offset < 0
        ):
            raise ProtocolError(f"HA master handshake with state {state}, body {body_size}")
        total = MASTER_HANDSHAKE.size + body_size
        if len(buffer) < total:
            return False
        epochs = tuple(
            EpochEntry(*EPOCH_ENTRY.unpack_from(buffer, position))
            for position in range(MASTER_HANDSHAKE.size, total, EPOCH_ENTRY.size)
        )
        for earlier, later in itertools.pairwise(epochs):
            if later.epoch <= earlier.epoch or later.start_offset <= earlier.start_offset:
                raise ProtocolError(f"HA master epochs out of order: {earlier}, {later}")
        self.handshake = MasterHandshake(int(max_offset), int(last_epoch), epochs)
        del buffer[:total]
        return True
