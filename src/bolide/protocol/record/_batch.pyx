"""Compiled twins of :mod:`bolide.protocol.record.batch` (Cython), one piece of the
``bolide.protocol.record._compiled`` extension (``_compiled.pyx`` includes it): the batch body the producer writes (``encode_batch_body``: one pass measures and checks every
entry, a second writes them into one bytes object) and the broker's split of one
(``decode_batch_body``). Same bytes and errors as the pure-Python functions, which are the
reference (the batch layout is drawn in record/batch.py); ``tests/protocol/test_batch_twins.py``
and ``tests/protocol/test_send_scan.py`` hold them alike.
"""

import struct

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.long cimport PyLong_AsLongLong
from libc.string cimport memcpy

from bolide.base import limits
from bolide.base.errors import ProtocolError

cdef extern from "Python.h":
    bint PyUnicode_CheckExact(object text)
    bint PyBytes_CheckExact(object data)
    bint PyLong_CheckExact(object number)

cdef Py_ssize_t _MAX_COUNT = limits.BATCH_MESSAGES_MAX_COUNT
cdef Py_ssize_t _PROPERTIES_MAX_BYTES = limits.MESSAGE_PROPERTIES_MAX_BYTES
cdef Py_ssize_t _HEAD_BYTES = 20
cdef Py_ssize_t _OVERHEAD_BYTES = 22
cdef int64_t _INT32_MIN = -2147483648
cdef int64_t _INT32_MAX = 2147483647
_HEAD = struct.Struct(">iiiii")


cdef object _utf8_bytes(object text):
    """``text`` as UTF-8 bytes the way the twin encodes it (surrogates pass)."""
    return text.encode("utf-8", "surrogatepass")


cdef inline bint _plain_int32(object number):
    """True when ``number`` is an int within int32 (else the twin's struct decides)."""
    cdef int64_t value
    if not PyLong_CheckExact(number):
        return False
    try:
        value = PyLong_AsLongLong(number)
    except OverflowError:
        return False
    return _INT32_MIN <= value <= _INT32_MAX


def encode_batch_body(entries):
    """The batch body of ``entries``; see the pure twin."""
    cdef Py_ssize_t count = len(entries)
    cdef Py_ssize_t total = 0
    cdef Py_ssize_t index, body_length, properties_length, entry_size
    cdef const char* text
    cdef uint8_t* out
    if count > _MAX_COUNT:
        raise ProtocolError(f"batch holds more than {_MAX_COUNT} messages")
    cdef list bodies = [None] * count
    cdef list properties = [None] * count
    cdef list flags = [None] * count
    for index in range(count):
        entry = entries[index]
        text_object = entry.properties
        if PyUnicode_CheckExact(text_object):
            try:
                PyUnicode_AsUTF8AndSize(text_object, &properties_length)
            except UnicodeEncodeError:  # surrogates: the twin lets them pass
                text_object = _utf8_bytes(text_object)
        else:
            text_object = _utf8_bytes(text_object)
        if not PyUnicode_CheckExact(text_object):
            properties_length = PyBytes_GET_SIZE(text_object)
        if properties_length > _PROPERTIES_MAX_BYTES:
            raise ProtocolError(
                f"batch entry properties of {properties_length} bytes are too long"
            )
        body = entry.body
        if not PyBytes_CheckExact(body):
            body = bytes(body)
        body_length = PyBytes_GET_SIZE(body)
        flag = entry.flag
        entry_size = _OVERHEAD_BYTES + body_length + properties_length
        if not _plain_int32(flag) or entry_size > _INT32_MAX:
            try:  # the twin's check, for its exact words
                _HEAD.pack(entry_size, 0, 0, flag, body_length)
            except struct.error as error:
                raise ProtocolError(f"batch entry field out of range: {error}") from error
        bodies[index] = body
        properties[index] = text_object
        flags[index] = flag
        total += entry_size
    result = PyBytes_FromStringAndSize(NULL, total)
    out = <uint8_t*>PyBytes_AS_STRING(result)
    for index in range(count):
        body = bodies[index]
        text_object = properties[index]
        if PyUnicode_CheckExact(text_object):
            text = PyUnicode_AsUTF8AndSize(text_object, &properties_length)
        else:
            text = PyBytes_AS_STRING(text_object)
            properties_length = PyBytes_GET_SIZE(text_object)
        body_length = PyBytes_GET_SIZE(body)
        _put32(out, _OVERHEAD_BYTES + body_length + properties_length)
        _put32(out + 4, 0)
        _put32(out + 8, 0)
        _put32(out + 12, PyLong_AsLongLong(flags[index]))
        _put32(out + 16, body_length)
        memcpy(out + _HEAD_BYTES, PyBytes_AS_STRING(body), body_length)
        out += _HEAD_BYTES + body_length
        out[0] = <uint8_t>(properties_length >> 8)
        out[1] = <uint8_t>properties_length
        memcpy(out + 2, text, properties_length)
        out += 2 + properties_length
    return result


# --- batch body (record/batch.py) ----------------------------------------------------------

cdef object _batch_entry_parts = None


cdef tuple _batch_entry_type():
    """(BatchEntry, its three slot setters), looked up once (record/batch.py imports this module
    at its end)."""
    global _batch_entry_parts
    if _batch_entry_parts is None:
        from bolide.protocol.record import BatchEntry
        slots = vars(BatchEntry)
        _batch_entry_parts = (
            BatchEntry, slots["flag"].__set__, slots["body"].__set__,
            slots["properties"].__set__,
        )
    return _batch_entry_parts


def decode_batch_body(body):
    """The inner messages of a batch body; see record/batch.decode_batch_body."""
    from bolide.base import limits
    cdef Py_ssize_t max_count = limits.BATCH_MESSAGES_MAX_COUNT
    cdef Py_buffer buffer
    cdef Py_ssize_t position = 0, end, body_offset, properties_at, properties_offset
    cdef int32_t body_length
    cdef Py_ssize_t properties_length
    cdef const uint8_t* base
    cdef list entries = []
    entry_class, set_flag, set_body, set_properties = _batch_entry_type()
    new = object.__new__
    PyObject_GetBuffer(body, &buffer, PyBUF_SIMPLE)
    try:
        base = <const uint8_t*>buffer.buf
        end = buffer.len
        while position < end:
            if len(entries) >= max_count:
                raise ProtocolError(f"batch holds more than {max_count} messages")
            if position + 20 > end:
                raise ProtocolError(f"batch entry at {position} is cut short")
            body_length = _i32(base + position + 16)
            body_offset = position + 20
            properties_at = body_offset + body_length
            if body_length < 0 or properties_at + 2 > end:
                raise ProtocolError(
                    f"batch entry at {position}: body length {body_length} too long")
            properties_length = (<Py_ssize_t>base[properties_at] << 8) | base[properties_at + 1]
            properties_offset = properties_at + 2
            position = properties_offset + properties_length
            if position > end:
                raise ProtocolError(
                    f"batch entry properties run past the end ({properties_length})")
            entry = new(entry_class)
            set_flag(entry, _i32(base + body_offset - 8))
            set_body(entry, PyBytes_FromStringAndSize(
                <const char*>base + body_offset, body_length))
            set_properties(entry, _utf8(base + properties_offset, properties_length,
                                        "batch properties"))
            entries.append(entry)
        return entries
    finally:
        PyBuffer_Release(&buffer)
