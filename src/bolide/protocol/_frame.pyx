"""Compiled twin of :func:`bolide.protocol.frame.split_frames` (Cython), one piece of the
``bolide.protocol._compiled`` extension (``_compiled.pyx`` includes it).

Same signature, answers and errors as the pure-Python function, which is the reference (the
frame layout is drawn in frame.py); ``tests/protocol/test_wire_twins.py`` holds them alike.
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_FromStringAndSize

from bolide.base.errors import FrameTooLargeError, ProtocolError


# --- frames (frame.py) --------------------------------------------------------------------

cdef object _frame_parts = None


cdef tuple _frame_type():
    """(RawFrame.__new__, its three slot setters), looked up once: frame.py imports this
    module at its end, so the class exists by the first call."""
    global _frame_parts
    if _frame_parts is None:
        from bolide.protocol.frame import RawFrame
        slots = vars(RawFrame)
        _frame_parts = (
            RawFrame, slots["serialize_type"].__set__, slots["header"].__set__,
            slots["body"].__set__,
        )
    return _frame_parts


def split_frames(view, Py_ssize_t max_frame_bytes, list frames):
    """Append the whole frames at the start of ``view``; see frame.split_frames."""
    cdef Py_buffer buffer
    cdef Py_ssize_t position = 0, end, frame_end, header_end, header_length
    cdef Py_ssize_t max_total_length = max_frame_bytes - 4
    cdef int32_t total_length
    cdef uint32_t type_word, serialize_type
    cdef const uint8_t* base
    frame_class, set_type, set_header, set_body = _frame_type()
    new = object.__new__
    PyObject_GetBuffer(view, &buffer, PyBUF_SIMPLE)
    try:
        base = <const uint8_t*>buffer.buf
        end = buffer.len
        while end - position >= 4:
            total_length = _i32(base + position)
            if total_length > max_total_length:
                raise FrameTooLargeError(
                    f"frame of {total_length + 4} bytes exceeds the limit of "
                    f"{max_frame_bytes} bytes")
            if total_length < 4:
                raise ProtocolError(f"frame total length {total_length} is below 4")
            if end - position < 8:
                break
            type_word = <uint32_t>_i32(base + position + 4)
            serialize_type = type_word >> 24
            header_length = type_word & 0xFFFFFF
            if serialize_type > 1:
                raise ProtocolError(f"unknown serialize type {serialize_type}")
            if header_length > total_length - 4:
                raise ProtocolError(
                    f"header length {header_length} exceeds frame length {total_length} - 4")
            frame_end = position + 4 + total_length
            if frame_end > end:
                break
            header_end = position + 8 + header_length
            frame = new(frame_class)
            set_type(frame, serialize_type)
            set_header(frame, PyBytes_FromStringAndSize(
                <const char*>base + position + 8, header_length))
            set_body(frame, PyBytes_FromStringAndSize(
                <const char*>base + header_end, frame_end - header_end))
            frames.append(frame)
            position = frame_end
        return position
    finally:
        PyBuffer_Release(&buffer)
