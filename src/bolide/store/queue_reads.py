"""The read rules both stores share: GET statuses, the pull scan, the time search, and the
offset and store-time queries of a queue (:class:`QueueTimeQueries`).

Keeping them in one place makes the memory twin and the file store answer a pull the same way;
what differs between them is only where entries and records come from.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol

from bolide.base import limits
from bolide.store.api import GetResult, GetStatus

RecordReader = Callable[[int, int], "memoryview | None"]
"""``(commit_log_offset, size) -> record view``, None when the record is gone."""


def confirmed_max_offset(
    entry: Callable[[int], tuple[int, int, int] | None],
    first_offset: int,
    max_offset: int,
    confirm_offset: int,
) -> int:
    """The queue's max offset as readers may see it: entries before the first one (from
    ``first_offset``) whose record ends past ``confirm_offset`` (a commit-log offset). A
    queue's entries ascend in commit-log offset, so this is a binary search of ``entry``
    (queue offset -> (commit-log offset, size, tags code) or None)."""
    low, high = max(0, first_offset), max_offset
    last = entry(high - 1) if high > low else None
    if last is None or last[0] + last[1] <= confirm_offset:
        return max_offset
    while low < high:
        middle = (low + high) // 2
        found = entry(middle)
        if found is not None and found[0] + found[1] <= confirm_offset:
            low = middle + 1
        else:
            high = middle
    return low


class QueueView(Protocol):
    """What the offset and time queries read of one queue (both stores' queues have it)."""

    @property
    def min_offset(self) -> int: ...

    @property
    def max_offset(self) -> int: ...

    def entry(self, queue_offset: int) -> tuple[int, int, int] | None:
        """(commit-log offset, size, tags code) at ``queue_offset``; None outside [min, max)."""
        ...


class QueueTimeQueries:
    """Mixed into both stores: the MessageStore queries of a queue's offsets and store times,
    answered the same way from what each store gives (:meth:`_queue`, :meth:`_store_time`)."""

    def _queue(self, topic: str, queue_id: int) -> QueueView | None:
        """The queue; None when it does not exist or the store is not running."""
        raise NotImplementedError

    def _store_time(self, commit_log_offset: int) -> int:
        """Store time (ms) of the record at ``commit_log_offset``; -1 when there is none."""
        raise NotImplementedError

    def max_offset(self, topic: str, queue_id: int) -> int:
        """See MessageStore.max_offset."""
        queue = self._queue(topic, queue_id)
        return 0 if queue is None else queue.max_offset

    def min_offset(self, topic: str, queue_id: int) -> int:
        """See MessageStore.min_offset."""
        queue = self._queue(topic, queue_id)
        return 0 if queue is None else queue.min_offset

    def store_time_at(self, topic: str, queue_id: int, queue_offset: int) -> int:
        """See MessageStore.store_time_at."""
        queue = self._queue(topic, queue_id)
        entry = None if queue is None else queue.entry(queue_offset)
        return -1 if entry is None else self._store_time(entry[0])

    def earliest_store_time(self, topic: str, queue_id: int) -> int:
        """See MessageStore.earliest_store_time."""
        queue = self._queue(topic, queue_id)
        if queue is None:
            return -1
        return self.store_time_at(topic, queue_id, queue.min_offset)

    def offset_for_timestamp(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """See MessageStore.offset_for_timestamp."""
        queue = self._queue(topic, queue_id)
        if queue is None:
            return 0
        return lower_bound_by_time(
            queue.min_offset,
            queue.max_offset,
            lambda offset: self.store_time_at(topic, queue_id, offset),
            timestamp_ms,
        )


def scan_limit_entries(max_count: int) -> int:
    """Consume-queue entries one pull scans at most: max(16000 bytes, max_count * 20) / 20."""
    scan_bytes = max(limits.PULL_SCAN_MIN_BYTES, max_count * limits.CONSUME_QUEUE_ENTRY_BYTES)
    return scan_bytes // limits.CONSUME_QUEUE_ENTRY_BYTES


def check_offset(min_offset: int, max_offset: int, queue_offset: int) -> GetResult | None:
    """The answer for an offset that cannot be read (RocketMQ's rules), or None to scan.

    * max 0 → NO_MESSAGE_IN_QUEUE, next 0;
    * below min → OFFSET_TOO_SMALL, next min;
    * equal to max → OFFSET_OVERFLOW_ONE, next = the offset (caught up);
    * beyond max → OFFSET_OVERFLOW_BADLY, next max.
    """
    if max_offset == 0:
        return GetResult(GetStatus.NO_MESSAGE_IN_QUEUE, 0, min_offset, max_offset)
    if queue_offset < min_offset:
        return GetResult(GetStatus.OFFSET_TOO_SMALL, min_offset, min_offset, max_offset)
    if queue_offset == max_offset:
        return GetResult(GetStatus.OFFSET_OVERFLOW_ONE, queue_offset, min_offset, max_offset)
    if queue_offset > max_offset:
        return GetResult(GetStatus.OFFSET_OVERFLOW_BADLY, max_offset, min_offset, max_offset)
    return None


def collect(
    entries: Iterable[tuple[int, int, int]],
    read: RecordReader,
    *,
    queue_offset: int,
    min_offset: int,
    max_offset: int,
    max_count: int,
    max_bytes: int,
    tag_codes: frozenset[int] | None,
) -> GetResult:
    """Walk ``entries`` (starting at ``queue_offset``, already limited to the scan budget) and
    gather matching records.

    An entry is *consumed* (counted into next_begin_offset) when it is filtered out, gone, or
    taken; the walk stops before the first entry met once ``max_count`` records are taken or
    whose size would pass ``max_bytes`` (the first record is always taken, whatever its size).
    Status: FOUND with records, MESSAGE_WAS_REMOVING when every matching record was gone,
    NO_MATCHED_MESSAGE when nothing matched, OFFSET_FOUND_NULL when no entry could be read.
    """
    buffers: list[memoryview] = []
    total_bytes = 0
    consumed = 0
    removed = False
    saw_entry = False
    for commit_log_offset, size, tags_code in entries:
        saw_entry = True
        # Checked before the filter, as RocketMQ does: a full batch ends the walk.
        if buffers and (len(buffers) >= max_count or total_bytes + size > max_bytes):
            break
        consumed += 1
        if tag_codes is not None and tags_code not in tag_codes:
            continue
        record = read(commit_log_offset, size)
        if record is None:
            removed = True
            continue
        buffers.append(record)
        total_bytes += size
    next_begin_offset = queue_offset + consumed
    if buffers:
        status = GetStatus.FOUND
    elif removed:
        status = GetStatus.MESSAGE_WAS_REMOVING
    elif saw_entry:
        status = GetStatus.NO_MATCHED_MESSAGE
    else:
        status = GetStatus.OFFSET_FOUND_NULL
        next_begin_offset = queue_offset + 1
    return GetResult(status, next_begin_offset, min_offset, max_offset, buffers, total_bytes)


def lower_bound_by_time(
    min_offset: int, max_offset: int, store_time_at: Callable[[int], int], timestamp_ms: int
) -> int:
    """The first queue offset in [min, max) whose store time is >= ``timestamp_ms`` (binary
    search; store times grow along a queue), max offset when none. An unreadable store time
    (-1) counts as earlier."""
    low, high = min_offset, max_offset
    while low < high:
        middle = (low + high) // 2
        if store_time_at(middle) < timestamp_ms:
            low = middle + 1
        else:
            high = middle
    return low
