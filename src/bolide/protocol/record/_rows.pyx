"""Compiled twin of :func:`bolide.protocol.record.rows.scan_rows` (Cython),
one piece of the ``bolide.protocol.record._compiled`` extension (``_compiled.pyx``
includes it): a pull body cut into Spark's column buffers.
``tests/protocol/test_wire_twins.py`` holds them alike.
"""

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
