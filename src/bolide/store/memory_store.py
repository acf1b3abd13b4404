"""The in-memory reference twin of the file store: the same rules, no files.

It validates and encodes records exactly as the file store does (bolide.store.records), lays
them out in a virtual commit log with the same segment roll rule (so commit-log offsets are
the same for the same puts), and answers reads with the same shared rules
(bolide.store.queue_reads). The contract suite runs against both; where they differ, one of
them is wrong. Nothing survives :meth:`MemoryMessageStore.shutdown`.
"""

from __future__ import annotations

import bisect
import contextlib
import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from bolide.base import limits
from bolide.base.clock import Clock
from bolide.protocol.address import SocketAddress
from bolide.protocol.record import read_record_header
from bolide.store import retention
from bolide.store.api import (
    MESSAGE_REFUSALS,
    ArrivalListener,
    BatchPutRequest,
    GetResult,
    GetStatus,
    PutRequest,
    PutResult,
    PutStatus,
    RecoveryReport,
    StoreStats,
)
from bolide.store.config import StoreConfig
from bolide.store.dispatch import answers_key_query, gets_queue_entry, queue_tags_code
from bolide.store.file_ops import DiskUsage
from bolide.store.index_file import index_key_hash
from bolide.store.queue_reads import (
    QueueTimeQueries,
    check_offset,
    collect,
    scan_limit_entries,
)
from bolide.store.records import PreparedRecord, RecordBuilder, RejectedError

_log = logging.getLogger("bolide.store.memory")


@dataclass(slots=True)
class _Queue:
    entries: list[tuple[int, int, int]] = field(default_factory=list)
    base_offset: int = 0
    """Queue offset of ``entries[0]``."""
    min_offset: int = 0

    @property
    def max_offset(self) -> int:
        return self.base_offset + len(self.entries)

    def entry(self, queue_offset: int) -> tuple[int, int, int] | None:
        if not self.min_offset <= queue_offset < self.max_offset:
            return None
        return self.entries[queue_offset - self.base_offset]


class MemoryMessageStore(QueueTimeQueries):
    """A :class:`~bolide.store.api.MessageStore` in memory, for tests and as the reference.

    ``config`` supplies sizes and limits (its directory is ignored). ``disk_usage``, when
    given, stands in for the file system in retention decisions.
    """

    def __init__(
        self,
        config: StoreConfig,
        *,
        clock: Clock,
        store_host: SocketAddress,
        disk_usage: Callable[[], DiskUsage] | None = None,
    ) -> None:
        config.validate()
        self.config = config
        self._clock = clock
        self._disk_usage = disk_usage
        self._builder = RecordBuilder(
            store_host=store_host,
            max_message_size_bytes=config.max_message_size_bytes,
            segment_bytes=config.commit_log_segment_bytes,
            index_max_entries=config.index_file_max_entries,
        )
        self._records: dict[int, bytes] = {}
        self._record_offsets: list[int] = []
        self._segment_starts: list[int] = []
        self._write_offset = 0
        self._queues: dict[str, dict[int, _Queue]] = {}
        self._index: dict[int, list[int]] = {}
        self._listeners: list[ArrivalListener] = []
        self._held: dict[tuple[str, int], list[Any]] | None = None
        """Announcements of a put_message_list, held until it ends."""
        self._tags_codes: dict[str, int] = {}
        self._running = False
        self._put_count = 0
        self._put_bytes = 0
        self._put_failures = 0

    async def start(self) -> RecoveryReport:
        self._running = True
        return RecoveryReport()

    async def shutdown(self) -> None:
        self._running = False

    # --- puts -----------------------------------------------------------------------------------

    async def put_message(self, request: PutRequest) -> PutResult:
        return self._put(request)

    @property
    def puts_at_once(self) -> bool:
        return True

    def put_message_at_once(self, request: PutRequest) -> PutResult | None:
        return self._put(request)

    def _put(self, request: PutRequest | BatchPutRequest) -> PutResult:
        """Store a single message or a batch at once; a refusal (not running, a bad message)
        is counted and answered as a result, as the file store does."""
        try:
            self._check_running()
            if isinstance(request, BatchPutRequest):
                topic, records, _ = self._builder.batch(request)
                transaction_offset, tags_code = 0, None
            else:
                topic, record, _ = self._builder.single(request)
                records = [record]
                transaction_offset = request.prepared_transaction_offset
                tags_code = request.tags_code
            return self._append(
                request.topic,
                topic.encoded,
                request.queue_id,
                records,
                request.sys_flag,
                request.born_timestamp_ms,
                request.born_host,
                request.reconsume_times,
                transaction_offset,
                tags_code,
            )
        except RejectedError as rejected:
            self._put_failures += 1
            return PutResult(rejected.status, remark=rejected.remark)

    async def put_message_list(
        self, requests: Sequence[PutRequest], *, wait_flushed: bool = True
    ) -> list[PutResult | None]:
        results: list[PutResult | None] = []
        with self.notifications_held():  # once per queue and tags code, at the end
            for request in requests:
                result = await self.put_message(request)
                results.append(result)
                if not result.ok and result.status not in MESSAGE_REFUSALS:
                    results += [None] * (len(requests) - len(results))
                    break
        return results

    @contextlib.contextmanager
    def notifications_held(self) -> Iterator[None]:
        if self._held is not None:  # nested: the outermost block announces
            yield
            return
        self._held = {}
        try:
            yield
        finally:
            held, self._held = self._held, None
            for (topic, queue_id), (max_offset, codes) in held.items():
                for tags_code in codes:
                    self._notify(topic, queue_id, max_offset, tags_code)

    async def put_messages(self, request: BatchPutRequest) -> PutResult:
        return self._put(request)

    def put_message_then(
        self, request: PutRequest, done: Callable[[PutResult], None]
    ) -> PutResult | None:
        return self._put(request)  # nothing to wait for: done is never called

    def put_messages_then(
        self, request: BatchPutRequest, done: Callable[[PutResult], None]
    ) -> PutResult | None:
        return self._put(request)  # nothing to wait for: done is never called

    def _check_running(self) -> None:
        if not self._running:
            raise RejectedError(PutStatus.SERVICE_NOT_AVAILABLE, "store is not running")

    def _reserve(self, size: int) -> int:
        """The offset for ``size`` bytes, rolling segments exactly as the file commit log."""
        segment_bytes = self.config.commit_log_segment_bytes
        if not self._segment_starts:
            self._segment_starts.append(0)
        start = self._segment_starts[-1]
        if self._write_offset - start + size + limits.COMMIT_LOG_BLANK_MIN_BYTES > segment_bytes:
            start += segment_bytes
            self._segment_starts.append(start)
            self._write_offset = start
        offset = self._write_offset
        self._write_offset += size
        return offset

    def _append(
        self,
        topic: str,
        topic_bytes: bytes,
        queue_id: int,
        records: list[PreparedRecord],
        sys_flag: int,
        born_timestamp_ms: int,
        born_host: SocketAddress,
        reconsume_times: int,
        prepared_transaction_offset: int,
        tags_code_override: int | None,
    ) -> PutResult:
        queue = None
        if gets_queue_entry(sys_flag):
            queue = self._queues.setdefault(topic, {}).setdefault(queue_id, _Queue())
        total_size = sum(record.size for record in records)
        store_timestamp_ms = self._clock.now_ms()
        first_queue_offset = queue.max_offset if queue is not None else 0
        segment_count = len(self._segment_starts)
        write_offset = self._write_offset
        base_offset = self._reserve(total_size)
        try:
            encoded = self._builder.encode_all(
                records,
                topic_bytes=topic_bytes,
                queue_id=queue_id,
                first_queue_offset=first_queue_offset if queue is not None else None,
                base_offset=base_offset,
                sys_flag=sys_flag,
                born_timestamp_ms=born_timestamp_ms,
                born_host=born_host,
                store_timestamp_ms=store_timestamp_ms,
                reconsume_times=reconsume_times,
                prepared_transaction_offset=prepared_transaction_offset,
            )
        except RejectedError:
            # Like the file store, keep a segment rolled to: the next put starts there.
            rolled = len(self._segment_starts) > segment_count
            self._write_offset = self._segment_starts[-1] if rolled else write_offset
            raise
        message_ids: list[str] = []
        codes: list[int] = []
        offset = base_offset
        delays = self.config.message_delay_levels_ms
        for record, data in zip(records, encoded, strict=True):
            self._records[offset] = data
            self._record_offsets.append(offset)
            message_ids.append(self._builder.message_id(offset))
            for key_hash in record.hashes:
                self._index.setdefault(key_hash, []).append(offset)
            if queue is not None:
                tags_code = tags_code_override
                if tags_code is None:
                    tags_code = queue_tags_code(
                        topic,
                        record.tags,
                        record.delay,
                        store_timestamp_ms,
                        delays,
                        self._tags_codes,
                    )
                queue.entries.append((offset, record.size, tags_code))
                codes.append(tags_code)
            offset += record.size
        if queue is not None:
            self._announce(topic, queue_id, queue.max_offset, codes)
        self._put_count += len(records)
        self._put_bytes += total_size
        return PutResult(
            PutStatus.PUT_OK,
            commit_log_offset=base_offset,
            queue_offset=first_queue_offset,
            store_timestamp_ms=store_timestamp_ms,
            wrote_bytes=total_size,
            message_ids=message_ids,
            message_count=len(records),
        )

    def _announce(self, topic: str, queue_id: int, max_offset: int, codes: list[int]) -> None:
        """Once the whole put is readable: once per distinct tags code, in order (a list of
        puts: once per queue and distinct tags code, after the list)."""
        if self._held is not None:
            held = self._held.setdefault((topic, queue_id), [max_offset, {}])
            held[0] = max_offset
            held[1].update(dict.fromkeys(codes))
            return
        for tags_code in dict.fromkeys(codes):
            self._notify(topic, queue_id, max_offset, tags_code)

    def _notify(self, topic: str, queue_id: int, max_offset: int, tags_code: int) -> None:
        for listener in self._listeners:
            try:
                listener(topic, queue_id, max_offset, tags_code)
            except Exception:
                _log.exception("arrival listener failed")

    def add_arrival_listener(self, listener: ArrivalListener) -> None:
        self._listeners.append(listener)

    # --- reads ----------------------------------------------------------------------------------

    def _queue(self, topic: str, queue_id: int) -> _Queue | None:
        if not self._running:
            return None
        return self._queues.get(topic, {}).get(queue_id)

    def _read(self, commit_log_offset: int, size: int) -> memoryview | None:
        record = self._records.get(commit_log_offset)
        if record is None or len(record) != size:
            return None
        return memoryview(record)

    def get_message(
        self,
        topic: str,
        queue_id: int,
        queue_offset: int,
        max_count: int,
        max_bytes: int,
        tag_codes: frozenset[int] | None = None,
    ) -> GetResult:
        queue = self._queue(topic, queue_id)
        if queue is None:
            return GetResult(GetStatus.NO_MATCHED_LOGIC_QUEUE, 0, 0, 0)
        early = check_offset(queue.min_offset, queue.max_offset, queue_offset)
        if early is not None:
            return early
        max_count = max(1, max_count)
        start = queue_offset - queue.base_offset
        entries = queue.entries[start : start + scan_limit_entries(max_count)]
        return collect(
            entries,
            self._read,
            queue_offset=queue_offset,
            min_offset=queue.min_offset,
            max_offset=queue.max_offset,
            max_count=max_count,
            max_bytes=max_bytes,
            tag_codes=tag_codes,
        )

    def _store_time(self, commit_log_offset: int) -> int:
        record = self._records.get(commit_log_offset)
        if record is None:
            return -1
        return read_record_header(record).store_timestamp_ms

    def read_record(self, commit_log_offset: int) -> memoryview | None:
        if not self._running:
            return None
        record = self._records.get(commit_log_offset)
        return None if record is None else memoryview(record)

    def query_by_key(
        self,
        topic: str,
        key: str,
        max_count: int,
        begin_ms: int,
        end_ms: int,
        *,
        unique: bool = False,
    ) -> list[memoryview]:
        max_count = min(max_count, limits.INDEX_QUERY_MAX_MESSAGES)
        if not self._running or max_count <= 0 or not key:
            return []
        found: list[memoryview] = []
        for offset in reversed(self._index.get(index_key_hash(topic, key), [])):
            record = self._records.get(offset)
            if record is None:
                continue
            if answers_key_query(record, topic, key, begin_ms, end_ms, unique=unique):
                found.append(memoryview(record))
                if len(found) >= max_count:
                    break
        return found

    def consume_queue_entries(
        self, topic: str, queue_id: int, from_offset: int, count: int
    ) -> list[tuple[int, int, int]]:
        queue = self._queue(topic, queue_id)
        if queue is None or count <= 0:
            return []
        start = max(from_offset, queue.min_offset) - queue.base_offset
        return queue.entries[start : start + count] if start >= 0 else []

    def prepare_queues(self, topic: str, queue_count: int) -> None:
        """Nothing to make ahead: the queues live in memory."""
        del topic, queue_count

    def delete_topic(self, topic: str) -> None:
        self._queues.pop(topic, None)
        self._builder.forget_topic(topic)

    def topics_and_queues(self) -> dict[str, list[int]]:
        return {topic: sorted(by_id) for topic, by_id in self._queues.items() if by_id}

    # --- retention and stats --------------------------------------------------------------------

    async def run_retention_once(self, *, manual: bool = False) -> int:
        if not self._running or len(self._segment_starts) < 2:
            return 0
        starts = self._segment_starts
        decision = retention.decide(
            self.config,
            [(start, self.config.commit_log_segment_bytes) for start in starts],
            self._store_time,
            self._clock.now_ms(),
            self._disk_usage() if self._disk_usage is not None else None,
            manual=manual,
        )
        if decision.delete_count == 0:
            return 0
        del starts[: decision.delete_count]
        new_min = starts[0]
        cut = bisect.bisect_left(self._record_offsets, new_min)
        for offset in self._record_offsets[:cut]:
            del self._records[offset]
        del self._record_offsets[:cut]
        for by_id in self._queues.values():
            for queue in by_id.values():
                self._advance_min(queue, new_min)
        return decision.delete_count

    @staticmethod
    def _advance_min(queue: _Queue, commit_log_min_offset: int) -> None:
        keep_from = queue.min_offset
        while keep_from < queue.max_offset:
            entry = queue.entry(keep_from)
            if entry is None or entry[0] >= commit_log_min_offset:
                break
            keep_from += 1
        queue.min_offset = keep_from

    def stats(self) -> StoreStats:
        disk = self._disk_usage() if self._disk_usage is not None else None
        return StoreStats(
            put_message_count=self._put_count,
            put_message_bytes=self._put_bytes,
            put_failure_count=self._put_failures,
            commit_log_min_offset=self._segment_starts[0] if self._segment_starts else 0,
            commit_log_max_offset=self._write_offset,
            commit_log_flushed_offset=self._write_offset,
            disk_used_ratio_percent=disk.used_percent if disk is not None else 0.0,
            topic_count=len(self._queues),
            queue_count=sum(len(by_id) for by_id in self._queues.values()),
        )
