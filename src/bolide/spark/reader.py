"""The Bolide source: batch reads and streaming micro-batches over explicit queue offsets.

Planning (``partitions``, ``initialOffset``, ``latestOffset``, ``commit``) runs in a Python
process on the driver, which asks the brokers for each queue's min and max offset. Reading
(``read``) runs in executor workers, each with its own reader object: everything a task needs
travels in its :class:`BolidePartition` (name servers, queue, offset range, pull settings). One
input partition covers one queue's offset range.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from bolide.base import limits
from bolide.base.clock import Clock, SystemClock
from bolide.base.errors import DataLossError
from bolide.protocol.bodies import MessageQueue
from bolide.spark.client import BlockingClient
from bolide.spark.offsets import (
    QueueBounds,
    QueueRange,
    check_start,
    from_spark_offset,
    plan_batch,
    plan_ranges,
    resolve_offsets,
    split_ranges,
    to_spark_offset,
)
from bolide.spark.options import ClusterAccess, OffsetSpec, ReadOptions
from bolide.spark.queues import (
    PulledChunk,
    PullSettings,
    commit_group_offsets,
    fetch_bounds,
    fetch_offsets_at_times,
    list_queues,
    matching_topics,
    pull_range,
)
from bolide.spark.records import RowColumns

__all__ = ["BolideBatchReader", "BolidePartition", "BolideStreamReader", "read_partition"]

_log = logging.getLogger("bolide.spark")


class BolidePartition(InputPartition):
    """One task's work: read ``queue_range`` from the cluster of ``namesrv``.

    Picklable (Spark ships it to an executor).
    """

    def __init__(
        self,
        namesrv: str,
        queue_range: QueueRange,
        settings: PullSettings,
        tag_set: frozenset[str],
        access: ClusterAccess | None = None,
    ) -> None:
        super().__init__(queue_range)
        self.namesrv = namesrv
        self.access = access or ClusterAccess()
        self.queue_range = queue_range
        self.settings = settings
        self.tag_set = tag_set


def read_partition(partition: BolidePartition) -> Iterator[pa.RecordBatch]:
    """The rows of ``partition`` as Arrow record batches of at most
    limits.SPARK_ARROW_BATCH_MAX_MESSAGES rows / limits.SPARK_ARROW_BATCH_MAX_BYTES body bytes.

    Records are decoded on the client's loop, between pulls, so pulls in flight progress
    while a batch fills; the loop stops only to hand a full batch to Spark.

    Raises DataLossError (failOnDataLoss and part of the range is gone), ProtocolError (a
    malformed record), and the client's errors when pulls keep failing.
    """
    client = BlockingClient(partition.namesrv, "reader", partition.access)
    columns = RowColumns(partition.queue_range.queue, partition.tag_set)
    chunks = pull_range(client.instance, partition.queue_range, partition.settings)
    try:
        while client.run(_fill(columns, chunks)):
            yield columns.take_batch()
        if len(columns):
            yield columns.take_batch()
    finally:
        try:
            client.run(chunks.aclose())
        finally:
            client.close()


async def _fill(columns: RowColumns, chunks: AsyncIterator[PulledChunk]) -> bool:
    """Decode chunks into ``columns`` until a record batch is full (True) or the range is
    done (False)."""
    async for chunk in chunks:
        columns.add(chunk.body, chunk.stop_offset)
        if (
            len(columns) >= limits.SPARK_ARROW_BATCH_MAX_MESSAGES
            or columns.body_bytes >= limits.SPARK_ARROW_BATCH_MAX_BYTES
        ):
            return True
    return False


def _read(partition: InputPartition) -> Iterator[pa.RecordBatch]:
    if isinstance(partition, BolidePartition):
        return read_partition(partition)
    # With no partition planned, Spark still runs one task, on an empty InputPartition.
    if partition.value is None:
        return iter(())
    raise TypeError(f"not a Bolide partition: {partition!r}")


def _pull_settings(options: ReadOptions) -> PullSettings:
    return PullSettings(
        group=options.pull_group,
        tags=options.tags,
        batch_size=options.pull_batch_size,
        fail_on_data_loss=options.fail_on_data_loss,
    )


def _partitions(options: ReadOptions, ranges: Sequence[QueueRange]) -> list[BolidePartition]:
    """One partition per range, after minPartitions / maxRecordsPerPartition split them."""
    settings = _pull_settings(options)
    split = split_ranges(
        ranges,
        min_partitions=options.min_partitions,
        max_records=options.max_records_per_partition,
    )
    return [
        BolidePartition(options.namesrv, queue_range, settings, options.tag_set, options.access)
        for queue_range in split
    ]


def _report_losses(losses: Sequence[str], fail: bool) -> None:
    if not losses:
        return
    if fail:
        raise DataLossError(
            "; ".join(losses) + ". Set failOnDataLoss=false to skip lost messages with a warning."
        )
    for loss in losses:
        _log.warning("%s; skipped (failOnDataLoss=false)", loss)


def _unknown_queues(options: ReadOptions, bounds: Mapping[MessageQueue, QueueBounds]) -> list[str]:
    named = [
        *options.starting.offsets,
        *options.starting.timestamps_ms,
        *options.ending.offsets,
        *options.ending.timestamps_ms,
    ]
    return [
        f"queue {queue.topic}/{queue.broker_name}/{queue.queue_id} named in the offsets"
        " does not exist"
        for queue in sorted(set(named))
        if queue not in bounds
    ]


class _Planner:
    """The driver's view of the brokers: a client kept for the reader's lifetime."""

    def __init__(self, options: ReadOptions) -> None:
        self.options = options
        self._client: BlockingClient | None = None

    @property
    def client(self) -> BlockingClient:
        if self._client is None:
            self._client = BlockingClient(self.options.namesrv, "planner", self.options.access)
        return self._client

    def bounds(self) -> dict[MessageQueue, QueueBounds]:
        """Every readable queue of the topics (named, or matching subscribePattern now) with
        its min and max offset, now."""
        instance = self.client.instance
        topics, pattern = self.options.topics, self.options.topic_pattern

        async def snapshot() -> dict[MessageQueue, QueueBounds]:
            names = topics if pattern is None else await matching_topics(instance, pattern)
            return await fetch_bounds(instance, await list_queues(instance, names))

        return self.client.run_idempotent(snapshot, "reading the queues' offsets")

    def offsets(
        self, spec: OffsetSpec, bounds: Mapping[MessageQueue, QueueBounds]
    ) -> dict[MessageQueue, int]:
        """``spec`` on each queue of ``bounds``; the queues it gives a time (startingTimestamp,
        *OffsetsByTimestamp) are searched on their brokers."""
        times_ms = {
            queue: time_ms for queue in bounds if (time_ms := spec.timestamp_for(queue)) is not None
        }
        found: dict[MessageQueue, int] | None = None
        if times_ms:
            instance = self.client.instance

            async def search() -> dict[MessageQueue, int]:
                return await fetch_offsets_at_times(instance, times_ms)

            found = self.client.run_idempotent(search, "searching offsets by time")
        return resolve_offsets(spec, bounds, found)

    def starting_offsets(
        self, bounds: Mapping[MessageQueue, QueueBounds]
    ) -> dict[MessageQueue, int]:
        """Where reading starts on each queue (startingOffsets, startingOffsetsByTimestamp,
        startingTimestamp)."""
        return self.offsets(self.options.starting, bounds)

    def commit_group(self, offsets: Mapping[MessageQueue, int]) -> None:
        group = self.options.group
        if group is None or not offsets:
            return
        recorded = self.client.run(commit_group_offsets(self.client.instance, group, offsets))
        _log.info("recorded %d queue offset(s) of group %s", recorded, group)

    def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            client.close()


class BolideBatchReader(DataSourceReader):
    """``spark.read.format("bolide")``: the offsets between startingOffsets (or
    startingTimestamp) and endingOffsets, as of planning."""

    def __init__(self, options: ReadOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        """One partition per queue with messages in range.

        Raises DataLossError (failOnDataLoss: a start below a queue's min offset, or a queue
        named in the offsets that does not exist), and the client's errors.
        """
        planner = _Planner(self.options)
        try:
            bounds = planner.bounds()
            start = planner.starting_offsets(bounds)
            end = planner.offsets(self.options.ending, bounds)
        finally:
            planner.close()
        losses = _unknown_queues(self.options, bounds)
        ranges: list[QueueRange] = []
        for queue in sorted(bounds):
            begin, loss = check_start(queue, start[queue], bounds[queue])
            if loss is not None:
                losses.append(loss)
            stop = min(end[queue], bounds[queue].max_offset)
            if stop > begin:
                ranges.append(QueueRange(queue, begin, stop))
        _report_losses(losses, self.options.fail_on_data_loss)
        _log.info("batch read of %s: %d partition(s)", ",".join(self.options.topics), len(ranges))
        return _partitions(self.options, ranges)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(partition)


class BolideStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("bolide")``: micro-batches over every queue of the topics.

    ``clock`` (default: the system clock) times maxTriggerDelay.
    """

    def __init__(self, options: ReadOptions, clock: Clock | None = None) -> None:
        self.options = options
        self._planner = _Planner(options)
        self._clock: Clock = clock or SystemClock()
        self._caps: dict[MessageQueue, int] | None = None
        self._rotation = 0
        self._last_trigger_ms = self._clock.monotonic_ms()
        self._latest: dict[MessageQueue, int] | None = None

    def initialOffset(self) -> dict[str, Any]:  # noqa: N802 (Spark's name)
        """startingOffsets (default latest) or startingTimestamp resolved on every queue."""
        bounds = self._planner.bounds()
        unknown = _unknown_queues(self.options, bounds)
        _report_losses(unknown, self.options.fail_on_data_loss)
        return dict(to_spark_offset(self._planner.starting_offsets(bounds)))

    def getDefaultReadLimit(self) -> ReadLimit:  # noqa: N802 (Spark's name)
        """maxMessagesPerTrigger as ReadMaxRows, else minMessagesPerTrigger as ReadMinRows."""
        if self.options.max_messages_per_trigger is not None:
            return ReadMaxRows(self.options.max_messages_per_trigger)
        if self.options.min_messages_per_trigger is not None:
            return ReadMinRows(self.options.min_messages_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802 (Spark's name)
        """Trigger.AvailableNow: read up to each queue's max offset as of now, no further."""
        self._caps = {queue: b.max_offset for queue, b in self._planner.bounds().items()}

    def _min_rows(self, limit: ReadLimit) -> int:
        if self._caps is not None or isinstance(limit, ReadAllAvailable):
            return 0
        if isinstance(limit, ReadMinRows):
            return limit.min_rows
        return self.options.min_messages_per_trigger or 0

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:  # noqa: N802 (Spark's name)
        """The end of the next micro-batch (see bolide.spark.offsets.plan_batch).

        Raises DataLossError with failOnDataLoss when queues vanished or retention deleted
        unread messages.
        """
        start_offsets = from_spark_offset(start)
        bounds = self._planner.bounds()
        self._latest = {queue: b.max_offset for queue, b in bounds.items()}
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        plan = plan_batch(
            start_offsets, bounds, max_rows=max_rows, caps=self._caps, rotation=self._rotation
        )
        self._rotation += 1
        _report_losses(plan.losses, self.options.fail_on_data_loss)
        now_ms = self._clock.monotonic_ms()
        min_rows = self._min_rows(limit)
        waited_ms = now_ms - self._last_trigger_ms
        if min_rows and plan.backlog < min_rows and waited_ms < self.options.max_trigger_delay_ms:
            return start
        if plan.end != start_offsets:
            self._last_trigger_ms = now_ms
        return dict(to_spark_offset(plan.end))

    def reportLatestOffset(self) -> dict[str, Any] | None:  # noqa: N802 (Spark's name)
        """Each queue's max offset as last seen (for the query's progress reports)."""
        return None if self._latest is None else dict(to_spark_offset(self._latest))

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        """One partition per queue whose offset moved between ``start`` and ``end``."""
        ranges = plan_ranges(from_spark_offset(start), from_spark_offset(end))
        return _partitions(self.options, ranges)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(partition)

    def commit(self, end: dict[str, Any]) -> None:
        """Spark has processed everything before ``end``: with the ``group`` option, record it
        as the group's consumer offsets (best effort)."""
        self._planner.commit_group(from_spark_offset(end))

    def stop(self) -> None:
        self._planner.close()
