"""The broker-side queue locks of an orderly consumer (RocketMQ's orderly consumption;
docs/protocol.md §2.9, §7.4).

An orderly consumer in clustering mode consumes a queue only while its broker says this client
holds the queue's lock:

* the rebalance locks a queue (LOCK_BATCH_MQ, one queue, 1 s timeout) before it takes it, and
  skips the queue when the broker refuses (another member still holds it);
* ``lock_all`` renews every owned queue's lock, one request per broker, every 20 s (first after
  1 s); queues the broker leaves out are marked unlocked, and their consumption stops;
* a queue given up by a rebalance, and every queue at shutdown, is unlocked (UNLOCK_BATCH_MQ).

The client counts its lock as valid for 30 s after the last renewal
(:meth:`ProcessQueue.is_lock_expired`), inside the broker's 60 s: a client cut off from its
broker stops consuming before the broker lets another member take the queue. The time recorded
is when the lock request was *sent* (Java records the answer's arrival), so a slow answer
shortens the client's view of the lease instead of stretching it past the broker's.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

from bolide.base import limits
from bolide.base.clock import Clock
from bolide.base.errors import BolideError
from bolide.client import rpc
from bolide.client.consumer.process_queue import ProcessQueue
from bolide.client.instance import ClientInstance
from bolide.protocol.bodies import LockBatchRequestBody, MessageQueue

__all__ = ["InstanceLockClient", "LockClient", "QueueLocker"]

_log = logging.getLogger("bolide.client.orderly")


class LockClient(Protocol):
    """LOCK_BATCH_MQ and UNLOCK_BATCH_MQ to the master of one broker."""

    @property
    def client_id(self) -> str: ...

    async def lock_batch(
        self, group: str, queues: frozenset[MessageQueue], timeout_ms: int
    ) -> frozenset[MessageQueue]:
        """Lock ``queues`` (all of one broker); returns those now held. Raises
        :class:`BolideError` (broker unknown, error answer, transport)."""
        ...

    async def unlock_batch(
        self, group: str, queues: frozenset[MessageQueue], timeout_ms: int, *, oneway: bool
    ) -> None:
        """Unlock ``queues`` (all of one broker). Raises :class:`BolideError`."""
        ...


class InstanceLockClient:
    """:class:`LockClient` over a :class:`ClientInstance`: requests go to the queues' master."""

    def __init__(self, instance: ClientInstance) -> None:
        self._instance = instance

    @property
    def client_id(self) -> str:
        return self._instance.client_id

    async def lock_batch(
        self, group: str, queues: frozenset[MessageQueue], timeout_ms: int
    ) -> frozenset[MessageQueue]:
        address = await self._instance.queue_broker_address(min(queues))
        body = LockBatchRequestBody(group, self.client_id, queues)
        return await rpc.lock_batch_mq(self._instance.pool, address, body, timeout_ms)

    async def unlock_batch(
        self, group: str, queues: frozenset[MessageQueue], timeout_ms: int, *, oneway: bool
    ) -> None:
        address = await self._instance.queue_broker_address(min(queues))
        body = LockBatchRequestBody(group, self.client_id, queues)
        await rpc.unlock_batch_mq(self._instance.pool, address, body, timeout_ms, oneway=oneway)


def _by_broker(queues: Iterable[MessageQueue]) -> dict[str, frozenset[MessageQueue]]:
    grouped: dict[str, set[MessageQueue]] = defaultdict(set)
    for queue in queues:
        grouped[queue.broker_name].add(queue)
    return {broker: frozenset(members) for broker, members in sorted(grouped.items())}


class QueueLocker:
    """The lock requests of one group (Java ``RebalanceImpl.lock / lockAll / unlock /
    unlockAll``); ``process_queues()`` is the consumer's process-queue table, whose
    ``locked`` flags and lock times this keeps up to date. Every request waits at most
    ``request_timeout_ms`` (1 s); failures are logged, never raised."""

    def __init__(
        self,
        group: str,
        client: LockClient,
        clock: Clock,
        *,
        process_queues: Callable[[], Mapping[MessageQueue, ProcessQueue]],
        request_timeout_ms: int = limits.CLIENT_LOCK_REQUEST_TIMEOUT_MS,
    ) -> None:
        self.group = group
        self._client = client
        self._clock = clock
        self._process_queues = process_queues
        self._timeout_ms = request_timeout_ms
        self.lock_requests = 0
        """LOCK_BATCH_MQ requests sent (tests and running info)."""

    async def lock(self, queue: MessageQueue, process_queue: ProcessQueue | None = None) -> bool:
        """Lock ``queue`` alone; returns whether this client now holds it. ``process_queue``
        (default: the table's) is marked locked with the request's time."""
        sent_ms = self._clock.now_ms()
        held = await self._lock_broker(frozenset((queue,)))
        if held is None:
            return False
        target = process_queue or self._process_queues().get(queue)
        locked = queue in held
        if target is not None and locked:
            target.locked = True
            target.last_lock_timestamp_ms = sent_ms
        _log.info("%s: lock of %s %s", self.group, queue, "taken" if locked else "refused")
        return locked

    async def lock_all(self) -> None:
        """Renew the lock of every queue in the table, one request per broker. A queue the
        broker leaves out is marked unlocked (its consumption stops until it is locked
        again); a broker that cannot be asked changes nothing."""
        table = dict(self._process_queues())
        for queues in _by_broker(table).values():
            sent_ms = self._clock.now_ms()
            held = await self._lock_broker(queues)
            if held is None:
                continue
            for queue in queues:
                process_queue = table[queue]
                if queue in held:
                    process_queue.locked = True
                    process_queue.last_lock_timestamp_ms = sent_ms
                elif process_queue.locked:
                    _log.warning("%s: lost the lock of %s", self.group, queue)
                    process_queue.locked = False

    async def unlock(
        self,
        queue: MessageQueue,
        process_queue: ProcessQueue | None = None,
        *,
        oneway: bool = False,
    ) -> None:
        """Unlock ``queue`` on its broker; ``process_queue`` (default: the table's) is marked
        unlocked whatever the broker said."""
        target = process_queue or self._process_queues().get(queue)
        if target is not None:
            target.locked = False
        await self._unlock_broker(frozenset((queue,)), oneway=oneway)

    async def unlock_all(self, *, oneway: bool = False) -> None:
        """Unlock every queue in the table (shutdown), one request per broker."""
        table = dict(self._process_queues())
        for process_queue in table.values():
            process_queue.locked = False
        for queues in _by_broker(table).values():
            await self._unlock_broker(queues, oneway=oneway)

    # ---- requests -----------------------------------------------------------------------------

    async def _lock_broker(self, queues: frozenset[MessageQueue]) -> frozenset[MessageQueue] | None:
        self.lock_requests += 1
        try:
            return await self._client.lock_batch(self.group, queues, self._timeout_ms)
        except BolideError as error:
            _log.warning("%s: LOCK_BATCH_MQ of %s failed: %s", self.group, sorted(queues), error)
            return None

    async def _unlock_broker(self, queues: frozenset[MessageQueue], *, oneway: bool) -> None:
        try:
            await self._client.unlock_batch(self.group, queues, self._timeout_ms, oneway=oneway)
        except BolideError as error:
            # The broker frees the locks when they expire (60 s) anyway.
            _log.warning("%s: UNLOCK_BATCH_MQ of %s failed: %s", self.group, sorted(queues), error)
