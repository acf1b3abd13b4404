"""The stored record layout (docs/protocol.md §3.1) and the batch body (§2.2)."""

from __future__ import annotations

import contextlib
import struct
import zlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bolide.base import limits
from bolide.base.errors import ProtocolError
from bolide.protocol.address import SocketAddress
from bolide.protocol.compression import CompressionType, compress_body, decompress_body
from bolide.protocol.message import MessageSysFlag
from bolide.protocol.record import (
    BLANK_MARKER_BYTES,
    MESSAGE_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
    BatchEntry,
    body_crc,
    decode_batch_body,
    decode_properties,
    decode_record,
    decode_records,
    encode_batch_body,
    encode_blank_marker,
    encode_properties,
    encode_record,
    read_record_header,
    read_record_properties,
    record_size,
)


def _fields(**overrides: Any) -> dict[str, Any]:
    body = overrides.pop("body", b"hello")
    fields: dict[str, Any] = {
        "topic": b"TopicTest",
        "body": body,
        "flag": 7,
        "properties": b"TAGS\x01TagA\x02KEYS\x01k1 k2",
        "queue_id": 3,
        "queue_offset": 42,
        "commit_log_offset": 0x1234,
        "sys_flag": 0,
        "born_timestamp_ms": 1_700_000_000_000,
        "born_host": ("10.0.0.7", 51234),
        "store_timestamp_ms": 1_700_000_000_123,
        "store_host": ("127.0.0.1", 10911),
        "reconsume_times": 2,
        "prepared_transaction_offset": 0,
        "body_crc": body_crc(body),
    }
    fields.update(overrides)
    return fields


# --- golden layout -------------------------------------------------------------------------


def test_record_layout_golden_bytes() -> None:
    """Every field at the offset docs/protocol.md §3.1 gives, written independently of the codec."""
    record = encode_record(**_fields())
    crc = zlib.crc32(b"hello") & 0x7FFFFFFF
    properties = b"TAGS\x01TagA\x02KEYS\x01k1 k2"
    expected = b"".join(
        [
            (91 + 5 + 9 + len(properties)).to_bytes(4, "big"),  # 0 TOTALSIZE
            bytes.fromhex("DAA320A7"),  # 4 MAGICCODE
            crc.to_bytes(4, "big"),  # 8 BODYCRC
            (3).to_bytes(4, "big"),  # 12 QUEUEID
            (7).to_bytes(4, "big"),  # 16 FLAG
            (42).to_bytes(8, "big"),  # 20 QUEUEOFFSET
            (0x1234).to_bytes(8, "big"),  # 28 PHYSICALOFFSET
            (0).to_bytes(4, "big"),  # 36 SYSFLAG
            (1_700_000_000_000).to_bytes(8, "big"),  # 40 BORNTIMESTAMP
            bytes([10, 0, 0, 7]) + (51234).to_bytes(4, "big"),  # 48 BORNHOST
            (1_700_000_000_123).to_bytes(8, "big"),  # 56 STORETIMESTAMP
            bytes([127, 0, 0, 1]) + (10911).to_bytes(4, "big"),  # 64 STOREHOST
            (2).to_bytes(4, "big"),  # 72 RECONSUMETIMES
            (0).to_bytes(8, "big"),  # 76 PREPARED TRANSACTION OFFSET
            (5).to_bytes(4, "big") + b"hello",  # 84 BODY
            bytes([9]) + b"TopicTest",  # TOPIC
            len(properties).to_bytes(2, "big") + properties,  # PROPERTIES
        ]
    )
    assert record == expected
    assert len(record) == record_size(body_length=5, topic_length=9, properties_length=20)


def test_ipv6_hosts_set_their_flags_and_take_12_bytes_each() -> None:
    record = encode_record(**_fields(born_host=("::1", 1), store_host=("fe80::2", 10911)))
    (sys_flag,) = struct.unpack_from(">i", record, 36)
    assert sys_flag == MessageSysFlag.BORNHOST_V6 | MessageSysFlag.STOREHOST_V6
    assert len(record) == 24 + record_size(body_length=5, topic_length=9, properties_length=20)
    assert record_size(
        body_length=5, topic_length=9, properties_length=20, born_v6=True, store_v6=True
    ) == len(record)
    message, _ = decode_record(record)
    assert message.born_host == ("::1", 1)
    assert message.store_host == ("fe80::2", 10911)


def test_stale_v6_bits_from_the_caller_are_corrected() -> None:
    flags = MessageSysFlag.BORNHOST_V6 | MessageSysFlag.STOREHOST_V6 | MessageSysFlag.MULTI_TAGS
    record = encode_record(**_fields(sys_flag=flags))
    assert struct.unpack_from(">i", record, 36)[0] == MessageSysFlag.MULTI_TAGS


# --- round trips ---------------------------------------------------------------------------

_ipv4 = st.tuples(*[st.integers(0, 255)] * 4).map(lambda parts: ".".join(map(str, parts)))
_ipv6 = st.binary(min_size=16, max_size=16).map(
    lambda packed: __import__("ipaddress").IPv6Address(packed).compressed
)
_hosts: st.SearchStrategy[SocketAddress] = st.tuples(
    st.one_of(_ipv4, _ipv6), st.integers(0, 2**31 - 1)
)
_topics = st.text(min_size=1, max_size=127).filter(lambda t: len(t.encode("utf-8")) <= 127)
_property_text = st.text(max_size=20).filter(lambda s: "\x01" not in s and "\x02" not in s)
_properties = st.dictionaries(_property_text.filter(bool), _property_text, max_size=6)
_int32 = st.integers(-(2**31), 2**31 - 1)
_int64 = st.integers(-(2**63), 2**63 - 1)


@st.composite
def _records(draw: st.DrawFn) -> dict[str, Any]:
    body = draw(st.binary(max_size=300))
    compressed = draw(st.booleans())
    stored_body = compress_body(body) if compressed else body
    sys_flag = draw(st.sampled_from([0, 0x4, 0x8, 0xC, 0x80, 0x300])) | int(compressed)
    return {
        "topic": draw(_topics),
        "plain_body": body,
        "properties": draw(_properties),
        "fields": {
            "body": stored_body,
            "flag": draw(_int32),
            "queue_id": draw(_int32),
            "queue_offset": draw(_int64),
            "commit_log_offset": draw(_int64),
            "sys_flag": sys_flag,
            "born_timestamp_ms": draw(_int64),
            "born_host": draw(_hosts),
            "store_timestamp_ms": draw(_int64),
            "store_host": draw(_hosts),
            "reconsume_times": draw(_int32),
            "prepared_transaction_offset": draw(_int64),
            "body_crc": body_crc(stored_body),
        },
    }


def _encode(case: dict[str, Any]) -> bytes:
    return encode_record(
        topic=case["topic"].encode("utf-8"),
        properties=encode_properties(case["properties"]).encode("utf-8"),
        **case["fields"],
    )


def _v6_bits(case: dict[str, Any]) -> int:
    fields = case["fields"]
    bits = MessageSysFlag.BORNHOST_V6 if ":" in fields["born_host"][0] else 0
    return bits | (MessageSysFlag.STOREHOST_V6 if ":" in fields["store_host"][0] else 0)


@given(_records())
def test_encode_decode_identity(case: dict[str, Any]) -> None:
    record = _encode(case)
    fields = case["fields"]
    message, next_position = decode_record(record, verify_crc=True)
    assert next_position == len(record)
    assert message.topic == case["topic"]
    assert message.body == case["plain_body"]
    assert message.properties == case["properties"]
    for name in ("flag", "queue_id", "queue_offset", "commit_log_offset", "born_timestamp_ms"):
        assert getattr(message, name) == fields[name]
    for name in ("born_host", "store_timestamp_ms", "store_host", "reconsume_times"):
        assert getattr(message, name) == fields[name]
    assert message.prepared_transaction_offset == fields["prepared_transaction_offset"]
    assert message.sys_flag == fields["sys_flag"] | _v6_bits(case)
    assert message.body_crc == fields["body_crc"]
    assert message.store_size == len(record)
    # Without decompression the stored bytes come back untouched.
    raw, _ = decode_record(memoryview(record), decompress=False)
    assert raw.body == fields["body"]


@given(_records())
def test_header_agrees_with_the_full_decode(case: dict[str, Any]) -> None:
    record = b"\x00" * 13 + _encode(case)
    header = read_record_header(record, 13)
    message, end = decode_record(record, 13, decompress=False)
    assert header.end == end
    assert header.total_size == message.store_size
    assert header.topic == message.topic
    assert header.queue_id == message.queue_id
    assert header.queue_offset == message.queue_offset
    assert header.commit_log_offset == message.commit_log_offset
    assert header.sys_flag == message.sys_flag
    assert header.store_timestamp_ms == message.store_timestamp_ms
    assert record[header.body_offset : header.body_offset + header.body_length] == message.body
    assert body_crc(record[header.body_offset : header.body_offset + header.body_length]) == (
        header.body_crc
    )
    assert read_record_properties(record, header) == message.properties
    assert not header.is_blank


@settings(max_examples=50)
@given(st.lists(_records(), max_size=6))
def test_decode_records_over_concatenations(cases: list[dict[str, Any]]) -> None:
    body = b"".join(_encode(case) for case in cases)
    messages = decode_records(body)
    assert [m.topic for m in messages] == [case["topic"] for case in cases]
    assert [m.body for m in messages] == [case["plain_body"] for case in cases]
    assert [m.commit_log_offset for m in messages] == [
        case["fields"]["commit_log_offset"] for case in cases
    ]


def test_decode_records_of_empty_body() -> None:
    assert decode_records(b"") == []


# --- limits and errors ---------------------------------------------------------------------


def test_topic_of_128_bytes_is_refused() -> None:
    assert len(encode_record(**_fields(topic=b"t" * 127))) > 0
    with pytest.raises(ProtocolError):
        encode_record(**_fields(topic=b"t" * 128))
    # Bytes count, not characters: 64 two-byte characters are 128 bytes.
    with pytest.raises(ProtocolError):
        encode_record(**_fields(topic=("é" * 64).encode("utf-8")))


def test_properties_over_32767_bytes_are_refused() -> None:
    assert len(encode_record(**_fields(properties=b"a" * 32767))) > 32767
    with pytest.raises(ProtocolError):
        encode_record(**_fields(properties=b"a" * 32768))


@pytest.mark.parametrize(
    "override",
    [
        {"queue_id": 2**31},
        {"queue_offset": 2**63},
        {"flag": -(2**31) - 1},
        {"born_host": ("127.0.0.1", 2**31)},
        {"store_host": ("broker-a", 10911)},
        {"born_host": ("", 1)},
    ],
)
def test_out_of_range_fields_are_protocol_errors(override: dict[str, Any]) -> None:
    with pytest.raises(ProtocolError):
        encode_record(**_fields(**override))


def test_crc_is_verified_on_request() -> None:
    record = bytearray(encode_record(**_fields()))
    record[88] ^= 0x01  # first body byte
    message, _ = decode_record(record)
    assert message.body == b"iello"
    with pytest.raises(ProtocolError, match="CRC"):
        decode_record(record, verify_crc=True)


def test_bad_magic_is_refused() -> None:
    record = bytearray(encode_record(**_fields()))
    record[4:8] = b"\x00\x00\x00\x00"
    with pytest.raises(ProtocolError, match="magic"):
        decode_record(record)
    with pytest.raises(ProtocolError, match="magic"):
        read_record_header(record)


def test_every_truncation_is_a_protocol_error() -> None:
    record = encode_record(**_fields())
    for length in range(len(record)):
        with pytest.raises(ProtocolError):
            decode_record(record[:length])
        with pytest.raises(ProtocolError):
            read_record_header(record[:length])
        with pytest.raises(ProtocolError):
            decode_records(record + record[:length]) if length else decode_record(b"")


def test_inconsistent_lengths_are_refused() -> None:
    record = bytearray(encode_record(**_fields()))
    # Claim one more body byte: the lengths no longer add up to TOTALSIZE.
    struct.pack_into(">i", record, 84, 6)
    with pytest.raises(ProtocolError):
        decode_record(record)
    struct.pack_into(">i", record, 84, -1)
    with pytest.raises(ProtocolError):
        read_record_header(record)


@given(st.binary(max_size=400), st.integers(0, 20))
def test_random_bytes_raise_only_protocol_error(data: bytes, position: int) -> None:
    for decode in (
        lambda: decode_record(data, position),
        lambda: decode_records(data),
        lambda: read_record_header(data, position),
    ):
        with contextlib.suppress(ProtocolError):
            decode()


@given(_records(), st.data())
def test_mutated_records_raise_only_protocol_error(
    case: dict[str, Any], data: st.DataObject
) -> None:
    record = bytearray(_encode(case))
    for _ in range(data.draw(st.integers(1, 4))):
        index = data.draw(st.integers(0, len(record) - 1))
        record[index] = data.draw(st.integers(0, 255))
    with contextlib.suppress(ProtocolError):
        decode_records(record, verify_crc=data.draw(st.booleans()))
    with contextlib.suppress(ProtocolError):
        read_record_header(record)


def test_negative_position_is_refused() -> None:
    record = encode_record(**_fields())
    with pytest.raises(ProtocolError):
        decode_record(record, -len(record))


def test_non_utf8_topic_is_a_protocol_error() -> None:
    record = encode_record(**_fields(topic=b"\xff\xfe"))
    with pytest.raises(ProtocolError, match="UTF-8"):
        decode_record(record)


# --- compression ---------------------------------------------------------------------------


def test_compressed_body_is_inflated_and_flags_kept() -> None:
    plain = b"A" * 5000
    stored = compress_body(plain)
    assert stored[:1] == b"\x78"  # zlib header, as Java's Deflater writes
    record = encode_record(**_fields(body=stored, sys_flag=MessageSysFlag.COMPRESSED))
    message, _ = decode_record(record)
    assert message.body == plain
    assert message.sys_flag == MessageSysFlag.COMPRESSED
    assert message.body_crc == body_crc(stored)


@pytest.mark.parametrize("compression", [CompressionType.LZ4, CompressionType.ZSTD])
def test_lz4_and_zstd_bodies_are_inflated(compression: CompressionType) -> None:
    stored = compress_body(b"x" * 100, compression)
    record = encode_record(**_fields(body=stored, sys_flag=1 | compression.value))
    assert decode_record(record)[0].body == b"x" * 100
    message, _ = decode_record(record, decompress=False)
    assert message.body == stored
    zlib_stored = compress_body(b"x" * 100)  # a body that is not what its type bits say
    wrong = encode_record(**_fields(body=zlib_stored, sys_flag=1 | compression.value))
    with pytest.raises(ProtocolError, match=compression.name):
        decode_record(wrong)


def test_zlib_type_bits_are_accepted() -> None:
    stored = compress_body(b"x" * 100)
    record = encode_record(**_fields(body=stored, sys_flag=1 | 0x300))
    assert decode_record(record)[0].body == b"x" * 100


def test_broken_compressed_bodies_are_protocol_errors() -> None:
    stored = compress_body(b"x" * 1000)
    for body in (b"not zlib", stored[:-3], b""):
        record = encode_record(**_fields(body=body, sys_flag=MessageSysFlag.COMPRESSED))
        with pytest.raises(ProtocolError):
            decode_record(record)


def test_decompression_is_bounded() -> None:
    bomb = compress_body(b"\x00" * 100_000)
    assert decompress_body(bomb, max_bytes=100_000) == b"\x00" * 100_000
    with pytest.raises(ProtocolError, match="beyond"):
        decompress_body(bomb, max_bytes=99_999)
    assert limits.MESSAGE_BODY_DECOMPRESSED_MAX_BYTES >= limits.MESSAGE_BODY_MAX_BYTES


def test_compress_level_out_of_range() -> None:
    with pytest.raises(ProtocolError):
        compress_body(b"x", level=42)


# --- the blank marker -------------------------------------------------------------------


def test_blank_marker() -> None:
    segment = bytearray(100)
    segment[60:68] = encode_blank_marker(40)
    header = read_record_header(segment, 60)
    assert header.is_blank
    assert header.total_size == 40
    assert header.end == 100
    with pytest.raises(ProtocolError, match="blank"):
        decode_record(segment, 60)
    with pytest.raises(ProtocolError):
        read_record_header(segment, 61)
    with pytest.raises(ProtocolError):
        encode_blank_marker(BLANK_MARKER_BYTES - 1)
    # A marker claiming more than the buffer holds is refused.
    segment[60:68] = encode_blank_marker(41)
    with pytest.raises(ProtocolError):
        read_record_header(segment, 60)


def test_v2_magic_with_int16_topic_length_is_decoded() -> None:
    topic = "t" * 200
    v1 = encode_record(**_fields(topic=b"x"))
    fixed = bytearray(v1[:88])
    properties = b"TAGS\x01TagA\x02KEYS\x01k1 k2"
    tail = b"hello" + (200).to_bytes(2, "big") + topic.encode() + (20).to_bytes(2, "big")
    record = fixed + tail + properties
    struct.pack_into(">ii", record, 0, len(record), MESSAGE_MAGIC_CODE_V2)
    message, end = decode_record(record)
    assert end == len(record)
    assert message.topic == topic
    assert message.tags == "TagA"
    assert read_record_header(record).magic == MESSAGE_MAGIC_CODE_V2
    assert MESSAGE_MAGIC_CODE != MESSAGE_MAGIC_CODE_V2


# --- batch body ----------------------------------------------------------------------------


def test_batch_body_golden_bytes() -> None:
    body = encode_batch_body([BatchEntry(flag=5, body=b"ab", properties="TAGS\x01T")])
    expected = (
        (22 + 2 + 6).to_bytes(4, "big")
        + b"\x00" * 8
        + (5).to_bytes(4, "big")
        + (2).to_bytes(4, "big")
        + b"ab"
        + (6).to_bytes(2, "big")
        + b"TAGS\x01T"
    )
    assert body == expected


_entries = st.builds(
    BatchEntry,
    flag=_int32,
    body=st.binary(max_size=100),
    properties=st.text(max_size=40),
)


@given(st.lists(_entries, max_size=10))
def test_batch_body_round_trip(entries: list[BatchEntry]) -> None:
    assert decode_batch_body(encode_batch_body(entries)) == entries


def test_batch_decode_ignores_totalsize_magic_and_crc() -> None:
    body = bytearray(encode_batch_body([BatchEntry(1, b"x", "A\x01b"), BatchEntry(2, b"", "")]))
    body[0:12] = b"\xff" * 12  # garbage TOTALSIZE, MAGICCODE, BODYCRC of the first entry
    entries = decode_batch_body(body)
    assert entries == [BatchEntry(1, b"x", "A\x01b"), BatchEntry(2, b"", "")]
    assert decode_properties(entries[0].properties) == {"A": "b"}


def test_batch_count_is_bounded() -> None:
    one = encode_batch_body([BatchEntry(0, b"", "")])
    limit = limits.BATCH_MESSAGES_MAX_COUNT
    assert len(decode_batch_body(one * limit)) == limit
    with pytest.raises(ProtocolError, match="more than"):
        decode_batch_body(one * (limit + 1))
    with pytest.raises(ProtocolError, match="more than"):
        encode_batch_body([BatchEntry(0, b"", "")] * (limit + 1))


def test_batch_truncations_are_protocol_errors() -> None:
    body = encode_batch_body([BatchEntry(1, b"body", "A\x01b")])
    for length in range(1, len(body)):
        with pytest.raises(ProtocolError):
            decode_batch_body(body[:length])


def test_batch_encode_refuses_long_properties() -> None:
    with pytest.raises(ProtocolError):
        encode_batch_body([BatchEntry(0, b"", "a" * 32768)])
    with pytest.raises(ProtocolError):
        encode_batch_body([BatchEntry(2**31, b"", "")])


@given(st.binary(max_size=300))
def test_random_batch_bytes_raise_only_protocol_error(data: bytes) -> None:
    with contextlib.suppress(ProtocolError):
        decode_batch_body(data)
