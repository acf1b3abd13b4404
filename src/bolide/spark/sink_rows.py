"""Arrow columns straight into SEND_BATCH_MESSAGE bodies (pure-Python twin of
``_sink_rows.pyx``).

The sink's fast path (bolide.spark.writer) turns a run of rows into one batch body without a
Python object per row: :func:`encode_batch_rows` reads the bodies, TAGS and KEYS of the rows
from their Arrow buffers (int32 end offsets and one data buffer each: Arrow's binary layout)
and writes the entries the producer's ``encode_batch_body`` writes for the same messages
(layout in :mod:`bolide.protocol.record.batch`): per row TOTALSIZE, MAGICCODE 0, BODYCRC 0,
FLAG 0, the body, and the properties string ``TAGS``, ``KEYS``, ``UNIQ_KEY``, ``WAIT=true``
in that order (an empty TAGS or KEYS is left out, as ``Message`` leaves it out).

This module needs neither pyarrow nor pyspark: it reads any buffers. The compiled twin in
``_sink_rows.pyx`` replaces :func:`encode_batch_rows` at import (see :mod:`bolide.base.compiled`).
"""

from __future__ import annotations

import struct
from typing import Final

from bolide.base import compiled
from bolide.protocol.message import PropertyKey
from bolide.protocol.record import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR

__all__ = ["ENTRY_OVERHEAD_BYTES", "ColumnBuffers", "encode_batch_rows"]

ColumnBuffers = tuple[memoryview, bytes | memoryview]
"""One binary/string column: its int32 end offsets as a memoryview of format ``i`` (row
count + 1 values, from the column's first row) and its data buffer."""

_ENTRY_HEAD: Final = struct.Struct(">iiiii")
_UINT16: Final = struct.Struct(">H")
ENTRY_OVERHEAD_BYTES: Final = _ENTRY_HEAD.size + 2
"""22: a batch entry is this plus its body and properties lengths."""
_SEPARATOR: Final = PROPERTY_SEPARATOR.encode()
_TAGS: Final = (PropertyKey.TAGS + NAME_VALUE_SEPARATOR).encode()
_KEYS: Final = (PropertyKey.KEYS + NAME_VALUE_SEPARATOR).encode()
_UNIQ_KEY: Final = (PropertyKey.UNIQ_KEY + NAME_VALUE_SEPARATOR).encode()
_WAIT_TRUE: Final = (PROPERTY_SEPARATOR + PropertyKey.WAIT + NAME_VALUE_SEPARATOR + "true").encode()
_KEY_INDEX_HEX_DIGITS: Final = 12


def encode_batch_rows(
    bodies: ColumnBuffers,
    tags: ColumnBuffers,
    keys: ColumnBuffers,
    key_prefix: bytes,
    first_key_index: int,
    start_row: int,
    max_messages: int,
    max_body_bytes: int,
) -> tuple[bytes, str, int]:
    """The batch body of the rows from ``start_row`` on, the rows' UNIQ_KEYs joined by ``,``,
    and the row after the last one encoded.

    Rows are taken until ``max_messages`` rows or ``max_body_bytes`` body bytes are reached
    (the row reaching it included) or the column ends. Row ``r``'s UNIQ_KEY is
    ``key_prefix`` followed by ``first_key_index + r`` in 12 upper-case hex digits. The caller
    has checked the rows: bodies not empty, TAGS and KEYS without separators, properties under
    32767 bytes (the fast path's conditions in bolide.spark.writer).
    """
    body_ends, body_data = bodies
    tag_ends, tag_data = tags
    key_ends, key_data = keys
    row_count = len(body_ends) - 1
    pieces: list[bytes] = []
    unique_keys: list[str] = []
    row = start_row
    body_bytes = 0
    while row < row_count and row - start_row < max_messages and body_bytes < max_body_bytes:
        body = bytes(body_data[body_ends[row] : body_ends[row + 1]])
        tag = bytes(tag_data[tag_ends[row] : tag_ends[row + 1]])
        key = bytes(key_data[key_ends[row] : key_ends[row + 1]])
        unique_key = key_prefix + b"%0*X" % (_KEY_INDEX_HEX_DIGITS, first_key_index + row)
        properties = b"".join(
            [
                _TAGS + tag + _SEPARATOR if tag else b"",
                _KEYS + key + _SEPARATOR if key else b"",
                _UNIQ_KEY + unique_key + _WAIT_TRUE,
            ]
        )
        total_size = ENTRY_OVERHEAD_BYTES + len(body) + len(properties)
        pieces += (_ENTRY_HEAD.pack(total_size, 0, 0, 0, len(body)), body)
        pieces += (_UINT16.pack(len(properties)), properties)
        unique_keys.append(unique_key.decode("ascii"))
        body_bytes += len(body)
        row += 1
    return b"".join(pieces), ",".join(unique_keys), row


compiled.install(globals(), "bolide.spark._compiled", ("encode_batch_rows",))
