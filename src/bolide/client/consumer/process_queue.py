"""ProcessQueue: one assigned queue's pulled-but-unacknowledged messages (RocketMQ's offset
management, consumption progress and orderly consumption).

Pure state, no I/O; callers pass the time (``now_ms``, wall clock in ms). Not thread-safe:
the consumer touches it from its event loop only (listeners on worker threads report back to
the loop).

The offset that may be committed after a batch is consumed is the **smallest offset still
cached** (an earlier message may still be in a listener's hands), or, when nothing is left,
one past the largest offset ever cached. So a consumer that crashes restarts at the oldest
unfinished message: at-least-once.

Flow control reads :attr:`ProcessQueue.message_count`, :attr:`ProcessQueue.message_bytes` (body
bytes) and :attr:`ProcessQueue.max_span` (largest minus smallest cached offset).

Orderly consumption (RocketMQ's orderly consumption) moves messages out of the cache into a
"consuming" map with
:meth:`ProcessQueue.take_messages`, then either :meth:`ProcessQueue.commit` (they are done) or
:meth:`ProcessQueue.make_messages_to_consume_again` (put back, to be retried in order).
"""

from __future__ import annotations

import bisect
import operator
from collections.abc import Iterable
from typing import Any

from bolide.base import limits
from bolide.protocol.message import MessageExt, PropertyKey

__all__ = ["ProcessQueue"]

NO_OFFSET = -1
"""What the offset-returning methods give when there is nothing to commit."""
_QUEUE_OFFSET = operator.attrgetter("queue_offset")
_BODY = operator.attrgetter("body")


def _strictly_ascending(offsets: list[int]) -> bool:
    """Whether ``offsets`` ascend without repeats (checked by C loops, not per element)."""
    return len(set(offsets)) == len(offsets) and offsets == sorted(offsets)


class ProcessQueue:
    """The cache of one message queue, ordered by queue offset."""

    def __init__(self, now_ms: int = 0) -> None:
        self._messages: dict[int, MessageExt] = {}
        self._offsets: list[int] = []
        """The cached offsets, ascending (pulls append in order, so inserts are at the end)."""
        self._consuming: dict[int, MessageExt] = {}
        self._message_bytes = 0
        self._queue_offset_max = NO_OFFSET
        self.dropped = False
        """Set when the queue is no longer ours (rebalance, offset illegal): results of work
        already handed out must not be committed."""
        self.offset_reset = False
        """Set (with ``dropped``) by an offset reset: even a batch that finishes while the
        queue is handed over must not commit, or it would undo the reset."""
        self.consuming = False
        """Orderly: a consume task runs for this queue."""
        self.locked = False
        """Orderly: the broker lock is held."""
        self.last_lock_timestamp_ms = now_ms
        self.last_pull_timestamp_ms = now_ms
        self.last_consume_timestamp_ms = now_ms
        self.try_unlock_times = 0
        self.accumulated_count = 0
        """Messages on the broker beyond the last cached one (MAX_OFFSET - offset), for lag."""

    # ---- figures -------------------------------------------------------------------------

    @property
    def message_count(self) -> int:
        """Messages cached or being consumed (orderly)."""
        return len(self._messages) + len(self._consuming)

    @property
    def message_bytes(self) -> int:
        """Body bytes of the messages counted by :attr:`message_count`."""
        return self._message_bytes

    @property
    def max_span(self) -> int:
        """Largest minus smallest cached offset (0 when fewer than two are cached)."""
        if not self._offsets:
            return 0
        return self._offsets[-1] - self._offsets[0]

    @property
    def min_offset(self) -> int | None:
        """The smallest cached offset, or None."""
        return self._offsets[0] if self._offsets else None

    @property
    def max_offset(self) -> int | None:
        """The largest cached offset, or None."""
        return self._offsets[-1] if self._offsets else None

    @property
    def queue_offset_max(self) -> int:
        """The largest offset ever put (NO_OFFSET before the first)."""
        return self._queue_offset_max

    def has_cached_messages(self) -> bool:
        """Whether messages wait in the cache (the consuming map not counted)."""
        return bool(self._offsets)

    def is_pull_expired(self, now_ms: int, max_idle_ms: int = limits.PULL_MAX_IDLE_MS) -> bool:
        """Whether no pull happened for more than ``max_idle_ms`` (default 120 s)."""
        return now_ms - self.last_pull_timestamp_ms > max_idle_ms

    def is_lock_expired(
        self, now_ms: int, max_live_ms: int = limits.CLIENT_LOCK_MAX_LIVE_MS
    ) -> bool:
        """Whether the lock was last renewed more than ``max_live_ms`` ago (default 30 s)."""
        return now_ms - self.last_lock_timestamp_ms > max_live_ms

    # ---- concurrent consumption ------------------------------------------------------------

    def put_messages(self, messages: Iterable[MessageExt]) -> bool:
        """Cache pulled ``messages`` (an offset already cached is ignored).

        Returns whether an orderly consume task should be started: there are messages and none
        runs (it then counts as running: :attr:`consuming` is set).
        """
        if type(messages) is list and messages:
            offsets = list(map(_QUEUE_OFFSET, messages))
            if offsets[0] > self._queue_offset_max and _strictly_ascending(offsets):
                # A pull's answer (ascending, past everything cached): none is cached yet, and
                # the bookkeeping runs over the whole list at once instead of message by message.
                self._messages.update(zip(offsets, messages, strict=True))
                self._offsets += offsets
                self._message_bytes += sum(map(len, map(_BODY, messages)))
                self._queue_offset_max = offsets[-1]
                return self._cached(messages[-1])
        last: MessageExt | None = None
        for message in messages:
            offset = message.queue_offset
            if offset in self._messages or offset in self._consuming:
                continue
            self._messages[offset] = message
            if not self._offsets or offset > self._offsets[-1]:
                self._offsets.append(offset)
            else:
                bisect.insort(self._offsets, offset)
            self._message_bytes += len(message.body)
            self._queue_offset_max = max(self._queue_offset_max, offset)
            last = message
        return self._cached(last)

    def _cached(self, last: MessageExt | None) -> bool:
        """After a put whose last new message is ``last``: the lag it tells, and whether an
        orderly consume task should start (see :meth:`put_messages`)."""
        if last is not None:
            max_offset_text = last.properties.get(PropertyKey.MAX_OFFSET)
            if max_offset_text and max_offset_text.lstrip("-").isdigit():
                self.accumulated_count = max(0, int(max_offset_text) - last.queue_offset)
        if self._offsets and not self.consuming:
            self.consuming = True
            return True
        return False

    def remove_messages(self, messages: Iterable[MessageExt], now_ms: int) -> int:
        """Drop consumed ``messages``; returns the offset to commit, or NO_OFFSET when the
        cache was already empty.

        The offset is the smallest still cached, or ``queue_offset_max + 1`` once the cache
        is empty.
        """
        self.last_consume_timestamp_ms = now_ms
        if not self._offsets:
            return NO_OFFSET
        if type(messages) is list:
            offsets = list(map(_QUEUE_OFFSET, messages))
            if self._offsets[: len(offsets)] == offsets:
                # The oldest cached, in order (a batch handed out whole): removed at once.
                del self._offsets[: len(offsets)]
                gone = list(map(self._messages.pop, offsets))
                self._message_bytes -= sum(map(len, map(_BODY, gone)))
                return self._offsets[0] if self._offsets else self._queue_offset_max + 1
        for message in messages:
            removed = self._messages.pop(message.queue_offset, None)
            if removed is None:
                continue
            self._message_bytes -= len(removed.body)
            position = bisect.bisect_left(self._offsets, message.queue_offset)
            del self._offsets[position]
        return self._offsets[0] if self._offsets else self._queue_offset_max + 1

    def first_expired_message(self, now_ms: int, consume_timeout_ms: int) -> MessageExt | None:
        """The smallest-offset cached message whose consumption (CONSUME_START_TIME property)
        started more than ``consume_timeout_ms`` ago, or None."""
        if not self._offsets:
            return None
        message = self._messages[self._offsets[0]]
        started_text = message.properties.get(PropertyKey.CONSUME_START_TIME, "")
        if not started_text.isdigit():
            return None
        return message if now_ms - int(started_text) > consume_timeout_ms else None

    # ---- orderly consumption -------------------------------------------------------------

    def take_messages(self, batch_size: int, now_ms: int) -> list[MessageExt]:
        """Move up to ``batch_size`` smallest-offset messages into the consuming map and return
        them; when none is left, :attr:`consuming` is cleared."""
        self.last_consume_timestamp_ms = now_ms
        count = min(batch_size, len(self._offsets))
        taken_offsets = self._offsets[:count]
        del self._offsets[:count]
        taken = [self._messages.pop(offset) for offset in taken_offsets]
        for message in taken:
            self._consuming[message.queue_offset] = message
        if not taken:
            self.consuming = False
        return taken

    def commit(self) -> int:
        """Forget the consuming map's messages (done); returns one past the largest of their
        offsets, or NO_OFFSET when it was empty."""
        if not self._consuming:
            return NO_OFFSET
        offset = max(self._consuming)
        self._message_bytes -= sum(len(message.body) for message in self._consuming.values())
        self._consuming.clear()
        return offset + 1

    def make_messages_to_consume_again(self, messages: Iterable[MessageExt]) -> None:
        """Put ``messages`` back from the consuming map into the cache, to be taken again."""
        for message in messages:
            offset = message.queue_offset
            if self._consuming.pop(offset, None) is None:
                continue
            self._messages[offset] = message
            bisect.insort(self._offsets, offset)

    def rollback(self) -> None:
        """Put every message of the consuming map back into the cache."""
        self.make_messages_to_consume_again(list(self._consuming.values()))

    def clear(self) -> None:
        """Drop everything (the queue was removed)."""
        self._messages.clear()
        self._offsets.clear()
        self._consuming.clear()
        self._message_bytes = 0

    # ---- reporting --------------------------------------------------------------------------

    def info(self, commit_offset: int) -> dict[str, Any]:
        """The ProcessQueueInfo object of GET_CONSUMER_RUNNING_INFO (Java's field names)."""
        return {
            "cachedMsgCount": self.message_count,
            "cachedMsgMaxOffset": self.max_offset or 0,
            "cachedMsgMinOffset": self.min_offset or 0,
            "cachedMsgSizeInMiB": self._message_bytes // limits.MIB,
            "commitOffset": commit_offset,
            "droped": self.dropped,
            "lastConsumeTimestamp": self.last_consume_timestamp_ms,
            "lastLockTimestamp": self.last_lock_timestamp_ms,
            "lastPullTimestamp": self.last_pull_timestamp_ms,
            "locked": self.locked,
            "transactionMsgCount": len(self._consuming),
            "transactionMsgMaxOffset": max(self._consuming, default=0),
            "transactionMsgMinOffset": min(self._consuming, default=0),
            "tryUnlockTimes": self.try_unlock_times,
        }
