"""The Bolide sink: ``df.write.format("bolide")`` and ``df.writeStream.format("bolide")``.

Columns read from the rows (others are ignored, so a Bolide source's rows can be written back):

==============  =====================  ====================================================
column          type                   meaning
==============  =====================  ====================================================
body            binary or string       the message body (required; a string goes as UTF-8)
topic           string                 target topic (else the ``topic`` option)
tags            string                 TAGS
keys            string                 KEYS (space-separated keys)
properties      map<string,string>     user properties (system names such as UNIQ_KEY are
                                       dropped: Bolide sets those)
sharding_key    string                 orderly: rows with the same key go to the same queue,
                                       in order
delay_level     int                    RocketMQ delay level 1..18
deliver_at_ms   long                   delivery time, ms since the epoch
==============  =====================  ====================================================

Delivery is at-least-once: a failed task or batch is written again. Every row gets a UNIQ_KEY
derived from (query or job id, batch id, partition, row number), so a replayed batch produces
the same ids and consumers can drop duplicates by ``msg_id``. Keys are stable when a replayed
batch brings each partition the same rows in the same order (true for replayed source offsets
without a shuffle in between).

Each task runs its own producer on a private event loop and keeps a bounded window of sends
in flight (limits.SPARK_WRITE_WINDOW_REQUESTS): rows without delay or sharding key travel in
batch requests, sharded rows in batches to their queue (one request in flight per queue, which
keeps their order), delayed rows one by one.

A record batch of plain rows (one topic, body, TAGS, KEYS; no user properties, delay or
sharding key: see bolide.spark.sink_columns) skips the per-row ``Message``: its batch bodies
are encoded straight from the Arrow columns in one compiled pass
(bolide.spark.sink_rows.encode_batch_rows), the bytes the general path sends for them.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import uuid
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructType,
)

from bolide.base import limits
from bolide.base.errors import ConfigError, InvalidMessageError, MessageTooLargeError
from bolide.client.message import SYSTEM_PROPERTY_NAMES, Message
from bolide.client.producer.prepare import PreparedSend
from bolide.client.producer.producer import Producer
from bolide.client.producer.selection import select_by_sharding_key
from bolide.protocol.bodies import MessageQueue
from bolide.protocol.message import PropertyKey
from bolide.protocol.record import NAME_VALUE_SEPARATOR
from bolide.spark.client import BlockingClient
from bolide.spark.exactly_once import HalvesReport, commit_batch, rollback_halves, write_halves
from bolide.spark.options import WriteOptions
from bolide.spark.sink_columns import PlainRows, plain_rows
from bolide.spark.sink_rows import encode_batch_rows

__all__ = [
    "BATCH_ID_PROPERTY",
    "QUERY_ID_PROPERTY",
    "BolideBatchWriter",
    "BolideStreamWriter",
    "WriteReport",
    "unique_key",
    "unique_key_prefix",
]

_log = logging.getLogger("bolide.spark")

QUERY_ID_PROPERTY = "sql.streaming.queryId"
"""Task-local property holding a streaming query's id (kept across restarts)."""
BATCH_ID_PROPERTY = "streaming.sql.batchId"
"""Task-local property holding the micro-batch id (a replayed batch keeps its id)."""

_ACCEPTED_TYPES: dict[str, tuple[type[DataType], ...]] = {
    "body": (BinaryType, StringType),
    "topic": (StringType,),
    "tags": (StringType,),
    "keys": (StringType,),
    "properties": (MapType,),
    "sharding_key": (StringType,),
    "delay_level": (IntegerType, ShortType, LongType),
    "deliver_at_ms": (LongType, IntegerType),
}
_NOT_TRANSACTIONAL = ("sharding_key", "delay_level", "deliver_at_ms")
"""Columns the exactly-once sink cannot honour (half messages go alone, undelayed)."""
_ROW_INDEX_HEX_DIGITS = 12
_PREFIX_BYTES = 10
_BATCH_HEADER_PROPERTIES = f"{PropertyKey.WAIT}{NAME_VALUE_SEPARATOR}true"
"""The properties of a batch request's header (what the producer's prepare_batch sets)."""


def unique_key_prefix(job_id: str, batch_id: int, partition_id: int) -> str:
    """The first 20 hex digits of the UNIQ_KEY of every row of one task's output."""
    text = f"{job_id}/{batch_id}/{partition_id}".encode()
    return hashlib.blake2b(text, digest_size=_PREFIX_BYTES).hexdigest().upper()


def unique_key(prefix: str, row_index: int) -> str:
    """A row's UNIQ_KEY: 32 upper-case hex digits, like the ids RocketMQ producers make."""
    return f"{prefix}{row_index:0{_ROW_INDEX_HEX_DIGITS}X}"


def check_write_schema(schema: StructType, options: WriteOptions) -> None:
    """Raise ConfigError unless ``schema`` has a usable ``body`` column, every known column has
    an accepted type, and a topic comes from a column or the option."""
    fields = {field.name: field.dataType for field in schema.fields}
    if "body" not in fields:
        raise ConfigError("writing to Bolide needs a body column (binary or string)")
    for name, accepted in _ACCEPTED_TYPES.items():
        data_type = fields.get(name)
        if data_type is not None and not isinstance(data_type, accepted):
            wanted = " or ".join(kind.__name__.removesuffix("Type").lower() for kind in accepted)
            raise ConfigError(f"column {name} must be {wanted}, not {data_type.simpleString()}")
    if "topic" not in fields and options.topic is None:
        raise ConfigError("give the topic option or a topic column")
    refused = sorted(set(fields) & set(_NOT_TRANSACTIONAL))
    if options.exactly_once and refused:
        raise ConfigError(
            f"exactlyOnce=true cannot honour the column(s) {', '.join(refused)}: transactional"
            " messages are neither delayed nor sent to a chosen queue; drop them or the option"
        )


@dataclass(frozen=True, slots=True)
class WriteReport(WriterCommitMessage):
    """What one task wrote: ``rows`` in ``requests`` send requests (partition ``partition_id``)."""

    partition_id: int
    rows: int
    requests: int
    body_bytes: int


@dataclass(slots=True)
class _Lane:
    """Rows waiting to go in one request: to ``topic`` (any queue) or to ``queue`` (sharded)."""

    topic: str
    queue: MessageQueue | None
    messages: list[Message]
    body_bytes: int = 0
    previous: asyncio.Future[None] | None = None
    """The lane's request in flight (sharded lanes send one at a time, in order)."""


class _PartitionSender:
    """One task's producer and its bounded window of sends (runs on the task's loop)."""

    def __init__(self, producer: Producer) -> None:
        self.producer = producer
        self._window = asyncio.Semaphore(limits.SPARK_WRITE_WINDOW_REQUESTS)
        self._in_flight: set[asyncio.Future[None]] = set()
        self._error: BaseException | None = None
        self._lanes: dict[tuple[str, MessageQueue | None], _Lane] = {}
        self.rows = 0
        self.requests = 0
        self.body_bytes = 0

    def _raise_first_error(self) -> None:
        if self._error is not None:
            raise self._error

    async def _submit(
        self, send: Callable[[], Awaitable[object]], rows: int, body_bytes: int
    ) -> asyncio.Future[None]:
        """Start ``send()`` once the window has room; raises an earlier send's failure."""
        self._raise_first_error()
        await self._window.acquire()

        async def run() -> None:
            try:
                await send()
            finally:
                self._window.release()
            self.rows += rows
            self.requests += 1
            self.body_bytes += body_bytes

        task = asyncio.ensure_future(run())
        self._in_flight.add(task)
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: asyncio.Future[None]) -> None:
        self._in_flight.discard(task)
        if not task.cancelled() and task.exception() is not None and self._error is None:
            self._error = task.exception()

    async def add(self, message: Message, sharding_key: str | None) -> None:
        """Queue ``message`` for sending (delayed ones go at once, alone)."""
        if message.delay_level > 0 or PropertyKey.TIMER_DELIVER_MS in message.properties:
            await self._submit(lambda: self.producer.send(message), 1, len(message.body))
            return
        queue: MessageQueue | None = None
        if sharding_key is not None:
            route = await self.producer.instance.publish_route(message.topic)
            queue = select_by_sharding_key(route.publish_queues, sharding_key)
        key = (message.topic, queue)
        lane = self._lanes.get(key)
        if lane is None:
            lane = self._lanes[key] = _Lane(message.topic, queue, [])
        lane.messages.append(message)
        lane.body_bytes += len(message.body)
        if (
            len(lane.messages) >= limits.SPARK_WRITE_BATCH_MAX_MESSAGES
            or lane.body_bytes >= limits.SPARK_WRITE_BATCH_MAX_BYTES
        ):
            await self._flush_lane(lane)

    async def add_plain(self, rows: PlainRows, prefix: str, first_row: int) -> None:
        """Send ``rows`` in batch requests encoded straight from their columns (the general
        path's bytes, see the module docstring). Raises MessageTooLargeError as the producer
        does for a batch over its limit."""
        producer = self.producer
        settings = producer.settings
        prefix_bytes = prefix.encode("ascii")
        start = 0
        while start < rows.count:
            body, msg_ids, stop = encode_batch_rows(
                rows.bodies,
                rows.tags,
                rows.keys,
                prefix_bytes,
                first_row,
                start,
                limits.SPARK_WRITE_BATCH_MAX_MESSAGES,
                limits.SPARK_WRITE_BATCH_MAX_BYTES,
            )
            if len(body) > settings.max_message_bytes:
                raise MessageTooLargeError(
                    f"the batch encodes to {len(body)} bytes; brokers accept at most"
                    f" {settings.max_message_bytes}; split it"
                )
            prepared = PreparedSend(
                topic=rows.topic,
                body=body,
                msg_id=msg_ids,
                sys_flag=0,
                flag=0,
                properties=_BATCH_HEADER_PROPERTIES,
                batch=True,
                reconsume_times=None,
                max_reconsume_times=None,
                born_timestamp_ms=producer.instance.clock.now_ms(),
                settings=settings,
            )

            def send(prepared: PreparedSend = prepared) -> Awaitable[object]:
                # The producer's own path for a prepared request: queue choice and retries.
                return producer._send_prepared(prepared, None, producer.send_timeout_ms)

            await self._submit(send, stop - start, rows.body_bytes(start, stop))
            start = stop

    async def _flush_lane(self, lane: _Lane) -> None:
        messages, body_bytes = lane.messages, lane.body_bytes
        if not messages:
            return
        lane.messages, lane.body_bytes = [], 0
        previous, queue = lane.previous, lane.queue

        async def send() -> None:
            if previous is not None:
                await asyncio.shield(previous)
            await self.producer.send_batch(messages, queue=queue)

        task = await self._submit(send, len(messages), body_bytes)
        if queue is not None:
            lane.previous = task

    async def finish(self) -> None:
        """Send what waits in the lanes and wait for every send; raises the first failure."""
        for lane in list(self._lanes.values()):
            await self._flush_lane(lane)
        await self.settle()
        self._raise_first_error()

    async def settle(self) -> None:
        """Wait for the sends in flight (their failures are kept, not raised)."""
        while self._in_flight:
            await asyncio.gather(*list(self._in_flight), return_exceptions=True)


def _column(batch: pa.RecordBatch, name: str) -> list[Any] | None:
    index = batch.schema.get_field_index(name)
    return None if index < 0 else list(batch.column(index).to_pylist())


def _messages(
    batch: pa.RecordBatch, default_topic: str | None, prefix: str, first_row: int
) -> Iterator[tuple[Message, str | None]]:
    """The batch's rows as messages (with their UNIQ_KEY) and sharding keys."""
    bodies = _column(batch, "body") or []
    count = batch.num_rows
    nothing: list[Any] = [None] * count
    topics = _column(batch, "topic") or nothing
    tags = _column(batch, "tags") or nothing
    keys = _column(batch, "keys") or nothing
    properties = _column(batch, "properties") or nothing
    sharding_keys = _column(batch, "sharding_key") or nothing
    delay_levels = _column(batch, "delay_level") or nothing
    deliver_times = _column(batch, "deliver_at_ms") or nothing
    for row in range(count):
        body = bodies[row]
        if body is None:
            raise InvalidMessageError(f"row {first_row + row}: the body is null")
        topic = topics[row] or default_topic
        if topic is None:
            raise InvalidMessageError(f"row {first_row + row}: no topic (column null, no option)")
        user_properties = {
            name: value
            for name, value in (properties[row] or ())
            if name not in SYSTEM_PROPERTY_NAMES and value is not None
        }
        message = Message(
            topic,
            body.encode() if isinstance(body, str) else body,
            properties=user_properties,
            tags=tags[row],
            keys=keys[row],
            delay_level=delay_levels[row] or None,
            deliver_at_ms=deliver_times[row],
        )
        message.properties[PropertyKey.UNIQ_KEY] = unique_key(prefix, first_row + row)
        yield message, sharding_keys[row]


async def _write_all(
    sender: _PartitionSender,
    batches: Iterable[pa.RecordBatch],
    default_topic: str | None,
    prefix: str,
) -> None:
    # Spark's input is read on a thread: while the JVM produces the next record batch, the loop
    # keeps serving the sends in flight (a loop blocked on the input would let their timeouts
    # run out with the answers waiting unread in the socket).
    loop = asyncio.get_running_loop()
    source = iter(batches)
    input_reader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="bolide-spark-input")
    try:
        row = 0
        max_message_bytes = sender.producer.settings.max_message_bytes
        while (batch := await loop.run_in_executor(input_reader, next, source, None)) is not None:
            plain = plain_rows(batch, default_topic, max_message_bytes)
            if plain is not None:
                await sender.add_plain(plain, prefix, row)
            else:
                for message, sharding_key in _messages(batch, default_topic, prefix, row):
                    await sender.add(message, sharding_key)
            row += batch.num_rows
    finally:
        input_reader.shutdown(wait=False, cancel_futures=True)
    await sender.finish()


def write_partition(
    options: WriteOptions,
    batches: Iterator[pa.RecordBatch],
    job_id: str,
    batch_id: int,
    partition_id: int,
) -> WriteReport:
    """Send every row of ``batches``; returns what was written.

    Raises the first send failure (after the sends in flight settled), InvalidMessageError
    for a row that cannot be a message, and ConfigError for bad options.
    """
    client = BlockingClient(options.namesrv, "writer", options.access)
    producer = Producer(
        options.group, instance=client.instance, send_timeout_ms=options.send_timeout_ms
    )
    sender = _PartitionSender(producer)
    prefix = unique_key_prefix(job_id, batch_id, partition_id)
    try:
        client.run(producer.start())
        try:
            client.run(_write_all(sender, batches, options.topic, prefix))
        except BaseException:
            # At-least-once: what was sent stays sent; let it land before failing the task.
            client.run(sender.settle())
            raise
        finally:
            client.run(producer.shutdown())
    finally:
        client.close()
    return WriteReport(partition_id, sender.rows, sender.requests, sender.body_bytes)


def _task_identity(default_job_id: str) -> tuple[str, int, int]:
    """(job id, batch id, partition id) of the running task: a streaming query's id and batch
    id when Spark set them, else ``default_job_id`` and batch 0."""
    context = TaskContext.get()
    if context is None:
        return default_job_id, 0, 0
    query_id = context.getLocalProperty(QUERY_ID_PROPERTY)
    batch_text = context.getLocalProperty(BATCH_ID_PROPERTY)
    batch_id = int(batch_text) if batch_text and batch_text.lstrip("-").isdigit() else 0
    return query_id or default_job_id, batch_id, context.partitionId()


def _summary(messages: Sequence[WriterCommitMessage | None]) -> tuple[int, int, int]:
    reports = [message for message in messages if isinstance(message, WriteReport)]
    return len(reports), sum(r.rows for r in reports), sum(r.requests for r in reports)


class BolideBatchWriter(DataSourceArrowWriter):
    """``df.write.format("bolide")``: the job id is made on the driver and travels with the
    writer to every task, so a retried task reproduces its rows' keys."""

    def __init__(self, options: WriteOptions, schema: StructType) -> None:
        check_write_schema(schema, options)
        self.options = options
        self.job_id = uuid.uuid4().hex
        self.last_report: tuple[int, int, int] | None = None

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriteReport:
        job_id, _, partition_id = _task_identity(self.job_id)
        return write_partition(self.options, iterator, job_id, 0, partition_id)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        self.last_report = _summary(messages)
        tasks, rows, requests = self.last_report
        _log.info(
            "bolide write committed: %d rows in %d requests from %d tasks", rows, requests, tasks
        )

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        tasks, rows, requests = _summary(messages)
        _log.warning(
            "bolide write aborted: %d task(s) had sent %d rows in %d requests (at-least-once:"
            " they stay sent)",
            tasks,
            rows,
            requests,
        )


class BolideStreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("bolide")``: keys come from the query id and batch id, which a
    restarted query keeps, so a replayed batch reproduces them."""

    def __init__(self, options: WriteOptions, schema: StructType) -> None:
        check_write_schema(schema, options)
        self.options = options
        self.fallback_job_id = uuid.uuid4().hex
        self.last_report: tuple[int, int, int, int] | None = None
        self.query_id: str | None = None
        """Exactly-once: the query id, learned by the tasks' identity or at commit."""

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        job_id, batch_id, partition_id = _task_identity(self.fallback_job_id)
        if self.options.exactly_once:
            identity = (job_id, batch_id, self.fallback_job_id)
            return write_halves(self.options, iterator, identity, partition_id)
        return write_partition(self.options, iterator, job_id, batch_id, partition_id)

    def _halves(self, messages: Sequence[WriterCommitMessage | None]) -> list[HalvesReport]:
        return [message for message in messages if isinstance(message, HalvesReport)]

    def _commit_exactly_once(
        self, messages: list[WriterCommitMessage | None], batch_id: int
    ) -> None:
        reports = [report for report in self._halves(messages) if report.halves]
        if not reports:
            _log.info("bolide batch %d wrote nothing: nothing to commit", batch_id)
            return
        query_id = reports[0].query_id
        committed, rolled_back = commit_batch(
            self.options, (query_id, batch_id, self.fallback_job_id), reports
        )
        _log.info(
            "bolide batch %d committed exactly once: %d half message(s) committed, %d of a"
            " replay rolled back",
            batch_id,
            committed,
            rolled_back,
        )

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        if self.options.exactly_once:
            self._commit_exactly_once(messages, batchId)
            return
        tasks, rows, requests = _summary(messages)
        self.last_report = (batchId, tasks, rows, requests)
        _log.info(
            "bolide batch %d committed: %d rows in %d requests from %d tasks",
            batchId,
            rows,
            requests,
            tasks,
        )

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        if self.options.exactly_once:
            count = rollback_halves(self.options, self._halves(messages))
            _log.warning("bolide batch %d aborted: %d half message(s) rolled back", batchId, count)
            return
        tasks, rows, requests = _summary(messages)
        _log.warning(
            "bolide batch %d aborted: %d task(s) had sent %d rows in %d requests; the replay"
            " sends them again with the same UNIQ_KEYs",
            batchId,
            tasks,
            rows,
            requests,
        )
