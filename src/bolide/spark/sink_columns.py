"""Which rows of a record batch the sink may encode straight from their Arrow columns.

The sink's general path (bolide.spark.writer) makes a ``Message`` per row and lets the
producer check and encode it. Most DataFrames written to a topic are plain: a body, maybe
TAGS and KEYS, one topic, no user properties, no delay, no sharding key. For such a batch,
:func:`plain_rows` checks every row at once with Arrow compute kernels and hands over the
column buffers that :func:`bolide.spark.sink_rows.encode_batch_rows` turns into batch bodies
in one compiled pass — the bytes the general path sends for the same rows.

A batch with anything else (user properties, a delay, a sharding key, several topics, a null
or empty body, a body over the broker's limit, a separator in TAGS or KEYS, a topic name the
producer refuses) takes the general path, whole, so that its errors and their order stay
those of the general path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import pyarrow as pa
import pyarrow.compute as pc

from bolide.base import limits
from bolide.base.errors import InvalidMessageError
from bolide.client.producer.prepare import check_topic
from bolide.protocol.record import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR
from bolide.protocol.system_topics import is_retry_topic
from bolide.spark.sink_rows import ColumnBuffers

__all__ = ["PlainRows", "plain_rows"]

_FIXED_PROPERTIES_BYTES: Final = 64
"""Properties bytes of a plain row besides its TAGS and KEYS values (names, separators,
UNIQ_KEY, WAIT): at most 5 + 1 + 5 + 1 + 9 + 32 + 10 = 63."""
_ABSENT_UNLESS_NULL: Final = ("sharding_key", "deliver_at_ms")


@dataclass(frozen=True, slots=True)
class PlainRows:
    """A batch whose rows are all plain: its ``topic`` and the buffers of its columns (TAGS
    and KEYS with nulls made empty, which the general path leaves out alike)."""

    topic: str
    count: int
    bodies: ColumnBuffers
    tags: ColumnBuffers
    keys: ColumnBuffers

    def body_bytes(self, start_row: int, stop_row: int) -> int:
        ends = self.bodies[0]
        return int(ends[stop_row]) - int(ends[start_row])


def _column(batch: pa.RecordBatch, name: str) -> pa.Array | None:
    """The column the general path reads (``get_field_index``: a duplicated name is absent)."""
    index = batch.schema.get_field_index(name)
    return None if index < 0 else batch.column(index)


def _buffers(array: pa.Array) -> ColumnBuffers:
    """A binary or string array without nulls as (int32 end offsets, data)."""
    if pa.types.is_large_binary(array.type) or pa.types.is_large_string(array.type):
        array = array.cast(pa.binary())
    _, offsets, data = array.buffers()
    assert offsets is not None  # a binary array has its offsets buffer
    ends = memoryview(offsets)[: len(offsets) // 4 * 4].cast("i")
    return ends[array.offset : array.offset + len(array) + 1], (
        memoryview(data) if data is not None else b""
    )


def _text_column(array: pa.Array | None, count: int) -> tuple[ColumnBuffers, int] | None:
    """TAGS or KEYS: nulls made empty; None when a value holds a property separator. Also
    the longest value's byte length."""
    if array is None or array.null_count == count:
        return _buffers(pa.array([""] * count, pa.string())), 0
    array = pc.fill_null(array, "")
    for separator in (NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR):
        if pc.any(pc.match_substring(array, separator)).as_py():
            return None
    longest = pc.max(pc.binary_length(array)).as_py() or 0
    return _buffers(array), int(longest)


def _single_topic(array: pa.Array | None, default_topic: str | None) -> str | None:
    """The one topic every row goes to (a null or empty column value means the option), or
    None when rows go to several topics or a row has none."""
    if array is None:
        return default_topic
    topics = {value or default_topic for value in pc.unique(array).to_pylist()}
    if len(topics) != 1 or None in topics:
        return None
    (topic,) = topics
    return topic


def _usable_topic(topic: str) -> bool:
    """The producer sends batches to ``topic`` (else the general path raises its error)."""
    try:
        check_topic(topic)
    except InvalidMessageError:
        return False
    return not is_retry_topic(topic)


def _without_extras(batch: pa.RecordBatch, count: int) -> bool:
    """No row has user properties, a delay or a sharding key."""
    for name in _ABSENT_UNLESS_NULL:
        column = _column(batch, name)
        if column is not None and column.null_count != count:
            return False
    delay = _column(batch, "delay_level")
    if (
        delay is not None
        and delay.null_count != count
        and not pc.all(pc.equal(pc.fill_null(delay, 0), 0)).as_py()
    ):
        return False
    properties = _column(batch, "properties")
    return properties is None or properties.null_count == count or _all_empty(properties)


def _all_empty(maps: pa.MapArray) -> bool:
    """No non-null map of ``maps`` has an entry."""
    offsets = maps.offsets
    sizes = pc.subtract(offsets.slice(1), offsets.slice(0, len(maps)))
    return (pc.max(pc.if_else(maps.is_valid(), sizes, 0)).as_py() or 0) == 0


def _plain_bodies(array: pa.Array | None, count: int, max_message_bytes: int) -> pa.Array | None:
    if array is None or array.null_count:
        return None
    lengths = pc.min_max(pc.binary_length(array)).as_py()
    if lengths["min"] < 1 or lengths["max"] > max_message_bytes:
        return None
    return array.view(pa.binary()) if pa.types.is_string(array.type) else array


def plain_rows(
    batch: pa.RecordBatch, default_topic: str | None, max_message_bytes: int
) -> PlainRows | None:
    """``batch`` ready for the compiled encoder, or None when it needs the general path."""
    count = batch.num_rows
    if count == 0:
        return None
    bodies = _plain_bodies(_column(batch, "body"), count, max_message_bytes)
    if bodies is None or not _without_extras(batch, count):
        return None
    topic = _single_topic(_column(batch, "topic"), default_topic)
    if topic is None or not _usable_topic(topic):
        return None
    tags = _text_column(_column(batch, "tags"), count)
    keys = _text_column(_column(batch, "keys"), count)
    if tags is None or keys is None:
        return None
    longest_properties = tags[1] + keys[1] + _FIXED_PROPERTIES_BYTES
    if longest_properties > limits.MESSAGE_PROPERTIES_MAX_BYTES:
        return None
    return PlainRows(topic, count, _buffers(bodies), tags[0], keys[0])
