"""FrameDecoder and encode_frame_prefix: every split, every malformed prefix, the size limit."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bolide.base import limits
from bolide.base.errors import FrameTooLargeError, InvariantViolationError, ProtocolError
from bolide.protocol.frame import FrameDecoder, RawFrame, SerializeType, encode_frame_prefix


def frame_bytes(serialize_type: int, header: bytes, body: bytes) -> bytes:
    return encode_frame_prefix(serialize_type, len(header), len(body)) + header + body


def test_prefix_matches_appendix_a() -> None:
    assert encode_frame_prefix(0, 111, 16).hex() == "000000830000006f"
    assert encode_frame_prefix(0, 95, 0).hex() == "000000630000005f"
    assert encode_frame_prefix(1, 33, 0).hex() == "0000002501000021"


def test_prefix_rejects_impossible_frames() -> None:
    with pytest.raises(InvariantViolationError):
        encode_frame_prefix(0, 1 << 24, 0)
    with pytest.raises(InvariantViolationError):
        encode_frame_prefix(256, 1, 0)
    with pytest.raises(InvariantViolationError):
        encode_frame_prefix(0, 1, 2**31)


def test_one_frame_in_one_feed() -> None:
    decoder = FrameDecoder()
    frames = decoder.feed(frame_bytes(1, b"head", b"body!"))
    assert frames == [RawFrame(SerializeType.ROCKETMQ, b"head", b"body!")]
    assert decoder.buffered_bytes == 0


def test_empty_body_and_empty_header() -> None:
    decoder = FrameDecoder()
    assert decoder.feed(frame_bytes(0, b"{}", b"")) == [RawFrame(0, b"{}", b"")]
    assert decoder.feed(frame_bytes(0, b"", b"")) == [RawFrame(0, b"", b"")]


def test_partial_frames_are_kept_byte_by_byte() -> None:
    stream = frame_bytes(0, b'{"code":1}', b"x" * 10) + frame_bytes(1, b"h", b"")
    decoder = FrameDecoder()
    frames: list[RawFrame] = []
    for index in range(len(stream)):
        frames += decoder.feed(stream[index : index + 1])
        if not frames:
            assert decoder.buffered_bytes == index + 1
    assert frames == [RawFrame(0, b'{"code":1}', b"x" * 10), RawFrame(1, b"h", b"")]
    assert decoder.buffered_bytes == 0


def test_accepts_bytearray_and_memoryview_and_copies_them() -> None:
    stream = bytearray(frame_bytes(0, b"hh", b"bb"))
    decoder = FrameDecoder()
    assert decoder.feed(memoryview(stream)[:5]) == []
    stream[:5] = b"\xff" * 5  # the caller reuses its buffer: the decoder must have copied
    frames = decoder.feed(bytearray(frame_bytes(0, b"hh", b"bb")[5:]))
    assert frames == [RawFrame(0, b"hh", b"bb")]


def test_frame_at_the_limit_passes_and_one_byte_more_fails() -> None:
    limit = 64
    header = b"h" * (limit - 8)
    assert FrameDecoder(limit).feed(frame_bytes(0, header, b"")) == [RawFrame(0, header, b"")]
    decoder = FrameDecoder(limit)
    with pytest.raises(FrameTooLargeError):
        decoder.feed(frame_bytes(0, header, b"b")[:4])  # raised on the length word alone


def test_default_limit_is_16_mib() -> None:
    decoder = FrameDecoder()
    too_large = struct.pack(">i", limits.FRAME_MAX_BYTES - 3)
    with pytest.raises(FrameTooLargeError):
        decoder.feed(too_large)
    just_fits = struct.pack(">iI", limits.FRAME_MAX_BYTES - 4, 0)
    assert FrameDecoder().feed(just_fits) == []


@pytest.mark.parametrize(
    ("prefix", "message"),
    [
        (struct.pack(">iI", 3, 0), "below 4"),
        (struct.pack(">iI", -1, 0), "below 4"),
        (struct.pack(">iI", 10, 7), "header length"),
        (struct.pack(">iI", 10, (2 << 24) | 2), "serialize type"),
    ],
)
def test_malformed_prefix_raises_and_breaks_the_decoder(prefix: bytes, message: str) -> None:
    decoder = FrameDecoder()
    with pytest.raises(ProtocolError, match=message):
        decoder.feed(prefix)
    assert decoder.buffered_bytes == 0
    with pytest.raises(ProtocolError, match="broken"):
        decoder.feed(frame_bytes(0, b"{}", b""))


def test_frames_before_an_error_in_the_same_feed_are_lost_with_the_connection() -> None:
    decoder = FrameDecoder()
    with pytest.raises(ProtocolError):
        decoder.feed(frame_bytes(0, b"ok", b"") + struct.pack(">iI", 2, 0))


frames_strategy = st.lists(
    st.builds(
        RawFrame,
        st.sampled_from([0, 1]),
        st.binary(max_size=40),
        st.binary(max_size=40),
    ),
    min_size=1,
    max_size=6,
)


@settings(max_examples=200)
@given(frames=frames_strategy, data=st.data())
def test_any_split_yields_the_same_frames(frames: list[RawFrame], data: st.DataObject) -> None:
    stream = b"".join(frame_bytes(f.serialize_type, f.header, f.body) for f in frames)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=8)))
    decoder = FrameDecoder()
    decoded: list[RawFrame] = []
    start = 0
    for cut in [*cuts, len(stream)]:
        decoded += decoder.feed(stream[start:cut])
        start = cut
    assert decoded == frames
    assert decoder.buffered_bytes == 0


@settings(max_examples=300)
@given(chunks=st.lists(st.binary(max_size=64), max_size=6))
def test_random_bytes_raise_only_protocol_errors(chunks: list[bytes]) -> None:
    decoder = FrameDecoder(max_frame_bytes=1024)
    for chunk in chunks:
        try:
            decoder.feed(chunk)
        except ProtocolError:
            return
