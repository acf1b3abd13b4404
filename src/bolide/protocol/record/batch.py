"""The batch body (docs/protocol.md §2.2): many messages in one SEND_MESSAGE (pure twin).

The producer writes it (:func:`encode_batch_body`), the broker splits it
(:func:`decode_batch_body`); both are compiled in ``_batch.pyx`` beside this file and swapped
in by the last line (:mod:`bolide.base.compiled`).
Import these names from :mod:`bolide.protocol.record`, the record's one door.

Every malformed input raises :class:`~bolide.base.errors.ProtocolError`.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Protocol

from bolide.base import compiled, limits
from bolide.base.errors import ProtocolError
from bolide.protocol.record.layout import Buffer, utf8_text

_UINT16: Final = struct.Struct(">H")

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
    Compiled (``_batch.pyx``, same bytes and errors): the producer's natural batches run it
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


COMPILED_NAMES: Final = ("encode_batch_body", "decode_batch_body")
"""The functions ``_batch.pyx`` also provides, with the same signatures and answers."""

# The compiled twins, unless BOLIDE_PURE_PYTHON=1 or not built.
compiled.install(globals(), "bolide.protocol.record._compiled", COMPILED_NAMES)
