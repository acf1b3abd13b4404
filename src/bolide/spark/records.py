"""Pull bodies straight into Arrow columns: the rows of the Bolide source.

A PULL_MESSAGE body is a run of stored records (docs/protocol.md §3.1; the layout is drawn, and
read, in :mod:`bolide.protocol.record.layout`). Reading at Spark speed means not building a Python
object per record: :func:`bolide.protocol.record.scan_rows` (compiled) appends each
record's fields to native column buffers — bodies and properties strings into one data buffer
each with int32 end offsets, Arrow's binary layout — which become Arrow arrays once per record
batch without copying again.

Rows and their columns (the source's schema, :data:`SPARK_SCHEMA_DDL`): the queue's topic,
broker name and queue id; the queue offset; ``msg_id`` (UNIQ_KEY, else the offset message
id); KEYS and TAGS; the body (inflated when the producer compressed it, with zlib, LZ4 or
ZSTD; kept as stored, with ``body_error`` saying why, when it does not inflate, so one bad
record never stalls the stream); every property; born
and store times; reconsume times.
"""

from __future__ import annotations

from typing import Final

import pyarrow as pa
import pyarrow.compute as pc

from bolide.base.errors import ProtocolError
from bolide.protocol.address import unpack_ip
from bolide.protocol.bodies import MessageQueue
from bolide.protocol.compression import decompress_body
from bolide.protocol.message import PropertyKey
from bolide.protocol.msgid import offset_message_id
from bolide.protocol.record import (
    COLUMN_INT64,
    NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
    STORE_HOST_ROW,
    RowSink,
    scan_rows,
)

__all__ = ["ARROW_SCHEMA", "SPARK_SCHEMA_DDL", "RowColumns"]

SPARK_SCHEMA_DDL: Final = (
    "topic string, broker_name string, queue_id int, queue_offset long, msg_id string,"
    " keys string, tags string, body binary, properties map<string,string>,"
    " born_timestamp timestamp, store_timestamp timestamp, reconsume_times int,"
    " body_error string"
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
        ("body_error", pa.string()),
    ]
)
"""The Arrow schema of the record batches ``read()`` yields: what Spark derives (in UTC) from
:data:`SPARK_SCHEMA_DDL`, field for field (Spark checks that they are equal)."""


# Arrow scalars made once: a Python value given to pyarrow is converted on every call, and the
# conversion tries ``import dateutil`` each time, which fails (a search of sys.path: ≈ 0.4 ms)
# where dateutil is not installed: 7 a record batch cost ≈ 0.3 µs a row.
_MICROS_PER_MS: Final = pa.scalar(1_000, pa.int64())
_PAIR_LENGTH: Final = pa.scalar(2, pa.int32())
_EMPTY_LENGTH: Final = pa.scalar(0, pa.int32())
_NAME_INDEX: Final = pa.scalar(0, pa.int32())
_VALUE_INDEX: Final = pa.scalar(1, pa.int32())
_FALSE: Final = pa.scalar(False, pa.bool_())
_TAGS: Final = pa.scalar(PropertyKey.TAGS, pa.string())
_KEYS: Final = pa.scalar(PropertyKey.KEYS, pa.string())
_UNIQ_KEY: Final = pa.scalar(PropertyKey.UNIQ_KEY, pa.string())


class RowColumns:
    """The rows of one queue, gathered column by column until :meth:`take_batch`.

    Per record the compiled scanner appends the fields to column buffers (no Python object a
    row); the properties map, KEYS, TAGS
    and UNIQ_KEY are then cut out of the properties strings by Arrow compute kernels (same
    tolerance as :func:`bolide.protocol.message.decode_properties`: empty chunks and chunks
    without a name are skipped; a repeated name's last value wins for the columns).

    ``tag_set`` (empty: every tag) keeps only messages whose TAGS is one of them: brokers
    filter by tag hash, which can collide.
    """

    def __init__(self, queue: MessageQueue, tag_set: frozenset[str] = frozenset()) -> None:
        self.queue = queue
        self._tag_set = pa.array(sorted(tag_set), pa.string()) if tag_set else None
        self._queue_scalars = (
            pa.scalar(queue.topic, pa.string()),
            pa.scalar(queue.broker_name, pa.string()),
            pa.scalar(queue.queue_id, pa.int32()),
        )
        self._ip_cache: dict[bytes, str] = {}
        self._sink = RowSink()
        self._body_errors: dict[int, str] = {}
        """Row -> why its body could not be inflated (rare: kept out of the hot columns)."""

    def __len__(self) -> int:
        return self._sink.count

    @property
    def body_bytes(self) -> int:
        """Body bytes gathered so far (a record batch must stay under 2 GiB of them)."""
        return len(self._sink.body_data)

    def add(self, body: bytes, stop_offset: int) -> int:
        """Append the records of a pull ``body`` whose queue offset is below ``stop_offset``
        (a pull may run past the range it was asked for when tags filter). Returns how many
        rows were appended (before the tag check of :meth:`take_batch`).

        Raises:
            ProtocolError: a record is malformed or cut short, or its magic code unknown (a
                body that does not inflate is kept as stored, with ``body_error``).
        """
        return scan_rows(body, stop_offset, self._sink, self._inflate)

    def _inflate(self, payload: bytes, sys_flag: int, row: int) -> bytes:
        """The inflated body, or (recorded for the row being added) the stored one."""
        try:
            return decompress_body(payload, sys_flag)
        except ProtocolError as error:
            self._body_errors[row] = str(error)
            return payload

    def _offset_msg_id(self, row: int) -> str:
        at = row * STORE_HOST_ROW.size
        ip_length, ip, port = STORE_HOST_ROW.unpack_from(self._sink.store_hosts, at)
        store_ip = ip[:ip_length]
        host = self._ip_cache.get(store_ip)
        if host is None:
            host = self._ip_cache[store_ip] = unpack_ip(store_ip)
        (commit_log_offset,) = COLUMN_INT64.unpack_from(self._sink.commit_log_offsets, row * 8)
        return offset_message_id((host, port), commit_log_offset)

    def take_batch(self) -> pa.RecordBatch:
        """The rows gathered so far as one record batch of :data:`ARROW_SCHEMA` (rows whose
        TAGS is outside the tag set left out); starts over.

        Raises ProtocolError when a properties string is not UTF-8.
        """
        sink, self._sink = self._sink, RowSink()
        body_errors, self._body_errors = self._body_errors, {}
        count = sink.count
        # The column buffers become Arrow buffers as they are (native order, Arrow's layout).
        bodies = pa.Array.from_buffers(
            pa.binary(), count, [None, pa.py_buffer(sink.body_ends), pa.py_buffer(sink.body_data)]
        )
        properties = _properties_map(
            pa.Array.from_buffers(
                pa.string(),
                count,
                [None, pa.py_buffer(sink.properties_ends), pa.py_buffer(sink.properties_data)],
            )
        )
        tags = pc.map_lookup(properties, _TAGS, "last")
        msg_ids = pc.map_lookup(properties, _UNIQ_KEY, "last")
        if msg_ids.null_count:
            self._sink = sink  # _offset_msg_id reads the hosts and offsets of these rows
            msg_ids = pa.array(
                [
                    value if value is not None else self._offset_msg_id(row)
                    for row, value in enumerate(msg_ids.to_pylist())
                ],
                pa.string(),
            )
            self._sink = RowSink()
        topic, broker_name, queue_id = self._queue_scalars
        columns = [
            pa.repeat(topic, count),
            pa.repeat(broker_name, count),
            pa.repeat(queue_id, count),
            _int_column(pa.int64(), count, sink.queue_offsets),
            msg_ids,
            pc.map_lookup(properties, _KEYS, "last"),
            tags,
            bodies,
            properties,
            _timestamps(count, sink.born_timestamps_ms),
            _timestamps(count, sink.store_timestamps_ms),
            _int_column(pa.int32(), count, sink.reconsume_times),
            pa.array([body_errors.get(row) for row in range(count)], pa.string())
            if body_errors
            else pa.nulls(count, pa.string()),
        ]
        batch = pa.RecordBatch.from_arrays(columns, schema=ARROW_SCHEMA)
        if self._tag_set is not None:
            batch = batch.filter(pc.fill_null(pc.is_in(tags, value_set=self._tag_set), _FALSE))
        return batch


def _int_column(kind: pa.DataType, count: int, values: bytearray) -> pa.Array:
    """A column straight over a native-order buffer of ``count`` integers."""
    return pa.Array.from_buffers(kind, count, [None, pa.py_buffer(values)])


def _timestamps(count: int, milliseconds: bytearray) -> pa.Array:
    """Epoch milliseconds (native int64 buffer) -> a timestamp column in microseconds."""
    column = _int_column(pa.int64(), count, milliseconds)
    return pc.multiply(column, _MICROS_PER_MS).cast(_TIMESTAMP)


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
        pc.equal(pc.list_value_length(pairs), _PAIR_LENGTH),
        pc.not_equal(pc.utf8_length(pc.list_element(pairs, _NAME_INDEX)), _EMPTY_LENGTH),
    )
    if not pc.all(valid).as_py():
        kept_before = pc.cumulative_sum(pc.cast(valid, pa.int32()))
        kept_before = pa.concat_arrays([pa.array([0], pa.int32()), kept_before])
        offsets = pc.take(kept_before, offsets)
        pairs = pairs.filter(valid)
    return pa.MapArray.from_arrays(
        offsets, pc.list_element(pairs, _NAME_INDEX), pc.list_element(pairs, _VALUE_INDEX)
    )
