"""Compiled twin of :class:`bolide.store.recovery_scan.SegmentScanner` (Cython), one piece of the
``bolide.store._compiled`` extension (``_compiled.pyx`` includes it).

Same class, answers, counters and consume-queue/index bytes as the pure-Python one, which is
the reference (its module doc says what the scan does);
tests/store/test_recovery_twins.py holds them alike. The record walk, the prefix reads and
the store's rules run in C; the record check stays ``read_stored_record`` (itself compiled,
the one home of the record layout) and the writes go through the queues' and the index's
own methods.
"""

import logging
import zlib


from bolide.base import limits
from bolide.base.errors import ProtocolError
from bolide.protocol.message import MessageSysFlag
from bolide.protocol.system_topics import SCHEDULE_TOPIC
from bolide.protocol.record import BLANK_MAGIC_CODE, read_stored_record
from bolide.store.consume_queue import topic_is_storable
from bolide.store.dispatch import index_hashes, queue_tags_code
from bolide.store.index_file import index_key_seed

_scan_log = logging.getLogger("bolide.store.recovery")

QUEUE_RUN_MAX_ENTRIES = limits.RECOVERY_QUEUE_RUN_MAX_ENTRIES

cdef int64_t _SCAN_BLANK_MIN = limits.COMMIT_LOG_BLANK_MIN_BYTES
cdef int64_t _SCAN_QUEUE_IDS_MAX = limits.STORE_QUEUE_IDS_MAX_COUNT
cdef Py_ssize_t _SCAN_CACHE_MAX = limits.STORE_NAME_CACHE_MAX_ENTRIES
cdef Py_ssize_t _RUN_MAX = limits.RECOVERY_QUEUE_RUN_MAX_ENTRIES
cdef int32_t _BLANK_MAGIC = BLANK_MAGIC_CODE
# dispatch.gets_queue_entry in C: no consume-queue entry for PREPARED or ROLLBACK halves.
# (TRANSACTION_MASK, a cdef int32, is declared by _records.pyx, included before this piece)
cdef int64_t _PREPARED = int(MessageSysFlag.TRANSACTION_PREPARED)
cdef int64_t _ROLLBACK = int(MessageSysFlag.TRANSACTION_ROLLBACK)
_scan_crc32 = zlib.crc32

# Field numbers of bolide.protocol.record.RecordHeader (a NamedTuple: read as a tuple).
cdef enum:
    H_QUEUE_ID = 4
    H_QUEUE_OFFSET = 6
    H_SYS_FLAG = 8
    H_STORE_TIMESTAMP = 10
    H_TOPIC = 15


cdef class _QueueRun:
    cdef public object queue
    cdef public int64_t next_offset
    cdef public list entries

    def __init__(self, queue):
        self.queue = queue
        self.next_offset = queue.max_offset
        self.entries = []


cdef class SegmentScanner:
    """Scans segments for one recovery run; counts what it re-created."""

    cdef public int64_t records
    cdef public int64_t queue_entries
    cdef public int64_t gaps
    cdef public int64_t index_entries
    cdef object _queues
    cdef object _index
    cdef tuple _delay_levels_ms
    cdef dict _tags_codes
    cdef dict _key_seeds
    cdef set _sound_topics
    cdef dict _runs
    cdef object _index_max_entries
    cdef int64_t _indexed_end

    def __init__(self, queues, index, tuple delay_levels_ms):
        self.records = 0
        self.queue_entries = 0
        self.gaps = 0
        self.index_entries = 0
        self._queues = queues
        self._index = index
        self._delay_levels_ms = delay_levels_ms
        self._tags_codes = {}
        self._key_seeds = {}
        self._sound_topics = set()
        self._runs = {}
        self._index_max_entries = index.max_entries
        self._indexed_end = -1

    def scan(self, view, Py_ssize_t size, Py_ssize_t position, int64_t offset):
        """See the pure twin."""
        self._indexed_end = self._index.end_commit_log_offset
        try:
            return self._scan(view, size, position, offset)
        finally:
            self.finish()

    cdef tuple _scan(self, view, Py_ssize_t size, Py_ssize_t position, int64_t offset):
        cdef const uint8_t[::1] data = view
        cdef const uint8_t* base = &data[0]
        cdef int32_t total_size, magic
        cdef int64_t transaction
        cdef int64_t queue_id
        cdef tuple header
        cdef str topic
        while position < size:
            if position + _SCAN_BLANK_MIN > size:
                return offset, f"record boundary {offset} too close to its segment end", False
            total_size = _i32(base + position)
            magic = _i32(base + position + 4)
            if total_size == 0:
                return offset, None, False
            if magic == _BLANK_MAGIC:
                if total_size != size - position:
                    return offset, f"blank marker of {total_size} bytes at {offset} is wrong", False
                return offset + total_size, None, True
            try:
                header_object, properties = read_stored_record(view, position, offset)
            except ProtocolError as error:
                return offset, f"unsound record at {offset}: {error}", False
            header = <tuple>header_object
            queue_id = header[H_QUEUE_ID]
            topic = header[H_TOPIC]
            if not 0 <= queue_id < _SCAN_QUEUE_IDS_MAX:
                return offset, f"record at {offset} has queue id {queue_id}", False
            if topic not in self._sound_topics:
                if not topic_is_storable(topic):
                    return offset, f"record at {offset} has an impossible topic {topic!r}", False
                if len(self._sound_topics) < _SCAN_CACHE_MAX:
                    self._sound_topics.add(topic)
            self.records += 1
            tags, keys, unique_key, delay = properties
            store_timestamp_ms = header[H_STORE_TIMESTAMP]
            transaction = <int64_t>header[H_SYS_FLAG] & TRANSACTION_MASK
            if transaction != _PREPARED and transaction != _ROLLBACK:
                self._queue_entry(
                    topic, queue_id, header[H_QUEUE_OFFSET], offset, total_size,
                    self._tags_code(topic, tags, delay, store_timestamp_ms),
                )
            self._index_entries(topic, offset, store_timestamp_ms, keys, unique_key)
            offset += total_size
            position += total_size
        return offset, None, True

    cdef object _tags_code(self, str topic, object tags, object delay, object store_timestamp_ms):
        if topic != SCHEDULE_TOPIC and tags:
            code = self._tags_codes.get(tags)
            if code is not None:
                return code
        return queue_tags_code(
            topic, tags, delay if topic == SCHEDULE_TOPIC else None, store_timestamp_ms,
            self._delay_levels_ms, self._tags_codes,
        )

    cdef void _queue_entry(
        self, str topic, int64_t queue_id, int64_t queue_offset, int64_t offset, int64_t size,
        object code,
    ) except *:
        key = (topic, queue_id)
        cdef _QueueRun run = self._runs.get(key)
        if run is None:
            if len(self._runs) >= _SCAN_CACHE_MAX:
                self.finish()
            run = _QueueRun(self._queues.get_or_create(topic, queue_id))
            self._runs[key] = run
        if queue_offset < run.next_offset:
            return
        if queue_offset > run.next_offset:
            _write_run(run)
            queue = run.queue
            if queue.max_offset == queue.min_offset:
                queue.restart_at(queue_offset)
            else:
                self.gaps += 1
                _scan_log.error(
                    "queue %s/%d misses entries %d..%d; record %d appended at %d",
                    topic, queue_id, queue.max_offset, queue_offset - 1, offset,
                    queue.max_offset,
                )
            run.next_offset = queue.max_offset
        run.entries.append((offset, size, code))
        run.next_offset += 1
        self.queue_entries += 1
        if len(run.entries) >= _RUN_MAX:
            _write_run(run)

    cdef void _index_entries(
        self, str topic, int64_t offset, object store_timestamp_ms, object keys, object unique,
    ) except *:
        key_seed = self._key_seeds.get(topic)
        if key_seed is None:
            key_seed = index_key_seed(topic)
            if len(self._key_seeds) < _SCAN_CACHE_MAX:
                self._key_seeds[topic] = key_seed
        index = self._index
        cdef list hashes
        if not keys and unique and self._index_max_entries:
            # dispatch.index_hashes' common case (UNIQ_KEY only) without its call.
            hashes = [_scan_crc32((<str>unique).encode("utf-8", "surrogatepass"), key_seed)]
        else:
            hashes = index_hashes(key_seed, keys, unique, self._index_max_entries)
        if hashes and offset > self._indexed_end:
            index.prepare_one(offset, len(hashes))
            index.add_record(offset, store_timestamp_ms, hashes)
            self.index_entries += len(hashes)

    def finish(self):
        """Write every collected consume-queue entry (and forget the queues)."""
        cdef _QueueRun run
        for run in self._runs.values():
            _write_run(run)
        self._runs.clear()


cdef void _write_run(_QueueRun run) except *:
    cdef list entries = run.entries
    if not entries:
        return
    queue = run.queue
    if queue.max_offset + len(entries) > queue.room_end_offset:
        queue.prepare_append(len(entries))
    queue.append_many(entries)
    run.entries = []
