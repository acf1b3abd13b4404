"""Compiled twin of :func:`bolide.protocol.send_scan.scan_send_request` (Cython), one piece
of the ``bolide.protocol._compiled`` extension: the send fast path's header scan, same answers
as the pure-Python function (the scan's rules are in send_scan.py);
``tests/protocol/test_send_scan.py`` holds them alike.
"""

# A one-pass reader of the JSON header of SEND_MESSAGE / SEND_MESSAGE_V2; the rules of what it
# accepts are in send_scan.py (the twin, written on orjson). Every failure, invalid JSON
# included, answers None: the general path then decodes the header and gives the error.

from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int64_t
from libc.string cimport memcmp


cdef enum:
    _STACK_BUFFER_BYTES = 2048
    _MAX_DEPTH = 64
    _MAX_DIGITS = 18
    _FIELDS = 14
    _SEND_MESSAGE = 10
    _SEND_MESSAGE_V2 = 310

cdef tuple _V1_NAMES = (
    b"producerGroup", b"topic", b"defaultTopic", b"defaultTopicQueueNums", b"queueId",
    b"sysFlag", b"bornTimestamp", b"flag", b"properties", b"reconsumeTimes", b"unitMode",
    b"maxReconsumeTimes", b"batch", b"bname",
)
cdef object _languages = None
cdef object _other_language = None


cdef inline const uint8_t* _ws(const uint8_t* p, const uint8_t* end) noexcept:
    while p < end and (p[0] == 32 or p[0] == 10 or p[0] == 13 or p[0] == 9):
        p += 1
    return p


cdef inline const uint8_t* _past_colon(const uint8_t* p, const uint8_t* end) noexcept:
    """From just after an object's key: past the ``:`` and the whitespace around it; NULL
    when no ``:`` follows."""
    p = _ws(p, end)
    if p >= end or p[0] != 58:
        return NULL
    return _ws(p + 1, end)


cdef inline const uint8_t* _past_member(
    const uint8_t* p, const uint8_t* end, int close, bint* closed
) noexcept:
    """From just after a member's value: past the ``,`` and whitespace to the next member, or
    past ``close`` (then ``closed`` is set); NULL when neither follows."""
    p = _ws(p, end)
    if p >= end:
        return NULL
    if p[0] == close:
        closed[0] = True
        return p + 1
    if p[0] != 44:
        return NULL
    return _ws(p + 1, end)


cdef inline int _hex4(const uint8_t* p) noexcept:
    cdef int value = 0, i, c
    for i in range(4):
        c = p[i]
        if 48 <= c <= 57:
            c -= 48
        elif 97 <= c <= 102:
            c -= 87
        elif 65 <= c <= 70:
            c -= 55
        else:
            return -1
        value = (value << 4) | c
    return value


cdef inline Py_ssize_t _put_utf8(uint8_t* out, int code_point) noexcept:
    if code_point < 0x80:
        out[0] = code_point
        return 1
    if code_point < 0x800:
        out[0] = 0xC0 | (code_point >> 6)
        out[1] = 0x80 | (code_point & 0x3F)
        return 2
    if code_point < 0x10000:
        out[0] = 0xE0 | (code_point >> 12)
        out[1] = 0x80 | ((code_point >> 6) & 0x3F)
        out[2] = 0x80 | (code_point & 0x3F)
        return 3
    out[0] = 0xF0 | (code_point >> 18)
    out[1] = 0x80 | ((code_point >> 12) & 0x3F)
    out[2] = 0x80 | ((code_point >> 6) & 0x3F)
    out[3] = 0x80 | (code_point & 0x3F)
    return 4


cdef const uint8_t* _string(
    const uint8_t* p, const uint8_t* end, uint8_t* out, Py_ssize_t* length, bint* high
) noexcept:
    """Unescape the JSON string at ``p`` (its opening quote) into ``out`` as UTF-8; answer the
    position after its closing quote, or NULL when it is not a valid JSON string. ``high``:
    a raw byte >= 0x80 was copied (UTF-8 still to be checked)."""
    cdef Py_ssize_t k = 0
    cdef int c, code_point, low
    p += 1
    while p < end:
        c = p[0]
        if c == 34:
            length[0] = k
            return p + 1
        if c == 92:
            if p + 1 >= end:
                return NULL
            c = p[1]
            if c == 117:
                if end - p < 6:
                    return NULL
                code_point = _hex4(p + 2)
                if code_point < 0:
                    return NULL
                p += 6
                if 0xD800 <= code_point <= 0xDBFF:
                    if end - p < 6 or p[0] != 92 or p[1] != 117:
                        return NULL
                    low = _hex4(p + 2)
                    if low < 0xDC00 or low > 0xDFFF:
                        return NULL
                    p += 6
                    code_point = 0x10000 + ((code_point - 0xD800) << 10) + (low - 0xDC00)
                elif 0xDC00 <= code_point <= 0xDFFF:
                    return NULL
                k += _put_utf8(out + k, code_point)
                continue
            if c == 34 or c == 92 or c == 47:
                out[k] = c
            elif c == 98:
                out[k] = 8
            elif c == 102:
                out[k] = 12
            elif c == 110:
                out[k] = 10
            elif c == 114:
                out[k] = 13
            elif c == 116:
                out[k] = 9
            else:
                return NULL
            k += 1
            p += 2
        elif c < 32:
            return NULL
        else:
            if c >= 0x80:
                high[0] = True
            out[k] = c
            k += 1
            p += 1
    return NULL


cdef inline const uint8_t* _digits(const uint8_t* p, const uint8_t* end) noexcept:
    """Past the one or more ASCII digits at ``p``; NULL when no digit is there."""
    if p >= end or not 48 <= p[0] <= 57:
        return NULL
    while p < end and 48 <= p[0] <= 57:
        p += 1
    return p


cdef const uint8_t* _number(
    const uint8_t* p, const uint8_t* end, int64_t* value, bint* integral
) noexcept:
    """Read a JSON number at ``p``; ``integral``: no fraction, no exponent, at most 18 digits."""
    cdef bint negative = False
    cdef int digits = 0
    cdef int64_t magnitude = 0
    if p < end and p[0] == 45:
        negative = True
        p += 1
    if p >= end:
        return NULL
    if p[0] == 48:
        p += 1
        digits = 1
    elif 49 <= p[0] <= 57:
        while p < end and 48 <= p[0] <= 57:
            if digits < _MAX_DIGITS:
                magnitude = magnitude * 10 + (p[0] - 48)
            digits += 1
            p += 1
    else:
        return NULL
    integral[0] = digits <= _MAX_DIGITS
    if p < end and p[0] == 46:
        p = _digits(p + 1, end)
        if p == NULL:
            return NULL
        integral[0] = False
    if p < end and (p[0] == 101 or p[0] == 69):
        p += 1
        if p < end and (p[0] == 43 or p[0] == 45):
            p += 1
        p = _digits(p, end)
        if p == NULL:
            return NULL
        integral[0] = False
    value[0] = -magnitude if negative else magnitude
    return p



cdef bint _utf8_ok(const uint8_t* data, Py_ssize_t length):
    try:
        PyUnicode_DecodeUTF8(<const char*>data, length, NULL)
    except UnicodeDecodeError:
        return False
    return True


# Value kinds; OTHER: true, false, a number with a fraction, an exponent or over 18 digits,
# an array, an object.
cdef enum:
    _KIND_STRING = 1
    _KIND_INT = 2
    _KIND_NULL = 3
    _KIND_OTHER = 4


cdef struct _Value:
    int kind
    Py_ssize_t length
    bint high
    int64_t number


cdef const uint8_t* _literal(const uint8_t* p, const uint8_t* end, const char* word, int size):
    if end - p < size or memcmp(p, word, size) != 0:
        return NULL
    return p + size


cdef const uint8_t* _read_value(
    const uint8_t* p, const uint8_t* end, uint8_t* out, _Value* value, int depth
):
    """Read the JSON value at ``p`` into ``value`` (a string's bytes unescaped into ``out``);
    the position after it, or NULL when it is not valid JSON (or nested too deep)."""
    cdef bint integral = False
    cdef int c
    if p >= end:
        return NULL
    c = p[0]
    value.high = False
    if c == 34:
        value.kind = _KIND_STRING
        return _string(p, end, out, &value.length, &value.high)
    if c == 45 or 48 <= c <= 57:
        p = _number(p, end, &value.number, &integral)
        value.kind = _KIND_INT if integral else _KIND_OTHER
        return p
    if c == 110:
        value.kind = _KIND_NULL
        return _literal(p, end, b"null", 4)
    value.kind = _KIND_OTHER
    if c == 116:
        return _literal(p, end, b"true", 4)
    if c == 102:
        return _literal(p, end, b"false", 5)
    if depth >= _MAX_DEPTH or (c != 91 and c != 123):
        return NULL
    return _skip_container(p, end, out, depth + 1)


cdef const uint8_t* _skip_container(
    const uint8_t* p, const uint8_t* end, uint8_t* out, int depth
):
    """Check the array or object at ``p`` (its values are not kept)."""
    cdef bint is_object = p[0] == 123
    cdef int close = 125 if is_object else 93
    cdef bint closed = False
    cdef _Value value
    p = _ws(p + 1, end)
    if p < end and p[0] == close:
        return p + 1
    while True:
        if is_object:
            if p >= end or p[0] != 34:
                return NULL
            p = _string(p, end, out, &value.length, &value.high)
            if p == NULL or (value.high and not _utf8_ok(out, value.length)):
                return NULL
            p = _past_colon(p, end)
            if p == NULL:
                return NULL
        p = _read_value(p, end, out, &value, depth)
        if p == NULL:
            return NULL
        if value.kind == _KIND_STRING and value.high and not _utf8_ok(out, value.length):
            return NULL
        p = _past_member(p, end, close, &closed)
        if p == NULL or closed:
            return p


# Slot states: no such key; a value taken; a value of a type not taken (null, true, ...); an
# empty text (ints); a text that is not a plain decimal (ints).
cdef enum:
    _ABSENT = 0
    _OK = 1
    _BAD = 2
    _EMPTY = 3
    _NOT_DECIMAL = 4
    _SLOT_TEXT = 0
    _SLOT_INT = 1
    _SLOT_BOOL = 2


cdef int[14] _SLOT_KINDS = [
    _SLOT_TEXT, _SLOT_TEXT, _SLOT_TEXT, _SLOT_INT, _SLOT_INT, _SLOT_INT, _SLOT_INT, _SLOT_INT,
    _SLOT_TEXT, _SLOT_INT, _SLOT_BOOL, _SLOT_INT, _SLOT_BOOL, _SLOT_TEXT,
]


cdef struct _Slots:
    int state[28]
    int64_t number[28]


cdef inline int _name_index(tuple names, const uint8_t* key, Py_ssize_t length):
    """The position of ``key`` in ``names`` (bytes), -1 when it is not one of them."""
    cdef int index
    cdef bytes name
    for index in range(len(names)):
        name = <bytes>names[index]
        if len(name) == length and memcmp(<const char*>name, key, length) == 0:
            return index
    return -1


cdef int _decimal(const uint8_t* p, Py_ssize_t length, int64_t* number) noexcept:
    """A plain ASCII decimal ('-' allowed, 1 to 18 digits): 1 and its value, else 0."""
    cdef const uint8_t* end = p + length
    cdef bint negative = length > 0 and p[0] == 45
    cdef int64_t value = 0
    if negative:
        p += 1
    if p == end or end - p > _MAX_DIGITS:
        return 0
    while p < end:
        if not 48 <= p[0] <= 57:
            return 0
        value = value * 10 + (p[0] - 48)
        p += 1
    number[0] = -value if negative else value
    return 1


cdef inline bint _true_text(const uint8_t* p, Py_ssize_t length) noexcept:
    """``text.lower() in ("true", "1")`` for ASCII text (no other character lowers to those
    letters)."""
    if length == 1:
        return p[0] == 49
    return length == 4 and (p[0] | 32) == 116 and (p[1] | 32) == 114 and (
        p[2] | 32) == 117 and (p[3] | 32) == 101


cdef bint _take_slot(
    int index, _Value* value, const uint8_t* out, _Slots* slots, list texts
) except -1:
    """Keep ``value`` in slot ``index``; False when a string is not valid UTF-8."""
    cdef int kind = _SLOT_KINDS[index % _FIELDS]
    if value.kind == _KIND_STRING:
        if kind == _SLOT_TEXT:
            try:
                texts[index] = PyUnicode_DecodeUTF8(<const char*>out, value.length, NULL)
            except UnicodeDecodeError:
                return False
            slots.state[index] = _OK
            return True
        if value.high and not _utf8_ok(out, value.length):
            return False
        if kind == _SLOT_BOOL:
            slots.number[index] = _true_text(out, value.length)
            slots.state[index] = _OK
        elif value.length == 0:
            slots.state[index] = _EMPTY
        else:
            slots.state[index] = (
                _OK if _decimal(out, value.length, &slots.number[index]) else _NOT_DECIMAL)
        return True
    if value.kind != _KIND_INT:
        slots.state[index] = _BAD
        return True
    slots.state[index] = _OK
    if kind == _SLOT_TEXT:
        texts[index] = str(value.number)
    elif kind == _SLOT_BOOL:
        slots.number[index] = value.number == 1
    else:
        slots.number[index] = value.number
    return True


cdef const uint8_t* _ext_fields(
    const uint8_t* p, const uint8_t* end, uint8_t* out, _Slots* slots, list texts, dict bad
) except? NULL:
    """Read the extFields object at ``p`` into the slots (one-letter keys 0-13, long names
    14-27); ``bad`` collects other keys whose (last) value is not a string or an integer."""
    cdef Py_ssize_t length = 0
    cdef bint high = False
    cdef bint closed = False
    cdef int index
    cdef _Value value
    for index in range(2 * _FIELDS):
        slots.state[index] = _ABSENT
    bad.clear()
    p = _ws(p + 1, end)
    if p < end and p[0] == 125:
        return p + 1
    while True:
        if p >= end or p[0] != 34:
            return NULL
        p = _string(p, end, out, &length, &high)
        if p == NULL or (high and not _utf8_ok(out, length)):
            return NULL
        if length == 1 and 97 <= out[0] <= 110:
            index = out[0] - 97
        else:
            index = _name_index(_V1_NAMES, out, length)
            if index >= 0:
                index += _FIELDS
        key = None if index >= 0 else PyBytes_FromStringAndSize(<const char*>out, length)
        p = _past_colon(p, end)
        if p == NULL:
            return NULL
        p = _read_value(p, end, out, &value, 0)
        if p == NULL:
            return NULL
        if index >= 0:
            if not _take_slot(index, &value, out, slots, texts):
                return NULL
        elif value.kind == _KIND_STRING or value.kind == _KIND_INT:
            if value.high and not _utf8_ok(out, value.length):
                return NULL
            if bad:
                bad.pop(key, None)
        else:
            bad[key] = True
        p = _past_member(p, end, 125, &closed)
        if p == NULL or closed:
            return p


cdef enum:
    _TOP_CODE = 0
    _TOP_FLAG = 1
    _TOP_LANGUAGE = 2
    _TOP_OPAQUE = 3
    _TOP_REMARK = 4
    _TOP_STAMP = 5
    _TOP_VERSION = 6
    _TOP_EXT = 7


# The header's keys the scan takes, in the order of the _TOP_* indexes.
cdef tuple _TOP_NAMES = (
    b"code", b"flag", b"language", b"opaque", b"remark", b"serializeTypeCurrentRPC", b"version",
    b"extFields",
)


cdef object _scan(const uint8_t* p, const uint8_t* end, uint8_t* out):
    cdef int top_state[8]
    cdef int64_t top_number[8]
    cdef _Slots slots
    cdef _Value value
    cdef list texts = [None] * (2 * _FIELDS)
    cdef dict bad = {}
    cdef Py_ssize_t length = 0
    cdef bint high = False
    cdef bint closed = False
    cdef int index
    language = None
    for index in range(8):
        top_state[index] = _ABSENT
    p = _ws(p, end)
    if p >= end or p[0] != 123:
        return None
    p = _ws(p + 1, end)
    while True:
        if p >= end or p[0] != 34:
            return None  # also "{}": no code
        p = _string(p, end, out, &length, &high)
        if p == NULL:
            return None
        index = _name_index(_TOP_NAMES, out, length)
        if index < 0:
            return None  # a key the scan does not take (or not valid UTF-8)
        p = _past_colon(p, end)
        if p == NULL:
            return None
        if index == _TOP_EXT and p < end and p[0] == 123:
            p = _ext_fields(p, end, out, &slots, texts, bad)
            top_state[index] = _OK
        else:
            p = _read_value(p, end, out, &value, 0)
            if p == NULL:
                return None
            if value.kind == _KIND_STRING and value.high and not _utf8_ok(out, value.length):
                return None
            top_state[index] = _BAD
            if index == _TOP_LANGUAGE:
                if value.kind == _KIND_STRING:
                    language = PyUnicode_DecodeUTF8(<const char*>out, value.length, NULL)
                    top_state[index] = _OK
            elif index == _TOP_REMARK:
                if value.kind == _KIND_STRING or value.kind == _KIND_NULL:
                    top_state[index] = _OK
            elif index == _TOP_STAMP:
                if value.kind == _KIND_STRING:
                    top_state[index] = _OK
            elif index != _TOP_EXT and value.kind == _KIND_INT:
                top_number[index] = value.number
                top_state[index] = _OK
        if p == NULL:
            return None
        p = _past_member(p, end, 125, &closed)
        if p == NULL:
            return None
        if closed:
            break
    if _ws(p, end) != end:
        return None
    return _assemble(top_state, top_number, language, &slots, texts, bad)


cdef inline bint _int32_or_absent(int state, int64_t number) noexcept:
    return state == _ABSENT or (state == _OK and -2147483648 <= number <= 2147483647)


cdef object _assemble(
    int* top_state, int64_t* top_number, object language, _Slots* slots, list texts, dict bad
):
    global _languages, _other_language
    cdef int64_t code = top_number[_TOP_CODE]
    cdef int base, index
    cdef int* state
    cdef int64_t* number
    if (
        top_state[_TOP_CODE] != _OK or not (code == _SEND_MESSAGE or code == _SEND_MESSAGE_V2)
        or not (top_state[_TOP_FLAG] == _ABSENT
                or (top_state[_TOP_FLAG] == _OK and top_number[_TOP_FLAG] == 0))
        or top_state[_TOP_EXT] != _OK or bad
        or top_state[_TOP_LANGUAGE] != _OK
        or top_state[_TOP_REMARK] == _BAD or top_state[_TOP_STAMP] == _BAD
        or not _int32_or_absent(top_state[_TOP_VERSION], top_number[_TOP_VERSION])
        or not _int32_or_absent(top_state[_TOP_OPAQUE], top_number[_TOP_OPAQUE])
    ):
        return None
    for index in range(2 * _FIELDS):  # the other key set's too: every value a text or integer
        if slots.state[index] == _BAD:
            return None
    base = 0 if code == _SEND_MESSAGE_V2 else _FIELDS
    state = slots.state + base
    number = slots.number + base
    for index in range(_FIELDS):
        if state[index] == _NOT_DECIMAL:
            return None
    for index in range(3, 8):
        if state[index] != _OK:
            return None
    if state[0] != _OK or state[1] != _OK or state[2] != _OK:
        return None
    if _languages is None:
        from bolide.protocol.send_scan import _LANGUAGE_BY_NAME
        _languages = _LANGUAGE_BY_NAME
        _other_language = _LANGUAGE_BY_NAME["OTHER"]
    properties = texts[base + 8] if state[8] == _OK else None
    broker_name = texts[base + 13] if state[13] == _OK else None
    return (
        <int>code,
        top_number[_TOP_OPAQUE] if top_state[_TOP_OPAQUE] == _OK else 0,
        _languages.get(language, _other_language),
        top_number[_TOP_VERSION] if top_state[_TOP_VERSION] == _OK else 0,
        texts[base], texts[base + 1], texts[base + 2],
        number[3], number[4], number[5], number[6], number[7],
        properties or None,
        number[9] if state[9] == _OK else None,
        state[10] == _OK and number[10] != 0,
        number[11] if state[11] == _OK else None,
        state[12] == _OK and number[12] != 0,
        broker_name or None,
    )


def scan_send_request(header):
    """The values of a common send request's JSON ``header``, else None; see send_scan.py."""
    cdef Py_buffer buffer
    cdef uint8_t stack[_STACK_BUFFER_BYTES]
    cdef uint8_t* out = stack
    PyObject_GetBuffer(header, &buffer, PyBUF_SIMPLE)
    try:
        if buffer.len > _STACK_BUFFER_BYTES:
            out = <uint8_t*>PyMem_Malloc(buffer.len)
            if out == NULL:
                raise MemoryError()
        try:
            return _scan(<const uint8_t*>buffer.buf, <const uint8_t*>buffer.buf + buffer.len, out)
        finally:
            if out != stack:
                PyMem_Free(out)
    finally:
        PyBuffer_Release(&buffer)
