"""The binary message layouts: the stored record (docs/protocol.md §3.1) and the batch body (§2.2).

The stored record is what the commit log holds and what PULL_MESSAGE, VIEW_MESSAGE_BY_ID and
QUERY_MESSAGE carry, byte for byte, so the broker never re-encodes a message after storing it.
:func:`encode_record` is on the broker's send path: one precompiled struct packs the fixed part.

Every malformed input raises :class:`~bolide.base.errors.ProtocolError`, never ``struct.error``,
``IndexError``, ``UnicodeDecodeError`` or ``zlib.error``. Buffers are bytes-like objects with
one-byte items (``bytes``, ``bytearray``, ``mmap`` or a ``memoryview`` of them).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Protocol

from bolide.base import compiled, limits
from bolide.base.errors import ProtocolError, invariant
from bolide.protocol.address import SocketAddress, pack_ip
from bolide.protocol.compression import decompress_body
from bolide.protocol.message import (
    MessageExt,
    MessageSysFlag,
)
from bolide.protocol.wire import BLANK_MAGIC_CODE as BLANK_MAGIC_CODE

# The layout is drawn, and its constants defined, in bolide.protocol.wire (one home); these
# names stay importable from here, where they always were.
from bolide.protocol.wire import BLANK_MARKER_BYTES as BLANK_MARKER_BYTES
from bolide.protocol.wire import (
    FIXED_PART_BY_HOSTS,
    RECORD_PREFIX,
    RecordDecodeError,
    decode_messages,
    decode_properties,
    utf8_text,
)
from bolide.protocol.wire import IPV6_HOST_EXTRA_BYTES as IPV6_HOST_EXTRA_BYTES
from bolide.protocol.wire import MESSAGE_MAGIC_CODE as MESSAGE_MAGIC_CODE
from bolide.protocol.wire import PHYSICAL_OFFSET_POSITION as PHYSICAL_OFFSET_POSITION
from bolide.protocol.wire import QUEUE_OFFSET_POSITION as QUEUE_OFFSET_POSITION
from bolide.protocol.wire import RECORD_FIXED_BYTES as RECORD_FIXED_BYTES
from bolide.protocol.wire import RECORD_OVERHEAD_BYTES as RECORD_OVERHEAD_BYTES
from bolide.protocol.wire import SYS_FLAG_POSITION as SYS_FLAG_POSITION
from bolide.protocol.wire import RecordHeader as RecordHeader
from bolide.protocol.wire import body_crc as body_crc
from bolide.protocol.wire import patch_queue_and_physical_offset as patch_queue_and_physical_offset
from bolide.protocol.wire import patch_store_timestamp as patch_store_timestamp
from bolide.protocol.wire import read_record_header as read_record_header
from bolide.protocol.wire import record_size as record_size

Buffer = bytes | bytearray | memoryview
WritableBuffer = bytearray | memoryview


# The record layout is drawn in bolide.protocol.wire.
_FIXED_BY_HOSTS: Final = FIXED_PART_BY_HOSTS
_PREFIX: Final = RECORD_PREFIX
_UINT16: Final = struct.Struct(">H")
_ONE_BYTE: Final = tuple(bytes((length,)) for length in range(256))


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


# --- decoding ---------------------------------------------------------------------------------


def read_record_properties(buffer: Buffer, header: RecordHeader) -> dict[str, str]:
    """The properties of the record whose header is ``header``, parsed (see decode_properties).

    Raises:
        ProtocolError: the properties are not UTF-8.
    """
    text = utf8_text(buffer, header.properties_offset, header.properties_length, "properties")
    return decode_properties(text)


def decode_record(
    buffer: Buffer, position: int = 0, *, decompress: bool = True, verify_crc: bool = False
) -> tuple[MessageExt, int]:
    """Decode the record at ``position``; returns it and the position just after it.

    With ``decompress`` (default) a COMPRESSED body is inflated (zlib, LZ4 or ZSTD; at most
    limits.MESSAGE_BODY_DECOMPRESSED_MAX_BYTES); ``sys_flag`` keeps the stored bits either
    way. With ``verify_crc`` the stored body must match BODYCRC. Accepts the 5.x V2 magic.

    Raises:
        ProtocolError: the checks of :func:`read_record_header` fail, a blank marker sits at
            ``position``, the CRC differs (``verify_crc``), the compression type is unknown,
            or the body does not inflate.
    """
    header = read_record_header(buffer, position)
    if header.is_blank:
        raise ProtocolError(f"blank marker at {position}, not a message")
    with memoryview(buffer) as view:
        try:
            (message,) = decode_messages(view[position : header.end], MessageExt, verify_crc)
        except RecordDecodeError as error:
            raise ProtocolError(f"{error} (the record at {position})") from error
    if decompress and message.sys_flag & _COMPRESSED:
        message.body = _inflate(message.body, message.sys_flag)
    return message, header.end


def decode_records(
    buffer: Buffer, *, decompress: bool = True, verify_crc: bool = False
) -> list[MessageExt]:
    """Decode a concatenation of records (a PULL_MESSAGE or QUERY_MESSAGE body) in one pass
    (compiled, see bolide.protocol.wire.decode_messages).

    Raises:
        RecordDecodeError: (a ProtocolError) any record is malformed, the last one is cut
            short, or a compressed body does not inflate; it names the record's index and
            carries the records decoded before it, so a caller may flag that one record and
            go on from ``next_position``.
    """
    messages: list[MessageExt] = decode_messages(buffer, MessageExt, verify_crc)
    if decompress:
        for index, message in enumerate(messages):
            if message.sys_flag & _COMPRESSED:
                try:
                    message.body = _inflate(message.body, message.sys_flag)
                except ProtocolError as error:
                    position = sum(decoded.store_size for decoded in messages[:index])
                    raise RecordDecodeError(
                        str(error),
                        index=index,
                        position=position,
                        decoded=messages[:index],
                        next_position=position + message.store_size,
                    ) from error
    return messages


# --- compression --------------------------------------------------------------------------------


def _inflate(body: bytes, sys_flag: int) -> bytes:
    # The codecs (zlib, LZ4 frame, ZSTD) and the cap live in bolide.protocol.compression.
    return decompress_body(body, sys_flag)


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
                properties=utf8_text(
                    body, properties_offset, properties_length, "batch properties"
                ),
            )
        )
    return entries


class BatchEntryLike(Protocol):
    """What :func:`encode_batch_body` reads of an entry: a :class:`BatchEntry`, or any object
    with the same three attributes (the producer's prepared sends)."""

    @property
    def flag(self) -> int: ...

    @property
    def body(self) -> bytes: ...

    @property
    def properties(self) -> str: ...


def encode_batch_body(entries: Sequence[BatchEntryLike]) -> bytes:
    """The batch body of ``entries`` (layout above), MAGICCODE and BODYCRC written as 0.
    Compiled (``_batch_c.pyx``, same bytes and errors): the producer's natural batches run it
    for every message.

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


COMPILED_NAMES: Final = ("encode_batch_body",)
"""The functions ``_batch_c.pyx`` also provides, with the same signatures and answers."""

# The compiled twins, unless BOLIDE_PURE_PYTHON=1 or not built: the producer's batch body
# (bolide/protocol/_batch_c.pyx) and the broker's split of one (bolide/protocol/_wire_c.pyx).
compiled.install(globals(), "bolide.protocol._batch_c", COMPILED_NAMES)
compiled.install(globals(), "bolide.protocol._wire_c", ("decode_batch_body",))
