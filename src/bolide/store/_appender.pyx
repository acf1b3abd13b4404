"""Compiled twin of the put path's store steps in :mod:`bolide.store.appender` (Cython),
one piece of the
``bolide.store._compiled`` extension (``_compiled.pyx`` includes it): the single put as one unit (room in queue, commit log and
index, the record written by ``record.write_records``, the index entry queued, the 20-byte
consume-queue entry, the arrival listeners, the result) and a batch's message ids and entries.
Same answers and bytes as the pure-Python code (tests/store/test_put_twins.py).
"""

def put_one(builder, appender, request):
    """One message validated and stored; see appender.put_one."""
    cdef PreparedRecord record
    _load()
    queue_id = request.queue_id
    if not 0 <= queue_id < _QUEUE_IDS_MAX:
        raise RejectedError(PutStatus.MESSAGE_ILLEGAL, f"queue id {queue_id} out of range")
    sys_flag = request.sys_flag
    born_timestamp_ms = request.born_timestamp_ms
    born_host = request.born_host
    reconsume_times = request.reconsume_times
    prepared_transaction_offset = request.prepared_transaction_offset
    born_port = born_host[1]
    born_ip = None
    if (_int32(sys_flag) and _int32(reconsume_times) and _int64(born_timestamp_ms)
            and _int64(prepared_transaction_offset) and type(born_port) is int
            and 0 <= born_port <= 0xFFFF):
        born_ip = builder._born_ips.get(born_host[0])
    if born_ip is None:  # checked (and refused, or cached) the general way
        born_ip = builder.check_fields(
            sys_flag, born_timestamp_ms, born_host, reconsume_times, prepared_transaction_offset)
    topic = builder._topics.get(request.topic)
    if topic is None:
        topic = builder.topic(request.topic)
    properties = request.properties
    if type(properties) is not str:  # a mapping: encoded by the general code
        record = builder._record(topic, request.body, request.flag, properties, born_host)
    else:
        extra = builder._store_extra_bytes
        if ":" in born_host[0]:
            extra += IPV6_EXTRA
        record = _build(topic, request.body, request.flag, properties, extra,
                        builder._max_message_size_bytes, builder._index_max_entries,
                        builder._tags_codes)
    if record.size + _BLANK_MIN > builder._segment_bytes:
        raise RejectedError(
            PutStatus.MESSAGE_ILLEGAL,
            f"{record.size} bytes of records do not fit a commit-log segment")
    tags_code = request.tags_code
    if tags_code is None and not topic.is_schedule:
        return append_single(
            appender, topic, queue_id, record, sys_flag, born_timestamp_ms, born_ip, born_port,
            reconsume_times, prepared_transaction_offset)
    return appender.append(
        topic, queue_id, [record], sys_flag, born_timestamp_ms, born_ip, born_port,
        reconsume_times, prepared_transaction_offset, tags_code)


cdef inline bint _int32(value):
    return type(value) is int and -0x80000000 <= value <= 0x7FFFFFFF


cdef inline bint _int64(value):
    return type(value) is int and -0x8000000000000000 <= value <= 0x7FFFFFFFFFFFFFFF


def append_single(appender, topic, queue_id, record, int32_t sys_flag, born_timestamp_ms,
                  born_ip, born_port, reconsume_times, prepared_transaction_offset):
    """One record appended; see appender.append_single."""
    cdef int64_t base_offset, store_timestamp_ms, size, max_offset
    cdef char digits[17]
    _load()
    cdef timespec now
    queue = None
    if not sys_flag & TRANSACTION_MASK or _gets_queue_entry(sys_flag):
        queues = appender._queues
        by_id = queues.queues.get(topic.name)  # ConsumeQueueTable.get_or_create's found case
        if by_id is not None:
            queue = by_id.get(queue_id)
        if queue is None:
            queue = queues.get_or_create(topic.name, queue_id)
        if queue.max_offset >= queue.room_end_offset:
            queue.prepare_append(1)
    size = record.size
    segment = _reserved(appender._commit_log, size)  # CommitLog.reserve's usual case
    if segment is None:
        segment, position = appender._commit_log.reserve(size)
    else:
        position = segment.write_position
    base_offset = segment.start_offset + position
    hashes = record.hashes
    index = appender._index
    if hashes and len(hashes) > index._room:  # KeyIndex.prepare_one
        index.prepare_one(base_offset, len(hashes))
    clock = appender._clock
    if type(clock) is _SystemClock:  # SystemClock.now_ms: time.time_ns() // 1_000_000
        clock_gettime(CLOCK_REALTIME, &now)
        store_timestamp_ms = <int64_t>now.tv_sec * 1000 + now.tv_nsec // 1000000
    else:
        store_timestamp_ms = clock.now_ms()
    first_queue_offset = None if queue is None else queue.max_offset
    segment.write_position = _write_records(
        segment.view, position, (record,), topic.tail_prefix, queue_id, first_queue_offset,
        base_offset, sys_flag, born_timestamp_ms, born_ip, born_port, store_timestamp_ms,
        appender._store_ip, appender._store_port, reconsume_times, prepared_transaction_offset)
    if hashes:  # KeyIndex.add_record's steps
        pending = index._pending
        pending.append((base_offset, store_timestamp_ms, hashes))
        index._room -= len(hashes)
        if len(pending) >= _INDEX_PENDING_MAX:
            index.drain()
    if queue is not None:
        code = record.tags_code
        _queue_append(queue, base_offset, size, code)
        appender.dirty_queues.add(queue)
        max_offset = queue.max_offset
        deferred = appender._deferred
        if deferred is not None:
            key = (topic.name, queue_id)
            held = deferred.get(key)
            if held is None:
                deferred[key] = [max_offset, {code: None}]
            else:
                held[0] = max_offset
                held[1][code] = None
        else:
            name = topic.name
            for listener in appender.listeners:
                try:
                    listener(name, queue_id, max_offset, code)
                except Exception:
                    _log.exception("arrival listener failed")
    appender.put_count += 1
    appender.put_bytes += size
    _hex16(base_offset, digits)
    return PutResult(
        _PUT_OK, base_offset, first_queue_offset or 0, store_timestamp_ms, size,
        [appender._message_id_prefix + PyUnicode_FromStringAndSize(digits, 16)], 1)


cdef object _reserved(commit_log, int64_t size):
    """The tail segment when it has room for ``size`` bytes and the blank marker before its
    refill position (blocks reserved ahead, not poisoned), else None: CommitLog.reserve
    decides the rest (including reserving the next chunk ahead)."""
    segments = commit_log.segments
    if not segments:
        return None
    segment = segments[len(segments) - 1]
    if segment.poison is not None:
        return None
    if segment.write_position + size + _BLANK_MIN > segment.refill_position:
        return None  # no room, or time to reserve the next chunk ahead: CommitLog.reserve
    return segment


cdef int _queue_append(queue, int64_t commit_log_offset, int64_t size, int64_t tags_code) except -1:
    """ConsumeQueue.append: the 20-byte entry (>qiq) at the queue's end, room made before."""
    cdef Py_buffer target
    cdef int64_t queue_offset = queue.max_offset
    cdef int64_t byte_offset = queue_offset * CQ_ENTRY_BYTES, position
    cdef uint8_t* p
    segments = queue.segments
    segment = segments[len(segments) - 1]
    position = byte_offset - segment.start_offset
    if position < 0:  # a file made ahead by a failed put: the general code finds the file
        queue.append(commit_log_offset, size, tags_code)
        return 0
    if position + CQ_ENTRY_BYTES > segment.allocated_position:
        _invariant(False, f"append without room in {segment.path}")
    PyObject_GetBuffer(segment.view, &target, PyBUF_WRITABLE)
    try:
        if position + CQ_ENTRY_BYTES > target.len:
            _invariant(False, f"append beyond the mapping of {segment.path}")
        p = <uint8_t*>target.buf + position
        _put64(p, commit_log_offset)
        _put32(p + 8, <uint32_t><int32_t>size)
        _put64(p + 12, tags_code)
    finally:
        PyBuffer_Release(&target)
    segment.write_position = position + CQ_ENTRY_BYTES
    queue.max_offset = queue_offset + 1
    return 0


def batch_entries(records, int64_t base_offset, str message_id_prefix,
                  int64_t store_timestamp_ms, list index_records):
    """Message ids and consume-queue entries of a batch; see appender.batch_entries."""
    cdef list message_ids = []
    cdef list entries = []
    cdef PreparedRecord record
    cdef int64_t offset = base_offset, size
    cdef char digits[17]
    for item in records:
        if type(item) is PreparedRecord:
            record = <PreparedRecord>item
            hashes, size, code = record.hashes, record.size, record.tags_code
        else:  # the pure twin's record (differential tests)
            hashes, size, code = item.hashes, item.size, item.tags_code
        _hex16(offset, digits)
        message_ids.append(message_id_prefix + PyUnicode_FromStringAndSize(digits, 16))
        if hashes:
            index_records.append((offset, store_timestamp_ms, hashes))
        entries.append((offset, size, code))
        offset += size
    return message_ids, entries


cdef inline void _hex16(int64_t value, char* digits) noexcept:
    """``f"{value:016X}"`` of a non-negative offset."""
    cdef uint64_t v = <uint64_t>value
    cdef int k
    for k in range(15, -1, -1):
        digits[k] = _HEX_DIGITS[v & 15]
        v >>= 4
    digits[16] = 0
