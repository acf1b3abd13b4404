# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, embedsignature=True
"""Compiled twin of the store's put path pieces in :mod:`bolide.store.records` and
:mod:`bolide.store.appender` (Cython).

Same names, signatures, answers and errors as the pure-Python code there, which is the
reference; tests/store/test_put_twins.py holds the two to the same records, the same
commit-log, consume-queue and index bytes and the same refusals. The properties string is
read through :func:`bolide.protocol.record.properties.store_properties` (its one home, compiled in
``_wire_c.pyx``); the record bytes are written by ``record.layout.write_records``.
"""

from cpython.buffer cimport PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.unicode cimport PyUnicode_FromStringAndSize
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from posix.time cimport CLOCK_REALTIME, clock_gettime, timespec

import logging
import zlib

from bolide.base import limits
from bolide.base.clock import SystemClock as _SystemClock
from bolide.base.errors import invariant as _invariant
from bolide.protocol.message import TRANSACTION_MASK as _TRANSACTION_MASK
from bolide.protocol.record import write_records as _write_records
from bolide.protocol.message import tags_code as _java_tags_code
from bolide.protocol.record import join_properties as _join
from bolide.protocol.record import store_properties as _store_properties

cdef object _crc32 = zlib.crc32
cdef const char* _HEX_DIGITS = b"0123456789ABCDEF"
cdef Py_ssize_t _PROPERTIES_MAX = limits.MESSAGE_PROPERTIES_MAX_BYTES
cdef Py_ssize_t _CACHE_MAX = limits.STORE_NAME_CACHE_MAX_ENTRIES
cdef Py_ssize_t _INDEX_PENDING_MAX = limits.INDEX_PENDING_MAX_RECORDS
cdef Py_ssize_t _QUEUE_IDS_MAX = limits.STORE_QUEUE_IDS_MAX_COUNT
cdef Py_ssize_t _BLANK_MIN = limits.COMMIT_LOG_BLANK_MIN_BYTES
cdef int32_t TRANSACTION_MASK = _TRANSACTION_MASK
_log = logging.getLogger("bolide.store")

cdef enum:
    OVERHEAD = 91  # record.RECORD_OVERHEAD_BYTES
    CQ_ENTRY_BYTES = 20  # consume_queue.ENTRY_BYTES
    IPV6_EXTRA = 12  # record.IPV6_HOST_EXTRA_BYTES

# records.py imports this module at its end; its names are looked up at first use.
cdef object RejectedError = None
cdef object PutStatus = None
cdef object _index_hashes = None


cdef object PutResult = None
cdef object _PUT_OK = None
cdef object _gets_queue_entry = None


cdef int _load() except -1:
    global RejectedError, PutStatus, _index_hashes, PutResult, _PUT_OK, _gets_queue_entry
    if RejectedError is None:
        from bolide.store import api, dispatch, records
        RejectedError = records.RejectedError
        PutStatus = api.PutStatus
        PutResult = api.PutResult
        _PUT_OK = api.PutStatus.PUT_OK
        _index_hashes = dispatch.index_hashes
        _gets_queue_entry = dispatch.gets_queue_entry
    return 0


cdef class PreparedRecord:
    """One record of a put, validated (see records.PreparedRecord)."""

    cdef public object body
    cdef public int flag
    cdef public bytes properties_bytes
    cdef public Py_ssize_t size
    cdef public object tags
    cdef public int tags_code
    cdef public object delay
    cdef public list hashes
    cdef public uint32_t body_crc

    def __init__(self, body, int flag, bytes properties_bytes, Py_ssize_t size, tags,
                 int tags_code, delay, list hashes):
        self.body = body
        self.flag = flag
        self.properties_bytes = properties_bytes
        self.size = size
        self.tags = tags
        self.tags_code = tags_code
        self.delay = delay
        self.hashes = hashes
        self.body_crc = _crc32(body) & 0x7FFFFFFF


def build_record(topic, body, flag, str text, Py_ssize_t extra_bytes,
                 Py_ssize_t max_body_bytes, Py_ssize_t index_max_entries, dict tags_codes):
    """The validated record of one message; see records.build_record."""
    _load()
    return _build(topic, body, flag, text, extra_bytes, max_body_bytes, index_max_entries,
                  tags_codes)


def build_records(topic, entries, str extra_properties, Py_ssize_t extra_bytes,
                  Py_ssize_t max_body_bytes, Py_ssize_t index_max_entries, dict tags_codes):
    """The validated records of a batch's entries; see records.build_records."""
    cdef list built = []
    _load()
    for entry in entries:
        built.append(_build(
            topic, entry.body, entry.flag, _join(entry.properties, extra_properties),
            extra_bytes, max_body_bytes, index_max_entries, tags_codes))
    return built


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
    """The tail segment when it has room for ``size`` bytes and the blank marker (blocks
    reserved ahead, not poisoned), else None: CommitLog.reserve decides the rest."""
    segments = commit_log.segments
    if not segments:
        return None
    segment = segments[len(segments) - 1]
    if segment.poison is not None:
        return None
    if segment.write_position + size + _BLANK_MIN > segment.allocated_position:
        return None
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


cdef inline void _put32(uint8_t* p, uint32_t v) noexcept:
    p[0] = <uint8_t>(v >> 24)
    p[1] = <uint8_t>(v >> 16)
    p[2] = <uint8_t>(v >> 8)
    p[3] = <uint8_t>v


cdef inline void _put64(uint8_t* p, int64_t value) noexcept:
    _put32(p, <uint32_t>(<uint64_t>value >> 32))
    _put32(p + 4, <uint32_t>value)


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


cdef PreparedRecord _build(topic, body, flag, str text, Py_ssize_t extra_bytes,
                           Py_ssize_t max_body_bytes, Py_ssize_t index_max_entries,
                           dict tags_codes):
    cdef Py_ssize_t body_length, properties_length
    cdef PreparedRecord record
    if not -0x80000000 <= flag <= 0x7FFFFFFF:
        raise RejectedError(PutStatus.MESSAGE_ILLEGAL, f"flag {flag} is not an int32")
    body_length = len(body)
    if body_length > max_body_bytes:
        raise RejectedError(
            PutStatus.MESSAGE_ILLEGAL,
            f"body of {body_length} bytes exceeds {max_body_bytes}")
    try:
        properties_bytes = text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise RejectedError(
            PutStatus.MESSAGE_ILLEGAL, "properties cannot be encoded as UTF-8") from error
    properties_length = PyBytes_GET_SIZE(properties_bytes)
    if properties_length and PyBytes_AS_STRING(properties_bytes)[properties_length - 1] == 0:
        raise RejectedError(PutStatus.MESSAGE_ILLEGAL, "properties end with a NUL character")
    if properties_length > _PROPERTIES_MAX:
        raise RejectedError(
            PutStatus.PROPERTIES_SIZE_EXCEEDED,
            f"properties of {properties_length} bytes exceed {_PROPERTIES_MAX}")
    tags, keys, unique_key, delay = _store_properties(text)
    encoded_topic = topic.encoded
    key_seed = topic.key_seed
    if keys or not unique_key:
        hashes = _index_hashes(key_seed, keys, unique_key, index_max_entries)
    else:  # one UNIQ_KEY (max entries >= 2 by config); valid UTF-8, as the text encoded
        hashes = [_crc32(unique_key.encode("utf-8"), key_seed)]
    code = 0
    if tags:
        cached = tags_codes.get(tags)
        if cached is None:
            code = _java_tags_code(tags)
            if len(tags_codes) < _CACHE_MAX:
                tags_codes[tags] = code
        else:
            code = cached
    record = PreparedRecord.__new__(PreparedRecord)
    record.body = body
    record.flag = flag
    record.properties_bytes = properties_bytes
    record.size = OVERHEAD + body_length + len(encoded_topic) + properties_length + extra_bytes
    record.tags = tags
    record.tags_code = code
    record.delay = delay if topic.is_schedule else None
    record.hashes = hashes
    record.body_crc = _crc32(body) & 0x7FFFFFFF
    return record
