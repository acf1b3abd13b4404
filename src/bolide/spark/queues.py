"""What the source asks brokers, through the Python client: queues, their bounds, offsets by
time, committed group offsets, and the pipelined pull of one offset range.

Reads need no consumer group registration: every pull names its offsets and carries its own
subscription (the SUBSCRIPTION pull flag), as Java's lite pull consumer does. Pull bodies are
kept as bytes (:mod:`bolide.spark.records` turns them into Arrow columns), so pulls are made
with :func:`bolide.client.rpc.call` rather than the decoding ``pull_message``.

Pipelining (:func:`pull_range`): a range ``[start, end)`` is cut into segments of
``batch_size`` offsets, and up to ``in_flight`` segments are pulled at once; results are used
in offset order. A pull answers at most ``batch_size`` messages and may stop early (the
broker's maxTransferCountOnMessageInMemory / maxTransferBytesOnMessageInMemory caps, 32 and
256 KiB by default); the rest of its segment is pulled again, at the front of the queue. A
short answer also shrinks the segments cut after it to what the broker answered with (never
below the 32 messages every RocketMQ broker sends by default), so a ``batch_size`` above the
broker's cap costs a few extra pulls, not one extra pull per segment.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import re
from collections import deque
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from bolide.base import limits
from bolide.base.errors import (
    BolideError,
    DataLossError,
    NameServerUnavailableError,
    NoRouteError,
    RequestTimeoutError,
    TransportError,
)
from bolide.base.gathering import gather_bounded
from bolide.client import rpc
from bolide.client.instance import ClientInstance
from bolide.client.route import subscribe_queues
from bolide.client.rpc import PullStatus
from bolide.client.rpc import admin as admin_rpc
from bolide.client.rpc.pull import RawPull, pull_raw
from bolide.protocol.bodies import EXPRESSION_TYPE_TAG, MessageQueue
from bolide.protocol.headers import PullMessageRequestHeader
from bolide.protocol.headers.pull import PullSysFlag
from bolide.protocol.system_topics import is_dlq_topic, is_retry_topic, is_system_topic
from bolide.spark.offsets import QueueBounds, QueueRange

__all__ = [
    "PullSettings",
    "PulledChunk",
    "commit_group_offsets",
    "fetch_bounds",
    "fetch_offsets_at_times",
    "fetch_timestamp_offsets",
    "list_queues",
    "matching_topics",
    "pull_range",
]

_log = logging.getLogger("bolide.spark")

T = TypeVar("T")


async def _bounded_gather(
    items: Iterable[MessageQueue], action: Callable[[MessageQueue], Awaitable[T]]
) -> dict[MessageQueue, T]:
    """``action`` for every queue, at most limits.SPARK_PLAN_WINDOW_REQUESTS at once."""
    queues = list(items)
    starts = [functools.partial(action, queue) for queue in queues]
    results = await gather_bounded(starts, limits.SPARK_PLAN_WINDOW_REQUESTS)
    return dict(zip(queues, results, strict=True))


async def list_queues(instance: ClientInstance, topics: Iterable[str]) -> list[MessageQueue]:
    """The readable queues of ``topics`` by fresh routes, sorted; a topic no broker holds has
    none. Raises NameServerUnavailableError."""
    queues: list[MessageQueue] = []
    for topic in topics:
        route = await instance.update_route(topic)
        if route is None:
            _log.info("topic %s has no route (not created yet?): no queues to read", topic)
            continue
        queues.extend(subscribe_queues(topic, route.data))
    return sorted(queues)


async def matching_topics(instance: ClientInstance, pattern: str) -> list[str]:
    """The topics whose whole name matches the regex ``pattern``, sorted, as the name servers
    know them now (first to answer); system, %RETRY% and %DLQ% topics, and the cluster and
    broker names brokers register as topics, never match.

    Raises NameServerUnavailableError when no name server answers.
    """
    timeout_ms = instance.config.api_timeout_ms
    failures: list[str] = []
    for address in instance.config.namesrv_addresses:
        try:
            topics = await admin_rpc.get_topic_list(instance.pool, address, timeout_ms)
            cluster = await admin_rpc.get_cluster_info(instance.pool, address, timeout_ms)
        except TransportError as error:
            failures.append(f"{address}: {error}")
            continue
        owned = set(cluster.broker_addr_table) | set(cluster.cluster_addr_table)
        return sorted(
            topic
            for topic in topics
            if re.fullmatch(pattern, topic) is not None
            and topic not in owned
            and not (is_system_topic(topic) or is_retry_topic(topic) or is_dlq_topic(topic))
        )
    raise NameServerUnavailableError(
        "no name server answered the topic list: " + ("; ".join(failures) or "none configured")
    )


async def fetch_bounds(
    instance: ClientInstance, queues: Iterable[MessageQueue]
) -> dict[MessageQueue, QueueBounds]:
    """Every queue's min and max offset. Raises NoRouteError, RemoteError, transport errors."""

    async def bounds(queue: MessageQueue) -> QueueBounds:
        min_offset = await instance.min_offset(queue)
        max_offset = await instance.max_offset(queue)
        return QueueBounds(min_offset, max(min_offset, max_offset))

    return await _bounded_gather(queues, bounds)


async def fetch_timestamp_offsets(
    instance: ClientInstance, queues: Iterable[MessageQueue], timestamp_ms: int
) -> dict[MessageQueue, int]:
    """Each queue's first offset stored at or after ``timestamp_ms`` (the broker searches).
    Raises as :func:`fetch_bounds`."""

    async def search(queue: MessageQueue) -> int:
        return await instance.search_offset(queue, timestamp_ms)

    return await _bounded_gather(queues, search)


async def fetch_offsets_at_times(
    instance: ClientInstance, times_ms: Mapping[MessageQueue, int]
) -> dict[MessageQueue, int]:
    """Each queue's first offset stored at or after its own time (epoch ms; the broker
    searches). Raises as :func:`fetch_bounds`."""

    async def search(queue: MessageQueue) -> int:
        return await instance.search_offset(queue, times_ms[queue])

    return await _bounded_gather(times_ms, search)


async def commit_group_offsets(
    instance: ClientInstance, group: str, offsets: Mapping[MessageQueue, int]
) -> int:
    """Store ``offsets`` as ``group``'s consumer offsets (what ``bolide group progress`` shows).
    Best effort: failures are logged. Returns how many queues were recorded."""

    async def update(queue: MessageQueue) -> bool:
        try:
            address = await instance.queue_broker_address(queue)
            await rpc.update_consumer_offset(
                instance.pool,
                address,
                group,
                queue.topic,
                queue.queue_id,
                offsets[queue],
                limits.SPARK_GROUP_COMMIT_TIMEOUT_MS,
            )
        except BolideError as error:
            _log.warning("recording %s's offset of %s failed: %s", group, queue, error)
            return False
        return True

    results = await _bounded_gather(offsets, update)
    return sum(results.values())


@dataclass(frozen=True, slots=True)
class PullSettings:
    """How one input partition pulls: ``group`` named in requests, ``tags`` expression,
    ``batch_size`` offsets per pull, ``in_flight`` pulls at once, ``fail_on_data_loss``."""

    group: str
    tags: str
    batch_size: int = limits.SPARK_PULL_BATCH_DEFAULT_MESSAGES
    in_flight: int = limits.SPARK_PULL_WINDOW_REQUESTS
    fail_on_data_loss: bool = True
    timeout_ms: int = limits.CLIENT_API_TIMEOUT_MS


@dataclass(frozen=True, slots=True)
class PulledChunk:
    """One pull's records (a run of stored records, maybe empty) and the offset they must stay
    below (records at or past it belong to a later segment)."""

    body: bytes
    stop_offset: int


async def _pull_once(
    instance: ClientInstance, queue: MessageQueue, offset: int, count: int, settings: PullSettings
) -> RawPull:
    header = PullMessageRequestHeader(
        consumer_group=settings.group,
        topic=queue.topic,
        queue_id=queue.queue_id,
        queue_offset=offset,
        max_messages=count,
        sys_flag=int(PullSysFlag.SUBSCRIPTION),
        commit_offset=0,
        suspend_timeout_ms=0,
        sub_version=0,
        subscription=settings.tags,
        expression_type=EXPRESSION_TYPE_TAG,
    )
    address = await instance.queue_broker_address(queue)
    return await pull_raw(instance.pool, address, header, settings.timeout_ms)


async def _pull(
    instance: ClientInstance, queue: MessageQueue, offset: int, count: int, settings: PullSettings
) -> RawPull:
    """One pull, tried up to limits.SPARK_PULL_ATTEMPTS_MAX_COUNT times on transport errors
    and retriable codes (refreshing the route between attempts)."""
    last_error: BolideError | None = None
    for attempt in range(limits.SPARK_PULL_ATTEMPTS_MAX_COUNT):
        if attempt:
            await instance.clock.sleep_ms(limits.SPARK_PULL_RETRY_DELAY_MS)
            try:
                await instance.update_route(queue.topic)
            except BolideError as error:
                _log.warning("route refresh of %s failed: %s", queue.topic, error)
        try:
            return await _pull_once(instance, queue, offset, count, settings)
        except BolideError as error:
            if not error.retriable:
                raise
            last_error = error
        _log.warning(
            "pull of %s at %d failed (attempt %d): %s", queue, offset, attempt + 1, last_error
        )
    if last_error is None:  # pragma: no cover - the loop runs at least once
        raise NoRouteError(f"no pull of {queue} was attempted")
    last_error.add_note(
        f"pulling {queue} at offset {offset} failed {limits.SPARK_PULL_ATTEMPTS_MAX_COUNT} times"
    )
    raise last_error


class _Pipeline:
    """The segments of one range, pulled ahead (see the module docstring)."""

    def __init__(
        self, instance: ClientInstance, queue_range: QueueRange, settings: PullSettings
    ) -> None:
        self.instance = instance
        self.queue = queue_range.queue
        self.end_offset = queue_range.end_offset
        self.settings = settings
        self.next_offset = queue_range.start_offset
        self.segment_size = settings.batch_size
        """Offsets per segment cut next: ``batch_size`` until a short answer shows the
        broker's cap (see :meth:`answered`)."""
        self.pending: deque[tuple[int, int, asyncio.Task[RawPull]]] = deque()
        self.dropped: list[asyncio.Task[RawPull]] = []
        self.stalls = 0

    def _start(self, offset: int, stop: int) -> asyncio.Task[RawPull]:
        count = stop - offset
        return asyncio.ensure_future(_pull(self.instance, self.queue, offset, count, self.settings))

    def fill(self) -> None:
        """Start pulls until ``in_flight`` are pending or the range is covered."""
        while len(self.pending) < self.settings.in_flight and self.next_offset < self.end_offset:
            stop = min(self.next_offset + self.segment_size, self.end_offset)
            self.pending.append((self.next_offset, stop, self._start(self.next_offset, stop)))
            self.next_offset = stop

    def answered(self, answered_count: int) -> None:
        """A pull answered ``answered_count`` offsets of a longer segment: cut the later ones to
        that size, not below the broker default (a large message or a filter ends one answer
        early without telling the broker's cap)."""
        floor = min(self.settings.batch_size, limits.PULL_BATCH_MAX_MESSAGES)
        self.segment_size = max(floor, min(self.segment_size, answered_count))

    def redo_front(self, offset: int, stop: int) -> None:
        """Pull ``[offset, stop)`` next, before the segments already pending."""
        self.pending.appendleft((offset, stop, self._start(offset, stop)))

    def skip_to(self, offset: int) -> None:
        """Forget everything below ``offset`` (lost): pending pulls below it are cancelled,
        one that straddles it starts again at ``offset``."""
        kept: deque[tuple[int, int, asyncio.Task[RawPull]]] = deque()
        for start, stop, task in self.pending:
            if start >= offset:
                kept.append((start, stop, task))
                continue
            task.cancel()
            self.dropped.append(task)
            if stop > offset:
                kept.append((offset, stop, self._start(offset, stop)))
        self.pending = kept
        self.next_offset = max(self.next_offset, offset)

    async def cancel(self) -> None:
        tasks = [task for _, _, task in self.pending] + self.dropped
        self.pending.clear()
        self.dropped.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def pull_range(
    instance: ClientInstance, queue_range: QueueRange, settings: PullSettings
) -> AsyncGenerator[PulledChunk, None]:
    """The records of ``queue_range``, as pull bodies in offset order.

    Raises:
        DataLossError: with ``fail_on_data_loss``, part of the range is gone (deleted by
            retention, or the queue ends before the range does); without it a warning is
            logged and the missing part skipped.
        RemoteError, ConnectionClosedError, RequestTimeoutError, NoRouteError: a pull failed
            limits.SPARK_PULL_ATTEMPTS_MAX_COUNT times, or the range made no progress.
    """
    pipeline = _Pipeline(instance, queue_range, settings)
    pipeline.fill()
    try:
        while pipeline.pending:
            offset, stop, task = pipeline.pending.popleft()
            result = await task
            chunk = await _next_step(pipeline, offset, stop, result)
            if chunk is not None and chunk.body:
                yield chunk
            pipeline.fill()
    finally:
        await pipeline.cancel()


async def _next_step(
    pipeline: _Pipeline, offset: int, stop: int, result: RawPull
) -> PulledChunk | None:
    """Act on the pull of segment ``[offset, stop)``: hand its records on, and queue again
    what it did not cover."""
    queue = pipeline.queue
    status = result.status
    if status is PullStatus.OFFSET_ILLEGAL and offset < result.min_offset:
        lost_end = min(result.min_offset, pipeline.end_offset)
        _lost(
            pipeline,
            f"queue {queue.topic}/{queue.broker_name}/{queue.queue_id}: messages"
            f" {offset}..{lost_end - 1} were deleted (retention) before they were read",
        )
        pipeline.skip_to(result.min_offset)
        if result.min_offset < stop:
            pipeline.redo_front(result.min_offset, stop)
        return None
    if status in (PullStatus.NO_NEW_MSG, PullStatus.OFFSET_ILLEGAL) and (
        result.max_offset <= offset
    ):
        _lost(
            pipeline,
            f"queue {queue.topic}/{queue.broker_name}/{queue.queue_id} ends at offset"
            f" {result.max_offset}; messages {offset}..{stop - 1} are not there any more",
        )
        return None
    progress = result.next_begin_offset
    if status in (PullStatus.FOUND, PullStatus.NO_MATCHED_MSG) and progress > offset:
        pipeline.stalls = 0
        if progress < stop:
            if status is PullStatus.FOUND:
                pipeline.answered(progress - offset)
            pipeline.redo_front(progress, stop)
        return PulledChunk(result.body if status is PullStatus.FOUND else b"", stop)
    pipeline.stalls += 1
    if pipeline.stalls >= limits.SPARK_PULL_ATTEMPTS_MAX_COUNT:
        raise RequestTimeoutError(
            f"pulls of {queue} at offset {offset} made no progress"
            f" ({pipeline.stalls} answers {status.value}, next offset {progress})"
        )
    await pipeline.instance.clock.sleep_ms(limits.SPARK_PULL_RETRY_DELAY_MS)
    pipeline.redo_front(offset, stop)
    return None


def _lost(pipeline: _Pipeline, message: str) -> None:
    if pipeline.settings.fail_on_data_loss:
        raise DataLossError(
            message + ". Set failOnDataLoss=false to skip lost messages with a warning."
        )
    _log.warning("%s; skipped (failOnDataLoss=false)", message)
