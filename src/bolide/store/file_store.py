"""The durable message store: commit log + consume queues + key index + checkpoint.

A put (on the event loop) does all its fallible work first — consume-queue room, commit-log
room (maybe a new segment), index room — then copies the record into the mapped segment,
appends the 20-byte consume-queue entry and the index entries, and tells the arrival
listeners. Nothing of a failed put is visible. Under SYNC_FLUSH it then waits for the group
commit that covers its record.

Background loops (:class:`bolide.base.service.Service`): the commit-log flush (every
flush_interval_commit_log_ms, or woken by SYNC puts), the queue flush (consume queues, index,
then the checkpoint, every flush_interval_consume_queue_ms), the SYNC timeout watch and
retention. fsync always runs in the store's small thread pool.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager

from bolide.base import limits
from bolide.base.clock import Clock
from bolide.base.errors import (
    DiskFullError,
    StoreError,
    invariant,
)
from bolide.base.fileio import fsync_directory
from bolide.base.histogram import BucketCounts
from bolide.base.service import Service
from bolide.protocol.address import SocketAddress
from bolide.store import appender, retention
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
from bolide.store.appender import Appender
from bolide.store.checkpoint import Checkpoint, CheckpointFile
from bolide.store.commit_log import CommitLog
from bolide.store.config import FlushDiskType, StoreConfig
from bolide.store.consume_queue import ConsumeQueue, ConsumeQueueTable
from bolide.store.dispatch import answers_key_query
from bolide.store.file_ops import DiskUsage, FileOps
from bolide.store.file_queue_reads import get_from_queue
from bolide.store.file_store_replication import ReplicationAccess
from bolide.store.flush import FlushBatch, GroupCommit, PipelinedFlusher, run_batch
from bolide.store.index_file import KeyIndex, index_key_hash
from bolide.store.queue_reads import QueueTimeQueries
from bolide.store.records import RecordBuilder, RejectedError
from bolide.store.recovery import Recovery
from bolide.store.replica import ReplicaWriter

_log = logging.getLogger("bolide.store")


FLUSH_LATENCY_BOUNDS_US = (
    50,
    100,
    250,
    500,
    1_000,
    2_500,
    5_000,
    10_000,
    25_000,
    100_000,
    1_000_000,
)
"""fsync round buckets (µs): one fdatasync costs ~200 µs on this machine's disk."""


class FileMessageStore(ReplicationAccess, QueueTimeQueries):
    """The file-backed :class:`~bolide.store.api.MessageStore`.

    ``clock`` gives store timestamps, retention time and the loops' intervals; ``store_host``
    is written into every record and into message ids; ``file_ops`` is the seam tests use to
    inject disk faults.
    """

    def __init__(
        self,
        config: StoreConfig,
        *,
        clock: Clock,
        store_host: SocketAddress,
        file_ops: FileOps | None = None,
    ) -> None:
        config.validate()
        self.config = config
        self._clock = clock
        self.flush_latency_us = BucketCounts(FLUSH_LATENCY_BOUNDS_US)
        """Durations of the SYNC_FLUSH commit-log fsync rounds, µs (the broker's
        ``bolide_flush_latency_seconds``)."""
        self._builder = RecordBuilder(
            store_host=store_host,
            max_message_size_bytes=config.max_message_size_bytes,
            segment_bytes=config.commit_log_segment_bytes,
            index_max_entries=config.index_file_max_entries,
        )
        self._file_ops = file_ops or FileOps()
        self._commit_log = CommitLog(
            config.commit_log_dir, config.commit_log_segment_bytes, self._file_ops
        )
        self._queues = ConsumeQueueTable(
            config.consume_queue_dir, config.consume_queue_file_entries, self._file_ops
        )
        self._index = KeyIndex(
            config.index_dir, config.index_hash_slots, config.index_file_max_entries, self._file_ops
        )
        self._checkpoint = CheckpointFile(config.checkpoint_path, self._file_ops)
        self._sync_flush = config.flush_disk_type is FlushDiskType.SYNC_FLUSH
        self.puts_at_once = not self._sync_flush  # see MessageStore.put_message_at_once
        self._group_commit = GroupCommit()
        self._executor: ThreadPoolExecutor | None = None
        self._services: list[Service] = []
        self._sync_flusher: PipelinedFlusher | None = None
        self._appender = Appender(
            commit_log=self._commit_log,
            queues=self._queues,
            index=self._index,
            builder=self._builder,
            clock=clock,
            delay_levels_ms=config.message_delay_levels_ms,
        )
        self._replica = ReplicaWriter(
            commit_log=self._commit_log,
            queues=self._queues,
            index=self._index,
            delay_levels_ms=config.message_delay_levels_ms,
            listeners=self._appender.listeners,
            dirty_queues=lambda: self._appender.dirty_queues,
        )
        self.confirm_offset: Callable[[], int] | None = None
        """Controller mode: reads stop at this commit-log offset (None: no stop)."""
        self.refuse_puts: str | None = None
        """Set on a slave (broker/ha): every put is refused with SERVICE_NOT_AVAILABLE and
        this remark; the log grows only by :meth:`append_replicated`."""
        self._running = False
        self._started = False
        self._queue_flushed_offset = 0
        self._write_failure: str | None = None
        self._put_failures = 0

    # --- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> RecoveryReport:
        """Recover the directory (in a flush thread) and start the background loops.

        Raises:
            StoreError: the files cannot be opened or repaired; nothing keeps running.
        """
        invariant(not self._started, "a store starts once")
        self._started = True
        config = self.config
        self._executor = ThreadPoolExecutor(
            max_workers=limits.STORE_FLUSH_THREAD_COUNT, thread_name_prefix="bolide-store-flush"
        )
        loop = asyncio.get_running_loop()
        try:
            report = await loop.run_in_executor(self._executor, self._recover_blocking)
        except BaseException:
            self._close_files()
            self._executor.shutdown(wait=True)
            raise
        self._queue_flushed_offset = self._commit_log.max_offset
        self._running = True
        self._start_services()
        _log.info(
            "store %s started: log %d..%d, %d records scanned%s",
            config.store_path_root_dir,
            report.commit_log_min_offset,
            report.commit_log_max_offset,
            report.records_scanned,
            f", cut at {report.cut_offset} ({report.cut_reason})" if report.cut else "",
        )
        return report

    def _recover_blocking(self) -> RecoveryReport:
        config = self.config
        try:
            config.store_path_root_dir.mkdir(parents=True, exist_ok=True)
            abort_present = config.abort_path.exists()
            checkpoint = self._checkpoint.read()
            report = Recovery(
                commit_log=self._commit_log,
                queues=self._queues,
                index=self._index,
                delay_levels_ms=config.message_delay_levels_ms,
            ).run(checkpoint=checkpoint, abort_present=abort_present)
            self._commit_log.prepare_next_spare()  # warm start: the next files, made ahead
            self._index.prepare_spare()
            self._sync_everything_blocking()
            self._seal_complete_segments()
            self._write_checkpoint_blocking(self._commit_log.max_offset)
            config.abort_path.touch()
            fsync_directory(config.store_path_root_dir)
        except OSError as error:
            raise StoreError(f"cannot open store {config.store_path_root_dir}: {error}") from error
        return report

    def _start_services(self) -> None:
        config = self.config
        executor = self._executor
        invariant(executor is not None, "services start after the executor")
        assert executor is not None  # for mypy; the invariant above says why
        self._services = [
            self._service(
                "store-queue-flush", self._flush_queues_step, config.flush_interval_consume_queue_ms
            ),
            self._service(
                "store-retention", self._retention_step, config.retention_check_interval_ms
            ),
        ]
        if self._sync_flush:
            self._sync_flusher = PipelinedFlusher(
                capture=self._capture_commit_log_flush,
                on_flushed=self._commit_log_flushed,
                on_failed=self._commit_log_flush_failed,
                has_waiters=lambda: len(self._group_commit) > 0,
                max_rounds=limits.SYNC_FLUSH_ROUNDS_MAX_COUNT,
            )
            self._sync_flusher.start()
            self._services.append(
                self._service(
                    "store-sync-flush-timeout",
                    self._expire_sync_waiters_step,
                    limits.SYNC_FLUSH_TIMEOUT_CHECK_INTERVAL_MS,
                )
            )
        else:
            self._services.append(
                self._service(
                    "store-commit-log-flush",
                    self._flush_commit_log_step,
                    config.flush_interval_commit_log_ms,
                )
            )
        for service in self._services:
            service.start()

    def _capture_commit_log_flush(self) -> tuple[int, FlushBatch]:
        commit_log = self._commit_log
        end_offset = commit_log.max_offset
        self._group_commit.capture(end_offset)
        return end_offset, FlushBatch(
            commit_log.dirty_segments(), self._file_ops, self.flush_latency_us
        )

    def _commit_log_flushed(self, end_offset: int) -> None:
        if self._write_failure is not None:
            # After a failed fsync a later one proves nothing about the pages the kernel
            # may have dropped: waiters were answered already, nothing more counts as durable.
            return
        commit_log = self._commit_log
        # min: a replica's truncation during the fsync may have cut the log below end_offset
        end_offset = min(end_offset, commit_log.max_offset)
        commit_log.flushed_offset = max(commit_log.flushed_offset, end_offset)
        self._group_commit.flushed_up_to(commit_log.flushed_offset)

    def _commit_log_flush_failed(self, error: StoreError) -> None:
        self._write_failure = str(error)
        self._group_commit.fail_all()

    def _service(
        self, name: str, step: Callable[[], Awaitable[int | None]], interval_ms: int
    ) -> Service:
        """The store's periodic task ``name``: ``step`` every ``interval_ms`` on the store's
        clock; its crash fails the store's writes (:meth:`_on_service_crash`)."""
        return Service(
            name, step, interval_ms=interval_ms, clock=self._clock, on_crash=self._on_service_crash
        )

    def _on_service_crash(self, service: Service, error: BaseException) -> None:
        self._write_failure = f"{service.name} stopped: {error}"
        self._group_commit.fail_all()

    async def shutdown(self) -> None:
        """Stop the loops, flush, write the final checkpoint and remove ``abort``.

        After a write or fsync failure ``abort`` stays, so the next start runs recovery.
        """
        if not self._running:
            return
        self._running = False
        for service in self._services:
            await service.stop()
        if self._sync_flusher is not None:
            await self._sync_flusher.stop()
        # Puts still waiting are covered by the final flush: no put is made after this.
        self._group_commit.capture(self._commit_log.max_offset)
        executor = self._executor
        invariant(executor is not None, "running store has an executor")
        assert executor is not None  # for mypy; the invariant above says why
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(executor, self._final_flush_blocking)
        except (StoreError, OSError) as error:
            _log.error("store shutdown could not flush; recovery will run at start: %s", error)
        self._group_commit.flushed_up_to(self._commit_log.flushed_offset)
        self._group_commit.fail_all()
        self._close_files()
        executor.shutdown(wait=True)

    def _final_flush_blocking(self) -> None:
        if self._write_failure is not None or self._any_poisoned():
            raise StoreError(f"not a clean shutdown: {self._write_failure or 'poisoned segment'}")
        self._sync_everything_blocking()
        end = self._commit_log.max_offset
        self._write_checkpoint_blocking(end)
        self.config.abort_path.unlink(missing_ok=True)
        fsync_directory(self.config.store_path_root_dir)

    def _sync_everything_blocking(self) -> None:
        end = self._commit_log.max_offset
        batch = FlushBatch(
            [
                *self._commit_log.dirty_segments(),
                *(s for q in self._queues.all_queues() for s in q.dirty_segments()),
                *self._index.dirty_segments(),
            ],
            self._file_ops,
        )
        try:
            batch.run()
        except StoreError as error:
            batch.poison(str(error))
            raise
        except BaseException:
            batch.discard()
            raise
        batch.commit()
        self._commit_log.flushed_offset = end
        self._queue_flushed_offset = end

    def _seal_complete_segments(self) -> None:
        for segment in self._commit_log.segments[:-1]:
            segment.seal_if_complete()
        for queue in self._queues.all_queues():
            for segment in queue.segments[:-1]:
                segment.seal_if_complete()

    def _write_checkpoint_blocking(self, queue_flushed_offset: int) -> None:
        self._checkpoint.write(
            Checkpoint(
                commit_log_flushed_offset=self._commit_log.flushed_offset,
                consume_queue_flushed_offset=queue_flushed_offset,
                index_flushed_offset=queue_flushed_offset,
                written_at_ms=self._clock.now_ms(),
            ),
        )

    def _any_poisoned(self) -> bool:
        return any(s.poison is not None for s in self._commit_log.segments)

    def _close_files(self) -> None:
        self._commit_log.close()
        self._queues.close()
        self._index.close()
        self._appender.dirty_queues.clear()

    async def flush(self) -> None:
        """Flush the commit log, then the queues and index, and write the checkpoint, now
        (what the background loops do on their intervals).

        Raises:
            StoreError: an fsync failed (the segments involved are poisoned).
        """
        if not self._running:
            return
        await self._flush_commit_log_step()
        await self._flush_queues_step()
        if self._write_failure is not None:
            raise StoreError(self._write_failure)

    # --- background steps -----------------------------------------------------------------------

    async def _flush_commit_log_step(self) -> None:
        executor = self._executor
        if executor is None or self._commit_log.max_offset <= self._commit_log.flushed_offset:
            return
        end_offset, batch = self._capture_commit_log_flush()
        try:
            await run_batch(batch, executor)
        except StoreError as error:
            self._commit_log_flush_failed(error)
            return
        self._commit_log_flushed(end_offset)

    async def _flush_queues_step(self) -> None:
        executor = self._executor
        if executor is None:
            return
        target = self._commit_log.max_offset
        if target == self._queue_flushed_offset and not self._appender.dirty_queues:
            return
        dirty = self._appender.take_dirty_queues()
        segments = [s for queue in dirty for s in queue.dirty_segments()]
        batch = FlushBatch([*segments, *self._index.dirty_segments()], self._file_ops)
        try:
            await run_batch(batch, executor)
        except StoreError as error:
            self._write_failure = str(error)
            return
        # min: a replica's truncation during the fsync may have cut the log below target
        target = min(target, self._commit_log.max_offset)
        self._queue_flushed_offset = target
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(executor, self._write_checkpoint_blocking, target)
        except StoreError as error:
            _log.error("checkpoint not written: %s", error)

    async def _expire_sync_waiters_step(self) -> None:
        if self._group_commit.expire(self._clock.monotonic_ms()):
            _log.warning("SYNC puts timed out waiting for their fsync")

    async def _retention_step(self) -> None:
        await self.run_retention_once()

    # --- puts -----------------------------------------------------------------------------------

    async def put_message(self, request: PutRequest) -> PutResult:
        """Store one message (see MessageStore.put_message)."""
        result = self._append_one(request)
        if self._sync_flush and result.ok:
            await self._wait_flushed(result)
        return result

    def put_message_at_once(self, request: PutRequest) -> PutResult | None:
        """ASYNC flush: :meth:`put_message` without a coroutine; SYNC: None, nothing stored."""
        return None if self._sync_flush else self._append_one(request)

    async def put_message_list(
        self, requests: Sequence[PutRequest], *, wait_flushed: bool = True
    ) -> list[PutResult | None]:
        """Store each request in order, one flush wait for all (see
        MessageStore.put_message_list): delayed and timer deliveries share a group commit."""
        results: list[PutResult | None] = []
        with self._appender.notifications_held():  # one per queue and tags code, at the end
            for request in requests:
                result = self._append_one(request)
                results.append(result)
                if not result.ok and result.status not in MESSAGE_REFUSALS:
                    results += [None] * (len(requests) - len(results))
                    break
        if self._sync_flush:
            stored = [result for result in results if result is not None and result.ok]
            if stored and wait_flushed:
                await self._wait_flushed(*stored)
            elif stored and self._sync_flusher is not None:
                self._sync_flusher.request()  # a round covers them soon; nobody waits for it
        return results

    def _append_one(self, request: PutRequest) -> PutResult:
        try:
            if not self._running or self._write_failure is not None or self.refuse_puts:
                self._refuse()
            # compiled: _appender.pyx
            return appender.put_one(self._builder, self._appender, request)
        except RejectedError as rejected:
            self._put_failures += 1
            return PutResult(rejected.status, remark=rejected.remark)
        except StoreError as error:
            return self._failed_put(error)

    async def put_messages(self, request: BatchPutRequest) -> PutResult:
        """Store a batch (see MessageStore.put_messages)."""
        result = self._append_batch(request)
        if self._sync_flush and result.ok:
            await self._wait_flushed(result)
        return result

    def put_messages_then(
        self, request: BatchPutRequest, done: Callable[[PutResult], None]
    ) -> PutResult | None:
        """Store a batch now; answer at once or through ``done`` (see
        MessageStore.put_messages_then): the group commit calls it, no future per put."""
        return self._now_or_then(self._append_batch(request), done)

    def put_message_then(
        self, request: PutRequest, done: Callable[[PutResult], None]
    ) -> PutResult | None:
        """Store one message now; answer at once or through ``done`` (see
        MessageStore.put_message_then)."""
        return self._now_or_then(self._append_one(request), done)

    def _now_or_then(
        self, result: PutResult, done: Callable[[PutResult], None]
    ) -> PutResult | None:
        """``result`` when nothing is to be waited for; else None, ``done`` called once the
        round covering it completed (:meth:`_wait_flushed` without a future)."""
        if not self._sync_flush or not result.ok:
            return result
        end_offset = result.commit_log_offset + result.wrote_bytes
        if self._commit_log.flushed_offset >= end_offset:
            return result
        deadline_ms = self._clock.monotonic_ms() + self.config.sync_flush_timeout_ms
        self._group_commit.call_when_flushed(
            deadline_ms, functools.partial(self._flushed_then, result, done)
        )
        if self._sync_flusher is not None:
            self._sync_flusher.request()
        return None

    def _flushed_then(
        self, result: PutResult, done: Callable[[PutResult], None], durable: bool
    ) -> None:
        """The end of a :meth:`put_messages_then` wait: as :meth:`_wait_flushed` marks it."""
        if not durable:
            result.status = PutStatus.FLUSH_DISK_TIMEOUT
            result.remark = self._flush_failure_remark()
        done(result)

    def _append_batch(self, request: BatchPutRequest) -> PutResult:
        try:
            if not self._running or self._write_failure is not None or self.refuse_puts:
                self._refuse()
            topic, records, born_ip = self._builder.batch(request)
            result = self._appender.append(
                topic,
                request.queue_id,
                records,
                request.sys_flag,
                request.born_timestamp_ms,
                born_ip,
                request.born_host[1],
                request.reconsume_times,
                0,
                None,
            )
        except RejectedError as rejected:
            self._put_failures += 1
            return PutResult(rejected.status, remark=rejected.remark)
        except StoreError as error:
            return self._failed_put(error)
        return result

    def _refuse(self) -> None:
        failure = f"store refuses writes until recovery: {self._write_failure}"
        reason = self.refuse_puts or failure if self._running else "store is not running"
        raise RejectedError(PutStatus.SERVICE_NOT_AVAILABLE, reason)

    def _failed_put(self, error: StoreError) -> PutResult:
        """The answer to a put whose room could not be made (nothing was written)."""
        self._put_failures += 1
        if isinstance(error, DiskFullError):
            return PutResult(PutStatus.DISK_FULL, remark=str(error))
        # Sticky: after an I/O error the state on disk is unknown until recovery reads it.
        self._write_failure = str(error)
        return PutResult(PutStatus.SERVICE_NOT_AVAILABLE, remark=str(error))

    async def _wait_flushed(self, *results: PutResult) -> None:
        """Wait for the fsync covering ``results`` (appended in order: the last ends last)."""
        last = results[-1]
        end_offset = last.commit_log_offset + last.wrote_bytes
        if self._commit_log.flushed_offset >= end_offset:
            return
        deadline_ms = self._clock.monotonic_ms() + self.config.sync_flush_timeout_ms
        future = self._group_commit.wait(deadline_ms)
        if self._sync_flusher is not None:
            self._sync_flusher.request()
        if not await future:
            remark = self._flush_failure_remark()
            for result in results:
                result.status = PutStatus.FLUSH_DISK_TIMEOUT
                result.remark = remark

    def _flush_failure_remark(self) -> str:
        """The remark of a put whose group commit did not complete (a failed fsync or its
        time limit)."""
        return self._write_failure or (
            f"fsync did not complete within {self.config.sync_flush_timeout_ms} ms"
        )

    def add_arrival_listener(self, listener: ArrivalListener) -> None:
        self._appender.listeners.append(listener)

    def notifications_held(self) -> AbstractContextManager[None]:
        return self._appender.notifications_held()

    # --- reads ----------------------------------------------------------------------------------

    def _queue(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        if not self._running:
            return None
        return self._queues.get(topic, queue_id)

    def get_message(
        self,
        topic: str,
        queue_id: int,
        queue_offset: int,
        max_count: int,
        max_bytes: int,
        tag_codes: frozenset[int] | None = None,
    ) -> GetResult:
        """See MessageStore.get_message."""
        queue = self._queue(topic, queue_id)
        if queue is None:
            return GetResult(GetStatus.NO_MATCHED_LOGIC_QUEUE, 0, 0, 0)
        confirm_offset = self.confirm_offset
        return get_from_queue(
            queue,
            self._commit_log.read,
            queue_offset=queue_offset,
            max_count=max_count,
            max_bytes=max_bytes,
            tag_codes=tag_codes,
            confirm_offset=None if confirm_offset is None else confirm_offset(),
        )

    def _store_time(self, commit_log_offset: int) -> int:
        return self._commit_log.store_timestamp(commit_log_offset)

    def read_record(self, commit_log_offset: int) -> memoryview | None:
        if not self._running:
            return None
        return self._commit_log.read_record(commit_log_offset)

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
        """See MessageStore.query_by_key."""
        max_count = min(max_count, limits.INDEX_QUERY_MAX_MESSAGES)
        if not self._running or max_count <= 0 or not key:
            return []
        records: dict[int, memoryview] = {}

        def accept(commit_log_offset: int) -> bool:
            record = self._commit_log.read_record(commit_log_offset)
            if record is None or not answers_key_query(
                record, topic, key, begin_ms, end_ms, unique=unique
            ):
                return False
            records[commit_log_offset] = record
            return True

        offsets = self._index.lookup(
            index_key_hash(topic, key), begin_ms, end_ms, accept, max_count
        )
        return [records[offset] for offset in sorted(offsets, reverse=True)]

    def consume_queue_entries(
        self, topic: str, queue_id: int, from_offset: int, count: int
    ) -> list[tuple[int, int, int]]:
        queue = self._queue(topic, queue_id)
        if queue is None or count <= 0:
            return []
        return queue.entries(from_offset, count)

    def delete_topic(self, topic: str) -> None:
        """See MessageStore.delete_topic.

        Raises:
            StoreIOError: the queue files could not be removed.
        """
        for queue in self._queues.delete_topic(topic):
            self._appender.dirty_queues.discard(queue)
        self._builder.forget_topic(topic)

    def prepare_queues(self, topic: str, queue_count: int) -> None:
        """See MessageStore.prepare_queues: the first consume-queue files, made ahead."""
        if self._running:
            self._queues.prepare_topic(topic, queue_count)

    def queue_files_in_the_making(self) -> int:
        """Queue files :meth:`prepare_queues` started and not yet put in place (benches)."""
        return self._queues.preparing_count

    def topics_and_queues(self) -> dict[str, list[int]]:
        return {topic: sorted(by_id) for topic, by_id in self._queues.queues.items() if by_id}

    # --- retention and stats --------------------------------------------------------------------

    async def run_retention_once(self, *, manual: bool = False) -> int:
        """See MessageStore.run_retention_once."""
        if not self._running:
            return 0
        commit_log = self._commit_log
        decision = retention.decide(
            self.config,
            [(segment.start_offset, segment.allocated_position) for segment in commit_log.segments],
            commit_log.store_timestamp,
            self._clock.now_ms(),
            self._disk_usage(),
            manual=manual,
        )
        if decision.delete_count == 0:
            return 0
        removed = commit_log.delete_leading_segments(decision.delete_count)
        new_min = commit_log.min_offset
        for queue in self._queues.all_queues():
            queue.advance_min_offset(lambda entry: entry[0] >= new_min)
        self._index.delete_files_before(new_min)
        _log.info(
            "retention (%s) deleted %d commit-log segment(s); log now starts at %d",
            decision.reason,
            len(removed),
            new_min,
        )
        return len(removed)

    def _disk_usage(self) -> DiskUsage | None:
        try:
            return self._file_ops.disk_usage(self.config.store_path_root_dir)
        except OSError as error:
            _log.warning("cannot read disk usage: %s", error)
            return None

    def stats(self) -> StoreStats:
        disk = self._disk_usage() if self._running else None
        return StoreStats(
            put_message_count=self._appender.put_count,
            put_message_bytes=self._appender.put_bytes,
            put_failure_count=self._put_failures,
            commit_log_min_offset=self._commit_log.min_offset,
            commit_log_max_offset=self._commit_log.max_offset,
            commit_log_flushed_offset=self._commit_log.flushed_offset,
            disk_used_ratio_percent=disk.used_percent if disk is not None else 0.0,
            topic_count=len(self._queues.queues),
            queue_count=sum(len(by_id) for by_id in self._queues.queues.values()),
        )
