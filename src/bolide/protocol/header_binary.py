"""ROCKETMQ binary command header (serialize type 1), both directions.

All integers big-endian; strings UTF-8::

    +-------+----------+---------+--------+-------+-------------+---------------+
    | code  | language | version | opaque | flag  | remark_len  | remark        |
    | int16 | uint8    | int16   | int32  | int32 | int32       | remark_len B  |
    +-------+----------+---------+--------+-------+-------------+---------------+
    | ext_len | ext entries, ext_len bytes in all, each:                        |
    | int32   |   key_len int16 | key bytes | value_len int32 | value bytes     |
    +---------+-----------------------------------------------------------------+

Header length = 13 + 4 + remark_len + 4 + ext_len. ``remark_len`` 0 means no remark (a
remark ``""`` therefore reads back as ``None``). An entry whose key is empty is skipped on read
(Java reads it as a null key); an empty value reads as ``""`` (Java reads null; our headers treat
both as absent). code and version are only 16 bits wide here.
"""

from __future__ import annotations

import struct

from bolide.base.errors import ProtocolError
from bolide.protocol.codes import LanguageCode
from bolide.protocol.header_json import DecodedHeader

__all__ = ["decode_binary_header", "encode_binary_header"]

_FIXED = struct.Struct(">hBhiii")
"""code, language, version, opaque, flag, remark_len."""
_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")
_FIXED_BYTES = _FIXED.size  # 17
_LANGUAGE_BY_VALUE: dict[int, LanguageCode] = {member.value: member for member in LanguageCode}


def encode_binary_header(
    code: int,
    language: int,
    version: int,
    opaque: int,
    flag: int,
    remark: str | None,
    ext_fields: dict[str, str],
) -> bytes:
    """Return the binary header bytes for these command fields (layout in the module docstring).

    Raises :class:`ProtocolError` when code or version do not fit int16, opaque or flag do not
    fit int32, language does not fit a byte, or a key is longer than 32767 bytes.
    """
    remark_bytes = remark.encode() if remark else b""
    ext_bytes = _encode_ext_fields(ext_fields) if ext_fields else b""
    try:
        fixed = _FIXED.pack(code, language, version, opaque, flag, len(remark_bytes))
    except struct.error as error:
        raise ProtocolError(f"command does not fit the ROCKETMQ header: {error}") from error
    return b"".join((fixed, remark_bytes, _INT32.pack(len(ext_bytes)), ext_bytes))


def _encode_ext_fields(ext_fields: dict[str, str]) -> bytes:
    pieces: list[bytes] = []
    extend = pieces.extend
    pack_key_length = _INT16.pack
    pack_value_length = _INT32.pack
    try:
        for key, value in ext_fields.items():
            key_bytes = key.encode()
            value_bytes = value.encode()
            extend(
                (
                    pack_key_length(len(key_bytes)),
                    key_bytes,
                    pack_value_length(len(value_bytes)),
                    value_bytes,
                )
            )
    except struct.error as error:
        raise ProtocolError(f"ext field key longer than 32767 bytes: {error}") from error
    return b"".join(pieces)


def decode_binary_header(header: bytes) -> DecodedHeader:
    """Parse a binary header. Raises :class:`ProtocolError` on any length that overruns the
    header, negative lengths, bytes left over, or text that is not UTF-8. An unknown language
    byte reads as ``OTHER``.
    """
    end = len(header)
    if end < _FIXED_BYTES + 4:
        raise ProtocolError(f"binary header of {end} bytes is shorter than 21")
    code, language_byte, version, opaque, flag, remark_length = _FIXED.unpack_from(header, 0)
    position = _FIXED_BYTES
    remark: str | None = None
    if remark_length:
        remark = _read_text(header, position, remark_length, "remark")
        position += remark_length
    (ext_length,) = _INT32.unpack_from(header, position) if end - position >= 4 else (-1,)
    position += 4
    if ext_length < 0 or position + ext_length != end:
        raise ProtocolError(f"binary header ext length {ext_length} does not match its size")
    ext_fields = _decode_ext_fields(header, position, end) if ext_length else {}
    language = _LANGUAGE_BY_VALUE.get(language_byte, LanguageCode.OTHER)
    return code, language, version, opaque, flag, remark, ext_fields


def _decode_ext_fields(header: bytes, position: int, end: int) -> dict[str, str]:
    """Entries from ``position`` to ``end``, which is the end of ``header``."""
    ext_fields: dict[str, str] = {}
    unpack_key_length = _INT16.unpack_from
    unpack_value_length = _INT32.unpack_from
    try:
        while position < end:
            (key_length,) = unpack_key_length(header, position)
            key_end = position + 2 + key_length
            (value_length,) = unpack_value_length(header, key_end)
            value_start = key_end + 4
            value_end = value_start + value_length
            if key_length < 0 or value_length < 0 or value_end > end:
                raise ProtocolError(f"binary header ext entry at {position} overruns the header")
            if key_length:
                key = header[position + 2 : key_end].decode()
                ext_fields[key] = header[value_start:value_end].decode()
            position = value_end
    except struct.error as error:  # a length field cut by the end of the header
        raise ProtocolError(f"binary header ext entry truncated at {position}") from error
    except UnicodeDecodeError as error:
        raise ProtocolError("binary header ext entry is not UTF-8") from error
    return ext_fields


def _read_text(header: bytes, position: int, length: int, what: str) -> str:
    if length < 0 or position + length > len(header):
        raise ProtocolError(f"binary header {what} length {length} overruns the header")
    try:
        return header[position : position + length].decode()
    except UnicodeDecodeError as error:
        raise ProtocolError(f"binary header {what} is not UTF-8") from error
