"""Offsets of the Bolide source and the pure decisions made over them.

Spark keeps a stream's progress as JSON it round-trips through our ``dict`` offsets, which
must have string keys. One offset names every queue the query reads::

    {"orders": {"broker-a": {"0": 1200, "1": 1187}, "broker-b": {"0": 977}}}

Each number is the next queue offset to read (exclusive end of what was read). Everything here
is pure: the broker's figures (each queue's min and max offset) are passed in.

Rules of :func:`plan_batch` (one micro-batch's end offset):

* a queue in the start offset that no longer exists is data loss (its topic was deleted or
  its queue count shrunk); it is dropped from the end offset;
* a queue that exists but is not in the start offset is new: it enters the end offset at
  its min offset, with nothing read from it in that batch, so replays plan the same ranges;
* a start below the queue's min offset is data loss (retention deleted unread messages);
  reading resumes at the min offset; a start past the max offset (the broker lost its tail)
  is reported the same way and reading resumes at the max offset;
* ``max_rows`` caps the batch: :func:`split_limit` shares it across queues in proportion to
  their backlog, every queue with a backlog getting at least one message when the cap allows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bolide.base.errors import ConfigError
from bolide.protocol.bodies import MessageQueue
from bolide.spark.options import EARLIEST, LATEST, OffsetSpec, queue_offsets_from_document

__all__ = [
    "BatchPlan",
    "QueueBounds",
    "QueueRange",
    "from_spark_offset",
    "plan_batch",
    "plan_ranges",
    "resolve_offsets",
    "split_limit",
    "split_ranges",
    "to_spark_offset",
]

SparkOffset = dict[str, dict[str, dict[str, int]]]
"""An offset as Spark stores it: topic -> broker name -> queue id (text) -> offset."""


@dataclass(frozen=True, slots=True)
class QueueBounds:
    """A queue's offsets on the broker: ``min_offset`` is the oldest kept, ``max_offset`` the
    next to be written (exclusive)."""

    min_offset: int
    max_offset: int


@dataclass(frozen=True, slots=True)
class QueueRange:
    """Offsets ``[start_offset, end_offset)`` of one queue: one input partition."""

    queue: MessageQueue
    start_offset: int
    end_offset: int

    @property
    def size(self) -> int:
        return self.end_offset - self.start_offset


@dataclass(frozen=True, slots=True)
class BatchPlan:
    """What :func:`plan_batch` decided: the ``end`` offsets, the data-loss ``losses`` found
    (sentences for a user), and the ``backlog`` (messages available before the cap)."""

    end: dict[MessageQueue, int]
    losses: tuple[str, ...]
    backlog: int


def to_spark_offset(offsets: Mapping[MessageQueue, int]) -> SparkOffset:
    """Queue -> offset as Spark's nested dict, keys in sorted order (equal offsets give equal
    JSON, which Spark compares)."""
    document: SparkOffset = {}
    for queue in sorted(offsets):
        brokers = document.setdefault(queue.topic, {})
        brokers.setdefault(queue.broker_name, {})[str(queue.queue_id)] = offsets[queue]
    return document


def from_spark_offset(document: Mapping[str, Any]) -> dict[MessageQueue, int]:
    """Spark's nested dict -> queue -> offset. Raises ConfigError for a malformed offset."""
    offsets = queue_offsets_from_document(dict(document), "the stream offset")
    if any(offset < 0 for offset in offsets.values()):
        raise ConfigError(f"the stream offset {dict(document)} holds a negative offset")
    return offsets


def split_limit(
    backlogs: Mapping[MessageQueue, int], limit: int, rotation: int = 0
) -> dict[MessageQueue, int]:
    """How many messages to take from each queue so that the total is at most ``limit``.

    When everything fits, each queue gives its whole backlog. Otherwise ``limit`` is shared in
    proportion to the backlogs (largest remainders get the odd units, ties in queue order), so
    the total is exactly ``limit`` and no queue gets more than its backlog; then every queue
    with a backlog that got nothing takes one message from the largest share, so none is
    starved. When ``limit`` is smaller than the number of queues with a backlog, ``limit`` of
    them get one message each, starting at position ``rotation`` of the sorted queues (the
    caller moves it on from trigger to trigger).
    """
    active = {queue: count for queue, count in sorted(backlogs.items()) if count > 0}
    total = sum(active.values())
    if total <= limit:
        return active
    if limit <= 0:
        return {}
    queues = list(active)
    if limit < len(queues):
        start = rotation % len(queues)
        return dict.fromkeys((queues[start:] + queues[:start])[:limit], 1)
    takes: dict[MessageQueue, int] = {}
    remainders: list[tuple[int, int, MessageQueue]] = []
    for position, queue in enumerate(queues):
        share, remainder = divmod(limit * active[queue], total)
        takes[queue] = share
        remainders.append((-remainder, position, queue))
    for _, _, queue in sorted(remainders)[: limit - sum(takes.values())]:
        takes[queue] += 1
    for queue in queues:
        if takes[queue] == 0:
            richest = max(queues, key=lambda item: (takes[item], -queues.index(item)))
            takes[richest] -= 1
            takes[queue] = 1
    return {queue: count for queue, count in takes.items() if count > 0}


def resolve_offsets(
    spec: OffsetSpec,
    bounds: Mapping[MessageQueue, QueueBounds],
    timestamp_offsets: Mapping[MessageQueue, int] | None = None,
) -> dict[MessageQueue, int]:
    """Concrete offsets for every queue of ``bounds``: EARLIEST becomes the min offset, LATEST
    the max offset, explicit offsets stay as given (a start below the min offset is then
    reported by :func:`plan_batch` or :func:`plan_ranges` callers as data loss). A queue the
    spec gives a time (``spec.timestamp_for``) takes ``timestamp_offsets`` (the broker's
    answer for that time), or its max offset when there is none."""
    resolved: dict[MessageQueue, int] = {}
    for queue in sorted(bounds):
        queue_bounds = bounds[queue]
        if spec.timestamp_for(queue) is not None:
            found = None if timestamp_offsets is None else timestamp_offsets.get(queue)
            resolved[queue] = queue_bounds.max_offset if found is None else found
            continue
        offset = spec.offset_for(queue)
        if offset == EARLIEST:
            offset = queue_bounds.min_offset
        elif offset == LATEST:
            offset = queue_bounds.max_offset
        resolved[queue] = offset
    return resolved


def check_start(
    queue: MessageQueue, start_offset: int, bounds: QueueBounds
) -> tuple[int, str | None]:
    """The offset reading of ``queue`` can really start at, and the data loss, if any, that
    starting at ``start_offset`` meets (see the module rules)."""
    if start_offset < bounds.min_offset:
        lost = bounds.min_offset - start_offset
        return bounds.min_offset, (
            f"{_name(queue)}: {lost} message(s) at offsets {start_offset}..{bounds.min_offset - 1}"
            " were deleted (retention) before the query read them"
        )
    if start_offset > bounds.max_offset:
        return bounds.max_offset, (
            f"{_name(queue)}: offset {start_offset} is past the queue's end {bounds.max_offset}"
            " (the broker lost messages, or the queue was re-created)"
        )
    return start_offset, None


def _name(queue: MessageQueue) -> str:
    return f"queue {queue.topic}/{queue.broker_name}/{queue.queue_id}"


def plan_batch(
    start: Mapping[MessageQueue, int],
    bounds: Mapping[MessageQueue, QueueBounds],
    *,
    max_rows: int | None = None,
    caps: Mapping[MessageQueue, int] | None = None,
    rotation: int = 0,
) -> BatchPlan:
    """The end offset of the micro-batch that begins at ``start`` (rules in the module
    docstring). ``caps`` (Trigger.AvailableNow) bounds each queue's end by the max offset it
    had when the trigger began; queues without a cap give nothing."""
    losses = [
        f"{_name(queue)} no longer exists (its topic was deleted or its queues were reduced);"
        f" messages from offset {start[queue]} on were not read"
        for queue in sorted(start)
        if queue not in bounds
    ]
    end: dict[MessageQueue, int] = {}
    begin: dict[MessageQueue, int] = {}
    backlogs: dict[MessageQueue, int] = {}
    for queue in sorted(bounds):
        queue_bounds = bounds[queue]
        if queue not in start:
            end[queue] = queue_bounds.min_offset
            continue
        begin_offset, loss = check_start(queue, start[queue], queue_bounds)
        if loss is not None:
            losses.append(loss)
        top = queue_bounds.max_offset
        if caps is not None:
            top = min(top, caps.get(queue, begin_offset))
        begin[queue] = begin_offset
        backlogs[queue] = max(0, top - begin_offset)
    takes = backlogs if max_rows is None else split_limit(backlogs, max_rows, rotation)
    for queue, begin_offset in begin.items():
        end[queue] = begin_offset + takes.get(queue, 0)
    return BatchPlan(end, tuple(losses), sum(backlogs.values()))


def plan_ranges(
    start: Mapping[MessageQueue, int], end: Mapping[MessageQueue, int]
) -> list[QueueRange]:
    """The non-empty ``[start, end)`` range of every queue in ``end``, sorted by queue; a
    queue missing from ``start`` (new in this batch) has no range."""
    ranges: list[QueueRange] = []
    for queue in sorted(end):
        start_offset = start.get(queue)
        if start_offset is None or end[queue] <= start_offset:
            continue
        ranges.append(QueueRange(queue, start_offset, end[queue]))
    return ranges


def total_size(ranges: Sequence[QueueRange]) -> int:
    """Offsets covered by ``ranges``."""
    return sum(item.size for item in ranges)


def _share(size: int, total: int, parts: int) -> int:
    """``size / total * parts`` rounded half up, at least 1 (Kafka's part count)."""
    return max((2 * size * parts + total) // (2 * total), 1)


def split_ranges(
    ranges: Sequence[QueueRange],
    *,
    min_partitions: int | None = None,
    max_records: int | None = None,
) -> list[QueueRange]:
    """``ranges`` split into more, smaller ranges of the same queues (minPartitions,
    maxRecordsPerPartition), the rules of Kafka's source:

    * empty ranges are dropped; nothing is split unless ``min_partitions`` exceeds the number
      of ranges or a range is larger than ``max_records``;
    * with ``min_partitions``, a range whose proportional share of it rounds to at most one
      part stays whole; the other ranges share what remains of ``min_partitions`` (at least
      one) in proportion to their sizes;
    * with ``max_records``, a range takes at least ``ceil(size / max_records)`` parts;
    * a range's parts are contiguous and differ in size by at most one offset.

    Pure and deterministic: a replayed micro-batch gets the same partitions.
    """
    kept = [item for item in ranges if item.size > 0]
    if not (
        (min_partitions is not None and min_partitions > len(kept))
        or (max_records is not None and any(item.size > max_records for item in kept))
    ):
        return kept
    total = total_size(kept)
    whole: set[int] = set()
    split_total, split_parts = total, 1
    if min_partitions is not None:
        whole = {n for n, item in enumerate(kept) if _share(item.size, total, min_partitions) == 1}
        split_total = total - sum(kept[n].size for n in whole)
        split_parts = max(min_partitions - len(whole), 1)
    result: list[QueueRange] = []
    for position, item in enumerate(kept):
        parts = 1
        if min_partitions is not None and position not in whole:
            parts = _share(item.size, split_total, split_parts)
        if max_records is not None:
            parts = max(parts, -(-item.size // max_records))
        result.extend(_cut(item, parts))
    return result


def _cut(item: QueueRange, parts: int) -> list[QueueRange]:
    parts = min(parts, item.size)  # never an empty piece
    pieces: list[QueueRange] = []
    remaining, start = item.size, item.start_offset
    for part in range(parts):
        size = remaining // (parts - part)
        remaining -= size
        pieces.append(QueueRange(item.queue, start, start + size))
        start += size
    return pieces
