"""Where a consumer group without a committed offset starts a queue: broker.conf's
``newGroupStartRule`` (:class:`~bolide.broker.config.NewGroupStart`), one rule for the 4.x
path (QUERY_CONSUMER_OFFSET, :mod:`bolide.broker.handlers.consumer_manage`) and the POP path
(:mod:`bolide.broker.pop.service`).

:func:`starts_at_zero` answers whether a new group reads the queue from offset 0. With MEMORY
(the default, RocketMQ's rule) that holds while the queue still starts at 0 and its first
message lies in the broker's memory window (its commit-log position within
ACCESS_MESSAGE_IN_MEMORY_MAX_RATIO_PERCENT of physical memory from the commit log's end), or
while the queue holds nothing yet. QUEUE_START drops the memory condition; CONSUME_FROM never
starts at 0. What happens otherwise is the caller's: a 4.x client applies its consumeFromWhere,
a POP group starts at the newest message.
"""

from __future__ import annotations

import functools
import os

from bolide.base import limits
from bolide.broker.config import NewGroupStart
from bolide.store.api import MessageStore

__all__ = ["memory_window_bytes", "physical_memory_bytes", "starts_at_zero"]


def starts_at_zero(
    rule: NewGroupStart, store: MessageStore, topic: str, queue_id: int, window_bytes: int
) -> bool:
    """Whether a new group starts ``topic``/``queue_id`` at 0 under ``rule``; ``window_bytes``
    is the memory window (:func:`memory_window_bytes`)."""
    if rule is NewGroupStart.CONSUME_FROM or store.min_offset(topic, queue_id) > 0:
        return False
    if store.max_offset(topic, queue_id) == 0:
        return True  # nothing stored yet: the first message will be at 0
    if rule is NewGroupStart.QUEUE_START:
        return store.store_time_at(topic, queue_id, 0) >= 0
    entries = store.consume_queue_entries(topic, queue_id, 0, 1)
    if not entries:
        return False
    first_position = entries[0][0]
    behind_bytes = store.stats().commit_log_max_offset - first_position
    return behind_bytes <= window_bytes


def memory_window_bytes(memory_bytes: int) -> int:
    """ACCESS_MESSAGE_IN_MEMORY_MAX_RATIO_PERCENT of ``memory_bytes``."""
    return memory_bytes * limits.ACCESS_MESSAGE_IN_MEMORY_MAX_RATIO_PERCENT // 100


@functools.cache
def physical_memory_bytes() -> int:
    """This machine's physical memory (what RocketMQ's memory window is a share of)."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
