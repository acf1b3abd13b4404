"""Compiled twin of :func:`bolide.store.index_file.write_index_entries` (Cython), one piece of the
``bolide.store._compiled`` extension (``_compiled.pyx`` includes it).

Same signature, bytes and answers as the pure-Python function, which is the reference (the
index file layout is drawn in index_file.py); tests/store/test_index_twins.py holds them alike.
"""

from cpython.buffer cimport PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer

from bolide.base.errors import invariant

cdef enum:
    HEADER_BYTES = 48
    ENTRY_BYTES = 20


def write_index_entries(view, records, Py_ssize_t entry_at, int32_t count, int32_t slot_count,
                        int64_t begin_time_ms, int64_t end_time_ms, int64_t begin_offset):
    """Write the entries of ``records``; see index_file.write_index_entries."""
    cdef Py_buffer target
    cdef uint8_t* base
    cdef Py_ssize_t slot_at, size
    cdef int64_t commit_log_offset = 0, store_timestamp_ms, delta_s
    cdef uint32_t key_hash
    cdef int32_t previous
    if slot_count <= 0:
        invariant(False, "an index file has slots")
    PyObject_GetBuffer(view, &target, PyBUF_WRITABLE)
    try:
        base = <uint8_t*>target.buf
        size = target.len
        if HEADER_BYTES + 4 * <Py_ssize_t>slot_count > size:
            invariant(False, "index slots beyond the mapping")
        for commit_log_offset, store_timestamp_ms, key_hashes in records:
            delta_s = store_timestamp_ms - begin_time_ms
            delta_s = 0 if delta_s < 0 else delta_s // 1000
            if delta_s > 2147483647:  # clamped into an int32, as the pure twin does
                delta_s = 2147483647
            if store_timestamp_ms > end_time_ms:
                end_time_ms = store_timestamp_ms
            for hash_value in key_hashes:
                key_hash = hash_value
                if entry_at < 0 or entry_at + ENTRY_BYTES > size:
                    invariant(False, "index entry beyond the mapping")
                count += 1
                slot_at = HEADER_BYTES + 4 * (key_hash % <uint32_t>slot_count)
                previous = _i32(base + slot_at)
                if not 0 <= previous < count:
                    previous = 0  # a slot written just before a crash, past the entry count
                _put32(base + entry_at, key_hash)
                _put64(base + entry_at + 4, commit_log_offset)
                _put32(base + entry_at + 12, <uint32_t><int32_t>delta_s)
                _put32(base + entry_at + 16, <uint32_t>previous)
                _put32(base + slot_at, <uint32_t>count)
                entry_at += ENTRY_BYTES
            _put64(base + 8, begin_time_ms)
            _put64(base + 16, end_time_ms)
            _put64(base + 24, begin_offset)
            _put64(base + 32, commit_log_offset)
            _put32(base + 40, <uint32_t>slot_count)
            _put32(base + 44, <uint32_t>count)
        return count, entry_at, end_time_ms
    finally:
        PyBuffer_Release(&target)
