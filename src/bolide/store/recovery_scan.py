"""Recovery's commit-log scan: walk one segment's records, check each, re-dispatch it.

:class:`SegmentScanner` is step 4 of recovery (store/recovery.py): from a record boundary it
reads record after record (``read_stored_record``: magic, sizes, PHYSICALOFFSET, body CRC,
UTF-8, a torn tail), applies the store's own rules (queue id range, a storable topic) and
re-creates the record's consume-queue entry and index entries. The first unsound record ends
the data.

Consume-queue entries are collected per queue and written in runs (``append_many``) instead
of one call a record: records of many queues interleave in the log, each queue's own entries
stay in order, and :meth:`SegmentScanner.finish` writes what is still collected (the scan
calls it before it returns). Index entries are added record by record, as a put does.

This module is the pure-Python twin, and the reference, of ``_recovery_scan.pyx`` (the same
class compiled; setup.py builds it): both leave the same consume-queue and index bytes, the
same counters and the same cut reasons (tests/store/test_recovery_twins.py).
"""

from __future__ import annotations

import logging
from typing import Final

from bolide.base import compiled, limits
from bolide.base.errors import ProtocolError
from bolide.protocol.record import BLANK_MAGIC_CODE, RECORD_PREFIX, read_stored_record
from bolide.protocol.system_topics import SCHEDULE_TOPIC
from bolide.store.consume_queue import (
    ConsumeQueue,
    ConsumeQueueEntry,
    ConsumeQueueTable,
    topic_is_storable,
)
from bolide.store.dispatch import gets_queue_entry, index_hashes, queue_tags_code
from bolide.store.index_file import KeyIndex, index_key_seed

__all__ = ["QUEUE_RUN_MAX_ENTRIES", "SegmentScanner"]

_log = logging.getLogger("bolide.store.recovery")

_PREFIX: Final = RECORD_PREFIX

QUEUE_RUN_MAX_ENTRIES: Final = limits.RECOVERY_QUEUE_RUN_MAX_ENTRIES
"""Consume-queue entries a queue collects before they are written (see the module doc)."""
_BLANK_MIN_BYTES: Final = limits.COMMIT_LOG_BLANK_MIN_BYTES
_QUEUE_IDS_MAX_COUNT: Final = limits.STORE_QUEUE_IDS_MAX_COUNT
_NAME_CACHE_MAX_ENTRIES: Final = limits.STORE_NAME_CACHE_MAX_ENTRIES


class _QueueRun:
    """One queue's collected entries and the queue offset the next one gets."""

    __slots__ = ("entries", "next_offset", "queue")

    def __init__(self, queue: ConsumeQueue) -> None:
        self.queue = queue
        self.next_offset = queue.max_offset
        self.entries: list[ConsumeQueueEntry] = []


class SegmentScanner:
    """Scans segments for one recovery run; counts what it re-created."""

    def __init__(
        self, queues: ConsumeQueueTable, index: KeyIndex, delay_levels_ms: tuple[int, ...]
    ) -> None:
        self.records = 0
        self.queue_entries = 0
        self.gaps = 0
        self.index_entries = 0
        self._queues = queues
        self._index = index
        self._delay_levels_ms = delay_levels_ms
        self._tags_codes: dict[str, int] = {}
        self._key_seeds: dict[str, int] = {}
        self._sound_topics: set[str] = set()
        self._runs: dict[tuple[str, int], _QueueRun] = {}
        self._indexed_end = -1
        """Offset of the last record the index held when this segment's scan began: records
        up to it were indexed before the crash and are not indexed twice."""

    def scan(
        self, view: memoryview, size: int, position: int, offset: int
    ) -> tuple[int, str | None, bool]:
        """Dispatch the sound records of a segment of ``size`` bytes mapped at ``view`` from
        ``position`` (the log's ``offset``): (where the data ends or the next segment starts,
        cut reason, whether to go on with the next segment). Collected entries are written
        before it returns.

        Raises:
            StoreError: a consume-queue or index file cannot be grown.
        """
        self._indexed_end = self._index.end_commit_log_offset
        try:
            return self._scan(view, size, position, offset)
        finally:
            self.finish()

    def _scan(
        self, view: memoryview, size: int, position: int, offset: int
    ) -> tuple[int, str | None, bool]:
        # Hot loop (a record every ~1 µs): names bound locally, the common consume-queue
        # case (the queue's next offset, room in its run) and tags-code case inline.
        runs, tags_codes, sound_topics = self._runs, self._tags_codes, self._sound_topics
        key_seeds, index, queue_entry = self._key_seeds, self._index, self._queue_entry
        index_max_entries = index.max_entries
        unpack_prefix, blank_min, blank = _PREFIX.unpack_from, _BLANK_MIN_BYTES, BLANK_MAGIC_CODE
        run_max = QUEUE_RUN_MAX_ENTRIES - 1
        while position < size:
            if position + blank_min > size:
                return offset, f"record boundary {offset} too close to its segment end", False
            total_size, magic = unpack_prefix(view, position)
            if total_size == 0:
                return offset, None, False
            if magic == blank:
                if total_size != size - position:
                    return offset, f"blank marker of {total_size} bytes at {offset} is wrong", False
                return offset + total_size, None, True
            try:
                header, (tags, keys, unique_key, delay) = read_stored_record(view, position, offset)
            except ProtocolError as error:
                return offset, f"unsound record at {offset}: {error}", False
            queue_id, topic = header.queue_id, header.topic
            if not 0 <= queue_id < _QUEUE_IDS_MAX_COUNT:
                return offset, f"record at {offset} has queue id {queue_id}", False
            if topic not in sound_topics:
                if not topic_is_storable(topic):
                    return offset, f"record at {offset} has an impossible topic {topic!r}", False
                if len(sound_topics) < _NAME_CACHE_MAX_ENTRIES:
                    sound_topics.add(topic)
            self.records += 1
            store_timestamp_ms = header.store_timestamp_ms
            if gets_queue_entry(header.sys_flag):
                code = tags_codes.get(tags) if tags and topic != SCHEDULE_TOPIC else None
                if code is None:
                    code = queue_tags_code(
                        topic, tags, delay if topic == SCHEDULE_TOPIC else None,
                        store_timestamp_ms, self._delay_levels_ms, tags_codes,
                    )  # fmt: skip
                run = runs.get((topic, queue_id))
                if (
                    run is not None
                    and header.queue_offset == run.next_offset
                    and len(run.entries) < run_max
                ):
                    run.entries.append((offset, total_size, code))
                    run.next_offset += 1
                    self.queue_entries += 1
                else:
                    queue_entry(topic, queue_id, header.queue_offset, offset, total_size, code)
            key_seed = key_seeds.get(topic)
            if key_seed is None:
                key_seed = self._key_seed(topic)
            hashes = index_hashes(key_seed, keys, unique_key, index_max_entries)
            if hashes and offset > self._indexed_end:
                index.prepare_one(offset, len(hashes))
                index.add_record(offset, store_timestamp_ms, hashes)
                self.index_entries += len(hashes)
            offset += total_size
            position += total_size
        return offset, None, True

    def _queue_entry(
        self, topic: str, queue_id: int, queue_offset: int, offset: int, size: int, code: int
    ) -> None:
        """Collect the entry of a record stored at ``queue_offset`` of its queue: skipped
        when the queue already holds that offset (it survived the trim); after a hole, the
        queue restarts there when empty, else the hole is logged and the entry goes next."""
        run = self._runs.get((topic, queue_id))
        if run is None:
            if len(self._runs) >= limits.STORE_NAME_CACHE_MAX_ENTRIES:
                self.finish()
            run = self._runs[(topic, queue_id)] = _QueueRun(
                self._queues.get_or_create(topic, queue_id)
            )
        if queue_offset < run.next_offset:
            return
        if queue_offset > run.next_offset:
            self._write_run(run)
            queue = run.queue
            if queue.max_offset == queue.min_offset:
                queue.restart_at(queue_offset)
            else:
                self.gaps += 1
                _log.error(
                    "queue %s/%d misses entries %d..%d; record %d appended at %d",
                    topic,
                    queue_id,
                    queue.max_offset,
                    queue_offset - 1,
                    offset,
                    queue.max_offset,
                )
            run.next_offset = queue.max_offset
        run.entries.append((offset, size, code))
        run.next_offset += 1
        self.queue_entries += 1
        if len(run.entries) >= QUEUE_RUN_MAX_ENTRIES:
            self._write_run(run)

    def _key_seed(self, topic: str) -> int:
        key_seed = index_key_seed(topic)
        if len(self._key_seeds) < _NAME_CACHE_MAX_ENTRIES:
            self._key_seeds[topic] = key_seed
        return key_seed

    @staticmethod
    def _write_run(run: _QueueRun) -> None:
        entries = run.entries
        if not entries:
            return
        queue = run.queue
        if queue.max_offset + len(entries) > queue.room_end_offset:
            queue.prepare_append(len(entries))
        queue.append_many(entries)
        run.entries = []

    def finish(self) -> None:
        """Write every collected consume-queue entry (and forget the queues)."""
        for run in self._runs.values():
            self._write_run(run)
        self._runs.clear()


# The compiled twin (bolide/store/_recovery_scan.pyx), unless BOLIDE_PURE_PYTHON=1 or not built.
compiled.install(globals(), "bolide.store._compiled", ("SegmentScanner",))
