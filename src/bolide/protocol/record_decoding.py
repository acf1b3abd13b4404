"""Decoding pulled records one by one, and serving compressed records to clients that know
only zlib. Above the record codec (:mod:`bolide.protocol.message_codec`), whose field scan it
calls; the codecs themselves are :mod:`bolide.protocol.compression`.

Per-record decoding (:func:`decode_pulled_records`): one record that cannot be decoded — an
unknown compression type, a body that does not inflate or inflates past the cap, fields that
do not add up — must not fail the whole pull, or the consumer would pull the same offset
forever. Every good record is delivered as usual; a bad one is handed over too, with its body
as stored and :attr:`~bolide.protocol.message.MessageExt.body_error` saying why, so the
application sees it (and may park it) and the queue moves on. Bolide does not dead-letter such
records on its own: broadcasting consumers have no dead-letter queue, and a record this client
cannot read may be perfectly readable to another (newer) client of the group.

Serving old clients (:func:`readable_by_zlib_only_client`): the C++ client 1.2.x ignores
sysFlag bits 8-10 and runs zlib on every compressed body — and aborts its process when that
fails, against Apache's broker too. So the broker hands it LZ4 and ZSTD records re-compressed
as zlib (type bits set to ZLIB), which it reads: a Java producer with ``compressType=LZ4`` and
a C++ consumer can share a topic.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import Final

from bolide.base.errors import ProtocolError
from bolide.protocol.compression import (
    CompressionType,
    compress_body,
    compressed_sys_flag,
    decompress_body,
)
from bolide.protocol.message import COMPRESSION_TYPE_MASK, MessageExt, MessageSysFlag
from bolide.protocol.message_codec import (
    body_crc,
    decode_record,
    decode_records,
    encode_record,
    read_record_header,
)

__all__ = ["decode_pulled_records", "inflate_message", "readable_by_zlib_only_client"]

_COMPRESSED: Final = int(MessageSysFlag.COMPRESSED)
_ZLIB_TYPE_BITS: Final = (0, CompressionType.ZLIB.value)
_SYS_FLAG: Final = struct.Struct(">i")
_SYS_FLAG_POSITION: Final = 36
"""Byte offset of SYSFLAG in a stored record (after size, magic, CRC, queue id, flag and the
two offsets)."""
_FIXED_PREFIX: Final = struct.Struct(">iiiiiqqi")
"""TOTALSIZE .. SYSFLAG: what an undecodable record still tells (40 bytes)."""


def inflate_message(message: MessageExt) -> None:
    """Inflate ``message.body`` in place when its sysFlag says it is compressed; when it
    cannot be, keep the body as stored and set ``body_error`` (never raises)."""
    if not message.sys_flag & _COMPRESSED:
        return
    try:
        message.body = decompress_body(message.body, message.sys_flag)
    except ProtocolError as error:
        message.body_error = str(error)


def decode_pulled_records(buffer: bytes | bytearray | memoryview) -> list[MessageExt]:
    """The records of a pull (or query) body, each decoded on its own: see the module
    docstring. Only a body whose record boundaries cannot be read raises.

    Raises:
        ProtocolError: a record's size or fixed fields are unreadable (the rest of the body
            cannot be located).
    """
    try:
        messages = decode_records(buffer, decompress=False)
    except ProtocolError:
        messages = list(_decode_one_by_one(buffer))
    for message in messages:
        if message.sys_flag & _COMPRESSED:  # inflate_message's own test: no call per message
            inflate_message(message)
    return messages


def _decode_one_by_one(buffer: bytes | bytearray | memoryview) -> Iterable[MessageExt]:
    """The slow path of :func:`decode_pulled_records`: a record that does not decode becomes
    a message with what its fixed fields say, its whole stored record as ``body`` and
    ``body_error`` set."""
    position, end = 0, len(buffer)
    while position < end:
        try:
            message, position = decode_record(buffer, position, decompress=False)
        except ProtocolError as error:
            message, position = _undecodable(buffer, position, error)
        yield message


def _undecodable(
    buffer: bytes | bytearray | memoryview, position: int, error: ProtocolError
) -> tuple[MessageExt, int]:
    if position + _FIXED_PREFIX.size > len(buffer):
        raise ProtocolError(f"record at {position} is cut short: {error}") from error
    fields = _FIXED_PREFIX.unpack_from(buffer, position)
    total_size, _, _, queue_id, flag, queue_offset, commit_log_offset, sys_flag = fields
    end = position + total_size
    if total_size < _FIXED_PREFIX.size or end > len(buffer):
        raise ProtocolError(f"record at {position} has an unreadable size: {error}") from error
    message = MessageExt(
        "",
        bytes(buffer[position:end]),
        flag,
        {},
        queue_id,
        queue_offset,
        commit_log_offset,
        sys_flag & ~_COMPRESSED,  # the body is the raw record, not a compressed body
        store_size=total_size,
        body_error=f"malformed record: {error}",
    )
    return message, end


# --- serving clients that know only zlib --------------------------------------------------------


def readable_by_zlib_only_client(record: memoryview) -> memoryview | bytes:
    """``record`` (one stored record) as a client that runs zlib on every compressed body can
    read it: unchanged unless LZ4 or ZSTD compressed, else re-encoded with the body
    re-compressed as zlib (sysFlag type bits ZLIB, BODYCRC of the new body). A record that
    cannot be re-encoded is left as it is (the client reports it)."""
    (sys_flag,) = _SYS_FLAG.unpack_from(record, _SYS_FLAG_POSITION)
    if not sys_flag & _COMPRESSED or (sys_flag & COMPRESSION_TYPE_MASK) in _ZLIB_TYPE_BITS:
        return record
    try:
        header = read_record_header(record)
        body = record[header.body_offset : header.body_offset + header.body_length]
        zlib_body = compress_body(decompress_body(body, sys_flag))
        message, _ = decode_record(record, decompress=False)
    except ProtocolError:
        return record
    properties_end = header.properties_offset + header.properties_length
    properties = record[header.properties_offset : properties_end]
    return encode_record(
        topic=message.topic.encode(),
        body=zlib_body,
        flag=message.flag,
        properties=bytes(properties),
        queue_id=message.queue_id,
        queue_offset=message.queue_offset,
        commit_log_offset=message.commit_log_offset,
        sys_flag=compressed_sys_flag(sys_flag, CompressionType.ZLIB),
        born_timestamp_ms=message.born_timestamp_ms,
        born_host=message.born_host,
        store_timestamp_ms=message.store_timestamp_ms,
        store_host=message.store_host,
        reconsume_times=message.reconsume_times,
        prepared_transaction_offset=message.prepared_transaction_offset,
        body_crc=body_crc(zlib_body),
    )
