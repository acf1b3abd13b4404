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
from collections.abc import Sequence
from typing import Any, Final

import pyarrow as pa
import pyarrow.compute as pc

from bolide.base.errors import ProtocolError
from bolide.protocol.address import unpack_ip
from bolide.protocol.bodies import MessageQueue
from bolide.protocol.message import (
    COMPRESSION_TYPE_MASK,
    MESSAGE_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
    NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
    MessageSysFlag,
    PropertyKey,
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
    """The fixed part, skipping (``x``) what rows do not use: BODYCRC, QUEUEID, FLAG,
    BORNHOST, PREPARED TRANSACTION OFFSET. Fields, in order: TOTALSIZE, MAGICCODE, QUEUEOFFSET,
    PHYSICALOFFSET, SYSFLAG, BORNTIMESTAMP, STORETIMESTAMP, STOREHOST ip, STOREHOST port,
    RECONSUMETIMES, BODY length."""
    born_host = "20x" if born_v6 else "8x"
    store_ip = "16s" if store_v6 else "4s"
    return struct.Struct(f">ii12xqqiq{born_host}q{store_ip}ii8xi")


# Indexed by (sysFlag >> 4) & 3, as in the codec: bit 0 BORNHOST_V6, bit 1 STOREHOST_V6.
_FIXED: Final = tuple(
    _fixed_struct(born, store) for store in (False, True) for born in (False, True)
)
_IPV4_FIXED: Final = _FIXED[0]
_HOSTS_V6: Final = int(MessageSysFlag.BORNHOST_V6 | MessageSysFlag.STOREHOST_V6)
_MINIMUM_RECORD_BYTES: Final = _IPV4_FIXED.size + 3
# Positions in the unpacked fixed part.
_QUEUE_OFFSET, _COMMIT_LOG_OFFSET, _BORN_MS, _STORE_MS = 2, 3, 5, 6
_STORE_IP, _STORE_PORT, _RECONSUME_TIMES = 7, 8, 9
_COMPRESSED: Final = int(MessageSysFlag.COMPRESSED)
_ZLIB_TYPES: Final = (0, int(MessageSysFlag.COMPRESSION_ZLIB))
_MICROS_PER_MS: Final = 1_000
_TAGS: Final = pa.scalar(PropertyKey.TAGS, pa.string())
_KEYS: Final = pa.scalar(PropertyKey.KEYS, pa.string())
_UNIQ_KEY: Final = pa.scalar(PropertyKey.UNIQ_KEY, pa.string())


class RowColumns:
    """The rows of one queue, gathered column by column until :meth:`take_batch`.

    Per record only the fixed part is unpacked in Python; bodies and properties strings are
    kept as views of the pull body and joined once per batch. The properties map, KEYS, TAGS
    and UNIQ_KEY are then cut out of the properties strings by Arrow compute kernels (same
    tolerance as :func:`bolide.protocol.message.decode_properties`: empty chunks and chunks
    without a name are skipped; a repeated name's last value wins for the columns).

    ``tag_set`` (empty: every tag) keeps only messages whose TAGS is one of them: brokers
    filter by tag hash, which can collide.
    """

    def __init__(self, queue: MessageQueue, tag_set: frozenset[str] = frozenset()) -> None:
        self.queue = queue
        self._tag_set = pa.array(sorted(tag_set), pa.string()) if tag_set else None
        self._ip_cache: dict[bytes, str] = {}
        self._reset()

    def _reset(self) -> None:
        self._fixed: list[tuple[Any, ...]] = []
        self._bodies: list[bytes | memoryview] = []
        self._body_ends: array.array[int] = array.array("i", [0])
        self._properties: list[memoryview] = []
        self._property_ends: array.array[int] = array.array("i", [0])

    def __len__(self) -> int:
        return len(self._fixed)

    @property
    def body_bytes(self) -> int:
        """Body bytes gathered so far (a record batch must stay under 2 GiB of them)."""
        return self._body_ends[-1]

    def add(self, body: bytes, stop_offset: int) -> int:
        """Append the records of a pull ``body`` whose queue offset is below ``stop_offset``
        (a pull may run past the range it was asked for when tags filter). Returns how many
        rows were appended (before the tag check of :meth:`take_batch`). The rows keep views
        of ``body`` until :meth:`take_batch`.

        Raises:
            ProtocolError: a record is malformed or cut short, its magic code unknown, or its
                body compressed with LZ4/ZSTD or not inflatable.
        """
        # The hot loop of a read (~1 µs a record): locals only, one unpack per record.
        view = memoryview(body)
        end = len(body)
        fixed_rows, bodies, body_ends = self._fixed, self._bodies, self._body_ends
        properties, property_ends = self._properties, self._property_ends
        added = position = 0
        while position < end:
            if position + _MINIMUM_RECORD_BYTES > end:
                raise ProtocolError(f"record at {position} of a pull body is cut short")
            fields = _IPV4_FIXED.unpack_from(body, position)
            fixed_size = _IPV4_FIXED.size
            if fields[4] & _HOSTS_V6:
                layout = _FIXED[(fields[4] >> 4) & 3]
                fields, fixed_size = layout.unpack_from(body, position), layout.size
            total_size, magic = fields[0], fields[1]
            record_end = position + total_size
            if magic != MESSAGE_MAGIC_CODE and magic != MESSAGE_MAGIC_CODE_V2:
                raise ProtocolError(f"bad magic code {magic & 0xFFFFFFFF:#010x} at {position}")
            if total_size < fixed_size + 3 or record_end > end or fields[10] < 0:
                raise ProtocolError(f"record at {position} has an impossible size {total_size}")
            if fields[_QUEUE_OFFSET] >= stop_offset:
                position = record_end
                continue
            body_at = position + fixed_size
            topic_at = body_at + fields[10]
            if magic == MESSAGE_MAGIC_CODE:
                properties_at = topic_at + 3 + body[topic_at]
            else:
                properties_at = topic_at + 4 + int.from_bytes(body[topic_at : topic_at + 2])
            if properties_at > record_end or (
                properties_at + ((body[properties_at - 2] << 8) | body[properties_at - 1])
                != record_end
            ):
                raise ProtocolError(f"record at {position}: field lengths do not add up")
            payload: bytes | memoryview = view[body_at:topic_at]
            if fields[4] & _COMPRESSED:
                payload = _inflate(bytes(payload), fields[4])
            fixed_rows.append(fields)
            bodies.append(payload)
            body_ends.append(body_ends[-1] + len(payload))
            properties.append(view[properties_at:record_end])
            property_ends.append(property_ends[-1] + record_end - properties_at)
            added += 1
            position = record_end
        return added

    def _offset_msg_id(self, fields: tuple[Any, ...]) -> str:
        store_ip = fields[_STORE_IP]
        host = self._ip_cache.get(store_ip)
        if host is None:
            host = self._ip_cache[store_ip] = unpack_ip(store_ip)
        return offset_message_id((host, fields[_STORE_PORT]), fields[_COMMIT_LOG_OFFSET])

    def take_batch(self) -> pa.RecordBatch:
        """The rows gathered so far as one record batch of :data:`ARROW_SCHEMA` (rows whose
        TAGS is outside the tag set left out); starts over.

        Raises ProtocolError when a properties string is not UTF-8.
        """
        count = len(self._fixed)
        queue = self.queue
        by_field = list(zip(*self._fixed, strict=True)) if count else [()] * 11
        # One copy of every body into the column's data buffer; offsets are int32.
        bodies = pa.Array.from_buffers(
            pa.binary(),
            count,
            [None, pa.py_buffer(self._body_ends), pa.py_buffer(b"".join(self._bodies))],
        )
        properties = _properties_map(
            pa.Array.from_buffers(
                pa.string(),
                count,
                [None, pa.py_buffer(self._property_ends), pa.py_buffer(b"".join(self._properties))],
            )
        )
        tags = pc.map_lookup(properties, _TAGS, "last")
        msg_ids = pc.map_lookup(properties, _UNIQ_KEY, "last")
        if msg_ids.null_count:
            msg_ids = pa.array(
                [
                    value if value is not None else self._offset_msg_id(self._fixed[row])
                    for row, value in enumerate(msg_ids.to_pylist())
                ],
                pa.string(),
            )
        columns = [
            pa.repeat(pa.scalar(queue.topic, pa.string()), count),
            pa.repeat(pa.scalar(queue.broker_name, pa.string()), count),
            pa.repeat(pa.scalar(queue.queue_id, pa.int32()), count),
            pa.array(by_field[_QUEUE_OFFSET], pa.int64()),
            msg_ids,
            pc.map_lookup(properties, _KEYS, "last"),
            tags,
            bodies,
            properties,
            _timestamps(by_field[_BORN_MS]),
            _timestamps(by_field[_STORE_MS]),
            pa.array(by_field[_RECONSUME_TIMES], pa.int32()),
        ]
        self._reset()
        batch = pa.RecordBatch.from_arrays(columns, schema=ARROW_SCHEMA)
        if self._tag_set is not None:
            batch = batch.filter(pc.fill_null(pc.is_in(tags, value_set=self._tag_set), False))
        return batch


def _timestamps(milliseconds: Sequence[int]) -> pa.Array:
    """Epoch milliseconds -> a timestamp column in microseconds (Spark's unit)."""
    return pc.multiply(pa.array(milliseconds, pa.int64()), _MICROS_PER_MS).cast(_TIMESTAMP)


def _properties_map(texts: pa.Array) -> pa.Array:
    """Properties strings (``name\\x01value`` pairs joined by ``\\x02``) -> a map column.

    Raises ProtocolError when a string is not UTF-8.
    """
    try:
        texts.validate(full=True)
    except pa.ArrowInvalid as error:
        raise ProtocolError(f"message properties are not UTF-8: {error}") from error
    chunks = pc.split_pattern(texts, PROPERTY_SEPARATOR)
    pairs = pc.split_pattern(pc.list_flatten(chunks), NAME_VALUE_SEPARATOR, max_splits=1)
    offsets = chunks.offsets
    # A chunk is a property when it has a separator and a name (Java producers write only
    # such chunks; C++ ones end with a separator, which leaves an empty chunk).
    valid = pc.and_(
        pc.equal(pc.list_value_length(pairs), 2),
        pc.not_equal(pc.utf8_length(pc.list_element(pairs, 0)), 0),
    )
    if not pc.all(valid).as_py():
        kept_before = pc.cumulative_sum(pc.cast(valid, pa.int32()))
        kept_before = pa.concat_arrays([pa.array([0], pa.int32()), kept_before])
        offsets = pc.take(kept_before, offsets)
        pairs = pairs.filter(valid)
    return pa.MapArray.from_arrays(offsets, pc.list_element(pairs, 0), pc.list_element(pairs, 1))


def _inflate(payload: bytes, sys_flag: int) -> bytes:
    compression_type = sys_flag & COMPRESSION_TYPE_MASK
    if compression_type not in _ZLIB_TYPES:
        raise ProtocolError(f"compression type {compression_type >> 8} (LZ4/ZSTD) unsupported")
    return decompress_body(payload)
