"""Compiled twin of the hot functions of :mod:`bolide.protocol.record.layout` (Cython),
one piece of the ``bolide.protocol.record._compiled`` extension (``_compiled.pyx``
includes it): the record header read, recovery's record check and the store's writer.

Same names, signatures, answers and errors as the pure-Python functions there, which are the
reference (the layout is drawn in record/layout.py's docstring; the offsets below are that
drawing's). ``tests/protocol/test_wire_twins.py`` holds the two to the same bytes and answers.
Buffers are read through the buffer protocol, fields with explicit big-endian loads. This
piece comes first: the declarations the other pieces of the record share are here.
"""

from cpython.buffer cimport (
    PyBUF_SIMPLE,
    PyBUF_WRITABLE,
    PyBuffer_Release,
    PyObject_GetBuffer,
)
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE, PyByteArray_Resize
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.string cimport memcmp, memcpy, memset

import zlib

from bolide.base.errors import ProtocolError, invariant
from bolide.protocol.address import unpack_ip

# RecordHeader and RecordDecodeError live in record/layout.py and record/messages.py, whose
# last lines import this module:
# looked up at first use, so that either module may be imported first.
cdef object RecordHeader = None
cdef object RecordDecodeError = None


cdef int _load_wire() except -1:
    global RecordHeader, RecordDecodeError
    if RecordHeader is None:
        from bolide.protocol.record import layout, messages
        RecordHeader = layout.RecordHeader
        RecordDecodeError = messages.RecordDecodeError
    return 0

cdef extern from "Python.h":
    object PyMemoryView_FromMemory(char* memory, Py_ssize_t size, int flags)
    int PyBUF_READ
    Py_ssize_t PyUnicode_GET_LENGTH(object text)
    int PyUnicode_KIND(object text)
    void* PyUnicode_DATA(object text)
    Py_UCS4 PyUnicode_READ(int kind, void* data, Py_ssize_t index)
    object PyUnicode_Substring(object text, Py_ssize_t start, Py_ssize_t end)
    const char* PyUnicode_AsUTF8AndSize(object text, Py_ssize_t* size) except NULL

# The layout (record/layout.py): fixed-part positions with IPv4 hosts.
cdef enum:
    MAGIC_CODE = -626843481
    MAGIC_CODE_V2 = -626843477
    BLANK_MAGIC = -875286124
    BORNHOST_V6 = 0x10
    STOREHOST_V6 = 0x20
    FIXED_IPV4 = 88
    OVERHEAD = 91
    IPV6_EXTRA = 12
    BLANK_BYTES = 8

_crc32 = zlib.crc32
_tuple_new = tuple.__new__


cdef object _utf8(const uint8_t* p, Py_ssize_t length, str what):
    try:
        return PyUnicode_DecodeUTF8(<const char*>p, length, NULL)
    except UnicodeDecodeError as error:
        raise ProtocolError(f"{what} is not valid UTF-8") from error


# --- reading records -----------------------------------------------------------------------


cdef struct Fields:
    int32_t total_size
    int32_t magic
    int32_t body_crc
    int32_t queue_id
    int32_t flag
    int64_t queue_offset
    int64_t commit_log_offset
    int32_t sys_flag
    int64_t born_timestamp_ms
    Py_ssize_t born_ip_at
    int born_ip_length
    int32_t born_port
    int64_t store_timestamp_ms
    Py_ssize_t store_ip_at
    int store_ip_length
    int32_t store_port
    int32_t reconsume_times
    int64_t prepared_transaction_offset
    Py_ssize_t body_offset
    int32_t body_length
    Py_ssize_t topic_offset
    Py_ssize_t topic_length
    Py_ssize_t properties_offset
    Py_ssize_t properties_length


cdef int _read_fields(const uint8_t* base, Py_ssize_t size, Py_ssize_t position,
                      Fields* f) except -1:
    """Fill ``f`` from the record at ``position`` with layout.read_record_header's checks
    (messages and order as there). A blank marker fills total_size and magic only."""
    if position < 0:
        raise ProtocolError(f"negative record position {position}")
    if position + 8 > size:
        raise ProtocolError(f"truncated record at {position}")
    cdef const uint8_t* p = base + position
    f.total_size = _i32(p)
    f.magic = _i32(p + 4)
    cdef Py_ssize_t end = position + f.total_size
    if f.magic == BLANK_MAGIC:
        if f.total_size < BLANK_BYTES or end > size:
            raise ProtocolError(
                f"blank marker of {f.total_size} bytes at {position} is invalid")
        return 0
    if f.magic != MAGIC_CODE and f.magic != MAGIC_CODE_V2:
        raise ProtocolError(f"bad magic code {<uint32_t>f.magic:#010x} at {position}")
    if f.total_size < OVERHEAD:
        raise ProtocolError(
            f"record at {position} claims {f.total_size} bytes, below the minimum")
    if end > size:
        raise ProtocolError(
            f"record of {f.total_size} bytes at {position} runs past the end ({size})")
    f.sys_flag = _i32(p + 36)
    f.born_ip_length = 16 if f.sys_flag & BORNHOST_V6 else 4
    f.store_ip_length = 16 if f.sys_flag & STOREHOST_V6 else 4
    if f.total_size < FIXED_IPV4 + f.born_ip_length + f.store_ip_length - 8 + 3:
        raise ProtocolError(f"record at {position} too short for its IPv6 hosts")
    f.body_crc = _i32(p + 8)
    f.queue_id = _i32(p + 12)
    f.flag = _i32(p + 16)
    f.queue_offset = _i64(p + 20)
    f.commit_log_offset = _i64(p + 28)
    f.born_timestamp_ms = _i64(p + 40)
    cdef Py_ssize_t at = 48
    f.born_ip_at = position + at
    at += f.born_ip_length
    f.born_port = _i32(p + at)
    at += 4
    f.store_timestamp_ms = _i64(p + at)
    at += 8
    f.store_ip_at = position + at
    at += f.store_ip_length
    f.store_port = _i32(p + at)
    at += 4
    f.reconsume_times = _i32(p + at)
    f.prepared_transaction_offset = _i64(p + at + 4)
    f.body_length = _i32(p + at + 12)
    f.body_offset = position + at + 16
    cdef Py_ssize_t topic_at = f.body_offset + f.body_length
    cdef int topic_length_bytes = 1 if f.magic == MAGIC_CODE else 2
    if f.body_length < 0 or topic_at + topic_length_bytes > end:
        raise ProtocolError(f"body length {f.body_length} runs past the record end")
    if topic_length_bytes == 1:
        f.topic_length = base[topic_at]
    else:
        f.topic_length = (base[topic_at] << 8) | base[topic_at + 1]
    f.topic_offset = topic_at + topic_length_bytes
    cdef Py_ssize_t properties_at = f.topic_offset + f.topic_length
    if properties_at + 2 > end:
        raise ProtocolError(f"topic length {f.topic_length} runs past the record end")
    f.properties_length = (base[properties_at] << 8) | base[properties_at + 1]
    f.properties_offset = properties_at + 2
    if f.properties_offset + f.properties_length != end:
        raise ProtocolError("record field lengths do not add up to its TOTALSIZE")
    return 0


cdef object _header(const uint8_t* base, Py_ssize_t position, Fields* f):
    topic = _utf8(base + f.topic_offset, f.topic_length, "topic")
    return _tuple_new(RecordHeader, (
        position, f.total_size, f.magic, f.body_crc, f.queue_id, f.flag, f.queue_offset,
        f.commit_log_offset, f.sys_flag, f.born_timestamp_ms, f.store_timestamp_ms,
        f.reconsume_times, f.prepared_transaction_offset, f.body_offset, f.body_length,
        topic, f.properties_offset, f.properties_length,
    ))


cdef const uint8_t* _open_fields(object buffer, Py_ssize_t position, Py_buffer* view,
                                 Fields* f) except NULL:
    """Hold ``buffer`` in ``view`` and fill ``f`` from the record at ``position``; the start
    of the buffer. The caller releases ``view``; on an error it is already released."""
    _load_wire()
    PyObject_GetBuffer(buffer, view, PyBUF_SIMPLE)
    base = <const uint8_t*>view.buf
    try:
        _read_fields(base, view.len, position, f)
    except BaseException:
        PyBuffer_Release(view)
        raise
    return base


def read_record_header(buffer, Py_ssize_t position=0):
    """Check the record (or blank marker) at ``position``; see layout.read_record_header."""
    cdef Py_buffer view
    cdef Fields f
    base = _open_fields(buffer, position, &view, &f)
    try:
        if f.magic == BLANK_MAGIC:
            end = position + f.total_size
            return _tuple_new(RecordHeader, (position, f.total_size, f.magic, 0, 0, 0, 0, 0,
                                             0, 0, 0, 0, 0, end, 0, "", end, 0))
        return _header(base, position, &f)
    finally:
        PyBuffer_Release(&view)


def read_stored_record(buffer, Py_ssize_t position, int64_t commit_log_offset):
    """Recovery's check of one record; see layout.read_stored_record."""
    cdef Py_buffer view
    cdef Fields f
    base = _open_fields(buffer, position, &view, &f)
    try:
        if f.magic == BLANK_MAGIC:
            raise ProtocolError(f"blank marker at {commit_log_offset}, not a record")
        header = _header(base, position, &f)
        if f.commit_log_offset != commit_log_offset:
            raise ProtocolError(
                f"record at {commit_log_offset} names physical offset {f.commit_log_offset}")
        body = PyMemoryView_FromMemory(<char*>base + f.body_offset, f.body_length, PyBUF_READ)
        if (_crc32(body) & 0x7FFFFFFF) != f.body_crc:
            raise ProtocolError(f"body CRC mismatch in the record at {commit_log_offset}")
        _utf8(base + f.properties_offset, f.properties_length, "properties")
        if f.properties_length and base[f.properties_offset + f.properties_length - 1] == 0:
            raise ProtocolError(
                f"record at {commit_log_offset} ends in zero bytes (torn tail)")
        return header, _store_properties(base + f.properties_offset, f.properties_length)
    finally:
        PyBuffer_Release(&view)


# --- writing records -----------------------------------------------------------------------


def write_records(view, Py_ssize_t position, records, bytes topic_tail, int32_t queue_id,
                  first_queue_offset, int64_t commit_log_offset, int32_t sys_flag,
                  int64_t born_timestamp_ms, bytes born_ip, int32_t born_port,
                  int64_t store_timestamp_ms, bytes store_ip, int32_t store_port,
                  int32_t reconsume_times, int64_t prepared_transaction_offset):
    """Write records end to end into a mapping; see layout.write_records."""
    cdef Py_buffer target
    cdef Py_ssize_t total_size = 0, cursor, body_length, properties_length
    cdef Py_ssize_t born_length = PyBytes_GET_SIZE(born_ip)
    cdef Py_ssize_t store_length = PyBytes_GET_SIZE(store_ip)
    cdef Py_ssize_t tail_length = PyBytes_GET_SIZE(topic_tail)
    cdef int64_t queue_offset = 0 if first_queue_offset is None else first_queue_offset
    cdef int64_t queue_step = 0 if first_queue_offset is None else 1
    cdef Py_buffer body_view
    cdef uint8_t* out
    cdef uint8_t* p
    sys_flag &= ~(BORNHOST_V6 | STOREHOST_V6)
    if born_length == 16:
        sys_flag |= BORNHOST_V6
    if store_length == 16:
        sys_flag |= STOREHOST_V6
    cdef Py_ssize_t fixed_size = FIXED_IPV4 + (born_length - 4) + (store_length - 4)
    for record in records:
        size = record.size
        expected = fixed_size + len(record.body) + tail_length + 2 + len(record.properties_bytes)
        if size != expected:
            invariant(False, f"records of {size} bytes encoded as {expected}")
        total_size += size
    PyObject_GetBuffer(view, &target, PyBUF_WRITABLE)
    try:
        if position < 0 or position + total_size > target.len:
            invariant(False, f"records of {total_size} bytes do not fit at {position}")
        out = <uint8_t*>target.buf
        cursor = position
        first = True
        for record in records:
            size = record.size
            p = out + cursor
            _put32(p, 0 if first else size)
            first = False
            _put32(p + 4, MAGIC_CODE)
            _put32(p + 8, record.body_crc)
            _put32(p + 12, queue_id)
            _put32(p + 16, record.flag)
            _put64(p + 20, queue_offset)
            _put64(p + 28, commit_log_offset)
            _put32(p + 36, sys_flag)
            _put64(p + 40, born_timestamp_ms)
            memcpy(p + 48, PyBytes_AS_STRING(born_ip), born_length)
            p += 48 + born_length
            _put32(p, born_port)
            _put64(p + 4, store_timestamp_ms)
            memcpy(p + 12, PyBytes_AS_STRING(store_ip), store_length)
            p += 12 + store_length
            _put32(p, store_port)
            _put32(p + 4, reconsume_times)
            _put64(p + 8, prepared_transaction_offset)
            PyObject_GetBuffer(record.body, &body_view, PyBUF_SIMPLE)
            try:
                body_length = body_view.len
                _put32(p + 16, body_length)
                memcpy(p + 20, body_view.buf, body_length)
            finally:
                PyBuffer_Release(&body_view)
            p += 20 + body_length
            memcpy(p, PyBytes_AS_STRING(topic_tail), tail_length)
            p += tail_length
            properties = <bytes?>record.properties_bytes
            properties_length = PyBytes_GET_SIZE(properties)
            p[0] = <uint8_t>(properties_length >> 8)
            p[1] = <uint8_t>properties_length
            memcpy(p + 2, PyBytes_AS_STRING(properties), properties_length)
            cursor += size
            commit_log_offset += size
            queue_offset += queue_step
        if total_size:
            _put32(out + position, records[0].size)
        return position + total_size
    finally:
        PyBuffer_Release(&target)
