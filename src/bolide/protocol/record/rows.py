"""Stored records cut straight into Spark's column buffers (pure-Python twin of
``_rows.pyx``).

The Spark source turns stored records into Arrow columns without a Python object per row:
:func:`scan_rows` appends each record's fields to the native-endian buffers of a
:class:`RowSink` (int64 / int32 columns, and the bodies and properties strings as one data
buffer plus int32 end offsets each, Arrow's binary layout), which become Arrow arrays once per
batch. The layout read is the one drawn in :mod:`bolide.protocol.record.layout`; the compiled
twin in ``_rows.pyx`` beside this file replaces :func:`scan_rows` at import (see
:mod:`bolide.base.compiled`).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Final

from bolide.base import compiled
from bolide.base.errors import ProtocolError
from bolide.protocol.record.layout import (
    FIXED_PART_BY_HOSTS,
    MESSAGE_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
    SYS_FLAG_COMPRESSED,
    Buffer,
)

__all__ = ["COLUMN_INT64", "STORE_HOST_ROW", "RowSink", "scan_rows"]

_INT32: Final = struct.Struct("=i")
STORE_HOST_ROW: Final = struct.Struct("=i16si")
"""One row of ``RowSink.store_hosts``, 24 bytes: ip length (4 or 16), the ip bytes padded to
16, the port; native int32s."""
COLUMN_INT64: Final = struct.Struct("=q")
"""One value of an int64 column of a RowSink (native order)."""
_STORE_HOST: Final = STORE_HOST_ROW
_INT64: Final = COLUMN_INT64
_MINIMUM_RECORD_BYTES: Final = FIXED_PART_BY_HOSTS[0].size + 3


class RowSink:
    """Column buffers of scanned rows, native byte order (Arrow's), grown by :func:`scan_rows`.

    ``body_ends`` and ``properties_ends`` start with one 0 (int32 end offsets into
    ``body_data`` / ``properties_data``, Arrow's offsets buffer); every other column holds one
    value a row.
    """

    __slots__ = (
        "body_data",
        "body_ends",
        "born_timestamps_ms",
        "commit_log_offsets",
        "count",
        "properties_data",
        "properties_ends",
        "queue_offsets",
        "reconsume_times",
        "store_hosts",
        "store_timestamps_ms",
    )

    def __init__(self) -> None:
        self.count = 0
        self.body_data = bytearray()
        self.body_ends = bytearray(_INT32.pack(0))
        self.properties_data = bytearray()
        self.properties_ends = bytearray(_INT32.pack(0))
        self.queue_offsets = bytearray()
        self.commit_log_offsets = bytearray()
        self.born_timestamps_ms = bytearray()
        self.store_timestamps_ms = bytearray()
        self.reconsume_times = bytearray()
        self.store_hosts = bytearray()


def scan_rows(
    body: Buffer, stop_offset: int, sink: RowSink, inflate: Callable[[bytes, int, int], bytes]
) -> int:
    """Append the records of a pull ``body`` whose queue offset is below ``stop_offset`` to
    ``sink``; returns how many rows were appended. A COMPRESSED body is stored as
    ``inflate(stored body, sys_flag, row)`` gives it, ``row`` being the index in ``sink`` of
    the row being added (the compiled twin counts its rows in ``sink.count`` only at the end).

    Raises:
        ProtocolError: a record is malformed or cut short or its magic code unknown (rows of
            the records before it stay appended), or what ``inflate`` raises.
    """
    view = memoryview(body)
    end = len(body)
    added = position = 0
    while position < end:
        if position + _MINIMUM_RECORD_BYTES > end:
            raise ProtocolError(f"record at {position} of a pull body is cut short")
        (sys_flag,) = struct.unpack_from(">i", body, position + 36)
        layout = FIXED_PART_BY_HOSTS[(sys_flag >> 4) & 3]
        fields = layout.unpack_from(body, position) if position + layout.size <= end else None
        total_size, magic = struct.unpack_from(">ii", body, position)
        record_end = position + total_size
        if magic != MESSAGE_MAGIC_CODE and magic != MESSAGE_MAGIC_CODE_V2:
            raise ProtocolError(f"bad magic code {magic & 0xFFFFFFFF:#010x} at {position}")
        if fields is None or total_size < layout.size + 3 or record_end > end or fields[16] < 0:
            raise ProtocolError(f"record at {position} has an impossible size {total_size}")
        (_, _, _, _, _, queue_offset, commit_log_offset, _, born_ms, _, _, store_ms, store_ip,
         store_port, reconsume_times, _, body_length) = fields  # fmt: skip
        if queue_offset >= stop_offset:
            position = record_end
            continue
        body_at = position + layout.size
        topic_at = body_at + body_length
        if topic_at + 3 > record_end:
            raise ProtocolError(f"record at {position}: field lengths do not add up")
        if magic == MESSAGE_MAGIC_CODE:
            properties_at = topic_at + 3 + body[topic_at]
        else:
            properties_at = topic_at + 4 + int.from_bytes(body[topic_at : topic_at + 2])
        if properties_at > record_end or (
            properties_at + ((body[properties_at - 2] << 8) | body[properties_at - 1]) != record_end
        ):
            raise ProtocolError(f"record at {position}: field lengths do not add up")
        payload: bytes | memoryview = view[body_at:topic_at]
        if sys_flag & SYS_FLAG_COMPRESSED:
            payload = inflate(bytes(payload), sys_flag, sink.count)
        sink.body_data += payload
        sink.body_ends += _INT32.pack(len(sink.body_data))
        sink.properties_data += view[properties_at:record_end]
        sink.properties_ends += _INT32.pack(len(sink.properties_data))
        sink.queue_offsets += _INT64.pack(queue_offset)
        sink.commit_log_offsets += _INT64.pack(commit_log_offset)
        sink.born_timestamps_ms += _INT64.pack(born_ms)
        sink.store_timestamps_ms += _INT64.pack(store_ms)
        sink.reconsume_times += _INT32.pack(reconsume_times)
        sink.store_hosts += _STORE_HOST.pack(len(store_ip), store_ip, store_port)
        sink.count += 1
        added += 1
        position = record_end
    return added


compiled.install(globals(), "bolide.protocol.record._compiled", ("scan_rows",))
