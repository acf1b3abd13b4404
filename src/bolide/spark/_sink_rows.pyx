"""Compiled twin of :func:`bolide.spark.sink_rows.encode_batch_rows` (Cython), one piece
of the ``bolide.spark._compiled`` extension: Arrow columns into one SEND_BATCH_MESSAGE body in
one pass.

Same signature, bytes and answers as the pure-Python function, which is the reference (the
entry layout is drawn in bolide.protocol.record.batch); ``tests/spark/test_sink_rows.py``
holds them alike.
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from libc.string cimport memcpy

cdef enum:
    ENTRY_OVERHEAD = 22
    KEY_HEX_DIGITS = 12

cdef bytes _TAGS = b"TAGS\x01"
cdef bytes _KEYS = b"KEYS\x01"
cdef bytes _UNIQ_KEY = b"UNIQ_KEY\x01"
cdef bytes _WAIT_TRUE = b"\x02WAIT\x01true"
cdef const char* _HEX = b"0123456789ABCDEF"


cdef class _Column:
    """A binary column's buffers, held for the call."""
    cdef Py_buffer ends_view
    cdef Py_buffer data_view
    cdef bint has_ends
    cdef bint has_data
    cdef const int32_t* ends
    cdef const uint8_t* data
    cdef Py_ssize_t rows

    def __cinit__(self, object column):
        ends, data = column
        PyObject_GetBuffer(ends, &self.ends_view, PyBUF_SIMPLE)
        self.has_ends = True
        PyObject_GetBuffer(data, &self.data_view, PyBUF_SIMPLE)
        self.has_data = True
        self.ends = <const int32_t*>self.ends_view.buf
        self.data = <const uint8_t*>self.data_view.buf
        self.rows = self.ends_view.len // 4 - 1

    def __dealloc__(self):
        if self.has_ends:
            PyBuffer_Release(&self.ends_view)
        if self.has_data:
            PyBuffer_Release(&self.data_view)

    cdef inline Py_ssize_t length(self, Py_ssize_t row) noexcept nogil:
        return self.ends[row + 1] - self.ends[row]


cdef inline uint8_t* _put(uint8_t* out, const uint8_t* source, Py_ssize_t size) noexcept nogil:
    memcpy(out, source, size)
    return out + size


cdef inline Py_ssize_t _properties_size(
    Py_ssize_t key_size, Py_ssize_t tag_size, Py_ssize_t key_field_size
) noexcept nogil:
    """One row's properties bytes: TAGS and KEYS when the row has them (name, value, 0x02),
    then UNIQ_KEY (``key_size`` bytes of key) and WAIT=true."""
    cdef Py_ssize_t size = 9 + key_size + 10
    if tag_size:
        size += 5 + tag_size + 1
    if key_field_size:
        size += 5 + key_field_size + 1
    return size


def encode_batch_rows(bodies, tags, keys, bytes key_prefix, int64_t first_key_index,
                      Py_ssize_t start_row, Py_ssize_t max_messages, int64_t max_body_bytes):
    cdef _Column body_column = _Column(bodies)
    cdef _Column tag_column = _Column(tags)
    cdef _Column key_column = _Column(keys)
    cdef Py_ssize_t row_count = body_column.rows
    cdef Py_ssize_t prefix_size = len(key_prefix)
    cdef Py_ssize_t key_size = prefix_size + KEY_HEX_DIGITS
    cdef Py_ssize_t row = start_row
    cdef int64_t body_bytes = 0
    cdef Py_ssize_t total = 0
    cdef Py_ssize_t body_size, tag_size, key_field_size, properties_size
    # First pass: which rows, and how many bytes.
    while row < row_count and row - start_row < max_messages and body_bytes < max_body_bytes:
        body_size = body_column.length(row)
        tag_size = tag_column.length(row)
        key_field_size = key_column.length(row)
        properties_size = _properties_size(key_size, tag_size, key_field_size)
        total += ENTRY_OVERHEAD + body_size + properties_size
        body_bytes += body_size
        row += 1
    cdef Py_ssize_t stop_row = row
    cdef Py_ssize_t count = stop_row - start_row
    cdef bytes body = PyBytes_FromStringAndSize(NULL, total)
    cdef bytes unique_keys = PyBytes_FromStringAndSize(NULL, count * (key_size + 1) - 1 if count else 0)
    cdef uint8_t* out = <uint8_t*>PyBytes_AS_STRING(body)
    cdef uint8_t* key_out = <uint8_t*>PyBytes_AS_STRING(unique_keys)
    cdef const uint8_t* prefix = <const uint8_t*>PyBytes_AS_STRING(key_prefix)
    cdef const uint8_t* tags_name = <const uint8_t*>PyBytes_AS_STRING(_TAGS)
    cdef const uint8_t* keys_name = <const uint8_t*>PyBytes_AS_STRING(_KEYS)
    cdef const uint8_t* uniq_name = <const uint8_t*>PyBytes_AS_STRING(_UNIQ_KEY)
    cdef const uint8_t* wait_true = <const uint8_t*>PyBytes_AS_STRING(_WAIT_TRUE)
    cdef uint8_t* key_start
    cdef uint64_t index
    cdef int digit
    for row in range(start_row, stop_row):
        body_size = body_column.length(row)
        tag_size = tag_column.length(row)
        key_field_size = key_column.length(row)
        properties_size = _properties_size(key_size, tag_size, key_field_size)
        _put32(out, <int32_t>(ENTRY_OVERHEAD + body_size + properties_size))
        _put32(out + 4, 0)
        _put32(out + 8, 0)
        _put32(out + 12, 0)
        _put32(out + 16, <int32_t>body_size)
        out = _put(out + 20, body_column.data + body_column.ends[row], body_size)
        out[0] = <uint8_t>(properties_size >> 8)
        out[1] = <uint8_t>properties_size
        out += 2
        if tag_size:
            out = _put(out, tags_name, 5)
            out = _put(out, tag_column.data + tag_column.ends[row], tag_size)
            out[0] = 2
            out += 1
        if key_field_size:
            out = _put(out, keys_name, 5)
            out = _put(out, key_column.data + key_column.ends[row], key_field_size)
            out[0] = 2
            out += 1
        out = _put(out, uniq_name, 9)
        key_start = out
        out = _put(out, prefix, prefix_size)
        index = <uint64_t>(first_key_index + row)
        for digit in range(KEY_HEX_DIGITS - 1, -1, -1):
            out[digit] = _HEX[index & 15]
            index >>= 4
        out += KEY_HEX_DIGITS
        out = _put(out, wait_true, 10)
        if row > start_row:
            key_out[0] = 44  # ","
            key_out += 1
        key_out = _put(key_out, key_start, key_size)
    return body, unique_keys.decode("ascii"), stop_row
