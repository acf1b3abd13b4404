"""Compiled twin of :func:`bolide.protocol.record.messages.decode_messages` (Cython),
one piece of the ``bolide.protocol.record._compiled`` extension (``_compiled.pyx``
includes it): a pull body decoded in one pass.
``tests/protocol/test_wire_twins.py`` holds them alike.
"""

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
