"""Compiled twin of :func:`bolide.protocol.answer_frames.success_frame` (Cython), one piece
of the ``bolide.protocol._compiled`` extension: the SUCCESS answer frame of a single send.
"""

from cpython.bytes cimport PyBytes_AS_STRING
from cpython.unicode cimport PyUnicode_AsUTF8AndSize
from libc.stdio cimport snprintf
from libc.string cimport memcpy

cdef enum:
    _NUMBER_TEXT_BYTES = 24

cdef bytes _QUEUE_ID_KEY = b'","queueId":"'
cdef bytes _QUEUE_OFFSET_KEY = b'","queueOffset":"'


cdef inline char* _put(char* out, const char* data, Py_ssize_t length) noexcept:
    memcpy(out, data, length)
    return out + length


cdef inline void _put_i32(char* out, uint32_t value) noexcept:
    out[0] = (value >> 24) & 0xFF
    out[1] = (value >> 16) & 0xFF
    out[2] = (value >> 8) & 0xFF
    out[3] = value & 0xFF


def success_frame(bytes head, bytes tail, bytes end, long long opaque, str message_id,
                  long long queue_id, long long queue_offset):
    """A SUCCESS answer frame; see answer_frames.success_frame."""
    cdef char queue_id_text[_NUMBER_TEXT_BYTES]
    cdef char offset_text[_NUMBER_TEXT_BYTES]
    cdef char opaque_text[_NUMBER_TEXT_BYTES]
    cdef Py_ssize_t id_length
    cdef const char* id_data = PyUnicode_AsUTF8AndSize(message_id, &id_length)
    cdef int queue_id_length = snprintf(queue_id_text, _NUMBER_TEXT_BYTES, b"%lld", queue_id)
    cdef int offset_length = snprintf(offset_text, _NUMBER_TEXT_BYTES, b"%lld", queue_offset)
    cdef int opaque_length = snprintf(opaque_text, _NUMBER_TEXT_BYTES, b"%lld", opaque)
    cdef Py_ssize_t header_length = (
        len(head) + id_length + len(_QUEUE_ID_KEY) + queue_id_length + len(_QUEUE_OFFSET_KEY)
        + offset_length + len(tail) + opaque_length + len(end))
    frame = PyBytes_FromStringAndSize(NULL, 8 + header_length)
    cdef char* out = PyBytes_AS_STRING(frame)
    _put_i32(out, <uint32_t>(4 + header_length))
    _put_i32(out + 4, <uint32_t>header_length)
    out += 8
    out = _put(out, head, len(head))
    out = _put(out, id_data, id_length)
    out = _put(out, _QUEUE_ID_KEY, len(_QUEUE_ID_KEY))
    out = _put(out, queue_id_text, queue_id_length)
    out = _put(out, _QUEUE_OFFSET_KEY, len(_QUEUE_OFFSET_KEY))
    out = _put(out, offset_text, offset_length)
    out = _put(out, tail, len(tail))
    out = _put(out, opaque_text, opaque_length)
    _put(out, end, len(end))
    return frame
