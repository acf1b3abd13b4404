"""The HA stream's two byte layouts (RocketMQ 4.x HAService/HAConnection), sans-IO.

Raw TCP on the master's haListenPort, no remoting frames.

Slave -> master: nothing but the slave's commit-log end offset, over and over::

    +------------------------------+
    | max physical offset (int64)  |   big-endian; on connect, after each append, every 5 s
    +------------------------------+

The master reads the last complete 8-byte value in what arrived (older ones are stale).

Master -> slave: transfer frames::

    +---------------------------+------------------+----------------------------+
    | physical offset (int64)   | body size (int32)| body: commit-log bytes     |
    +---------------------------+------------------+----------------------------+
      where the body starts        0..32 KiB          copied as stored

A frame with size 0 is a heartbeat: the offset is where the next bytes will start.
"""

from __future__ import annotations

import struct
from typing import Final

from bolide.base import limits
from bolide.base.errors import ProtocolError

__all__ = [
    "FRAME_HEADER",
    "OFFSET_REPORT",
    "FrameDecoder",
    "OffsetReportDecoder",
    "encode_frame_header",
    "encode_offset_report",
]

OFFSET_REPORT: Final = struct.Struct(">q")
FRAME_HEADER: Final = struct.Struct(">qi")


def encode_offset_report(offset: int) -> bytes:
    """A slave's report of its commit-log end ``offset`` (8 bytes)."""
    return OFFSET_REPORT.pack(offset)


def encode_frame_header(offset: int, size: int) -> bytes:
    """The 12-byte header of a transfer frame whose body of ``size`` bytes starts at
    ``offset`` (size 0: a heartbeat)."""
    return FRAME_HEADER.pack(offset, size)


class OffsetReportDecoder:
    """The master's reader of a slave's reports: keeps a partial value across reads."""

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, data: bytes) -> int | None:
        """The last complete offset in what arrived so far (None: no complete value yet).

        Raises:
            ProtocolError: a negative offset (what a slave never sends: garbage).
        """
        buffer = self._buffer + data
        whole = len(buffer) - len(buffer) % OFFSET_REPORT.size
        self._buffer = buffer[whole:]
        if whole == 0:
            return None
        (offset,) = OFFSET_REPORT.unpack_from(buffer, whole - OFFSET_REPORT.size)
        if offset < 0:
            raise ProtocolError(f"HA peer reported a negative offset {offset}")
        return int(offset)


class FrameDecoder:
    """The slave's reader of transfer frames: splits a byte stream into (offset, body)."""

    def __init__(self, max_body_bytes: int = limits.HA_TRANSFER_BATCH_BYTES) -> None:
        self._buffer = bytearray()
        self._max_body_bytes = max_body_bytes

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        """Every complete frame in what arrived so far, in order.

        Raises:
            ProtocolError: a negative offset or a size outside 0..max_body_bytes.
        """
        buffer = self._buffer
        buffer += data
        frames: list[tuple[int, bytes]] = []
        cursor = 0
        header_size = FRAME_HEADER.size
        while len(buffer) - cursor >= header_size:
            offset, size = FRAME_HEADER.unpack_from(buffer, cursor)
            if offset < 0 or not 0 <= size <= self._max_body_bytes:
                raise ProtocolError(f"HA frame with offset {offset} and size {size}")
            end = cursor + header_size + size
            if len(buffer) < end:
                break
            frames.append((int(offset), bytes(buffer[cursor + header_size : end])))
            cursor = end
        del buffer[:cursor]
        return frames
