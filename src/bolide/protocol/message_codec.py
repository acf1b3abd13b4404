"""The binary message layouts: the stored record (protocol.md §3.1) and the batch body (§2.2).

The stored record is what the commit log holds and what PULL_MESSAGE, VIEW_MESSAGE_BY_ID and
QUERY_MESSAGE carry, byte for byte, so the broker never re-encodes a message after storing it.
:func:`encode_record` is on the broker's send path: one precompiled struct packs the fixed part.

Every malformed input raises :class:`~bolide.base.errors.ProtocolError`, never ``struct.error``,
``IndexError``, ``UnicodeDecodeError`` or ``zlib.error``. Buffers are bytes-like objects with
one-byte items (``bytes``, ``bytearray``, ``mmap`` or a ``memoryview`` of them).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

from bolide.base import limits
from bolide.base.errors import ProtocolError, invariant
from bolide.protocol.address import SocketAddress, pack_ip, unpack_ip
from bolide.protocol.message import (
    BLANK_MAGIC_CODE,
    COMPRESSION_TYPE_MASK,
    MESSAGE_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
    MessageExt,
    MessageSysFlag,
    decode_properties,
)

Buffer = bytes | bytearray | memoryview
WritableBuffer = bytearray | memoryview

ZLIB_LEVEL_DEFAULT: Final = 5
"""zlib level of the Java producer (compressMsgBodyOverHowmuch bodies are deflated at 5)."""

# Stored / transferred record, big-endian. Offsets are for IPv4 hosts: an IPv6 born host (sysFlag
# BORNHOST_V6) moves every field after it by 12 bytes, an IPv6 store host (STOREHOST_V6) too.
#
#   offset  size  field
#   ------  ----  ---------------------------------------------------------------
#        0     4  TOTALSIZE          whole record, this field included
#        4     4  MAGICCODE          MESSAGE_MAGIC_CODE (0xDAA320A7)
#        8     4  BODYCRC            crc32(stored body) & 0x7FFFFFFF
#       12     4  QUEUEID
#       16     4  FLAG               the user flag
#       20     8  QUEUEOFFSET        logical offset in the consume queue
#       28     8  PHYSICALOFFSET     commit-log offset of this record
#       36     4  SYSFLAG            MessageSysFlag
#       40     8  BORNTIMESTAMP      ms
#       48   4+4  BORNHOST           ip + port (int32); 16+4 with BORNHOST_V6
#       56     8  STORETIMESTAMP     ms
#       64   4+4  STOREHOST          ip + port (int32); 16+4 with STOREHOST_V6
#       72     4  RECONSUMETIMES
#       76     8  PREPARED TRANSACTION OFFSET
#       84     4  BODY length n      --- end of the fixed part: 88 bytes, one struct ---
#       88     n  BODY               as sent (deflated when SYSFLAG has COMPRESSED)
#     88+n     1  TOPIC length t     t <= 127 (an int16 under the 5.x MAGIC_CODE_V2)
#     89+n     t  TOPIC              UTF-8
#   89+n+t     2  PROPERTIES length p, p <= 32767
#   91+n+t     p  PROPERTIES         UTF-8 properties string (protocol.md §3.3)
#
# Blank marker at the unused end of a commit-log segment (never on the wire):
#
#        0     4  TOTALSIZE          the bytes left in the segment
#        4     4  MAGICCODE          BLANK_MAGIC_CODE (0xCBD43194)


def _fixed_struct(born_v6: bool, store_v6: bool) -> struct.Struct:
    born_ip = "16s" if born_v6 else "4s"
    store_ip = "16s" if store_v6 else "4s"
    return struct.Struct(f">iiiiiqqiq{born_ip}iq{store_ip}iiqi")


# Indexed by (sysFlag >> 4) & 3: bit 0 is BORNHOST_V6, bit 1 STOREHOST_V6.
_FIXED_BY_HOSTS: Final = (
    _fixed_struct(False, False),
    _fixed_struct(True, False),
    _fixed_struct(False, True),
    _fixed_struct(True, True),
)
_PREFIX: Final = struct.Struct(">ii")  # TOTALSIZE, MAGICCODE
_INT32: Final = struct.Struct(">i")
_UINT16: Final = struct.Struct(">H")
_QUEUE_AND_PHYSICAL_OFFSET: Final = struct.Struct(">qq")
_INT64: Final = struct.Struct(">q")
_ONE_BYTE: Final = tuple(bytes((length,)) for length in range(256))

SYS_FLAG_POSITION: Final = 36
"""Offset of SYSFLAG inside a record."""
QUEUE_OFFSET_POSITION: Final = 20
"""Offset of QUEUEOFFSET inside a record (PHYSICALOFFSET follows at 28)."""
PHYSICAL_OFFSET_POSITION: Final = 28
"""Offset of PHYSICALOFFSET inside a record."""
RECORD_FIXED_BYTES: Final = _FIXED_BY_HOSTS[0].size
"""88: the fixed part of a record with IPv4 hosts, body length included."""
RECORD_OVERHEAD_BYTES: Final = RECORD_FIXED_BYTES + 1 + 2
"""91: a record with IPv4 hosts is this plus body, topic and properties lengths."""
IPV6_HOST_EXTRA_BYTES: Final = 12
"""An IPv6 host takes 16 + 4 bytes instead of 4 + 4."""
BLANK_MARKER_BYTES: Final = _PREFIX.size
"""8: TOTALSIZE and MAGICCODE of the blank marker that closes a segment."""


class RecordHeader(NamedTuple):
    """What the store needs of a record without decoding it (recovery, dispatch, index).

    Offsets are absolute positions in the buffer that was read. For a blank marker only
    ``position``, ``total_size`` and ``magic`` are meaningful; the rest is zero or empty.
    """

    position: int
    total_size: int
    magic: int
    body_crc: int
    queue_id: int
    flag: int
    queue_offset: int
    commit_log_offset: int
    sys_flag: int
    born_timestamp_ms: int
    store_timestamp_ms: int
    reconsume_times: int
    prepared_transaction_offset: int
    body_offset: int
    body_length: int
    topic: str
    properties_offset: int
    properties_length: int

    @property
    def is_blank(self) -> bool:
        """This is the end-of-segment marker, not a message."""
        return self.magic == BLANK_MAGIC_CODE

    @property
    def end(self) -> int:
        """Position just after the record."""
        return self.position + self.total_size


def body_crc(body: bytes | bytearray | memoryview) -> int:
    """The BODYCRC of a stored body: ``zlib.crc32(body) & 0x7FFFFFFF`` (Java's UtilAll.crc32)."""
    return zlib.crc32(body) & 0x7FFFFFFF


def record_size(
    *,
    body_length: int,
    topic_length: int,
    properties_length: int,
    born_v6: bool = False,
    store_v6: bool = False,
) -> int:
    """Bytes of a record: 91 + body + topic + properties, plus 12 per IPv6 host."""
    return (
        RECORD_OVERHEAD_BYTES
        + body_length
        + topic_length
        + properties_length
        + IPV6_HOST_EXTRA_BYTES * (born_v6 + store_v6)
    )


_BORNHOST_V6: Final = int(MessageSysFlag.BORNHOST_V6)
_STOREHOST_V6: Final = int(MessageSysFlag.STOREHOST_V6)
_COMPRESSED: Final = int(MessageSysFlag.COMPRESSED)
# Plain ints on the hot path: IntFlag arithmetic goes through the enum machinery (~10x slower).
_HOST_FLAGS: Final = _BORNHOST_V6 | _STOREHOST_V6


def _prepare(
    topic: bytes,
    body: bytes | bytearray | memoryview,
    properties: bytes,
    sys_flag: int,
    born_host: SocketAddress,
    store_host: SocketAddress,
) -> tuple[struct.Struct, int, bytes, bytes, int]:
    """(fixed struct, sys flag with the host bits, born ip, store ip, record size)."""
    if len(topic) > limits.RECORD_TOPIC_MAX_BYTES:
        raise ProtocolError(
            f"topic of {len(topic)} bytes exceeds {limits.RECORD_TOPIC_MAX_BYTES} bytes"
        )
    if len(properties) > limits.MESSAGE_PROPERTIES_MAX_BYTES:
        raise ProtocolError(
            f"properties of {len(properties)} bytes exceed "
            f"{limits.MESSAGE_PROPERTIES_MAX_BYTES} bytes"
        )
    born_ip = pack_ip(born_host[0])
    store_ip = pack_ip(store_host[0])
    # The v6 bits must describe the hosts actually written, whatever the caller passed.
    sys_flag &= ~_HOST_FLAGS
    if len(born_ip) == 16:
        sys_flag |= _BORNHOST_V6
    if len(store_ip) == 16:
        sys_flag |= _STOREHOST_V6
    fixed = _FIXED_BY_HOSTS[(sys_flag >> 4) & 3]
    total_size = fixed.size + len(body) + 1 + len(topic) + 2 + len(properties)
    return fixed, sys_flag, born_ip, store_ip, total_size


def encode_record(
    *,
    topic: bytes,
    body: bytes | bytearray | memoryview,
    flag: int,
    properties: bytes,
    queue_id: int,
    queue_offset: int,
    commit_log_offset: int,
    sys_flag: int,
    born_timestamp_ms: int,
    born_host: SocketAddress,
    store_timestamp_ms: int,
    store_host: SocketAddress,
    reconsume_times: int,
    prepared_transaction_offset: int,
    body_crc: int,
) -> bytes:
    """One stored record in the layout drawn above; ``topic`` and ``properties`` are UTF-8.

    The BORNHOST_V6 / STOREHOST_V6 bits of ``sys_flag`` are set from the hosts (an ip with
    ``:`` is IPv6). ``body_crc`` is written as given: see :func:`body_crc`.

    Raises:
        ProtocolError: topic over 127 bytes, properties over 32767 bytes, a host that is not an
            IP literal, or a number outside its field (int32 / int64).
    """
    fixed, sys_flag, born_ip, store_ip, total_size = _prepare(
        topic, body, properties, sys_flag, born_host, store_host
    )
    try:
        head = fixed.pack(
            total_size,
            MESSAGE_MAGIC_CODE,
            body_crc,
            queue_id,
            flag,
            queue_offset,
            commit_log_offset,
            sys_flag,
            born_timestamp_ms,
            born_ip,
            born_host[1],
            store_timestamp_ms,
            store_ip,
            store_host[1],
            reconsume_times,
            prepared_transaction_offset,
            len(body),
        )
    except struct.error as error:
        raise ProtocolError(f"record field out of range: {error}") from error
    return b"".join(
        (
            head,
            body,
            _ONE_BYTE[len(topic)],
            topic,
            _UINT16.pack(len(properties)),
            properties,
        )
    )


def encode_record_into(
    buffer: WritableBuffer,
    position: int,
    *,
    topic: bytes,
    body: bytes | bytearray | memoryview,
    flag: int,
    properties: bytes,
    queue_id: int,
    queue_offset: int,
    commit_log_offset: int,
    sys_flag: int,
    born_timestamp_ms: int,
    born_host: SocketAddress,
    store_timestamp_ms: int,
    store_host: SocketAddress,
    reconsume_times: int,
    prepared_transaction_offset: int,
    body_crc: int,
) -> int:
    """Like :func:`encode_record` but writes at ``buffer[position:]``; returns the record size.

    The caller checks room first (:func:`record_size`): a record that does not fit is a bug
    and fails an invariant, with nothing written.

    Raises:
        ProtocolError: as :func:`encode_record`; the record's span then holds no record (at
            most the fixed part's bytes were zeroed).
    """
    fixed, sys_flag, born_ip, store_ip, total_size = _prepare(
        topic, body, properties, sys_flag, born_host, store_host
    )
    invariant(
        position >= 0 and position + total_size <= len(buffer),
        f"record of {total_size} bytes does not fit at {position} in {len(buffer)}",
    )
    try:
        fixed.pack_into(
            buffer,
            position,
            total_size,
            MESSAGE_MAGIC_CODE,
            body_crc,
            queue_id,
            flag,
            queue_offset,
            commit_log_offset,
            sys_flag,
            born_timestamp_ms,
            born_ip,
            born_host[1],
            store_timestamp_ms,
            store_ip,
            store_host[1],
            reconsume_times,
            prepared_transaction_offset,
            len(body),
        )
    except struct.error as error:
        # pack_into may have written some fields before failing: leave zeros, not half a record.
        buffer[position : position + fixed.size] = bytes(fixed.size)
        raise ProtocolError(f"record field out of range: {error}") from error
    cursor = position + fixed.size
    buffer[cursor : cursor + len(body)] = body
    cursor += len(body)
    buffer[cursor] = len(topic)
    buffer[cursor + 1 : cursor + 1 + len(topic)] = topic
    cursor += 1 + len(topic)
    _UINT16.pack_into(buffer, cursor, len(properties))
    buffer[cursor + 2 : cursor + 2 + len(properties)] = properties
    return total_size


def encode_blank_marker(total_size: int) -> bytes:
    """The 8-byte marker that closes a segment whose last ``total_size`` bytes are unused.

    Raises:
        ProtocolError: ``total_size`` is below 8 or above int32.
    """
    if not BLANK_MARKER_BYTES <= total_size <= 0x7FFFFFFF:
        raise ProtocolError(f"a blank marker spans 8..2^31-1 bytes, not {total_size}")
    return _PREFIX.pack(total_size, BLANK_MAGIC_CODE)


def patch_queue_and_physical_offset(
    buffer: WritableBuffer, position: int, queue_offset: int, commit_log_offset: int
) -> None:
    """Overwrite QUEUEOFFSET and PHYSICALOFFSET of the record at ``position``.

    Raises:
        ProtocolError: the record's fixed part is not inside ``buffer``, or a value does not
            fit int64.
    """
    try:
        _QUEUE_AND_PHYSICAL_OFFSET.pack_into(
            buffer, position + QUEUE_OFFSET_POSITION, queue_offset, commit_log_offset
        )
    except struct.error as error:
        raise ProtocolError(f"cannot patch offsets at {position}: {error}") from error


def patch_store_timestamp(buffer: WritableBuffer, position: int, store_timestamp_ms: int) -> None:
    """Overwrite STORETIMESTAMP of the record at ``position`` (its place depends on the born host).

    Raises:
        ProtocolError: the record's fixed part is not inside ``buffer``.
    """
    try:
        (sys_flag,) = _INT32.unpack_from(buffer, position + SYS_FLAG_POSITION)
        offset = 56 + (IPV6_HOST_EXTRA_BYTES if sys_flag & _BORNHOST_V6 else 0)
        _INT64.pack_into(buffer, position + offset, store_timestamp_ms)
    except struct.error as error:
        raise ProtocolError(f"cannot patch the store timestamp at {position}: {error}") from error


# --- decoding ---------------------------------------------------------------------------------


def _unpack_prefix(buffer: Buffer, position: int) -> tuple[int, int]:
    if position < 0:
        raise ProtocolError(f"negative record position {position}")
    try:
        total_size, magic = _PREFIX.unpack_from(buffer, position)
    except struct.error as error:
        raise ProtocolError(f"truncated record at {position}") from error
    return total_size, magic


def _unpack_fixed(
    buffer: Buffer, position: int, total_size: int, magic: int
) -> tuple[tuple[Any, ...], int]:
    """The fixed part's fields and size, after checking magic and that the record fits."""
    if magic != MESSAGE_MAGIC_CODE and magic != MESSAGE_MAGIC_CODE_V2:
        raise ProtocolError(f"bad magic code {magic & 0xFFFFFFFF:#010x} at {position}")
    if total_size < RECORD_OVERHEAD_BYTES:
        raise ProtocolError(f"record at {position} claims {total_size} bytes, below the minimum")
    if position + total_size > len(buffer):
        raise ProtocolError(
            f"record of {total_size} bytes at {position} runs past the end ({len(buffer)})"
        )
    (sys_flag,) = _INT32.unpack_from(buffer, position + SYS_FLAG_POSITION)
    fixed = _FIXED_BY_HOSTS[(sys_flag >> 4) & 3]
    if total_size < fixed.size + 3:
        raise ProtocolError(f"record at {position} too short for its IPv6 hosts")
    return fixed.unpack_from(buffer, position), fixed.size


def _tail_spans(
    buffer: Buffer, body_offset: int, body_length: int, magic: int, end: int
) -> tuple[int, int, int, int]:
    """(topic offset, topic length, properties offset, properties length), checked against
    ``end``, the record's end: the lengths must add up to TOTALSIZE exactly."""
    topic_at = body_offset + body_length
    # The 4.x magic has a one-byte topic length, the 5.x V2 magic an int16.
    topic_length_bytes = 1 if magic == MESSAGE_MAGIC_CODE else 2
    if body_length < 0 or topic_at + topic_length_bytes > end:
        raise ProtocolError(f"body length {body_length} runs past the record end")
    if topic_length_bytes == 1:
        topic_length = buffer[topic_at]
    else:
        (topic_length,) = _UINT16.unpack_from(buffer, topic_at)
    topic_offset = topic_at + topic_length_bytes
    properties_at = topic_offset + topic_length
    if properties_at + 2 > end:
        raise ProtocolError(f"topic length {topic_length} runs past the record end")
    (properties_length,) = _UINT16.unpack_from(buffer, properties_at)
    properties_offset = properties_at + 2
    if properties_offset + properties_length != end:
        raise ProtocolError("record field lengths do not add up to its TOTALSIZE")
    return topic_offset, topic_length, properties_offset, properties_length


def _utf8(buffer: Buffer, offset: int, length: int, what: str) -> str:
    try:
        return str(buffer[offset : offset + length], "utf-8")
    except UnicodeDecodeError as error:
        raise ProtocolError(f"{what} is not valid UTF-8") from error


def read_record_header(buffer: Buffer, position: int = 0) -> RecordHeader:
    """Check the record (or blank marker) at ``position`` and return its header fields.

    Checks the magic code, that TOTALSIZE lies inside ``buffer`` and that the body, topic and
    properties lengths add up to it exactly; the topic must be UTF-8. The body CRC is not
    checked here: compare ``body_crc(buffer[h.body_offset:h.body_offset + h.body_length])``
    with ``h.body_crc`` when that is wanted.

    Raises:
        ProtocolError: any of those checks fails (a torn or corrupt record).
    """
    total_size, magic = _unpack_prefix(buffer, position)
    end = position + total_size
    if magic == BLANK_MAGIC_CODE:
        if total_size < BLANK_MARKER_BYTES or end > len(buffer):
            raise ProtocolError(f"blank marker of {total_size} bytes at {position} is invalid")
        return RecordHeader(position, total_size, magic, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                            end, 0, "", end, 0)  # fmt: skip
    fields, fixed_size = _unpack_fixed(buffer, position, total_size, magic)
    (_, _, stored_crc, queue_id, flag, queue_offset, commit_log_offset, sys_flag,
     born_timestamp_ms, _, _, store_timestamp_ms, _, _, reconsume_times,
     prepared_transaction_offset, body_length) = fields  # fmt: skip
    body_offset = position + fixed_size
    spans = _tail_spans(buffer, body_offset, body_length, magic, end)
    topic_offset, topic_length, properties_offset, properties_length = spans
    topic = _utf8(buffer, topic_offset, topic_length, "topic")
    return RecordHeader(
        position, total_size, magic, stored_crc, queue_id, flag, queue_offset,
        commit_log_offset, sys_flag, born_timestamp_ms, store_timestamp_ms, reconsume_times,
        prepared_transaction_offset, body_offset, body_length, topic, properties_offset,
        properties_length,
    )  # fmt: skip


def read_record_properties(buffer: Buffer, header: RecordHeader) -> dict[str, str]:
    """The properties of the record whose header is ``header``, parsed (see decode_properties).

    Raises:
        ProtocolError: the properties are not UTF-8.
    """
    text = _utf8(buffer, header.properties_offset, header.properties_length, "properties")
    return decode_properties(text)


def decode_record(
    buffer: Buffer, position: int = 0, *, decompress: bool = True, verify_crc: bool = False
) -> tuple[MessageExt, int]:
    """Decode the record at ``position``; returns it and the position just after it.

    With ``decompress`` (default) a COMPRESSED body is inflated (zlib; at most
    limits.MESSAGE_BODY_DECOMPRESSED_MAX_BYTES); ``sys_flag`` keeps the stored bits either
    way. With ``verify_crc`` the stored body must match BODYCRC. Accepts the 5.x V2 magic.

    Raises:
        ProtocolError: the checks of :func:`read_record_header` fail, a blank marker sits at
            ``position``, the CRC differs (``verify_crc``), the compression type is LZ4 or
            ZSTD, or the body does not inflate.
    """
    return _decode_one(buffer, position, decompress, verify_crc, {})


def decode_records(
    buffer: Buffer, *, decompress: bool = True, verify_crc: bool = False
) -> list[MessageExt]:
    """Decode a concatenation of records (a PULL_MESSAGE or QUERY_MESSAGE body).

    Raises:
        ProtocolError: any record is malformed or the last one is cut short.
    """
    messages: list[MessageExt] = []
    # Records of one body share a few hosts: render each address once per call.
    ip_cache: dict[bytes, str] = {}
    position = 0
    end = len(buffer)
    while position < end:
        message, position = _decode_one(buffer, position, decompress, verify_crc, ip_cache)
        messages.append(message)
    return messages


def _decode_one(
    buffer: Buffer, position: int, decompress: bool, verify_crc: bool, ip_cache: dict[bytes, str]
) -> tuple[MessageExt, int]:
    total_size, magic = _unpack_prefix(buffer, position)
    if magic == BLANK_MAGIC_CODE:
        raise ProtocolError(f"blank marker at {position}, not a message")
    fields, fixed_size = _unpack_fixed(buffer, position, total_size, magic)
    (_, _, stored_crc, queue_id, flag, queue_offset, commit_log_offset, sys_flag,
     born_timestamp_ms, born_ip, born_port, store_timestamp_ms, store_ip, store_port,
     reconsume_times, prepared_transaction_offset, body_length) = fields  # fmt: skip
    end = position + total_size
    body_offset = position + fixed_size
    spans = _tail_spans(buffer, body_offset, body_length, magic, end)
    topic_offset, topic_length, properties_offset, properties_length = spans
    body = bytes(buffer[body_offset : body_offset + body_length])
    if verify_crc and body_crc(body) != stored_crc:
        raise ProtocolError(f"body CRC mismatch in the record at {position}")
    if decompress and sys_flag & _COMPRESSED:
        body = _inflate(body, sys_flag)
    born_text = ip_cache.get(born_ip)
    if born_text is None:
        born_text = ip_cache[born_ip] = unpack_ip(born_ip)
    store_text = ip_cache.get(store_ip)
    if store_text is None:
        store_text = ip_cache[store_ip] = unpack_ip(store_ip)
    properties_text = _utf8(buffer, properties_offset, properties_length, "properties")
    # Positional: keyword construction of a 16-field dataclass costs twice as much.
    message = MessageExt(
        _utf8(buffer, topic_offset, topic_length, "topic"),
        body,
        flag,
        decode_properties(properties_text),
        queue_id,
        queue_offset,
        commit_log_offset,
        sys_flag,
        born_timestamp_ms,
        (born_text, born_port),
        store_timestamp_ms,
        (store_text, store_port),
        reconsume_times,
        prepared_transaction_offset,
        stored_crc,
        total_size,
    )
    return message, end


# --- compression --------------------------------------------------------------------------------


def compress_body(body: bytes | bytearray | memoryview, level: int = ZLIB_LEVEL_DEFAULT) -> bytes:
    """Deflate ``body`` in zlib format (header and Adler-32), as Java's Deflater and C++ do.

    Raises:
        ProtocolError: ``level`` is not in -1..9.
    """
    try:
        return zlib.compress(body, level)
    except zlib.error as error:
        raise ProtocolError(f"cannot compress with level {level}: {error}") from error


def decompress_body(
    body: bytes | bytearray | memoryview,
    max_bytes: int = limits.MESSAGE_BODY_DECOMPRESSED_MAX_BYTES,
) -> bytes:
    """Inflate a zlib-format body of at most ``max_bytes`` inflated bytes.

    Raises:
        ProtocolError: the data is not zlib, is cut short, or inflates beyond ``max_bytes``.
    """
    invariant(max_bytes > 0, "max_bytes must be positive")
    inflater = zlib.decompressobj()
    try:
        result = inflater.decompress(body, max_bytes + 1)
    except zlib.error as error:
        raise ProtocolError(f"compressed body does not inflate: {error}") from error
    if len(result) > max_bytes:
        raise ProtocolError(f"compressed body inflates beyond {max_bytes} bytes")
    if not inflater.eof:
        raise ProtocolError("compressed body is cut short")
    return result


def _inflate(body: bytes, sys_flag: int) -> bytes:
    compression_type = sys_flag & COMPRESSION_TYPE_MASK
    # 0 is what producers before 4.9.4 send; both 0 and ZLIB mean zlib.
    if compression_type not in (0, MessageSysFlag.COMPRESSION_ZLIB):
        raise ProtocolError(f"compression type {compression_type >> 8} (LZ4/ZSTD) unsupported")
    return decompress_body(body)


# --- batch body -------------------------------------------------------------------------------
#
# SEND_MESSAGE with batch=true (and SEND_BATCH_MESSAGE) carries inner messages concatenated,
# each laid out big-endian as:
#
#   size  field
#   ----  -------------------------------------------------------------------
#      4  TOTALSIZE          this entry: 22 + n + p (read but not trusted, as Java does)
#      4  MAGICCODE          written as 0, ignored
#      4  BODYCRC            written as 0, ignored (the broker computes it)
#      4  FLAG               user flag
#      4  BODY length n
#      n  BODY
#      2  PROPERTIES length p
#      p  PROPERTIES         UTF-8 properties string, with the message's own UNIQ_KEY
_BATCH_ENTRY_HEAD: Final = struct.Struct(">iiiii")
BATCH_ENTRY_OVERHEAD_BYTES: Final = _BATCH_ENTRY_HEAD.size + 2
"""22: an inner message of a batch is this plus its body and properties lengths."""


@dataclass(frozen=True, slots=True)
class BatchEntry:
    """One inner message of a batch body: user flag, body and properties string."""

    flag: int
    body: bytes
    properties: str


def decode_batch_body(body: Buffer) -> list[BatchEntry]:
    """Split a batch body into its inner messages (layout above). An empty body gives ``[]``.

    Inner messages are parsed field by field; TOTALSIZE, MAGICCODE and BODYCRC are ignored as
    the Java broker ignores them.

    Raises:
        ProtocolError: an entry is cut short, its properties are not UTF-8, or there are more
            than limits.BATCH_MESSAGES_MAX_COUNT entries.
    """
    entries: list[BatchEntry] = []
    position = 0
    end = len(body)
    head_size = _BATCH_ENTRY_HEAD.size
    while position < end:
        if len(entries) >= limits.BATCH_MESSAGES_MAX_COUNT:
            raise ProtocolError(f"batch holds more than {limits.BATCH_MESSAGES_MAX_COUNT} messages")
        if position + head_size > end:
            raise ProtocolError(f"batch entry at {position} is cut short")
        _, _, _, flag, body_length = _BATCH_ENTRY_HEAD.unpack_from(body, position)
        body_offset = position + head_size
        properties_at = body_offset + body_length
        if body_length < 0 or properties_at + 2 > end:
            raise ProtocolError(f"batch entry at {position}: body length {body_length} too long")
        (properties_length,) = _UINT16.unpack_from(body, properties_at)
        properties_offset = properties_at + 2
        position = properties_offset + properties_length
        if position > end:
            raise ProtocolError(f"batch entry properties run past the end ({properties_length})")
        entries.append(
            BatchEntry(
                flag=flag,
                body=bytes(body[body_offset:properties_at]),
                properties=_utf8(body, properties_offset, properties_length, "batch properties"),
            )
        )
    return entries


def encode_batch_body(entries: Sequence[BatchEntry]) -> bytes:
    """The batch body of ``entries`` (layout above), MAGICCODE and BODYCRC written as 0.

    Raises:
        ProtocolError: more than limits.BATCH_MESSAGES_MAX_COUNT entries, properties over
            32767 UTF-8 bytes, or a flag outside int32.
    """
    if len(entries) > limits.BATCH_MESSAGES_MAX_COUNT:
        raise ProtocolError(f"batch holds more than {limits.BATCH_MESSAGES_MAX_COUNT} messages")
    pieces: list[bytes] = []
    for entry in entries:
        properties = entry.properties.encode("utf-8", "surrogatepass")
        if len(properties) > limits.MESSAGE_PROPERTIES_MAX_BYTES:
            raise ProtocolError(f"batch entry properties of {len(properties)} bytes are too long")
        total_size = BATCH_ENTRY_OVERHEAD_BYTES + len(entry.body) + len(properties)
        try:
            head = _BATCH_ENTRY_HEAD.pack(total_size, 0, 0, entry.flag, len(entry.body))
        except struct.error as error:
            raise ProtocolError(f"batch entry field out of range: {error}") from error
        pieces += (head, entry.body, _UINT16.pack(len(properties)), properties)
    return b"".join(pieces)
