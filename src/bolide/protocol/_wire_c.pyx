# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, embedsignature=True
"""Compiled twin of the hot functions of the record's rooms (Cython): layout, properties,
messages and rows of :mod:`bolide.protocol.record`, and
:func:`bolide.protocol.record.batch.decode_batch_body` (the broker's batch-body split).

Same names, signatures, answers and errors as the pure-Python functions there, which are the
reference (the layout is drawn in record/layout.py's docstring; the offsets below are that drawing's).
``tests/protocol/test_wire_twins.py`` holds the two to the same bytes and answers.
Buffers are read through the buffer protocol, fields with explicit big-endian loads.
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
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
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


cdef inline int32_t _i32(const uint8_t* p) noexcept nogil:
    return <int32_t>((<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16)
                     | (<uint32_t>p[2] << 8) | <uint32_t>p[3])


cdef inline int64_t _i64(const uint8_t* p) noexcept nogil:
    return <int64_t>((<uint64_t><uint32_t>_i32(p) << 32) | <uint64_t><uint32_t>_i32(p + 4))


cdef inline void _put32(uint8_t* p, int64_t value) noexcept nogil:
    cdef uint32_t v = <uint32_t>value
    p[0] = <uint8_t>(v >> 24)
    p[1] = <uint8_t>(v >> 16)
    p[2] = <uint8_t>(v >> 8)
    p[3] = <uint8_t>v


cdef inline void _put64(uint8_t* p, int64_t value) noexcept nogil:
    _put32(p, <int64_t>(<uint64_t>value >> 32))
    _put32(p + 4, value)


cdef object _utf8(const uint8_t* p, Py_ssize_t length, str what):
    try:
        return PyUnicode_DecodeUTF8(<const char*>p, length, NULL)
    except UnicodeDecodeError as error:
        raise ProtocolError(f"{what} is not valid UTF-8") from error


# --- properties string ---------------------------------------------------------------------


def decode_properties(str text):
    """Parse a properties string (see properties.decode_properties)."""
    cdef dict result = {}
    cdef Py_ssize_t length = PyUnicode_GET_LENGTH(text)
    if length == 0:
        return result
    cdef int kind = PyUnicode_KIND(text)
    cdef void* data = PyUnicode_DATA(text)
    cdef Py_ssize_t start = 0, index = 0, name_end = -1
    cdef Py_UCS4 character
    while index <= length:
        character = PyUnicode_READ(kind, data, index) if index < length else 2
        if character == 1 and name_end < 0:
            name_end = index
        elif character == 2:
            if name_end > start:
                result[PyUnicode_Substring(text, start, name_end)] = PyUnicode_Substring(
                    text, name_end + 1, index
                )
            start = index + 1
            name_end = -1
        index += 1
    return result


cdef extern from "Python.h":
    Py_ssize_t PyUnicode_Tailmatch(object text, object suffix, Py_ssize_t start,
                                   Py_ssize_t end, int direction) except -1

cdef enum:
    _MAX_MARKS = 32
    _KNOWN_NAMES_MAX = 16  # property names one pull body's decode remembers


def edit_plain_properties(str text, tuple acted_on_marks, str drop_name, str extra):
    """The properties string of a common send, or None (see properties.edit_plain_properties).

    One pass over ``text``: the plain checks of properties._is_plain (a mark ``NAME\x01`` occurs
    exactly where some ``\x01`` follows NAME), and the chunks that begin ``drop_name\x01``
    (what properties.without_property cuts)."""
    cdef Py_ssize_t length = PyUnicode_GET_LENGTH(text)
    cdef int kind = PyUnicode_KIND(text)
    cdef void* data = PyUnicode_DATA(text)
    cdef Py_ssize_t index, chunk_start = 0, ones = 0, seps = 0, mark_count, m
    cdef Py_ssize_t drop_length = PyUnicode_GET_LENGTH(drop_name)
    cdef Py_UCS4 character, previous = 2
    cdef Py_UCS4 last_chars[_MAX_MARKS]
    cdef bint dropping = False, any_dropped = False
    cdef list runs = None
    cdef Py_ssize_t run_start = 0
    if length == 0:
        return extra
    mark_count = len(acted_on_marks)
    if mark_count > _MAX_MARKS:  # not the broker's case: the reference steps
        return _edit_plain_properties_slowly(text, acted_on_marks, drop_name, extra)
    for m in range(mark_count):
        mark = <str>acted_on_marks[m]
        last_chars[m] = PyUnicode_READ(
            PyUnicode_KIND(mark), PyUnicode_DATA(mark), PyUnicode_GET_LENGTH(mark) - 2
        ) if PyUnicode_GET_LENGTH(mark) >= 2 else 0xFFFFFFFF
        if PyUnicode_GET_LENGTH(mark) < 2 or PyUnicode_READ(  # not NAME\x01: the reference
                PyUnicode_KIND(mark), PyUnicode_DATA(mark), PyUnicode_GET_LENGTH(mark) - 1) != 1:
            return _edit_plain_properties_slowly(text, acted_on_marks, drop_name, extra)
    for index in range(length + 1):
        character = PyUnicode_READ(kind, data, index) if index < length else 2
        if character == 1:
            if previous == 2 and index < length:
                return None  # a chunk starting with \x01 (also at the start of text)
            ones += 1
            for m in range(mark_count):
                if previous == last_chars[m] and PyUnicode_Tailmatch(
                        text, acted_on_marks[m], 0, index + 1, 1):
                    return None
        elif character == 2:
            if index < length:
                seps += 1
                if previous == 2:
                    return None  # an empty chunk (or text starting with \x02)
            # the chunk [chunk_start, index) ends: cut when it begins drop_name\x01
            dropping = (
                index - chunk_start > drop_length
                and PyUnicode_READ(kind, data, chunk_start + drop_length) == 1
                and PyUnicode_Tailmatch(text, drop_name, chunk_start,
                                        chunk_start + drop_length, -1)
            )
            if dropping:
                if runs is None:
                    runs = []
                if chunk_start > run_start:
                    runs.append(PyUnicode_Substring(text, run_start, chunk_start - 1))
                run_start = index + 1
            chunk_start = index + 1
        previous = character
    pairs = seps + (0 if PyUnicode_READ(kind, data, length - 1) == 2 else 1)
    if ones != pairs:
        return None
    if runs is not None:
        if run_start <= length:
            if run_start < length or PyUnicode_READ(kind, data, length - 1) == 2:
                runs.append(PyUnicode_Substring(text, run_start, length))
        text = "\x02".join(runs)
    if not text:  # join_properties
        return extra
    if not extra:
        return text
    if PyUnicode_READ(PyUnicode_KIND(text), PyUnicode_DATA(text),
                      PyUnicode_GET_LENGTH(text) - 1) == 2:
        return text + extra
    return text + "\x02" + extra


def _edit_plain_properties_slowly(str text, tuple acted_on_marks, str drop_name, str extra):
    """The reference steps, for unusual marks (properties.edit_plain_properties)."""
    from bolide.base import compiled
    return compiled.pure_twin("bolide.protocol.record.properties", "edit_plain_properties")(
        text, acted_on_marks, drop_name, extra)


cdef dict _decode_properties_bytes(const uint8_t* p, Py_ssize_t length, list names):
    """decode_properties(bytes.decode('utf-8')) straight from UTF-8 bytes: the separators are
    ASCII and never occur inside a multi-byte sequence, so pairs can be cut before decoding.
    Skipped chunks are decoded too, so that any invalid byte raises as the pure twin does.
    ``names`` holds (UTF-8, str) pairs of names decoded before (the records of one pull repeat
    a few): a name found there is reused, hash included; new ones join it, up to a bound."""
    cdef dict result = {}
    cdef Py_ssize_t start = 0, index = 0, name_end = -1
    cdef uint8_t byte
    while index <= length:
        byte = p[index] if index < length else 2
        if byte == 1 and name_end < 0:
            name_end = index
        elif byte == 2:
            if name_end > start:
                name = _known_name(p + start, name_end - start, names)
                result[name] = _utf8(p + name_end + 1, index - name_end - 1, "properties")
            elif index > start:
                _utf8(p + start, index - start, "properties")
            start = index + 1
            name_end = -1
        index += 1
    return result


cdef object _known_name(const uint8_t* p, Py_ssize_t length, list names):
    cdef bytes encoded
    for pair in names:
        encoded = <bytes>(<tuple>pair)[0]
        if PyBytes_GET_SIZE(encoded) == length and memcmp(
                PyBytes_AS_STRING(encoded), p, length) == 0:
            return (<tuple>pair)[1]
    name = _utf8(p, length, "properties")
    if len(names) < _KNOWN_NAMES_MAX:
        names.append((PyBytes_FromStringAndSize(<const char*>p, length), name))
    return name


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


def read_record_header(buffer, Py_ssize_t position=0):
    """Check the record (or blank marker) at ``position``; see layout.read_record_header."""
    cdef Py_buffer view
    cdef Fields f
    _load_wire()
    PyObject_GetBuffer(buffer, &view, PyBUF_SIMPLE)
    try:
        base = <const uint8_t*>view.buf
        _read_fields(base, view.len, position, &f)
        if f.magic == BLANK_MAGIC:
            end = position + f.total_size
            return _tuple_new(RecordHeader, (position, f.total_size, f.magic, 0, 0, 0, 0, 0,
                                             0, 0, 0, 0, 0, end, 0, "", end, 0))
        return _header(base, position, &f)
    finally:
        PyBuffer_Release(&view)


cdef tuple _store_properties(const uint8_t* p, Py_ssize_t length):
    """TAGS, KEYS, UNIQ_KEY, DELAY (last pair of each name wins, None when absent): the
    answers of properties.property_value on the same string. Only matching values are decoded."""
    cdef Py_ssize_t start = 0, index = 0, name_end = -1, name_length
    cdef Py_ssize_t spans[8]
    cdef int which, k
    cdef uint8_t byte
    for k in range(8):
        spans[k] = -1
    while index <= length:
        byte = p[index] if index < length else 2
        if byte == 1 and name_end < 0:
            name_end = index
        elif byte == 2:
            if name_end >= start:
                name_length = name_end - start
                which = -1
                if name_length == 4 and memcmp(p + start, b"TAGS", 4) == 0:
                    which = 0
                elif name_length == 4 and memcmp(p + start, b"KEYS", 4) == 0:
                    which = 1
                elif name_length == 8 and memcmp(p + start, b"UNIQ_KEY", 8) == 0:
                    which = 2
                elif name_length == 5 and memcmp(p + start, b"DELAY", 5) == 0:
                    which = 3
                if which >= 0:
                    spans[2 * which] = name_end + 1
                    spans[2 * which + 1] = index
            start = index + 1
            name_end = -1
        index += 1
    values = []
    for k in range(4):
        if spans[2 * k] < 0:
            values.append(None)
        else:
            values.append(_utf8(p + spans[2 * k], spans[2 * k + 1] - spans[2 * k], "properties"))
    return tuple(values)


def store_properties(str text):
    """TAGS, KEYS, UNIQ_KEY, DELAY of a properties string; see properties.store_properties."""
    cdef Py_ssize_t length
    cdef const char* data
    try:
        data = PyUnicode_AsUTF8AndSize(text, &length)  # cached on the str; ASCII: its data
    except UnicodeEncodeError:  # a lone surrogate: the same answer the slow way
        padded = "\x02" + text
        return tuple([_last_value(padded, mark) for mark in _STORE_MARKS])
    return _store_properties(<const uint8_t*>data, length)


_STORE_MARKS = ("\x02TAGS\x01", "\x02KEYS\x01", "\x02UNIQ_KEY\x01", "\x02DELAY\x01")


cdef object _last_value(str padded, str mark):
    cdef Py_ssize_t at = padded.rfind(mark), start, end
    if at < 0:
        return None
    start = at + len(mark)
    end = padded.find("\x02", start)
    return padded[start:] if end < 0 else padded[start:end]


def read_stored_record(buffer, Py_ssize_t position, int64_t commit_log_offset):
    """Recovery's check of one record; see layout.read_stored_record."""
    cdef Py_buffer view
    cdef Fields f
    _load_wire()
    PyObject_GetBuffer(buffer, &view, PyBUF_SIMPLE)
    try:
        base = <const uint8_t*>view.buf
        _read_fields(base, view.len, position, &f)
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


cdef class _Address:
    """An address of the record before: where its bytes were, its port, its (host, port)."""
    cdef Py_ssize_t at, length
    cdef int32_t port
    cdef object value

    def __cinit__(self):
        self.length = -1

    cdef object of(self, const uint8_t* base, Py_ssize_t at, Py_ssize_t length, int32_t port,
                   dict ip_texts):
        """The (host, port) of the address at ``at``: the one before when bytes and port are
        the same, else a new one (each host rendered once a body)."""
        if not (port == self.port and _same(base, at, length, self.at, self.length)):
            self.value = (_ip_text(base, at, length, ip_texts), port)
            self.at, self.length, self.port = at, length, port
        return self.value


cdef class _Shared:
    """What the records of one pull body repeat, rendered once: the topic and the two
    addresses of the record before, reused while the next record's bytes are the same
    (equal values, fewer objects: one str and two tuples per body instead of per record),
    and the property names met so far."""
    cdef Py_ssize_t topic_at, topic_length
    cdef object topic
    cdef _Address born, store
    cdef dict ip_texts
    cdef list names

    def __cinit__(self):
        self.topic_length = -1
        self.born = _Address()
        self.store = _Address()
        self.ip_texts = {}
        self.names = []


cdef inline bint _same(const uint8_t* base, Py_ssize_t at, Py_ssize_t length,
                       Py_ssize_t previous_at, Py_ssize_t previous_length):
    return length == previous_length and memcmp(base + at, base + previous_at, length) == 0


cdef object _ip_text(const uint8_t* base, Py_ssize_t at, Py_ssize_t length, dict ip_texts):
    ip = PyBytes_FromStringAndSize(<const char*>base + at, length)
    text = ip_texts.get(ip)
    if text is None:
        text = ip_texts[ip] = unpack_ip(ip)
    return text


cdef object _message(const uint8_t* base, Py_ssize_t position, Fields* f, factory,
                     bint verify_crc, _Shared shared):
    body = PyBytes_FromStringAndSize(<const char*>base + f.body_offset, f.body_length)
    if verify_crc and (_crc32(body) & 0x7FFFFFFF) != f.body_crc:
        raise ProtocolError(f"body CRC mismatch in the record at {position}")
    born = shared.born.of(base, f.born_ip_at, f.born_ip_length, f.born_port, shared.ip_texts)
    store = shared.store.of(
        base, f.store_ip_at, f.store_ip_length, f.store_port, shared.ip_texts)
    properties = _decode_properties_bytes(
        base + f.properties_offset, f.properties_length, shared.names)
    if not _same(base, f.topic_offset, f.topic_length, shared.topic_at, shared.topic_length):
        shared.topic = _utf8(base + f.topic_offset, f.topic_length, "topic")
        shared.topic_at, shared.topic_length = f.topic_offset, f.topic_length
    return factory(
        shared.topic, body, f.flag, properties,
        f.queue_id, f.queue_offset, f.commit_log_offset, f.sys_flag, f.born_timestamp_ms,
        born, f.store_timestamp_ms, store,
        f.reconsume_times, f.prepared_transaction_offset, f.body_crc, f.total_size,
    )


def decode_messages(buffer, factory, bint verify_crc=False):
    """Decode every record of a pull body through ``factory``; see messages.decode_messages."""
    cdef Py_buffer view
    cdef Fields f
    cdef list messages = []
    cdef _Shared shared = _Shared()
    cdef Py_ssize_t position = 0, size, next_end
    cdef const uint8_t* base
    _load_wire()
    PyObject_GetBuffer(buffer, &view, PyBUF_SIMPLE)
    try:
        base = <const uint8_t*>view.buf
        size = view.len
        while position < size:
            try:
                _read_fields(base, size, position, &f)
                if f.magic == BLANK_MAGIC:
                    raise ProtocolError(f"blank marker at {position}, not a message")
                messages.append(_message(base, position, &f, factory, verify_crc, shared))
            except ProtocolError as error:
                trusted = None
                if position + 4 <= size:
                    next_end = position + _i32(base + position)
                    if next_end - position >= OVERHEAD and next_end <= size:
                        trusted = next_end
                raise RecordDecodeError(
                    str(error), index=len(messages), position=position, decoded=messages,
                    next_position=trusted,
                ) from error
            position += f.total_size
        return messages
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


# --- rows for Arrow (record/rows.py) --------------------------------------------------------


cdef inline void _append(bytearray target, const void* data, Py_ssize_t length) except *:
    cdef Py_ssize_t old = PyByteArray_GET_SIZE(target)
    PyByteArray_Resize(target, old + length)
    memcpy(PyByteArray_AS_STRING(target) + old, data, length)


cdef inline void _append32(bytearray target, int32_t value) except *:
    _append(target, &value, 4)


cdef inline void _append64(bytearray target, int64_t value) except *:
    _append(target, &value, 8)


def scan_rows(body, int64_t stop_offset, sink, inflate):
    """Append a pull body's rows to column buffers; see record/rows.scan_rows."""
    cdef Py_buffer view
    cdef Py_ssize_t position = 0, end, record_end, body_at, topic_at, properties_at
    cdef Py_ssize_t fixed_size, added = 0
    cdef int32_t total_size, magic, sys_flag, body_length, ip_length
    cdef int64_t queue_offset
    cdef const uint8_t* base
    cdef const uint8_t* p
    cdef const uint8_t* host
    cdef uint8_t host_row[24]
    cdef bytearray body_data = sink.body_data, body_ends = sink.body_ends
    cdef bytearray properties_data = sink.properties_data
    cdef bytearray properties_ends = sink.properties_ends
    cdef bytearray queue_offsets = sink.queue_offsets
    cdef bytearray commit_log_offsets = sink.commit_log_offsets
    cdef bytearray born = sink.born_timestamps_ms, stored = sink.store_timestamps_ms
    cdef bytearray reconsume = sink.reconsume_times, hosts = sink.store_hosts
    cdef Py_buffer payload_view
    PyObject_GetBuffer(body, &view, PyBUF_SIMPLE)
    try:
        base = <const uint8_t*>view.buf
        end = view.len
        while position < end:
            if position + OVERHEAD > end:
                raise ProtocolError(f"record at {position} of a pull body is cut short")
            p = base + position
            sys_flag = _i32(p + 36)
            ip_length = 16 if sys_flag & STOREHOST_V6 else 4
            fixed_size = FIXED_IPV4 + (12 if sys_flag & BORNHOST_V6 else 0) + ip_length - 4
            total_size = _i32(p)
            magic = _i32(p + 4)
            record_end = position + total_size
            if magic != MAGIC_CODE and magic != MAGIC_CODE_V2:
                raise ProtocolError(f"bad magic code {<uint32_t>magic:#010x} at {position}")
            if (position + fixed_size > end or total_size < fixed_size + 3 or record_end > end
                    or _i32(p + fixed_size - 4) < 0):
                raise ProtocolError(
                    f"record at {position} has an impossible size {total_size}")
            queue_offset = _i64(p + 20)
            if queue_offset >= stop_offset:
                position = record_end
                continue
            body_length = _i32(p + fixed_size - 4)
            body_at = position + fixed_size
            topic_at = body_at + body_length
            if topic_at + 3 > record_end:
                raise ProtocolError(f"record at {position}: field lengths do not add up")
            if magic == MAGIC_CODE:
                properties_at = topic_at + 3 + base[topic_at]
            else:
                properties_at = topic_at + 4 + ((base[topic_at] << 8) | base[topic_at + 1])
            if properties_at > record_end or (
                properties_at + ((base[properties_at - 2] << 8) | base[properties_at - 1])
                != record_end
            ):
                raise ProtocolError(f"record at {position}: field lengths do not add up")
            if sys_flag & 1:
                payload = inflate(PyBytes_FromStringAndSize(<const char*>base + body_at,
                                                            body_length), sys_flag,
                                  sink.count + added)
                PyObject_GetBuffer(payload, &payload_view, PyBUF_SIMPLE)
                try:
                    _append(body_data, payload_view.buf, payload_view.len)
                finally:
                    PyBuffer_Release(&payload_view)
            else:
                _append(body_data, base + body_at, body_length)
            _append32(body_ends, <int32_t>PyByteArray_GET_SIZE(body_data))
            _append(properties_data, base + properties_at, record_end - properties_at)
            _append32(properties_ends, <int32_t>PyByteArray_GET_SIZE(properties_data))
            _append64(queue_offsets, queue_offset)
            _append64(commit_log_offsets, _i64(p + 28))
            _append64(born, _i64(p + 40))
            host = p + fixed_size - 20 - ip_length
            # STORETIMESTAMP sits 8 bytes before the store ip.
            _append64(stored, _i64(host - 8))
            _append32(reconsume, _i32(p + fixed_size - 16))
            memset(host_row, 0, 24)
            memcpy(host_row, &ip_length, 4)
            memcpy(host_row + 4, host, ip_length)
            total_size = _i32(host + ip_length)
            memcpy(host_row + 20, &total_size, 4)
            _append(hosts, host_row, 24)
            added += 1
            position = record_end
        return added
    finally:
        sink.count += added
        PyBuffer_Release(&view)


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
