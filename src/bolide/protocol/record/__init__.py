"""The stored record: its one door. Import every record name from here.

A stored record is what the commit log holds and what PULL_MESSAGE, VIEW_MESSAGE_BY_ID and
QUERY_MESSAGE carry byte for byte (docs/protocol.md §3.1), so the broker never re-encodes a
message after storing it. The rooms behind this door, each named for what it does:

* :mod:`~bolide.protocol.record.layout`: where every field sits (drawn in its docstring), the
  record header, sizes, the body CRC, the store's writer and the blank marker.
* :mod:`~bolide.protocol.record.properties`: the ``name\\x01value\\x02`` properties string.
* :mod:`~bolide.protocol.record.messages`: records decoded into messages, the per-record
  fallback of a pull and the re-encoding for clients that know only zlib.
* :mod:`~bolide.protocol.record.batch`: the batch body of a SEND_MESSAGE (§2.2).
* :mod:`~bolide.protocol.record.rows`: records cut into Spark's column buffers.
* :mod:`~bolide.protocol.record.reference`: the checked encoder of one whole record.

The message types themselves are :mod:`bolide.protocol.message`. An import contract
(pyproject.toml) lets nothing outside this package import a room directly.
"""

from __future__ import annotations

from bolide.protocol.record.batch import (
    BATCH_ENTRY_OVERHEAD_BYTES,
    BatchEntry,
    BatchEntryLike,
    decode_batch_body,
    encode_batch_body,
)
from bolide.protocol.record.layout import (
    BLANK_MAGIC_CODE,
    BLANK_MARKER_BYTES,
    FIXED_PART_BY_HOSTS,
    IPV6_HOST_EXTRA_BYTES,
    MESSAGE_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
    PHYSICAL_OFFSET_POSITION,
    QUEUE_ID_POSITION,
    QUEUE_OFFSET_POSITION,
    RECORD_FIXED_BYTES,
    RECORD_OVERHEAD_BYTES,
    RECORD_PREFIX,
    STORE_TIMESTAMP_POSITION,
    SYS_FLAG_BORNHOST_V6,
    SYS_FLAG_COMPRESSED,
    SYS_FLAG_POSITION,
    SYS_FLAG_STOREHOST_V6,
    Buffer,
    RecordHeader,
    RecordSource,
    body_crc,
    encode_blank_marker,
    read_record_header,
    read_stored_record,
    record_size,
    utf8_text,
    write_records,
)
from bolide.protocol.record.messages import (
    MessageFactory,
    RecordDecodeError,
    decode_messages,
    decode_pulled_records,
    decode_record,
    decode_records,
    inflate_message,
    read_record_properties,
    readable_by_zlib_only_client,
)
from bolide.protocol.record.properties import (
    DELAY_MARK,
    KEYS_MARK,
    NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
    TAGS_MARK,
    UNIQ_KEY_MARK,
    StoreProperties,
    decode_properties,
    edit_plain_properties,
    encode_properties,
    join_properties,
    properties_are_plain,
    property_mark,
    property_value,
    store_properties,
    without_property,
)
from bolide.protocol.record.reference import encode_record
from bolide.protocol.record.rows import COLUMN_INT64, STORE_HOST_ROW, RowSink, scan_rows

__all__ = [
    "BATCH_ENTRY_OVERHEAD_BYTES",
    "BLANK_MAGIC_CODE",
    "BLANK_MARKER_BYTES",
    "COLUMN_INT64",
    "DELAY_MARK",
    "FIXED_PART_BY_HOSTS",
    "IPV6_HOST_EXTRA_BYTES",
    "KEYS_MARK",
    "MESSAGE_MAGIC_CODE",
    "MESSAGE_MAGIC_CODE_V2",
    "NAME_VALUE_SEPARATOR",
    "PHYSICAL_OFFSET_POSITION",
    "PROPERTY_SEPARATOR",
    "QUEUE_ID_POSITION",
    "QUEUE_OFFSET_POSITION",
    "RECORD_FIXED_BYTES",
    "RECORD_OVERHEAD_BYTES",
    "RECORD_PREFIX",
    "STORE_HOST_ROW",
    "STORE_TIMESTAMP_POSITION",
    "SYS_FLAG_BORNHOST_V6",
    "SYS_FLAG_COMPRESSED",
    "SYS_FLAG_POSITION",
    "SYS_FLAG_STOREHOST_V6",
    "TAGS_MARK",
    "UNIQ_KEY_MARK",
    "BatchEntry",
    "BatchEntryLike",
    "Buffer",
    "MessageFactory",
    "RecordDecodeError",
    "RecordHeader",
    "RecordSource",
    "RowSink",
    "StoreProperties",
    "body_crc",
    "decode_batch_body",
    "decode_messages",
    "decode_properties",
    "decode_pulled_records",
    "decode_record",
    "decode_records",
    "edit_plain_properties",
    "encode_batch_body",
    "encode_blank_marker",
    "encode_properties",
    "encode_record",
    "inflate_message",
    "join_properties",
    "properties_are_plain",
    "property_mark",
    "property_value",
    "read_record_header",
    "read_record_properties",
    "read_stored_record",
    "readable_by_zlib_only_client",
    "record_size",
    "scan_rows",
    "store_properties",
    "utf8_text",
    "without_property",
    "write_records",
]
