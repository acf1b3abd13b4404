"""The stored-record layout (pure-Python twin): positions, header, size, CRC, write.

Everything that knows where a field of a stored record sits is here; the rest of Bolide
imports it through :mod:`bolide.protocol.record`, the record's one door. The hot functions
also exist compiled, in ``_layout.pyx`` beside this file, built by setup.py during the install;
the last line of this module swaps them in (:func:`bolide.base.compiled.install`) unless
``BOLIDE_PURE_PYTHON=1`` or the extension was not built. Both are held to the same bytes and
the same answers by ``tests/protocol/test_wire_twins.py``.

Stored / transferred record, big-endian. Offsets are for IPv4 hosts: an IPv6 born host (sysFlag
BORNHOST_V6) moves every field after it by 12 bytes, an IPv6 store host (STOREHOST_V6) too::

      offset  size  field
      ------  ----  ---------------------------------------------------------------
           0     4  TOTALSIZE          whole record, this field included
           4     4  MAGICCODE          MESSAGE_MAGIC_CODE (0xDAA320A7)
           8     4  BODYCRC            crc32(stored body) & 0x7FFFFFFF
          12     4  QUEUEID
          16     4  FLAG               the user flag
          20     8  QUEUEOFFSET        logical offset in the consume queue
          28     8  PHYSICALOFFSET     commit-log offset of this record
          36     4  SYSFLAG            MessageSysFlag
          40     8  BORNTIMESTAMP      ms
          48   4+4  BORNHOST           ip + port (int32); 16+4 with BORNHOST_V6
          56     8  STORETIMESTAMP     ms
          64   4+4  STOREHOST          ip + port (int32); 16+4 with STOREHOST_V6
          72     4  RECONSUMETIMES
          76     8  PREPARED TRANSACTION OFFSET
          84     4  BODY length n      --- end of the fixed part: 88 bytes, one struct ---
          88     n  BODY               as sent (deflated when SYSFLAG has COMPRESSED)
        88+n     1  TOPIC length t     t <= 127 (an int16 under the 5.x MAGIC_CODE_V2)
        89+n     t  TOPIC              UTF-8
      89+n+t     2  PROPERTIES length p, p <= 32767
      91+n+t     p  PROPERTIES         UTF-8 properties string (below)

Blank marker at the unused end of a commit-log segment (never on the wire): TOTALSIZE (the
bytes left in the segment), then MAGICCODE = BLANK_MAGIC_CODE (0xCBD43194).

The properties string is :mod:`bolide.protocol.record.properties`.

Every malformed input raises :class:`~bolide.base.errors.ProtocolError`. Buffers are
bytes-like objects with one-byte items (``bytes``, ``bytearray``, ``mmap`` or a memoryview).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from typing import Any, Final, NamedTuple, Protocol

from bolide.base import compiled
from bolide.base.errors import ProtocolError, invariant
from bolide.protocol.message import MessageSysFlag
from bolide.protocol.record.properties import (
    DELAY_MARK,
    KEYS_MARK,
    PROPERTY_SEPARATOR,
    TAGS_MARK,
    UNIQ_KEY_MARK,
    StoreProperties,
    property_value,
)

Buffer = bytes | bytearray | memoryview

# --- magic codes and the sysFlag bits the layout depends on -----------------------------------

MESSAGE_MAGIC_CODE: Final = -626843481
"""0xDAA320A7 as a signed int32: the magic of every 4.x record (topic length in one byte)."""
MESSAGE_MAGIC_CODE_V2: Final = -626843477
"""0xDAA320AB: the 5.x magic whose topic length is an int16. Decoded, never written."""
BLANK_MAGIC_CODE: Final = -875286124
"""0xCBD43194: marks the unused tail of a commit-log segment (never sent on the wire)."""

# Plain ints on the hot path: IntFlag arithmetic goes through the enum machinery (~10x slower).
SYS_FLAG_COMPRESSED: Final = int(MessageSysFlag.COMPRESSED)
"""sysFlag bit: the stored body is compressed."""
SYS_FLAG_BORNHOST_V6: Final = int(MessageSysFlag.BORNHOST_V6)
"""sysFlag bit: BORNHOST is 16 + 4 bytes."""
SYS_FLAG_STOREHOST_V6: Final = int(MessageSysFlag.STOREHOST_V6)
"""sysFlag bit: STOREHOST is 16 + 4 bytes."""
_HOST_BITS: Final = SYS_FLAG_BORNHOST_V6 | SYS_FLAG_STOREHOST_V6

# --- record layout ----------------------------------------------------------------------------


def _fixed_struct(born_v6: bool, store_v6: bool) -> struct.Struct:
    born_ip = "16s" if born_v6 else "4s"
    store_ip = "16s" if store_v6 else "4s"
    return struct.Struct(f">iiiiiqqiq{born_ip}iq{store_ip}iiqi")


FIXED_PART_BY_HOSTS: Final = (
    _fixed_struct(False, False),
    _fixed_struct(True, False),
    _fixed_struct(False, True),
    _fixed_struct(True, True),
)
"""The fixed part (TOTALSIZE .. BODY length), indexed by ``(sysFlag >> 4) & 3``: bit 0 is
BORNHOST_V6, bit 1 STOREHOST_V6."""
RECORD_PREFIX: Final = struct.Struct(">ii")
"""TOTALSIZE, MAGICCODE: the start of every record and of the blank marker."""
INT32: Final = struct.Struct(">i")
_UINT16: Final = struct.Struct(">H")

QUEUE_ID_POSITION: Final = 12
"""Offset of QUEUEID inside a record."""
QUEUE_OFFSET_POSITION: Final = 20
"""Offset of QUEUEOFFSET inside a record (PHYSICALOFFSET follows at 28)."""
PHYSICAL_OFFSET_POSITION: Final = 28
"""Offset of PHYSICALOFFSET inside a record."""
SYS_FLAG_POSITION: Final = 36
"""Offset of SYSFLAG inside a record."""
STORE_TIMESTAMP_POSITION: Final = 56
"""Offset of STORETIMESTAMP with an IPv4 born host (12 more with BORNHOST_V6)."""
RECORD_FIXED_BYTES: Final = FIXED_PART_BY_HOSTS[0].size
"""88: the fixed part of a record with IPv4 hosts, body length included."""
RECORD_OVERHEAD_BYTES: Final = RECORD_FIXED_BYTES + 1 + 2
"""91: a record with IPv4 hosts is this plus body, topic and properties lengths."""
IPV6_HOST_EXTRA_BYTES: Final = 12
"""An IPv6 host takes 16 + 4 bytes instead of 4 + 4."""
BLANK_MARKER_BYTES: Final = RECORD_PREFIX.size
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


# --- reading records --------------------------------------------------------------------------


def unpack_fixed(
    buffer: Buffer, position: int, total_size: int, magic: int
) -> tuple[tuple[Any, ...], int]:
    """The fixed part's fields and size, after checking magic and that the record fits
    (the first step of every reader of a whole record).

    Raises:
        ProtocolError: the magic code is unknown, or the record is too short or runs past
            the end of ``buffer``.
    """
    if magic != MESSAGE_MAGIC_CODE and magic != MESSAGE_MAGIC_CODE_V2:
        raise ProtocolError(f"bad magic code {magic & 0xFFFFFFFF:#010x} at {position}")
    if total_size < RECORD_OVERHEAD_BYTES:
        raise ProtocolError(f"record at {position} claims {total_size} bytes, below the minimum")
    if position + total_size > len(buffer):
        raise ProtocolError(
            f"record of {total_size} bytes at {position} runs past the end ({len(buffer)})"
        )
    (sys_flag,) = INT32.unpack_from(buffer, position + SYS_FLAG_POSITION)
    fixed = FIXED_PART_BY_HOSTS[(sys_flag >> 4) & 3]
    if total_size < fixed.size + 3:
        raise ProtocolError(f"record at {position} too short for its IPv6 hosts")
    return fixed.unpack_from(buffer, position), fixed.size


def unpack_prefix(buffer: Buffer, position: int) -> tuple[int, int]:
    """TOTALSIZE and MAGICCODE of the record (or blank marker) at ``position``.

    Raises:
        ProtocolError: ``position`` is negative or fewer than 8 bytes follow it.
    """
    if position < 0:
        raise ProtocolError(f"negative record position {position}")
    try:
        total_size, magic = RECORD_PREFIX.unpack_from(buffer, position)
    except struct.error as error:
        raise ProtocolError(f"truncated record at {position}") from error
    return total_size, magic


def tail_spans(
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


def utf8_text(buffer: Buffer, offset: int, length: int, what: str) -> str:
    """``buffer[offset:offset + length]`` as UTF-8 text.

    Raises:
        ProtocolError: the bytes are not UTF-8 (the message names ``what``).
    """
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
    total_size, magic = unpack_prefix(buffer, position)
    end = position + total_size
    if magic == BLANK_MAGIC_CODE:
        if total_size < BLANK_MARKER_BYTES or end > len(buffer):
            raise ProtocolError(f"blank marker of {total_size} bytes at {position} is invalid")
        return RecordHeader(position, total_size, magic, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                            end, 0, "", end, 0)  # fmt: skip
    fields, fixed_size = unpack_fixed(buffer, position, total_size, magic)
    (_, _, stored_crc, queue_id, flag, queue_offset, commit_log_offset, sys_flag,
     born_timestamp_ms, _, _, store_timestamp_ms, _, _, reconsume_times,
     prepared_transaction_offset, body_length) = fields  # fmt: skip
    body_offset = position + fixed_size
    spans = tail_spans(buffer, body_offset, body_length, magic, end)
    topic_offset, topic_length, properties_offset, properties_length = spans
    topic = utf8_text(buffer, topic_offset, topic_length, "topic")
    return RecordHeader(
        position, total_size, magic, stored_crc, queue_id, flag, queue_offset,
        commit_log_offset, sys_flag, born_timestamp_ms, store_timestamp_ms, reconsume_times,
        prepared_transaction_offset, body_offset, body_length, topic, properties_offset,
        properties_length,
    )  # fmt: skip


def read_stored_record(
    buffer: Buffer, position: int, commit_log_offset: int
) -> tuple[RecordHeader, StoreProperties]:
    """Recovery's check of the record at ``position``, which the log holds at
    ``commit_log_offset``: :func:`read_record_header`'s checks, then PHYSICALOFFSET equals
    ``commit_log_offset``, the body CRC matches, the properties are UTF-8 and, when there are
    any, do not end in a zero byte (puts refuse that, so zeros there are a tail that never
    reached the disk: the CRC does not cover the properties). Returns the header and the four
    properties the store reads, as ``decode_properties(text).get(name)`` gives them.

    Raises:
        ProtocolError: a check fails; the message says which.
    """
    header = read_record_header(buffer, position)
    if header.magic == BLANK_MAGIC_CODE:
        raise ProtocolError(f"blank marker at {commit_log_offset}, not a record")
    if header.commit_log_offset != commit_log_offset:
        raise ProtocolError(
            f"record at {commit_log_offset} names physical offset {header.commit_log_offset}"
        )
    body_at = header.body_offset
    if body_crc(buffer[body_at : body_at + header.body_length]) != header.body_crc:
        raise ProtocolError(f"body CRC mismatch in the record at {commit_log_offset}")
    properties_at, properties_length = header.properties_offset, header.properties_length
    text = utf8_text(buffer, properties_at, properties_length, "properties")
    if properties_length and buffer[properties_at + properties_length - 1] == 0:
        raise ProtocolError(f"record at {commit_log_offset} ends in zero bytes (torn tail)")
    padded = PROPERTY_SEPARATOR + text
    return header, (
        property_value(padded, TAGS_MARK),
        property_value(padded, KEYS_MARK),
        property_value(padded, UNIQ_KEY_MARK),
        property_value(padded, DELAY_MARK),
    )


# --- writing records --------------------------------------------------------------------------


class RecordSource(Protocol):
    """What :func:`write_records` reads of one record (the store's PreparedRecord)."""

    body: bytes | bytearray | memoryview
    body_crc: int
    flag: int
    properties_bytes: bytes
    size: int


def write_records(
    view: memoryview,
    position: int,
    records: Sequence[RecordSource],
    topic_tail: bytes,
    queue_id: int,
    first_queue_offset: int | None,
    commit_log_offset: int,
    sys_flag: int,
    born_timestamp_ms: int,
    born_ip: bytes,
    born_port: int,
    store_timestamp_ms: int,
    store_ip: bytes,
    store_port: int,
    reconsume_times: int,
    prepared_transaction_offset: int,
) -> int:
    """Write ``records`` end to end at ``view[position:]``; returns the end position.

    The caller reserved the room and checked every field (the store's RecordBuilder), so
    nothing here fails on input. ``commit_log_offset`` is the log offset of ``position``; queue
    offsets count up from ``first_queue_offset`` (None: no consume-queue entry, queue offset 0);
    ``topic_tail`` is the topic length byte and the topic. The BORNHOST_V6 / STOREHOST_V6 bits
    of ``sys_flag`` are set from the ip lengths. The first record's TOTALSIZE is written last,
    so a process killed during the copy leaves a zero length where the put began, which
    recovery reads as the end of the data.
    """
    sys_flag &= ~_HOST_BITS
    if len(born_ip) == 16:
        sys_flag |= SYS_FLAG_BORNHOST_V6
    if len(store_ip) == 16:
        sys_flag |= SYS_FLAG_STOREHOST_V6
    pack = FIXED_PART_BY_HOSTS[(sys_flag >> 4) & 3].pack
    pack_length = _UINT16.pack
    queue_offset = 0 if first_queue_offset is None else first_queue_offset
    queue_step = 0 if first_queue_offset is None else 1
    pieces: list[bytes | bytearray | memoryview] = []
    total_size = 0
    for record in records:
        body = record.body
        properties = record.properties_bytes
        pieces += (
            pack(
                record.size if total_size else 0, MESSAGE_MAGIC_CODE, record.body_crc,
                queue_id, record.flag, queue_offset, commit_log_offset, sys_flag,
                born_timestamp_ms, born_ip, born_port, store_timestamp_ms, store_ip,
                store_port, reconsume_times, prepared_transaction_offset, len(body),
            ),
            body,
            topic_tail,
            pack_length(len(properties)),
            properties,
        )  # fmt: skip
        total_size += record.size
        commit_log_offset += record.size
        queue_offset += queue_step
    data = b"".join(pieces)
    end = position + total_size
    if len(data) != total_size:
        invariant(False, f"records of {total_size} bytes encoded as {len(data)}")
    view[position:end] = data  # one copy into the mapping per put
    INT32.pack_into(view, position, records[0].size)
    return end


def encode_blank_marker(total_size: int) -> bytes:
    """The 8-byte marker that closes a segment whose last ``total_size`` bytes are unused.

    Raises:
        ProtocolError: ``total_size`` is below 8 or above int32.
    """
    if not BLANK_MARKER_BYTES <= total_size <= 0x7FFFFFFF:
        raise ProtocolError(f"a blank marker spans 8..2^31-1 bytes, not {total_size}")
    return RECORD_PREFIX.pack(total_size, BLANK_MAGIC_CODE)


COMPILED_NAMES: Final = ("read_record_header", "read_stored_record", "write_records")
"""The functions ``_layout.pyx`` also provides, with the same signatures and answers."""

compiled.install(globals(), "bolide.protocol.record._compiled", COMPILED_NAMES)
