"""Pull bodies straight into Arrow columns: the rows of the Bolide source.

A PULL_MESSAGE body is a run of stored records (protocol.md §3.1; the layout is drawn, and
written, in :mod:`bolide.protocol.message_codec`). Reading at Spark speed means not building a
message object per record: :class:`RowColumns` unpacks each record's fixed part with one
precompiled struct and appends the fields a row needs to plain lists, which become Arrow arrays
once per record batch. The fixed part it reads (IPv4 hosts; an IPv6 host adds 12 bytes)::

    offset  size  field                  offset  size  field
         0     4  TOTALSIZE                  48     8  BORNHOST (ip, port)
         4     4  MAGICCODE                  56     8  STORETIMESTAMP (ms)
         8     4  BODYCRC                    64     8  STOREHOST (ip, port)
        12     4  QUEUEID                    72     4  RECONSUMETIMES
        16     4  FLAG                       76     8  PREPARED TRANSACTION OFFSET
        20     8  QUEUEOFFSET                84     4  BODY length n
        28     8  PHYSICALOFFSET             88     n  BODY, then TOPIC length (1 byte; 2 under
        36     4  SYSFLAG                                the 5.x magic), TOPIC, PROPERTIES
        40     8  BORNTIMESTAMP (ms)                     length (2 bytes), PROPERTIES

Rows and their columns (the source's schema, :data:`SPARK_SCHEMA_DDL`): the queue's topic,
broker name and queue id; the queue offset; ``msg_id`` (UNIQ_KEY, else the offset message
id); KEYS and TAGS; the body (inflated when the producer compressed it); every property; born
and store times; reconsume times.
"""

from __future__ import annotations

import array
import struct
from typing import Final

import pyarrow as pa

from bolide.base.errors import ProtocolError
from bolide.protocol.bodies import MessageQueue
from bolide.protocol.message import (
    COMPRESSION_TYPE_MASK,
    MESSAGE_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
    NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
    MessageSysFlag,
    PropertyKey,
    unpack_ip,
)
from bolide.protocol.message_codec import decompress_body
from bolide.protocol.msgid import offset_message_id

__all__ = ["ARROW_SCHEMA", "SPARK_SCHEMA_DDL", "RowColumns"]

SPARK_SCHEMA_DDL: Final = (
    "topic string, broker_name string, queue_id int, queue_offset long, msg_id string,"
    " keys string, tags string, body binary, properties map<string,string>,"
    " born_timestamp timestamp, store_timestamp timestamp, reconsume_times int"
)
"""The schema of the rows the source produces, as Spark DDL."""

_TIMESTAMP: Final = pa.timestamp("us", tz="UTC")
ARROW_SCHEMA: Final = pa.schema(
    [
        ("topic", pa.string()),
        ("broker_name", pa.string()),
        ("queue_id", pa.int32()),
        ("queue_offset", pa.int64()),
        ("msg_id", pa.string()),
        ("keys", pa.string()),
        ("tags", pa.string()),
        ("body", pa.binary()),
        ("properties", pa.map_(pa.string(), pa.string())),
        ("born_timestamp", _TIMESTAMP),
        ("store_timestamp", _TIMESTAMP),
        ("reconsume_times", pa.int32()),
    ]
)
"""The Arrow schema of the record batches ``read()`` yields: what Spark derives (in UTC) from
:data:`SPARK_SCHEMA_DDL`, field for field (Spark checks that they are equal)."""


def _fixed_struct(born_v6: bool, store_v6: bool) -> struct.Struct:
    born_ip = "16s" if born_v6 else "4s"
    store_ip = "16s" if store_v6 else "4s"
    return struct.Struct(f">iiiiiqqiq{born_ip}iq{store_ip}iiqi")


# Indexed by (sysFlag >> 4) & 3, as in the codec: bit 0 BORNHOST_V6, bit 1 STOREHOST_V6.
_FIXED: Final = tuple(
    _fixed_struct(born, store) for store in (False, True) for born in (False, True)
)
_SYS_FLAG: Final = struct.Struct(">i")
_SYS_FLAG_POSITION: Final = 36
_MINIMUM_RECORD_BYTES: Final = _FIXED[0].size + 3
_COMPRESSED: Final = int(MessageSysFlag.COMPRESSED)
_ZLIB_TYPES: Final = (0, int(MessageSysFlag.COMPRESSION_ZLIB))
_MICROS_PER_MS: Final = 1_000
_TAGS: Final = PropertyKey.TAGS
_KEYS: Final = PropertyKey.KEYS
_UNIQ_KEY: Final = PropertyKey.UNIQ_KEY


class RowColumns:
    """The rows of one queue, gathered column by column until :meth:`take_batch`.

    ``tag_set`` (empty: every tag) keeps only messages whose TAGS is one of them: brokers
    filter by tag hash, which can collide.
    """

    def __init__(self, queue: MessageQueue, tag_set: frozenset[str] = frozenset()) -> None:
        self.queue = queue
        self._tag_set = tag_set
        self._ip_cache: dict[bytes, str] = {}
        self._reset()

    def _reset(self) -> None:
        self.queue_offsets: list[int] = []
        self._msg_ids: list[str] = []
        self._keys: list[str | None] = []
        self._tags: list[str | None] = []
        self._bodies: list[bytes | memoryview] = []
        self._body_ends: array.array[int] = array.array("i", [0])
        self._property_ends: array.array[int] = array.array("i", [0])
        self._property_names: list[str] = []
        self._property_values: list[str] = []
        self._born_us: list[int] = []
        self._store_us: list[int] = []
        self._reconsume_times: list[int] = []

    def __len__(self) -> int:
        return len(self.queue_offsets)

    @property
    def body_bytes(self) -> int:
        """Body bytes gathered so far (a record batch must stay under 2 GiB of them)."""
        return self._body_ends[-1]

    def add(self, body: bytes, stop_offset: int) -> int:
        """Append the records of a pull ``body`` whose queue offset is below ``stop_offset``
        (a pull may run past the range it was asked for when tags filter). Returns how many
        rows were appended. The rows keep views of ``body`` until :meth:`take_batch`.

        Raises:
            ProtocolError: a record is malformed or cut short, its magic code unknown, or its
                body compressed with LZ4/ZSTD or not inflatable.
        """
        added = 0
        position = 0
        end = len(body)
        view = memoryview(body)
        while position < end:
            position, kept = self._add_one(body, view, position, end, stop_offset)
            added += kept
        return added

    def _add_one(
        self, body: bytes, view: memoryview, position: int, end: int, stop_offset: int
    ) -> tuple[int, int]:
        if position + _MINIMUM_RECORD_BYTES > end:
            raise ProtocolError(f"record at {position} of a pull body is cut short")
        (sys_flag,) = _SYS_FLAG.unpack_from(body, position + _SYS_FLAG_POSITION)
        fixed = _FIXED[(sys_flag >> 4) & 3]
        (total_size, magic, _, _, _, queue_offset, commit_log_offset, _, born_ms, _, _,
         store_ms, store_ip, store_port, reconsume_times, _, body_length) = fixed.unpack_from(
            body, position
        )  # fmt: skip
        record_end = position + total_size
        if magic != MESSAGE_MAGIC_CODE and magic != MESSAGE_MAGIC_CODE_V2:
            raise ProtocolError(f"bad magic code {magic & 0xFFFFFFFF:#010x} at {position}")
        if total_size < fixed.size + 3 or record_end > end or body_length < 0:
            raise ProtocolError(f"record at {position} has an impossible size {total_size}")
        if queue_offset >= stop_offset:
            return record_end, 0
        body_at = position + fixed.size
        topic_at = body_at + body_length
        topic_length_bytes = 1 if magic == MESSAGE_MAGIC_CODE else 2
        topic_length = int.from_bytes(body[topic_at : topic_at + topic_length_bytes], "big")
        properties_at = topic_at + topic_length_bytes + topic_length
        properties_length = int.from_bytes(body[properties_at : properties_at + 2], "big")
        if properties_at + 2 + properties_length != record_end:
            raise ProtocolError(f"record at {position}: field lengths do not add up")
        try:
            text = str(body[properties_at + 2 : record_end], "utf-8")
        except UnicodeDecodeError as error:
            raise ProtocolError(f"record at {position}: properties are not UTF-8") from error
        # decode_properties inlined (same tolerance: a chunk without \\x01 or name is skipped);
        # a dict per row would cost a third of the row's time.
        names: list[str] = []
        values: list[str] = []
        tags = keys = unique_key = None
        for chunk in text.split(PROPERTY_SEPARATOR):
            name, separator, value = chunk.partition(NAME_VALUE_SEPARATOR)
            if separator and name:
                names.append(name)
                values.append(value)
                if name == _TAGS:
                    tags = value
                elif name == _KEYS:
                    keys = value
                elif name == _UNIQ_KEY:
                    unique_key = value
        if self._tag_set and tags not in self._tag_set:
            return record_end, 0
        payload: bytes | memoryview = view[body_at:topic_at]
        if sys_flag & _COMPRESSED:
            payload = _inflate(bytes(payload), sys_flag)
        msg_id = unique_key or self._offset_msg_id(store_ip, store_port, commit_log_offset)
        self.queue_offsets.append(queue_offset)
        self._msg_ids.append(msg_id)
        self._keys.append(keys)
        self._tags.append(tags)
        self._bodies.append(payload)
        self._body_ends.append(self._body_ends[-1] + len(payload))
        self._property_names.extend(names)
        self._property_values.extend(values)
        self._property_ends.append(len(self._property_names))
        self._born_us.append(born_ms * _MICROS_PER_MS)
        self._store_us.append(store_ms * _MICROS_PER_MS)
        self._reconsume_times.append(reconsume_times)
        return record_end, 1

    def _offset_msg_id(self, store_ip: bytes, store_port: int, commit_log_offset: int) -> str:
        host = self._ip_cache.get(store_ip)
        if host is None:
            host = self._ip_cache[store_ip] = unpack_ip(store_ip)
        return offset_message_id((host, store_port), commit_log_offset)

    def take_batch(self) -> pa.RecordBatch:
        """The rows gathered so far as one record batch of :data:`ARROW_SCHEMA`; starts over.

        Raises ProtocolError when the bodies exceed the 2 GiB a binary column can hold (the
        caller takes a batch long before: see limits.SPARK_ARROW_BATCH_MAX_BYTES).
        """
        count = len(self.queue_offsets)
        queue = self.queue
        # One copy of every body into the column's data buffer; offsets are int32.
        bodies = pa.Array.from_buffers(
            pa.binary(),
            count,
            [None, pa.py_buffer(self._body_ends), pa.py_buffer(b"".join(self._bodies))],
        )
        properties = pa.MapArray.from_arrays(
            pa.Array.from_buffers(pa.int32(), count + 1, [None, pa.py_buffer(self._property_ends)]),
            pa.array(self._property_names, pa.string()),
            pa.array(self._property_values, pa.string()),
        )
        columns = [
            pa.repeat(pa.scalar(queue.topic, pa.string()), count),
            pa.repeat(pa.scalar(queue.broker_name, pa.string()), count),
            pa.repeat(pa.scalar(queue.queue_id, pa.int32()), count),
            pa.array(self.queue_offsets, pa.int64()),
            pa.array(self._msg_ids, pa.string()),
            pa.array(self._keys, pa.string()),
            pa.array(self._tags, pa.string()),
            bodies,
            properties,
            pa.array(self._born_us, _TIMESTAMP),
            pa.array(self._store_us, _TIMESTAMP),
            pa.array(self._reconsume_times, pa.int32()),
        ]
        self._reset()
        return pa.RecordBatch.from_arrays(columns, schema=ARROW_SCHEMA)


def _inflate(payload: bytes, sys_flag: int) -> bytes:
    compression_type = sys_flag & COMPRESSION_TYPE_MASK
    if compression_type not in _ZLIB_TYPES:
        raise ProtocolError(f"compression type {compression_type >> 8} (LZ4/ZSTD) unsupported")
    return decompress_body(payload)
