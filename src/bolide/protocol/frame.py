"""Frame layer of the remoting protocol: split a byte stream into frames, write frame prefixes.

One frame on the wire (all integers big-endian)::

    +-----------------+--------------------------------+------------------+--------------+
    | total_length    | type_and_header_length         | header           | body         |
    | int32           | int32                          | header_length    | the rest     |
    | 4 + header +    | top byte: serialize type       | bytes: JSON text | (may be      |
    | body (excludes  |   (0 = JSON, 1 = ROCKETMQ)     | or the binary    |  empty)      |
    | itself)         | low 24 bits: header_length     | layout           |              |
    +-----------------+--------------------------------+------------------+--------------+
      offset 0          offset 4                         offset 8

``body_length = total_length - 4 - header_length``. Sans-IO: nothing here touches a socket.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

from bolide.base import compiled, limits
from bolide.base.errors import FrameTooLargeError, ProtocolError, invariant

__all__ = [
    "FRAME_PREFIX_BYTES",
    "FrameDecoder",
    "RawFrame",
    "SerializeType",
    "encode_frame_prefix",
    "split_frames",
]

FRAME_PREFIX_BYTES = 8
"""The total-length word plus the type-and-header-length word."""

_PREFIX = struct.Struct(">iI")
_TOTAL_LENGTH = struct.Struct(">i")
_TYPE_AND_HEADER_LENGTH = struct.Struct(">I")
_HEADER_LENGTH_MASK = 0xFFFFFF
_KNOWN_SERIALIZE_TYPES = frozenset((0, 1))
_TYPE_WORD_BYTES = 4
"""The type-and-header-length word counts in total_length."""


class SerializeType(enum.IntEnum):
    """How the header of a frame is encoded (the top byte of the type-and-header-length word)."""

    JSON = 0
    ROCKETMQ = 1


@dataclass(frozen=True, slots=True)
class RawFrame:
    """One frame as cut from the stream, header not yet parsed."""

    serialize_type: int
    """Top byte of the type-and-header-length word: a :class:`SerializeType` value."""
    header: bytes
    """The ``header_length`` header bytes."""
    body: bytes
    """The body bytes; ``b""`` when the frame has none."""


# RawFrame is built on every frame: its slot setters skip the ~0.1 µs per field that the frozen
# dataclass __init__ spends in object.__setattr__.
_new_frame = object.__new__
_set_serialize_type = vars(RawFrame)["serialize_type"].__set__
_set_header = vars(RawFrame)["header"].__set__
_set_body = vars(RawFrame)["body"].__set__


def encode_frame_prefix(serialize_type: int, header_length: int, body_length: int) -> bytes:
    """Return the 8 prefix bytes of a frame whose header and body have the given lengths (bytes).

    Raises :class:`~bolide.base.errors.InvariantViolationError` when the header length does not
    fit 24 bits, the serialize type one byte, or the total a signed int32: the caller built an
    impossible frame.
    """
    total_length = _TYPE_WORD_BYTES + header_length + body_length
    if not (
        0 <= header_length <= limits.FRAME_HEADER_LENGTH_MAX_BYTES
        and 0 <= serialize_type <= 0xFF
        and body_length >= 0
        and total_length <= 0x7FFFFFFF
    ):  # one test on the hot path; invariant() only to report which bound broke
        invariant(0 <= header_length <= limits.FRAME_HEADER_LENGTH_MAX_BYTES, "header 24 bits")
        invariant(0 <= serialize_type <= 0xFF, "serialize type is one byte")
        invariant(False, "frame length fits int32")
    return _PREFIX.pack(total_length, (serialize_type << 24) | header_length)


class FrameDecoder:
    """Incremental frame splitter: feed it bytes as they arrive, get whole frames back.

    Partial frames are kept between calls (:attr:`buffered_bytes`). A frame whose total size,
    the 4 length bytes included, exceeds ``max_frame_bytes`` (default
    :data:`~bolide.base.limits.FRAME_MAX_BYTES`, 16 MiB, as Java's frameMaxLength) raises
    :class:`~bolide.base.errors.FrameTooLargeError` as soon as its length word is read; a total
    length below 4, a header length above ``total_length - 4`` or an unknown serialize type raise
    :class:`~bolide.base.errors.ProtocolError` as soon as the 8 prefix bytes are read. After an
    error the decoder is broken: the peer's stream can no longer be trusted, so every later
    :meth:`feed` raises :class:`ProtocolError` too (the connection should be closed).
    """

    __slots__ = ("_buffer", "_error", "_max_frame_bytes")

    def __init__(self, max_frame_bytes: int = limits.FRAME_MAX_BYTES) -> None:
        invariant(
            FRAME_PREFIX_BYTES <= max_frame_bytes <= 0x7FFFFFFF,
            "max_frame_bytes must hold a frame prefix and fit int32",
        )
        self._max_frame_bytes = max_frame_bytes
        self._buffer = bytearray()
        self._error: ProtocolError | None = None

    @property
    def buffered_bytes(self) -> int:
        """Bytes received that do not yet form a whole frame."""
        return len(self._buffer)

    def feed(self, data: bytes | bytearray | memoryview) -> list[RawFrame]:
        """Consume ``data`` and return every frame it completes, in stream order.

        ``data`` is copied where kept, so the caller may reuse its buffer. Raises
        :class:`FrameTooLargeError` or :class:`ProtocolError` as described on the class.
        """
        if self._error is not None:
            raise ProtocolError("frame decoder is broken by an earlier error") from self._error
        if isinstance(data, memoryview) and data.format != "B":
            data = data.cast("B")
        if self._buffer:
            self._buffer += data
            source: bytes | bytearray | memoryview = self._buffer
        else:
            source = data
        frames: list[RawFrame] = []
        try:
            with memoryview(source) as view:
                consumed = self._split(view, frames)
        except ProtocolError as error:
            self._error = error
            self._buffer.clear()
            raise
        if source is self._buffer:
            # bytearray drops a prefix in amortised O(1): CPython only moves its start pointer.
            del self._buffer[:consumed]
        elif consumed < len(source):
            self._buffer += source[consumed:]
        return frames

    def _split(self, view: memoryview, frames: list[RawFrame]) -> int:
        """Append the whole frames found at the start of ``view``; return the bytes they span."""
        return split_frames(view, self._max_frame_bytes, frames)


def split_frames(view: memoryview, max_frame_bytes: int, frames: list[RawFrame]) -> int:
    """Append to ``frames`` the whole frames at the start of ``view``; return the bytes they
    span (a partial frame at the end is left). The checks and errors of :class:`FrameDecoder`.

    Raises:
        FrameTooLargeError: a frame's total size exceeds ``max_frame_bytes``.
        ProtocolError: a total length below 4, an unknown serialize type or a header longer
            than its frame.
    """
    position = 0
    end = len(view)
    max_total_length = max_frame_bytes - limits.FRAME_LENGTH_FIELD_BYTES
    while end - position >= limits.FRAME_LENGTH_FIELD_BYTES:
        (total_length,) = _TOTAL_LENGTH.unpack_from(view, position)
        if total_length > max_total_length:
            raise FrameTooLargeError(
                f"frame of {total_length + 4} bytes exceeds the limit of {max_frame_bytes} bytes"
            )
        if total_length < _TYPE_WORD_BYTES:
            raise ProtocolError(f"frame total length {total_length} is below 4")
        if end - position < FRAME_PREFIX_BYTES:
            break
        (type_word,) = _TYPE_AND_HEADER_LENGTH.unpack_from(view, position + 4)
        serialize_type = type_word >> 24
        header_length = type_word & _HEADER_LENGTH_MASK
        if serialize_type not in _KNOWN_SERIALIZE_TYPES:
            raise ProtocolError(f"unknown serialize type {serialize_type}")
        if header_length > total_length - _TYPE_WORD_BYTES:
            raise ProtocolError(
                f"header length {header_length} exceeds frame length {total_length} - 4"
            )
        frame_end = position + limits.FRAME_LENGTH_FIELD_BYTES + total_length
        if frame_end > end:
            break
        header_end = position + FRAME_PREFIX_BYTES + header_length
        frame = _new_frame(RawFrame)
        _set_serialize_type(frame, serialize_type)
        _set_header(frame, bytes(view[position + FRAME_PREFIX_BYTES : header_end]))
        _set_body(frame, bytes(view[header_end:frame_end]))
        frames.append(frame)
        position = frame_end
    return position


# The compiled twin (bolide/protocol/_frame.pyx), unless BOLIDE_PURE_PYTHON=1 or not built.
compiled.install(globals(), "bolide.protocol._compiled", ("split_frames",))
