"""Stored records decoded into messages: one pass, one record, the per-record fallback, and
serving compressed records to clients that know only zlib (pure-Python twin of
``decode_messages``, compiled in ``_messages.pyx`` beside this file).

:func:`decode_messages` is the one pass over a pull (or query) body, each record built by a
factory (:class:`~bolide.protocol.message.MessageExt`); :func:`decode_record` and
:func:`decode_records` add inflating compressed bodies (the codecs are
:mod:`bolide.protocol.compression`). Import these names from :mod:`bolide.protocol.record`,
the record's one door.

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
from collections.abc import Callable, Iterable
from typing import Any, Final, Protocol

from bolide.base import compiled
from bolide.base.errors import ProtocolError
from bolide.protocol.address import unpack_ip
from bolide.protocol.compression import (
    CompressionType,
    compress_body,
    compressed_sys_flag,
    decompress_body,
)
from bolide.protocol.message import COMPRESSION_TYPE_MASK, MessageExt
from bolide.protocol.record.layout import (
    BLANK_MAGIC_CODE,
    INT32,
    RECORD_OVERHEAD_BYTES,
    SYS_FLAG_COMPRESSED,
    SYS_FLAG_POSITION,
    Buffer,
    RecordHeader,
    body_crc,
    read_record_header,
    tail_spans,
    unpack_fixed,
    unpack_prefix,
    utf8_text,
)
from bolide.protocol.record.properties import decode_properties
from bolide.protocol.record.reference import encode_record

_COMPRESSED: Final = SYS_FLAG_COMPRESSED
_ZLIB_TYPE_BITS: Final = (0, CompressionType.ZLIB.value)
_FIXED_PREFIX: Final = struct.Struct(">iiiiiqqi")
"""TOTALSIZE .. SYSFLAG: what an undecodable record still tells (40 bytes)."""


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
    total_size: int = INT32.unpack_from(buffer, position)[0]
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
    total_size, magic = unpack_prefix(buffer, position)
    if magic == BLANK_MAGIC_CODE:
        raise ProtocolError(f"blank marker at {position}, not a message")
    fields, fixed_size = unpack_fixed(buffer, position, total_size, magic)
    (_, _, stored_crc, queue_id, flag, queue_offset, commit_log_offset, sys_flag,
     born_timestamp_ms, born_ip, born_port, store_timestamp_ms, store_ip, store_port,
     reconsume_times, prepared_transaction_offset, body_length) = fields  # fmt: skip
    end = position + total_size
    body_offset = position + fixed_size
    spans = tail_spans(buffer, body_offset, body_length, magic, end)
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
    (:func:`decode_messages`, compiled).

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


def _inflate(body: bytes, sys_flag: int) -> bytes:
    # The codecs (zlib, LZ4 frame, ZSTD) and the cap live in bolide.protocol.compression.
    return decompress_body(body, sys_flag)


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
    (sys_flag,) = INT32.unpack_from(record, SYS_FLAG_POSITION)
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


COMPILED_NAMES: Final = ("decode_messages",)
"""The functions ``_messages.pyx`` also provides, with the same signatures and answers."""

compiled.install(globals(), "bolide.protocol.record._compiled", COMPILED_NAMES)
