"""A pull from one of the file store's consume queues: the confirm-offset read stop, the
bounds check and the scan of the queue's mapped entries.

The read rules themselves (statuses, scan budget, collection) are bolide.store.queue_reads,
shared with the memory twin; this module only feeds them the file store's entries.
"""

from __future__ import annotations

from collections.abc import Iterator

from bolide.store.api import GetResult
from bolide.store.consume_queue import ENTRY, ConsumeQueue
from bolide.store.queue_reads import (
    RecordReader,
    check_offset,
    collect,
    confirmed_max_offset,
    scan_limit_entries,
)


def get_from_queue(
    queue: ConsumeQueue,
    read: RecordReader,
    *,
    queue_offset: int,
    max_count: int,
    max_bytes: int,
    tag_codes: frozenset[int] | None,
    confirm_offset: int | None,
) -> GetResult:
    """MessageStore.get_message on one queue: ``read`` gives a record by (commit-log offset,
    size); with ``confirm_offset`` (a commit-log offset, controller mode) set, entries whose
    record ends past it are not visible yet. ``max_count`` below 1 counts as 1."""
    min_offset, max_offset = queue.min_offset, queue.max_offset
    if confirm_offset is not None:
        max_offset = confirmed_max_offset(
            queue.entry, max(min_offset, queue_offset), max_offset, confirm_offset
        )
    early = check_offset(min_offset, max_offset, queue_offset)
    if early is not None:
        return early
    max_count = max(1, max_count)
    scan_entries = min(scan_limit_entries(max_count), max_offset - queue_offset)
    return collect(
        iter_entries(queue, queue_offset, scan_entries),
        read,
        queue_offset=queue_offset,
        min_offset=min_offset,
        max_offset=max_offset,
        max_count=max_count,
        max_bytes=max_bytes,
        tag_codes=tag_codes,
    )


def iter_entries(
    queue: ConsumeQueue, queue_offset: int, limit_entries: int
) -> Iterator[tuple[int, int, int]]:
    """At most ``limit_entries`` entries (commit-log offset, size, tags code) of ``queue``
    from ``queue_offset``, read view by view from its mapped files."""
    offset = queue_offset
    remaining = limit_entries
    while remaining > 0:
        view = queue.entries_view(offset, remaining)
        if not view:
            return
        count = len(view) // ENTRY.size
        yield from ENTRY.iter_unpack(view)
        offset += count
        remaining -= count
