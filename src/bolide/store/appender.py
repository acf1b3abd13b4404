"""The file store's send path: make room, write the records, make them readable.

A put (on the event loop) does all its fallible work first — consume-queue room, commit-log
room (maybe a new segment), index room — then writes its records into the mapped segment in
one pass (``wire.write_records``, compiled), appends the 20-byte consume-queue entries and the index
entries, and tells the arrival listeners. Nothing of a failed put is visible.

The put path (docs/architecture.md, "Sending and storing"): the usual put compares three integers
for room (blocks are reserved ahead, in
chunks), packs each record's fixed part with one precompiled struct, copies the whole put
into the mapping with one slice assignment, appends its consume-queue entries (a batch's with
one slice per file) and queues its index entries, which the index writes in batches
(index_file.KeyIndex.add_record). A batch goes through the same single pass.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence
from typing import Any, Final

from bolide.base import compiled
from bolide.base.clock import Clock
from bolide.protocol.message import TRANSACTION_MASK
from bolide.protocol.record import write_records
from bolide.protocol.system_topics import SCHEDULE_TOPIC
from bolide.store.api import ArrivalListener, PutRequest, PutResult, PutStatus
from bolide.store.commit_log import CommitLog
from bolide.store.consume_queue import ConsumeQueue, ConsumeQueueEntry, ConsumeQueueTable
from bolide.store.dispatch import gets_queue_entry, queue_tags_code
from bolide.store.index_file import KeyIndex, PendingRecord
from bolide.store.records import PreparedRecord, RecordBuilder, TopicFacts

_log = logging.getLogger("bolide.store")

_PUT_OK: Final = PutStatus.PUT_OK


class Appender:
    """Writes validated puts into the commit log, consume queues and index of one store.

    ``dirty_queues`` collects the queues written since the queue flush last took them;
    ``put_count`` / ``put_bytes`` count stored records and bytes.
    """

    def __init__(
        self,
        *,
        commit_log: CommitLog,
        queues: ConsumeQueueTable,
        index: KeyIndex,
        builder: RecordBuilder,
        clock: Clock,
        delay_levels_ms: tuple[int, ...],
    ) -> None:
        self._commit_log = commit_log
        self._queues = queues
        self._index = index
        self._clock = clock
        self._delay_levels_ms = delay_levels_ms
        self._store_ip = builder.store_ip
        self._store_port = builder.store_host[1]
        self._deferred: dict[tuple[str, int], list[Any]] | None = None
        self._message_id_prefix = builder.message_id_prefix
        self.listeners: list[ArrivalListener] = []
        self.dirty_queues: set[ConsumeQueue] = set()
        self.put_count = 0
        self.put_bytes = 0

    def append(
        self,
        topic: TopicFacts,
        queue_id: int,
        records: list[PreparedRecord],
        sys_flag: int,
        born_timestamp_ms: int,
        born_ip: bytes,
        born_port: int,
        reconsume_times: int,
        prepared_transaction_offset: int,
        tags_code_override: int | None,
    ) -> PutResult:
        """Store ``records`` contiguously in one segment, with consecutive queue offsets.

        The result's ``wrote_bytes`` past its ``commit_log_offset`` is where the records end.

        Raises:
            DiskFullError: no space for the room a put needs; nothing was written.
            StoreError: an I/O error while making room; nothing was written, but the state on
                disk is unknown: the caller refuses puts until recovery.
        """
        count = len(records)
        if count == 1 and tags_code_override is None and not topic.is_schedule:
            return append_single(
                self, topic, queue_id, records[0], sys_flag, born_timestamp_ms, born_ip,
                born_port, reconsume_times, prepared_transaction_offset,
            )  # fmt: skip
        total_size = records[0].size if count == 1 else sum([r.size for r in records])
        queue = None
        if not sys_flag & TRANSACTION_MASK or gets_queue_entry(sys_flag):
            queue = self._queues.get_or_create(topic.name, queue_id)
            if queue.max_offset + count > queue.room_end_offset:
                queue.prepare_append(count)
        segment, position = self._commit_log.reserve(total_size)
        base_offset = segment.start_offset + position
        if count > 1:
            self._reserve_index(records, base_offset)
        elif records[0].hashes:  # most records have one hash: their UNIQ_KEY
            self._index.prepare_one(base_offset, len(records[0].hashes))
        store_timestamp_ms = self._clock.now_ms()
        first_queue_offset = None if queue is None else queue.max_offset
        segment.write_position = write_records(
            segment.view, position, records, topic.tail_prefix, queue_id, first_queue_offset,
            base_offset, sys_flag, born_timestamp_ms, born_ip, born_port, store_timestamp_ms,
            self._store_ip, self._store_port, reconsume_times, prepared_transaction_offset,
        )  # fmt: skip
        message_ids = self._dispatch(
            topic, queue_id, queue, records, base_offset, store_timestamp_ms, tags_code_override
        )
        self.put_count += count
        self.put_bytes += total_size
        return PutResult(
            _PUT_OK,
            base_offset,
            first_queue_offset or 0,
            store_timestamp_ms,
            total_size,
            message_ids,
            count,
        )

    def _reserve_index(self, records: list[PreparedRecord], base_offset: int) -> None:
        """Index room for the hashes of a batch's records."""
        groups: list[tuple[int, int]] = []
        offset = base_offset
        for record in records:
            if record.hashes:
                groups.append((offset, len(record.hashes)))
            offset += record.size
        self._index.prepare(groups)

    def _dispatch(
        self,
        topic: TopicFacts,
        queue_id: int,
        queue: ConsumeQueue | None,
        records: list[PreparedRecord],
        base_offset: int,
        store_timestamp_ms: int,
        tags_code_override: int | None,
    ) -> list[str]:
        """Consume-queue and index entries of records just written, then the arrival
        listeners (once per distinct tags code, after the last entry); returns message ids."""
        prefix = self._message_id_prefix
        if len(records) == 1:
            record = records[0]
            if record.hashes:
                self._index.add_record(base_offset, store_timestamp_ms, record.hashes)
            if queue is not None:
                code = tags_code_override
                if code is None:
                    code = record.tags_code
                    if topic.is_schedule:
                        code = self._delivery_ms(record, store_timestamp_ms)
                queue.append(base_offset, record.size, code)
                self._queue_written(topic, queue_id, queue, (code,))
            return [f"{prefix}{base_offset:016X}"]
        index_records: list[PendingRecord] = []
        message_ids, entries = batch_entries(
            records, base_offset, prefix, store_timestamp_ms, index_records
        )
        self._index.add_records(index_records)
        if tags_code_override is not None or topic.is_schedule:
            entries = [
                (offset, size, self._queue_code(record, store_timestamp_ms, tags_code_override))
                for (offset, size, _), record in zip(entries, records, strict=True)
            ]
        if queue is not None:
            queue.append_many(entries)
            self._queue_written(topic, queue_id, queue, [entry[2] for entry in entries])
        return message_ids

    def _queue_code(
        self, record: PreparedRecord, store_timestamp_ms: int, tags_code_override: int | None
    ) -> int:
        if tags_code_override is not None:
            return tags_code_override
        return self._delivery_ms(record, store_timestamp_ms)  # a SCHEDULE_TOPIC_XXXX record

    def _delivery_ms(self, record: PreparedRecord, store_timestamp_ms: int) -> int:
        """The tags code of a SCHEDULE_TOPIC_XXXX record: when it is due."""
        return queue_tags_code(
            SCHEDULE_TOPIC, None, record.delay, store_timestamp_ms, self._delay_levels_ms
        )

    def _queue_written(
        self, topic: TopicFacts, queue_id: int, queue: ConsumeQueue, codes: Sequence[int]
    ) -> None:
        self.dirty_queues.add(queue)
        if self._deferred is not None:
            self._defer(topic.name, queue_id, queue.max_offset, codes)
        elif self.listeners:
            self._notify(topic.name, queue_id, queue.max_offset, codes)

    def _notify(self, topic: str, queue_id: int, max_offset: int, codes: Sequence[int]) -> None:
        for code in codes if len(codes) == 1 else dict.fromkeys(codes):
            self._notify_one(topic, queue_id, max_offset, code)

    def _notify_one(self, topic: str, queue_id: int, max_offset: int, code: int) -> None:
        for listener in self.listeners:
            try:
                listener(topic, queue_id, max_offset, code)
            except Exception:
                _log.exception("arrival listener failed")

    # --- notifications of a list of puts, together ---------------------------------------

    @contextlib.contextmanager
    def notifications_held(self) -> Iterator[None]:
        """Hold the arrival notifications of the puts inside until the block ends: a list of
        puts then tells each listener once per queue and distinct tags code (with the queue's
        last max offset), not once per message. Nested holds end with the outermost."""
        if self._deferred is not None:
            yield
            return
        self._deferred = {}
        try:
            yield
        finally:
            self._flush_notifications()

    def _defer(self, topic: str, queue_id: int, max_offset: int, codes: Sequence[int]) -> None:
        assert self._deferred is not None  # for mypy; callers check
        held = self._deferred.get((topic, queue_id))
        if held is None:
            self._deferred[(topic, queue_id)] = held = [max_offset, {}]
        held[0] = max_offset
        held[1].update(dict.fromkeys(codes))

    def _flush_notifications(self) -> None:
        """Tell the listeners what :meth:`notifications_held` held, queue by queue in the
        order they were first written; puts notify at once again."""
        deferred, self._deferred = self._deferred, None
        if not deferred or not self.listeners:
            return
        for (topic, queue_id), (max_offset, codes) in deferred.items():
            for code in codes:
                self._notify_one(topic, queue_id, max_offset, code)

    def take_dirty_queues(self) -> set[ConsumeQueue]:
        """The queues written since the last call (for the queue flush)."""
        dirty, self.dirty_queues = self.dirty_queues, set()
        return dirty


def put_one(builder: RecordBuilder, appender: Appender, request: PutRequest) -> PutResult:
    """One message validated (:meth:`RecordBuilder.single`) and stored
    (:meth:`Appender.append`): the file store's single put below its refusal checks.
    Compiled in ``_appender.pyx`` (checks, record build and append in one call).

    Raises:
        RejectedError: the request breaks a rule; nothing was written.
        DiskFullError, StoreError: as :meth:`Appender.append`.
    """
    topic, record, born_ip = builder.single(request)
    return appender.append(
        topic, request.queue_id, [record], request.sys_flag, request.born_timestamp_ms, born_ip,
        request.born_host[1], request.reconsume_times, request.prepared_transaction_offset,
        request.tags_code,
    )  # fmt: skip


def append_single(
    appender: Appender,
    topic: TopicFacts,
    queue_id: int,
    record: PreparedRecord,
    sys_flag: int,
    born_timestamp_ms: int,
    born_ip: bytes,
    born_port: int,
    reconsume_times: int,
    prepared_transaction_offset: int,
) -> PutResult:
    """:meth:`Appender.append` of one record whose tags code is its TAGS hash (not a scheduled
    record, no override): the same steps in the same order, without the batch's lists — room,
    the record written into the mapped segment, the index entry queued, the consume-queue
    entry, the listeners. Compiled in ``_appender.pyx`` (the single send's store path as one
    unit)."""
    queue = None
    if not sys_flag & TRANSACTION_MASK or gets_queue_entry(sys_flag):
        queue = appender._queues.get_or_create(topic.name, queue_id)
        if queue.max_offset >= queue.room_end_offset:
            queue.prepare_append(1)
    size = record.size
    segment, position = appender._commit_log.reserve(size)
    base_offset = segment.start_offset + position
    hashes = record.hashes
    if hashes:
        appender._index.prepare_one(base_offset, len(hashes))
    store_timestamp_ms = appender._clock.now_ms()
    first_queue_offset = None if queue is None else queue.max_offset
    segment.write_position = write_records(
        segment.view, position, (record,), topic.tail_prefix, queue_id, first_queue_offset,
        base_offset, sys_flag, born_timestamp_ms, born_ip, born_port, store_timestamp_ms,
        appender._store_ip, appender._store_port, reconsume_times, prepared_transaction_offset,
    )  # fmt: skip
    if hashes:
        appender._index.add_record(base_offset, store_timestamp_ms, hashes)
    if queue is not None:
        code = record.tags_code
        queue.append(base_offset, size, code)
        appender.dirty_queues.add(queue)
        deferred = appender._deferred
        if deferred is not None:  # Appender._defer's steps, inline
            held = deferred.get((topic.name, queue_id))
            if held is None:
                deferred[(topic.name, queue_id)] = [queue.max_offset, {code: None}]
            else:
                held[0] = queue.max_offset
                held[1][code] = None
        elif appender.listeners:
            appender._notify_one(topic.name, queue_id, queue.max_offset, code)
    appender.put_count += 1
    appender.put_bytes += size
    return PutResult(
        _PUT_OK,
        base_offset,
        first_queue_offset or 0,
        store_timestamp_ms,
        size,
        [f"{appender._message_id_prefix}{base_offset:016X}"],
        1,
    )


def batch_entries(
    records: Sequence[PreparedRecord],
    base_offset: int,
    message_id_prefix: str,
    store_timestamp_ms: int,
    index_records: list[PendingRecord],
) -> tuple[list[str], list[ConsumeQueueEntry]]:
    """The message ids and consume-queue entries (tags code: the record's TAGS hash) of
    ``records`` laid end to end from ``base_offset``; appends the index's pending record of
    each one that has key hashes to ``index_records``. Compiled in ``_appender.pyx``."""
    message_ids: list[str] = []
    entries: list[ConsumeQueueEntry] = []
    offset = base_offset
    for record in records:
        message_ids.append(f"{message_id_prefix}{offset:016X}")
        if record.hashes:
            index_records.append((offset, store_timestamp_ms, record.hashes))
        entries.append((offset, record.size, record.tags_code))
        offset += record.size
    return message_ids, entries


# The compiled twin (bolide/store/_appender.pyx), unless BOLIDE_PURE_PYTHON=1 or not built.
compiled.install(globals(), "bolide.store._compiled", ("put_one", "append_single", "batch_entries"))
