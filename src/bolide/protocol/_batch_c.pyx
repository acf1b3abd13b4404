# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, embedsignature=True
"""Compiled twin of :func:`bolide.protocol.record.batch.encode_batch_body` (Cython).

Same signature, bytes and errors as the pure-Python function, which is the reference (the
batch layout is drawn in record/batch.py); ``tests/protocol/test_batch_twins.py`` holds them
alike. One pass measures and checks every entry, a second writes them into one bytes object.
"""

import struct

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.long cimport PyLong_AsLongLong
from libc.stdint cimport int64_t, uint8_t, uint32_t
from libc.string cimport memcpy

from bolide.base import limits
from bolide.base.errors import ProtocolError

cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object text, Py_ssize_t* size) except NULL
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


cdef inline void _put_i32(uint8_t* p, int64_t value) noexcept nogil:
    cdef uint32_t v = <uint32_t>value
    p[0] = <uint8_t>(v >> 24)
    p[1] = <uint8_t>(v >> 16)
    p[2] = <uint8_t>(v >> 8)
    p[3] = <uint8_t>v


cdef object _utf8(object text):
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
                text_object = _utf8(text_object)
        else:
            text_object = _utf8(text_object)
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
        _put_i32(out, _OVERHEAD_BYTES + body_length + properties_length)
        _put_i32(out + 4, 0)
        _put_i32(out + 8, 0)
        _put_i32(out + 12, PyLong_AsLongLong(flags[index]))
        _put_i32(out + 16, body_length)
        memcpy(out + _HEAD_BYTES, PyBytes_AS_STRING(body), body_length)
        out += _HEAD_BYTES + body_length
        out[0] = <uint8_t>(properties_length >> 8)
        out[1] = <uint8_t>properties_length
        memcpy(out + 2, text, properties_length)
        out += 2 + properties_length
    return result
