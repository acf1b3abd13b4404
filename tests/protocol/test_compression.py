"""Body codecs (zlib, LZ4 frame, ZSTD) and per-record decoding of pulled bodies: one record
that cannot be decoded used to fail the whole pull, and the consumer re-pulled it forever."""

from __future__ import annotations

import lz4.frame
import pytest
import zstandard

from bolide.base import limits
from bolide.base.errors import ProtocolError
from bolide.protocol.compression import (
    CompressionType,
    compress_body,
    compressed_sys_flag,
    compression_type_of,
    decompress_body,
)
from bolide.protocol.message import MessageSysFlag
from bolide.protocol.record import (
    body_crc,
    decode_pulled_records,
    decode_record,
    encode_record,
    readable_by_zlib_only_client,
)

LZ4, ZSTD, ZLIB = CompressionType.LZ4, CompressionType.ZSTD, CompressionType.ZLIB


def _record(offset: int, body: bytes, sys_flag: int = 0, properties: bytes = b"") -> bytes:
    return encode_record(
        topic=b"T",
        body=body,
        flag=0,
        properties=properties,
        queue_id=0,
        queue_offset=offset,
        commit_log_offset=offset * 100,
        sys_flag=sys_flag,
        born_timestamp_ms=1,
        born_host=("127.0.0.1", 1),
        store_timestamp_ms=2,
        store_host=("127.0.0.1", 10911),
        reconsume_times=0,
        prepared_transaction_offset=0,
        body_crc=body_crc(body),
    )


def _compressed(offset: int, body: bytes, compression: CompressionType) -> bytes:
    return _record(offset, compress_body(body, compression), compressed_sys_flag(0, compression))


def test_the_sys_flag_bits_name_the_compression() -> None:
    assert compression_type_of(0) is None
    assert compression_type_of(0x1) is ZLIB  # before 4.9.4, and C++
    assert compression_type_of(0x101) is LZ4
    assert compression_type_of(0x201) is ZSTD
    assert compression_type_of(0x301) is ZLIB
    with pytest.raises(ProtocolError, match="unknown compression type 4"):
        compression_type_of(0x401)
    assert compressed_sys_flag(0x40, LZ4) == 0x141


@pytest.mark.parametrize("compression", list(CompressionType))
def test_bodies_round_trip_in_the_formats_java_writes(compression: CompressionType) -> None:
    body = b"a Java producer with compressType " * 200
    stored = compress_body(body, compression)
    assert len(stored) < len(body)
    if compression is LZ4:  # the frame format (LZ4FrameOutputStream), readable by lz4.frame
        assert stored[:4] == b"\x04\x22\x4d\x18" and lz4.frame.decompress(stored) == body
    if compression is ZSTD:
        assert zstandard.ZstdDecompressor().decompressobj().decompress(stored) == body
    assert decompress_body(stored, compressed_sys_flag(0, compression)) == body


@pytest.mark.parametrize("compression", list(CompressionType))
def test_inflating_is_bounded_and_a_cut_body_is_refused(compression: CompressionType) -> None:
    flag = compressed_sys_flag(0, compression)
    bomb = compress_body(b"\x00" * 100_000, compression)
    assert decompress_body(bomb, flag, max_bytes=100_000) == b"\x00" * 100_000
    with pytest.raises(ProtocolError, match="beyond"):
        decompress_body(bomb, flag, max_bytes=99_999)
    stored = compress_body(bytes(range(256)) * 40, compression)
    with pytest.raises(ProtocolError, match=compression.name):
        decompress_body(stored[: len(stored) // 2], flag)
    assert limits.MESSAGE_BODY_DECOMPRESSED_MAX_BYTES >= limits.MESSAGE_BODY_MAX_BYTES


def test_a_pull_with_an_undecodable_record_between_good_ones() -> None:
    broken_zstd = bytearray(compress_body(b"z" * 500, ZSTD))
    broken_zstd[6:12] = b"\xff" * 6
    body = b"".join(
        [
            _record(0, b"plain"),
            _compressed(1, b"lz4 " * 300, LZ4),
            _record(2, bytes(broken_zstd), compressed_sys_flag(0, ZSTD)),
            _record(3, b"x", sys_flag=0x401),  # a compression type nobody knows
            _compressed(4, b"zstd " * 300, ZSTD),
            _compressed(5, b"zlib " * 300, ZLIB),
        ]
    )
    messages = decode_pulled_records(body)
    assert [m.queue_offset for m in messages] == [0, 1, 2, 3, 4, 5]
    assert [m.body_error is None for m in messages] == [True, True, False, False, True, True]
    assert messages[1].body == b"lz4 " * 300 and messages[4].body == b"zstd " * 300
    assert messages[2].body == bytes(broken_zstd)  # handed over as stored
    assert "ZSTD" in (messages[2].body_error or "")
    assert "unknown compression type" in (messages[3].body_error or "")


def test_a_malformed_record_is_handed_over_and_the_next_ones_still_decode() -> None:
    bad_properties = _record(1, b"two", properties=b"\xff\xfe not utf-8")
    body = _record(0, b"one") + bad_properties + _record(2, b"three")
    messages = decode_pulled_records(body)
    assert [m.queue_offset for m in messages] == [0, 1, 2]
    assert [m.body for m in (messages[0], messages[2])] == [b"one", b"three"]
    assert messages[1].body == bad_properties and "malformed" in (messages[1].body_error or "")
    with pytest.raises(ProtocolError):
        decode_pulled_records(body[:30])  # no record boundary to go on from


def test_records_are_served_as_zlib_to_clients_that_know_only_zlib() -> None:
    for compression in (LZ4, ZSTD):
        record = _compressed(7, b"for the C++ client " * 50, compression)
        served = readable_by_zlib_only_client(memoryview(record))
        message, _ = decode_record(served, decompress=False)
        assert message.sys_flag & 0x701 == int(MessageSysFlag.COMPRESSION_ZLIB) | 1
        assert decompress_body(message.body, 0x1) == b"for the C++ client " * 50  # plain zlib
        assert (message.queue_offset, message.topic, message.body_crc) == (
            7,
            "T",
            body_crc(message.body),
        )
    untouched = memoryview(_compressed(8, b"zlib already", ZLIB))
    assert readable_by_zlib_only_client(untouched) is untouched
    plain = memoryview(_record(9, b"plain"))
    assert readable_by_zlib_only_client(plain) is plain
