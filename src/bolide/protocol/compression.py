"""Message-body compression: zlib, LZ4 and ZSTD (sans-IO codecs).

How a producer marks a compressed body (sysFlag, the record and SEND_MESSAGE alike): bit 0
(COMPRESSED, 0x1) says the body is compressed, bits 8-10 say how — LZ4 0x100, ZSTD 0x200,
ZLIB 0x300 — as Java producers from 4.9.4 on write them (``compressType``); 0 in those bits is
what older producers and the C++ client send and means zlib. LZ4 bodies are in the LZ4 *frame*
format (what Java's LZ4FrameOutputStream writes), ZSTD bodies are ordinary zstd frames, zlib
bodies carry the zlib header and Adler-32 (java.util.zip.Deflater). Inflated bodies are capped
at MESSAGE_BODY_DECOMPRESSED_MAX_BYTES so a small record cannot expand without bound.

Decoding pulled records one by one, so one undecodable record never fails a pull, lives in
:mod:`bolide.protocol.record.messages`, above the record codec.
"""

from __future__ import annotations

import enum
import io
import zlib
from typing import Final

import lz4.frame
import zstandard

from bolide.base import limits
from bolide.base.errors import ProtocolError, invariant
from bolide.protocol.message import COMPRESSION_TYPE_MASK, MessageSysFlag

__all__ = [
    "ZLIB_LEVEL_DEFAULT",
    "CompressionType",
    "compress_body",
    "compressed_sys_flag",
    "compression_type_of",
    "decompress_body",
]

ZLIB_LEVEL_DEFAULT: Final = 5
"""The Java producer's compressLevel (rocketmq.message.compressLevel): zlib and ZSTD at 5."""

_COMPRESSED: Final = int(MessageSysFlag.COMPRESSED)


class CompressionType(enum.Enum):
    """How a body is compressed; the value is its sysFlag bits (8-10)."""

    LZ4 = int(MessageSysFlag.COMPRESSION_LZ4)
    ZSTD = int(MessageSysFlag.COMPRESSION_ZSTD)
    ZLIB = int(MessageSysFlag.COMPRESSION_ZLIB)


def compression_type_of(sys_flag: int) -> CompressionType | None:
    """The compression of a body with ``sys_flag``; None when it is not compressed.

    Raises:
        ProtocolError: COMPRESSED with type bits that name no known compression.
    """
    if not sys_flag & _COMPRESSED:
        return None
    bits = sys_flag & COMPRESSION_TYPE_MASK
    if bits == 0:
        return CompressionType.ZLIB  # producers before 4.9.4, and C++
    try:
        return CompressionType(bits)
    except ValueError:
        raise ProtocolError(f"unknown compression type {bits >> 8} in sysFlag") from None


def compressed_sys_flag(sys_flag: int, compression: CompressionType) -> int:
    """``sys_flag`` marked COMPRESSED with ``compression``'s type bits."""
    return (sys_flag & ~COMPRESSION_TYPE_MASK) | _COMPRESSED | compression.value


def compress_body(
    body: bytes | bytearray | memoryview,
    compression: CompressionType = CompressionType.ZLIB,
    level: int = ZLIB_LEVEL_DEFAULT,
) -> bytes:
    """``body`` compressed as a Java producer does: zlib with header, an LZ4 frame, or a zstd
    frame (``level`` applies to zlib, -1..9, and ZSTD, 1..22).

    Raises:
        ProtocolError: a level the codec refuses.
    """
    try:
        if compression is CompressionType.LZ4:
            return bytes(lz4.frame.compress(bytes(body)))
        if compression is CompressionType.ZSTD:
            return zstandard.ZstdCompressor(level=level).compress(bytes(body))
        return zlib.compress(body, level)
    except (zlib.error, zstandard.ZstdError, ValueError, RuntimeError) as error:
        raise ProtocolError(f"cannot compress with {compression.name} {level}: {error}") from error


def decompress_body(
    body: bytes | bytearray | memoryview,
    sys_flag: int = _COMPRESSED,
    max_bytes: int = limits.MESSAGE_BODY_DECOMPRESSED_MAX_BYTES,
) -> bytes:
    """The body of a record with ``sys_flag`` (COMPRESSED set), inflated, at most
    ``max_bytes`` long.

    Raises:
        ProtocolError: an unknown compression type, data that is not of that format or is
            cut short, or more than ``max_bytes`` once inflated.
    """
    invariant(max_bytes > 0, "max_bytes must be positive")
    compression = compression_type_of(sys_flag | _COMPRESSED)
    data = bytes(body)
    if compression is CompressionType.LZ4:
        result, complete = _lz4(data, max_bytes)
    elif compression is CompressionType.ZSTD:
        result, complete = _zstd(data, max_bytes)
    else:
        result, complete = _zlib(data, max_bytes)
    name = compression.name if compression is not None else "ZLIB"
    if len(result) > max_bytes:
        raise ProtocolError(f"{name} body inflates beyond {max_bytes} bytes")
    if not complete:
        raise ProtocolError(f"{name} body is cut short")
    return result


def _zlib(data: bytes, max_bytes: int) -> tuple[bytes, bool]:
    inflater = zlib.decompressobj()
    try:
        result = inflater.decompress(data, max_bytes + 1)
    except zlib.error as error:
        raise ProtocolError(f"ZLIB body does not inflate: {error}") from error
    return result, inflater.eof


def _lz4(data: bytes, max_bytes: int) -> tuple[bytes, bool]:
    inflater = lz4.frame.LZ4FrameDecompressor()
    try:
        result = bytes(inflater.decompress(data, max_length=max_bytes + 1))
    except RuntimeError as error:
        raise ProtocolError(f"LZ4 body does not inflate: {error}") from error
    return result, bool(inflater.eof)


def _zstd(data: bytes, max_bytes: int) -> tuple[bytes, bool]:
    context = zstandard.ZstdDecompressor()
    try:
        # The reader stops at max_bytes + 1, so a frame that expands without bound cannot
        # take the memory; only a body within the cap is then inflated for the end check.
        with context.stream_reader(io.BytesIO(data), read_across_frames=False) as reader:
            bounded = reader.read(max_bytes + 1)
        if len(bounded) > max_bytes:
            return bounded, True
        inflater = context.decompressobj()
        result = inflater.decompress(data)
    except zstandard.ZstdError as error:
        raise ProtocolError(f"ZSTD body does not inflate: {error}") from error
    return result, bool(inflater.eof)
