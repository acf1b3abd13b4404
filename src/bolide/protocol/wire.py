"""The one home of the stored-record layout and the properties string (pure-Python twin).

Everything that knows where a field of a stored record sits, or how ``name\\x01value\\x02``
pairs are written and read, is here; the rest of Bolide imports it from here (``message`` and
``message_codec`` re-export the older names). The hot functions also exist compiled, in
``_wire_c.pyx`` beside this file, built by setup.py during the install; the last line of this
module swaps them in (:func:`bolide.base.compiled.install`) unless ``BOLIDE_PURE_PYTHON=1`` or
the extension was not built. Both are held to the same bytes and the same answers by
``tests/protocol/test_wire_twins.py``.

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

Properties string (docs/protocol.md §3.3): ``name \\x01 value`` pairs joined by ``\\x02``; Java
writes no separator after the last pair, C++ writes one.

Every malformed input raises :class:`~bolide.base.errors.ProtocolError`. Buffers are
bytes-like objects with one-byte items (``bytes``, ``bytearray``, ``mmap`` or a memoryview).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, NamedTuple, Protocol

from bolide.base import compiled
from bolide.base.errors import ProtocolError, invariant
from bolide.protocol.address import unpack_ip

Buffer = bytes | bytearray | memoryview

# --- magic codes and the sysFlag bits the layout depends on -----------------------------------

MESSAGE_MAGIC_CODE: Final = -626843481
"""0xDAA320A7 as a signed int32: the magic of every 4.x record (topic length in one byte)."""
MESSAGE_MAGIC_CODE_V2: Final = -626843477
"""0xDAA320AB: the 5.x magic whose topic length is an int16. Decoded, never written."""
BLANK_MAGIC_CODE: Final = -875286124
"""0xCBD43194: marks the unused tail of a commit-log segment (never sent on the wire)."""

SYS_FLAG_COMPRESSED: Final = 0x1
"""sysFlag bit: the stored body is compressed."""
SYS_FLAG_BORNHOST_V6: Final = 0x10
"""sysFlag bit: BORNHOST is 16 + 4 bytes."""
SYS_FLAG_STOREHOST_V6: Final = 0x20
"""sysFlag bit: STOREHOST is 16 + 4 bytes."""
_HOST_BITS: Final = SYS_FLAG_BORNHOST_V6 | SYS_FLAG_STOREHOST_V6

# --- properties string ------------------------------------------------------------------------

NAME_VALUE_SEPARATOR: Final = "\x01"
"""Between a property name and its value."""
PROPERTY_SEPARATOR: Final = "\x02"
"""Between two name/value pairs (Java writes none after the last pair, C++ writes one)."""


def encode_properties(properties: Mapping[str, str]) -> str:
    """The properties string of ``properties``, in the mapping's order (Java's layout).

    Raises:
        ProtocolError: a name is empty, or a name or value contains ``\\x01`` or ``\\x02``
            (the string could not be parsed back).
    """
    if not properties:
        return ""
    text = PROPERTY_SEPARATOR.join(
        [f"{name}{NAME_VALUE_SEPARATOR}{value}" for name, value in properties.items()]
    )
    count = len(properties)
    # One C-level count per separator checks every name and value at once.
    if text.count(NAME_VALUE_SEPARATOR) != count or text.count(PROPERTY_SEPARATOR) != count - 1:
        raise ProtocolError(_separator_complaint(properties))
    if "" in properties:
        raise ProtocolError("a property name is empty")
    return text


def _separator_complaint(properties: Mapping[str, str]) -> str:
    for name, value in properties.items():
        for separator in (NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR):
            if separator in name or separator in value:
                return f"property {name!r} contains the separator {separator!r}"
    return "a property contains a separator"


def decode_properties(text: str) -> dict[str, str]:
    """Parse a properties string written by Java, C++ or anyone else.

    Tolerant, as the Java parser is: a trailing separator and empty chunks are skipped, a chunk
    without ``\\x01`` or with an empty name is skipped, an empty value is kept as ``""``, a value
    keeps any further ``\\x01``, and a repeated name keeps its last value. Never raises.
    """
    result: dict[str, str] = {}
    if not text:
        return result
    for chunk in text.split(PROPERTY_SEPARATOR):
        name, separator, value = chunk.partition(NAME_VALUE_SEPARATOR)
        if separator and name:
            result[name] = value
    return result


def join_properties(first: str, second: str) -> str:
    """Append the properties string ``second`` to ``first`` (either may be empty).

    A separator is inserted only when ``first`` does not already end with one: the broker
    applies this rule when it appends a batch's own properties and CLUSTER to each inner
    message (docs/protocol.md §2.2).
    """
    if not first:
        return second
    if not second:
        return first
    if first.endswith(PROPERTY_SEPARATOR):
        return first + second
    return first + PROPERTY_SEPARATOR + second


def properties_are_plain(text: str, acted_on: tuple[str, ...]) -> bool:
    """Whether ``text`` may be edited as a string instead of decoded and encoded again: it
    names none of ``acted_on`` (not even as the end of a longer name), every pair has a name
    and exactly one ``\x01``, and there is no empty chunk — then decoding and encoding again
    would give back the same pairs. The broker's send path (docs/architecture.md, "Sending
    and storing")."""
    return _is_plain(text, tuple(f"{name}{NAME_VALUE_SEPARATOR}" for name in acted_on))


def _is_plain(text: str, acted_on_marks: tuple[str, ...]) -> bool:
    if not text:
        return True
    if any(mark in text for mark in acted_on_marks):
        return False
    pairs = text.count(PROPERTY_SEPARATOR) + (0 if text.endswith(PROPERTY_SEPARATOR) else 1)
    return (
        text.count(NAME_VALUE_SEPARATOR) == pairs
        and not text.startswith((NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR))
        and f"{PROPERTY_SEPARATOR}{NAME_VALUE_SEPARATOR}" not in text
        and PROPERTY_SEPARATOR * 2 not in text
    )


def edit_plain_properties(
    text: str, acted_on_marks: tuple[str, ...], drop_name: str, extra: str
) -> str | None:
    """The properties string a common send stores, in one call: None when ``text`` is not
    plain (:func:`properties_are_plain`; ``acted_on_marks`` are the acted-on names each
    followed by ``\x01``), else ``join_properties(without_property(text, drop_name), extra)``.
    The broker's send fast path (WAIT dropped, CLUSTER appended)."""
    if not _is_plain(text, acted_on_marks):
        return None
    return join_properties(without_property(text, drop_name), extra)


def without_property(text: str, name: str) -> str:
    """``text`` without its ``name`` pairs, the others untouched; ``text`` itself when it has
    none (a properties string, as :func:`properties_are_plain` accepts)."""
    if f"{name}{NAME_VALUE_SEPARATOR}" not in text:
        return text
    mark = property_mark(name)
    padded = PROPERTY_SEPARATOR + text
    at = padded.find(mark)
    while at >= 0:
        end = padded.find(PROPERTY_SEPARATOR, at + 1)
        padded = padded[:at] if end < 0 else padded[:at] + padded[end:]
        at = padded.find(mark, at)
    return padded[1:]


def property_mark(name: str) -> str:
    """What :func:`property_value` looks for to find ``name``: ``"\\x02NAME\\x01"``."""
    return f"{PROPERTY_SEPARATOR}{name}{NAME_VALUE_SEPARATOR}"


# The four properties the store reads without parsing the string (names as in PropertyKey).
TAGS_MARK: Final = property_mark("TAGS")
KEYS_MARK: Final = property_mark("KEYS")
UNIQ_KEY_MARK: Final = property_mark("UNIQ_KEY")
DELAY_MARK: Final = property_mark("DELAY")


def property_value(padded: str, mark: str) -> str | None:
    """The value of the last ``name=value`` pair whose name is in ``mark`` (``"\\x02NAME\\x01"``)
    in ``padded`` (a properties string with ``"\\x02"`` put in front), or None.

    Same answer as ``decode_properties(text).get(NAME)``: a pair starts after a separator, its
    name ends at the first ``\\x01``, its value runs to the next separator, the last pair of a
    repeated name wins.
    """
    at = padded.rfind(mark)
    if at < 0:
        return None
    start = at + len(mark)
    end = padded.find(PROPERTY_SEPARATOR, start)
    return padded[start:] if end < 0 else padded[start:end]


def store_properties(text: str) -> StoreProperties:
    """TAGS, KEYS, UNIQ_KEY and DELAY of the properties string ``text`` (None when absent):
    :func:`property_value` of each, in one call (the store's put path)."""
    padded = PROPERTY_SEPARATOR + text
    return (
        property_value(padded, TAGS_MARK),
        property_value(padded, KEYS_MARK) if KEYS_MARK in padded else None,
        property_value(padded, UNIQ_KEY_MARK),
        property_value(padded, DELAY_MARK),
    )


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
_INT32: Final = struct.Struct(">i")
_INT64: Final = struct.Struct(">q")
_UINT16: Final = struct.Struct(">H")
_QUEUE_AND_PHYSICAL_OFFSET: Final = struct.Struct(">qq")

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


def patch_queue_and_physical_offset(
    buffer: bytearray | memoryview, position: int, queue_offset: int, commit_log_offset: int
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


def patch_store_timestamp(
    buffer: bytearray | memoryview, position: int, store_timestamp_ms: int
) -> None:
    """Overwrite STORETIMESTAMP of the record at ``position`` (its place depends on the born host).

    Raises:
        ProtocolError: the record's fixed part is not inside ``buffer``.
    """
    try:
        (sys_flag,) = _INT32.unpack_from(buffer, position + SYS_FLAG_POSITION)
        offset = STORE_TIMESTAMP_POSITION + (
            IPV6_HOST_EXTRA_BYTES if sys_flag & SYS_FLAG_BORNHOST_V6 else 0
        )
        _INT64.pack_into(buffer, position + offset, store_timestamp_ms)
    except struct.error as error:
        raise ProtocolError(f"cannot patch the store timestamp at {position}: {error}") from error


# --- reading records --------------------------------------------------------------------------


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
    fixed = FIXED_PART_BY_HOSTS[(sys_flag >> 4) & 3]
    if total_size < fixed.size + 3:
        raise ProtocolError(f"record at {position} too short for its IPv6 hosts")
    return fixed.unpack_from(buffer, position), fixed.size


def _unpack_prefix(buffer: Buffer, position: int) -> tuple[int, int]:
    if position < 0:
        raise ProtocolError(f"negative record position {position}")
    try:
        total_size, magic = RECORD_PREFIX.unpack_from(buffer, position)
    except struct.error as error:
        raise ProtocolError(f"truncated record at {position}") from error
    return total_size, magic


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
    topic = utf8_text(buffer, topic_offset, topic_length, "topic")
    return RecordHeader(
        position, total_size, magic, stored_crc, queue_id, flag, queue_offset,
        commit_log_offset, sys_flag, born_timestamp_ms, store_timestamp_ms, reconsume_times,
        prepared_transaction_offset, body_offset, body_length, topic, properties_offset,
        properties_length,
    )  # fmt: skip


StoreProperties = tuple[str | None, str | None, str | None, str | None]
"""TAGS, KEYS, UNIQ_KEY and DELAY of a record (None when absent): what the store reads."""


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


class RecordDecodeError(ProtocolError):
    """A record of a pull body could not be decoded; the records before it could.

    ``index`` is the bad record's number in the body (0 for the first), ``position`` its byte
    offset, ``decoded`` the records decoded before it and ``next_position`` where the next
    record starts when the bad one's TOTALSIZE could be trusted (it lies inside the body and
    is at least the minimum record size), else None: a caller that flags bad records instead
    of failing the whole body (the consumer) resumes there.
    """

    def __init__(
        self,
        message: str,
        *,
        index: int,
        position: int,
        decoded: list[Any],
        next_position: int | None,
    ) -> None:
        super().__init__(message)
        self.index = index
        self.position = position
        self.decoded = decoded
        self.next_position = next_position


class MessageFactory(Protocol):
    """Builds one decoded message from the 16 fields of a record, in MessageExt's order."""

    def __call__(
        self, topic: str, body: bytes, flag: int, properties: dict[str, str], queue_id: int,
        queue_offset: int, commit_log_offset: int, sys_flag: int, born_timestamp_ms: int,
        born_host: tuple[str, int], store_timestamp_ms: int, store_host: tuple[str, int],
        reconsume_times: int, prepared_transaction_offset: int, body_crc: int, store_size: int,
    ) -> Any: ...  # fmt: skip


def decode_messages(
    buffer: Buffer, factory: MessageFactory | Callable[..., Any], verify_crc: bool = False
) -> list[Any]:
    """Decode every record of ``buffer`` (a PULL_MESSAGE or QUERY_MESSAGE body) in one pass,
    each through ``factory`` (MessageExt). Bodies are returned as stored (not inflated).

    Raises:
        RecordDecodeError: a record is malformed, cut short or (``verify_crc``) fails its
            CRC; it carries the record's index and the records decoded before it.
    """
    messages: list[Any] = []
    # Records of one body share a few hosts: render each address once per call.
    ip_cache: dict[bytes, str] = {}
    position = 0
    end = len(buffer)
    while position < end:
        try:
            message, next_position = _decode_message(
                buffer, position, factory, verify_crc, ip_cache
            )
        except ProtocolError as error:
            raise RecordDecodeError(
                str(error),
                index=len(messages),
                position=position,
                decoded=messages,
                next_position=_trusted_end(buffer, position),
            ) from error
        messages.append(message)
        position = next_position
    return messages


def _trusted_end(buffer: Buffer, position: int) -> int | None:
    """Where the record at ``position`` ends by its TOTALSIZE, if that can be believed."""
    if position + 4 > len(buffer):
        return None
    total_size: int = _INT32.unpack_from(buffer, position)[0]
    end = position + total_size
    if total_size < RECORD_OVERHEAD_BYTES or end > len(buffer):
        return None
    return end


def _decode_message(
    buffer: Buffer,
    position: int,
    factory: Callable[..., Any],
    verify_crc: bool,
    ip_cache: dict[bytes, str],
) -> tuple[Any, int]:
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
    born_text = ip_cache.get(born_ip)
    if born_text is None:
        born_text = ip_cache[born_ip] = unpack_ip(born_ip)
    store_text = ip_cache.get(store_ip)
    if store_text is None:
        store_text = ip_cache[store_ip] = unpack_ip(store_ip)
    properties_text = utf8_text(buffer, properties_offset, properties_length, "properties")
    # Positional: keyword construction of a 16-field dataclass costs twice as much.
    message = factory(
        utf8_text(buffer, topic_offset, topic_length, "topic"),
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
    _INT32.pack_into(view, position, records[0].size)
    return end


COMPILED_NAMES: Final = (
    "decode_properties",
    "edit_plain_properties",
    "read_record_header",
    "read_stored_record",
    "decode_messages",
    "write_records",
    "store_properties",
)
"""The functions ``_wire_c.pyx`` also provides, with the same signatures and answers."""

compiled.install(globals(), "bolide.protocol._wire_c", COMPILED_NAMES)
