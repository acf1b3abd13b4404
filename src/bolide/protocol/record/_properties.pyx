"""Compiled twin of the hot functions of :mod:`bolide.protocol.record.properties` (Cython),
one piece of the ``bolide.protocol.record._compiled`` extension (``_compiled.pyx``
includes it): the properties string's parse, the send path's edit and the four
properties the store reads. ``tests/protocol/test_wire_twins.py`` holds them alike.
"""

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
