"""RebalanceLockManager: which client of a consumer group may consume a queue orderly (RocketMQ's
orderly consumption,
docs/protocol.md §2.9).

An orderly consumer locks a queue on its broker (LOCK_BATCH_MQ) before it takes the queue, and
renews the lock every 20 s. The broker keeps, per group and per queue, the holder's client id
and the time of its last lock or renewal:

* a queue that is free, or held by the same client, is (re)locked and its time refreshed;
* a queue whose holder has not renewed for more than ``lock_max_live_ms`` (60 s,
  ``rocketmq.broker.rebalance.lockMaxLiveTime``) is taken over;
* a queue held by another live client is left out of the answer.

UNLOCK_BATCH_MQ releases only the caller's own locks, and so does a client's UNREGISTER_CLIENT
for the group (:meth:`RebalanceLockManager.unlock_client`: some clients, the C++ one among them,
do not always unlock every queue at shutdown). Clients treat their own lock as lost
after 30 s without renewal, well inside the broker's 60 s, so a client cut off from the
broker stops consuming before the broker hands its queues to someone else.

The check-and-set of each call is atomic: the methods never await, so nothing of the event
loop runs in between, and a :class:`threading.Lock` keeps them whole against other threads too
(tools that read the table). Time is the injected clock's monotonic reading, so expiry is
tested with a :class:`~bolide.base.clock.ManualClock`. Entries leave the table when unlocked,
and expired ones are purged when the table is full (``max_entries``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from dataclasses import dataclass

from bolide.base import limits
from bolide.base.clock import Clock
from bolide.base.errors import invariant
from bolide.protocol.bodies import MessageQueue

__all__ = ["LockEntry", "RebalanceLockManager"]

_log = logging.getLogger("bolide.broker.locks")


@dataclass(slots=True)
class LockEntry:
    """One queue's lock: its holder and when it last locked or renewed (monotonic ms)."""

    client_id: str
    last_update_ms: int


class RebalanceLockManager:
    """The broker's queue lock table (module docstring).

    ``lock_max_live_ms`` (default 60 s) is how long a lock lives without renewal;
    ``max_entries`` (default :data:`~bolide.base.limits.REBALANCE_LOCK_TABLE_MAX_ENTRIES`)
    bounds the table.
    """

    def __init__(
        self,
        clock: Clock,
        *,
        lock_max_live_ms: int = limits.REBALANCE_LOCK_MAX_LIVE_MS,
        max_entries: int = limits.REBALANCE_LOCK_TABLE_MAX_ENTRIES,
    ) -> None:
        invariant(lock_max_live_ms > 0 and max_entries > 0, "positive lock lifetime and bound")
        self.lock_max_live_ms = lock_max_live_ms
        self.max_entries = max_entries
        self._clock = clock
        self._table: dict[str, dict[MessageQueue, LockEntry]] = {}
        self._entry_count = 0
        self._mutex = threading.Lock()

    # ---- queries -----------------------------------------------------------------------------

    @property
    def entry_count(self) -> int:
        """Lock entries held (expired ones not yet purged included)."""
        return self._entry_count

    def holder(self, group: str, queue: MessageQueue) -> str | None:
        """The client id holding a live lock on ``queue`` in ``group``, or None."""
        with self._mutex:
            entry = self._table.get(group, {}).get(queue)
            if entry is None or self._expired(entry, self._clock.monotonic_ms()):
                return None
            return entry.client_id

    def is_locked(self, group: str, queue: MessageQueue, client_id: str) -> bool:
        """Whether ``client_id`` holds a live lock on ``queue`` in ``group`` (no refresh)."""
        return self.holder(group, queue) == client_id

    def locked_queues(self, group: str) -> dict[MessageQueue, str]:
        """Every live lock of ``group``: queue -> holder (admin views, tests)."""
        with self._mutex:
            now_ms = self._clock.monotonic_ms()
            return {
                queue: entry.client_id
                for queue, entry in self._table.get(group, {}).items()
                if not self._expired(entry, now_ms)
            }

    # ---- LOCK_BATCH_MQ / UNLOCK_BATCH_MQ -----------------------------------------------------

    def try_lock_batch(
        self, group: str, queues: Iterable[MessageQueue], client_id: str
    ) -> frozenset[MessageQueue]:
        """Lock ``queues`` of ``group`` for ``client_id``; returns those it now holds (free,
        its own — refreshed — or expired and taken over). Queues held by another live client
        are left out, as are new ones when the table is full (logged)."""
        with self._mutex:
            now_ms = self._clock.monotonic_ms()
            group_table = self._table.setdefault(group, {})
            locked: set[MessageQueue] = set()
            for queue in queues:
                if self._lock_one_locked(group, group_table, queue, client_id, now_ms):
                    locked.add(queue)
            if not group_table:
                del self._table[group]
            return frozenset(locked)

    def try_lock(self, group: str, queue: MessageQueue, client_id: str) -> bool:
        """:meth:`try_lock_batch` for one queue: whether ``client_id`` now holds it."""
        return queue in self.try_lock_batch(group, (queue,), client_id)

    def unlock_batch(
        self, group: str, queues: Iterable[MessageQueue], client_id: str
    ) -> frozenset[MessageQueue]:
        """Release the locks of ``queues`` in ``group`` that ``client_id`` holds (expired or
        not); others' locks are left alone. Returns the queues released."""
        with self._mutex:
            group_table = self._table.get(group)
            if group_table is None:
                return frozenset()
            released: set[MessageQueue] = set()
            for queue in queues:
                entry = group_table.get(queue)
                if entry is None:
                    continue
                if entry.client_id != client_id:
                    _log.info(
                        "unlock of %s in %s by %s ignored: held by %s",
                        queue,
                        group,
                        client_id,
                        entry.client_id,
                    )
                    continue
                del group_table[queue]
                self._entry_count -= 1
                released.add(queue)
            if not group_table:
                del self._table[group]
            return frozenset(released)

    def unlock_client(self, group: str, client_id: str) -> frozenset[MessageQueue]:
        """Release every lock ``client_id`` holds in ``group``: the client unregistered the
        group (UNREGISTER_CLIENT), so it consumes none of its queues any more. Returns the
        queues released. (A closed connection alone releases nothing: a client cut off from
        the broker may still be consuming within its own lease.)"""
        with self._mutex:
            group_table = self._table.get(group, {})
            mine = [queue for queue, entry in group_table.items() if entry.client_id == client_id]
        return self.unlock_batch(group, mine, client_id)

    # ---- internals (the caller holds the mutex) ----------------------------------------------

    def _expired(self, entry: LockEntry, now_ms: int) -> bool:
        return now_ms - entry.last_update_ms > self.lock_max_live_ms

    def _lock_one_locked(
        self,
        group: str,
        group_table: dict[MessageQueue, LockEntry],
        queue: MessageQueue,
        client_id: str,
        now_ms: int,
    ) -> bool:
        entry = group_table.get(queue)
        if entry is None:
            full = self._entry_count >= self.max_entries
            if full and not self._purge_expired_locked(now_ms, keep_group=group):
                _log.warning(
                    "lock table full (%d entries): %s of %s not locked for %s",
                    self._entry_count,
                    queue,
                    group,
                    client_id,
                )
                return False
            group_table[queue] = LockEntry(client_id, now_ms)
            self._entry_count += 1
            return True
        if entry.client_id == client_id:
            # Its own lock, live or expired: nobody took it meanwhile, so it simply renews.
            entry.last_update_ms = now_ms
            return True
        if self._expired(entry, now_ms):
            _log.info(
                "%s of %s: lock of %s expired, taken over by %s",
                queue,
                group,
                entry.client_id,
                client_id,
            )
            entry.client_id = client_id
            entry.last_update_ms = now_ms
            return True
        return False

    def _purge_expired_locked(self, now_ms: int, *, keep_group: str) -> bool:
        """Drop every expired entry (of every group); returns whether any was dropped.
        ``keep_group`` keeps its table even when emptied: the caller is filling it."""
        purged = 0
        for group_table in self._table.values():
            stale = [queue for queue, entry in group_table.items() if self._expired(entry, now_ms)]
            for queue in stale:
                del group_table[queue]
            purged += len(stale)
        self._entry_count -= purged
        empty = [group for group, table in self._table.items() if not table]
        for group in empty:
            if group == keep_group:
                continue
            del self._table[group]
        return purged > 0
