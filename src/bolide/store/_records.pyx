"""Compiled twin of the put path's record build in :mod:`bolide.store.records` (Cython),
one piece of the
``bolide.store._compiled`` extension (``_compiled.pyx`` includes it).

Same names, signatures, answers and errors as the pure-Python code there, which is the
reference; tests/store/test_put_twins.py holds the two to the same records and the same
refusals. The properties string is read through ``record.store_properties`` (its one home,
compiled in ``protocol/record/_properties.pyx``). This piece comes before ``_appender.pyx``,
which shares its declarations.
"""

from cpython.buffer cimport PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.unicode cimport PyUnicode_FromStringAndSize
from libc.stdint cimport uint64_t
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
