"""Rebalance: which queues this consumer owns, and where it starts on a new one (RocketMQ's offset
management and rebalancing).

The client instance calls :meth:`Rebalancer.do_rebalance` at start, every 20 s and at once on
NOTIFY_CONSUMER_IDS_CHANGED. For each subscribed topic (``rebalanceByTopic``):

1. take the topic's subscribe queues from the route cache and, in clustering mode, the
   group's client ids from a broker (GET_CONSUMER_LIST_BY_GROUP);
2. sort both and let the allocation strategy pick this client's share (broadcasting: every
   queue);
3. update the process-queue table (``updateProcessQueueTableInRebalance``), decided by the
   pure :func:`plan_topic`:

   * a held queue that is no longer ours is marked dropped, its offset persisted and removed
     from the offset store, and it leaves the table;
   * a held queue whose pulls stopped for 120 s (pull expired) is treated the same way by a
     push consumer and re-created in the same pass, which restarts its pull;
   * a new queue gets its start offset (:meth:`Rebalancer.compute_pull_from_where`) and a
     fresh :class:`ProcessQueue`, and the owner starts pulling it; a queue whose start offset
     cannot be computed is left for the next rebalance.

Finally queues of topics no longer subscribed are dropped (``truncateMessageQueueNotMyTopic``).

An orderly consumer gives the rebalance a :class:`QueueGate` (RocketMQ's orderly consumption): a new
queue is taken
only once its broker lock is held (a refused queue waits for a later rebalance), and a queue
given up is first quiesced — the batch being consumed ends — then its offset is persisted and
its lock released. A queue that cannot be quiesced in time stays in the table, dropped, and
each later rebalance tries again (re-creating it when it is ours again).

Start offsets (RocketMQ's offset management, ``computePullFromWhereWithException``), decided by the
pure
:func:`decide_start_offset`: a committed offset (>= 0) always wins. Without one (-1):
LAST_OFFSET starts at the queue's max offset (retry topics at 0), FIRST_OFFSET at 0,
TIMESTAMP at the offset the broker finds for the consume timestamp (retry topics at the max
offset). Anything below -1 (the store could not be read) skips the queue for now.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Protocol

from bolide.base.clock import Clock
from bolide.base.errors import BolideError
from bolide.client.config import ConsumeFrom
from bolide.client.consumer.allocate import AllocateStrategy
from bolide.client.consumer.offset_store import OffsetStore, ReadOffsetType
from bolide.client.consumer.process_queue import ProcessQueue
from bolide.protocol.bodies import ConsumeType, MessageModel, MessageQueue, SubscriptionData
from bolide.protocol.system_topics import is_retry_topic

__all__ = [
    "QueueGate",
    "QueueOwner",
    "RebalanceClient",
    "Rebalancer",
    "StartAction",
    "StartDecision",
    "TopicPlan",
    "decide_start_offset",
    "plan_topic",
]

_log = logging.getLogger("bolide.client.rebalance")

# ---- decisions (pure) ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TopicPlan:
    """What one topic's rebalance changes: queues to drop, to restart, to add (each sorted)."""

    remove: tuple[MessageQueue, ...]
    """Held but no longer assigned: drop, persist and forget their offsets."""
    expired: tuple[MessageQueue, ...]
    """Assigned and held, but not pulled for too long: drop and re-create (push only)."""
    add: tuple[MessageQueue, ...]
    """Assigned but not held (expired ones included): compute a start offset and pull."""

    @property
    def changed(self) -> bool:
        return bool(self.remove or self.expired or self.add)


def plan_topic(
    topic: str,
    assigned: Collection[MessageQueue],
    held: Mapping[MessageQueue, ProcessQueue],
    now_ms: int,
    consume_type: ConsumeType,
    pull_max_idle_ms: int | None = None,
) -> TopicPlan:
    """Decide ``updateProcessQueueTableInRebalance`` for ``topic``.

    ``assigned`` is this client's share, ``held`` the current process-queue table (all
    topics; only ``topic``'s entries are looked at). A pull consumer (CONSUME_ACTIVELY)
    never expires queues: it pulls when its user asks.
    """
    assigned_set = set(assigned)
    remove: list[MessageQueue] = []
    expired: list[MessageQueue] = []
    for queue, process_queue in held.items():
        if queue.topic != topic:
            continue
        if queue not in assigned_set:
            remove.append(queue)
        elif consume_type is ConsumeType.CONSUME_PASSIVELY and _pull_expired(
            process_queue, now_ms, pull_max_idle_ms
        ):
            expired.append(queue)
    expired_set = set(expired)
    add = [queue for queue in assigned_set if queue not in held or queue in expired_set]
    return TopicPlan(tuple(sorted(remove)), tuple(sorted(expired)), tuple(sorted(add)))


def _pull_expired(process_queue: ProcessQueue, now_ms: int, max_idle_ms: int | None) -> bool:
    if max_idle_ms is None:
        return process_queue.is_pull_expired(now_ms)
    return process_queue.is_pull_expired(now_ms, max_idle_ms)


class StartAction(enum.Enum):
    """How to find a new queue's start offset."""

    USE = "use"
    """Start at :attr:`StartDecision.offset`."""
    MAX_OFFSET = "max"
    """Ask the broker for the queue's max offset (GET_MAX_OFFSET) and start there."""
    SEARCH_TIMESTAMP = "search"
    """Ask the broker for the offset at the consume timestamp (SEARCH_OFFSET_BY_TIMESTAMP)."""
    SKIP = "skip"
    """Do not take the queue now; the next rebalance tries again."""


@dataclass(frozen=True, slots=True)
class StartDecision:
    action: StartAction
    offset: int = -1


def decide_start_offset(consume_from: ConsumeFrom, topic: str, stored_offset: int) -> StartDecision:
    """RocketMQ's offset management's rules; ``stored_offset`` is what the offset store read (-1:
    none stored,
    < -1: could not be read)."""
    if stored_offset >= 0:
        return StartDecision(StartAction.USE, stored_offset)
    if stored_offset < -1:
        return StartDecision(StartAction.SKIP)
    retry = is_retry_topic(topic)
    if consume_from is ConsumeFrom.LAST_OFFSET:
        return StartDecision(StartAction.USE, 0) if retry else StartDecision(StartAction.MAX_OFFSET)
    if consume_from is ConsumeFrom.FIRST_OFFSET:
        return StartDecision(StartAction.USE, 0)
    if retry:
        return StartDecision(StartAction.MAX_OFFSET)
    return StartDecision(StartAction.SEARCH_TIMESTAMP)


# ---- the shell ----------------------------------------------------------------------------


class RebalanceClient(Protocol):
    """What the rebalance asks of the client instance."""

    @property
    def client_id(self) -> str: ...

    async def subscribe_queues(self, topic: str) -> list[MessageQueue] | None:
        """The topic's readable queues (route cache, fetched when missing); None when the
        topic is unknown."""
        ...

    async def find_consumer_ids(self, topic: str, group: str) -> list[str] | None:
        """The group's client ids as one broker of the topic lists them; None when unknown."""
        ...

    async def max_offset(self, queue: MessageQueue) -> int: ...

    async def search_offset(self, queue: MessageQueue, timestamp_ms: int) -> int: ...


class QueueOwner(Protocol):
    """The consumer behind the rebalance: it pulls the queues the rebalance gives it."""

    def on_queue_added(
        self, queue: MessageQueue, process_queue: ProcessQueue, next_offset: int
    ) -> None:
        """Start pulling ``queue`` at ``next_offset``."""
        ...

    def on_queue_removed(self, queue: MessageQueue, process_queue: ProcessQueue) -> None:
        """``queue`` is ours no more (``process_queue`` is already dropped)."""
        ...

    def on_assignment_changed(self, topic: str, assigned: frozenset[MessageQueue]) -> None:
        """``topic``'s share changed (lite pull consumers tell their user)."""
        ...


class QueueGate(Protocol):
    """Orderly consumption's say in taking and giving up queues (module docstring)."""

    async def admit(self, queue: MessageQueue, process_queue: ProcessQueue) -> bool:
        """Before ``queue`` is taken with the new ``process_queue``: lock it; whether it may."""
        ...

    async def quiesce(self, queue: MessageQueue, process_queue: ProcessQueue) -> bool:
        """``process_queue`` (dropped) is being given up: wait, bounded, until no listener
        call runs for it; False when it is still busy."""
        ...

    async def release(self, queue: MessageQueue, process_queue: ProcessQueue) -> None:
        """``queue`` was given up (offset persisted), or taken in vain: unlock it."""
        ...


class Rebalancer:
    """One consumer group's rebalance state: subscriptions and the process-queue table.

    ``consume_timestamp_ms`` is the wall-clock time CONSUME_FROM TIMESTAMP starts at;
    ``gate`` is an orderly consumer's :class:`QueueGate` (None: concurrent consumption).
    Calls are serialised by an internal lock, so the periodic service, notifications and
    resets never interleave.
    """

    def __init__(
        self,
        group: str,
        *,
        client: RebalanceClient,
        offset_store: OffsetStore,
        strategy: AllocateStrategy,
        message_model: MessageModel,
        consume_type: ConsumeType,
        consume_from: ConsumeFrom,
        consume_timestamp_ms: int,
        clock: Clock,
        owner: QueueOwner,
        gate: QueueGate | None = None,
    ) -> None:
        self.group = group
        self.subscriptions: dict[str, SubscriptionData] = {}
        self.process_queues: dict[MessageQueue, ProcessQueue] = {}
        self.strategy = strategy
        self.message_model = message_model
        self.consume_type = consume_type
        self.consume_from = consume_from
        self.consume_timestamp_ms = consume_timestamp_ms
        self._client = client
        self._offset_store = offset_store
        self._clock = clock
        self._owner = owner
        self._gate = gate
        self._deferred: set[MessageQueue] = set()
        """Queues dropped but not given up yet (the gate could not quiesce them)."""
        self._lock = asyncio.Lock()
        self._closed = False
        self.rebalance_count = 0
        """Completed :meth:`do_rebalance` calls (tests and running info read it)."""

    async def do_rebalance(self) -> bool:
        """Rebalance every subscribed topic; returns whether any queue was added or dropped.

        A topic that fails (broker unreachable) is logged and left as it was.
        """
        async with self._lock:
            if self._closed:
                return False
            changed = False
            for topic in list(self.subscriptions):
                try:
                    changed |= await self._rebalance_topic(topic)
                except BolideError as error:
                    if not is_retry_topic(topic):
                        _log.warning("rebalance of %s for %s failed: %s", topic, self.group, error)
            changed |= self._truncate_queues_not_subscribed()
            self.rebalance_count += 1
            return changed

    async def _rebalance_topic(self, topic: str) -> bool:
        queues = await self._client.subscribe_queues(topic)
        if queues is None:
            if not is_retry_topic(topic):
                _log.warning("rebalance of %s: topic %s has no route", self.group, topic)
            return False
        if self.message_model is MessageModel.BROADCASTING:
            assigned = frozenset(queues)
        else:
            client_ids = await self._client.find_consumer_ids(topic, self.group)
            if not client_ids:
                _log.warning(
                    "rebalance of %s/%s: no consumer ids from the broker", self.group, topic
                )
                return False
            share = self.strategy.allocate(
                self.group, self._client.client_id, sorted(queues), sorted(client_ids)
            )
            assigned = frozenset(share)
        changed = await self._apply(topic, assigned)
        if changed:
            self._owner.on_assignment_changed(topic, assigned)
        return changed

    async def _apply(self, topic: str, assigned: frozenset[MessageQueue]) -> bool:
        plan = plan_topic(
            topic, assigned, self.process_queues, self._clock.now_ms(), self.consume_type
        )
        # Deferred queues that are ours again are re-created, like expired ones.
        stuck = tuple(sorted(q for q in self._deferred if q.topic == topic and q in assigned))
        for queue in plan.remove + plan.expired + stuck:
            if queue in plan.expired:
                _log.warning("%s: %s not pulled for too long, restarting it", self.group, queue)
            await self._drop(queue)
        added = False
        for queue in plan.add + stuck:
            if queue not in self.process_queues:  # not still held by a deferred drop
                added |= await self._add(queue)
        return bool(plan.remove or plan.expired) or added

    async def _add(self, queue: MessageQueue) -> bool:
        process_queue = ProcessQueue(self._clock.now_ms())
        if self._gate is not None and not await self._gate.admit(queue, process_queue):
            _log.info("%s: %s is locked by another member; not taken now", self.group, queue)
            return False
        try:
            next_offset = await self.compute_pull_from_where(queue)
        except BolideError as error:
            _log.info("%s: cannot compute the start offset of %s: %s", self.group, queue, error)
            next_offset = -1
        else:
            if next_offset < 0:
                _log.warning("%s: no valid start offset for %s yet", self.group, queue)
        if next_offset < 0:
            if self._gate is not None:
                await self._gate.release(queue, process_queue)
            return False
        self.process_queues[queue] = process_queue
        _log.info("%s: takes %s from offset %d", self.group, queue, next_offset)
        self._owner.on_queue_added(queue, process_queue, next_offset)
        return True

    async def _drop(self, queue: MessageQueue) -> None:
        """RocketMQ's rebalancing: mark dropped, persist and remove the offset, leave the table.
        With a
        gate, the queue is quiesced first (else kept, dropped, for a later try) and unlocked
        after."""
        process_queue = self.process_queues.get(queue)
        if process_queue is None:
            return
        process_queue.dropped = True
        if await self._quiesce(queue, process_queue):
            await self._give_up(queue, process_queue)

    async def _quiesce(self, queue: MessageQueue, process_queue: ProcessQueue) -> bool:
        """Wait (bounded, through the gate) until no batch of the dropped ``process_queue``
        runs; False (and kept, dropped, for a later rebalance) when it is still busy."""
        if self._gate is not None and not await self._gate.quiesce(queue, process_queue):
            self._deferred.add(queue)
            return False
        return True

    async def _give_up(self, queue: MessageQueue, process_queue: ProcessQueue) -> None:
        """Leave the table with the offset persisted, then unlock (the queue is quiesced)."""
        self._deferred.discard(queue)
        del self.process_queues[queue]
        await self._offset_store.persist(queue)
        self._offset_store.remove_offset(queue)
        self._owner.on_queue_removed(queue, process_queue)
        if self._gate is not None:
            await self._gate.release(queue, process_queue)
        _log.info("%s: drops %s", self.group, queue)

    def _truncate_queues_not_subscribed(self) -> bool:
        stale = [queue for queue in self.process_queues if queue.topic not in self.subscriptions]
        for queue in stale:
            self._deferred.discard(queue)
            process_queue = self.process_queues.pop(queue)
            process_queue.dropped = True
            self._owner.on_queue_removed(queue, process_queue)
        return bool(stale)

    async def compute_pull_from_where(self, queue: MessageQueue) -> int:
        """The offset to start ``queue`` at (module docstring); -1 when it must wait.

        Raises:
            BolideError: the broker could not answer GET_MAX_OFFSET or the timestamp search.
        """
        stored = await self._offset_store.read_offset(queue, ReadOffsetType.READ_FROM_STORE)
        decision = decide_start_offset(self.consume_from, queue.topic, stored)
        if decision.action is StartAction.USE:
            return decision.offset
        if decision.action is StartAction.MAX_OFFSET:
            return await self._client.max_offset(queue)
        if decision.action is StartAction.SEARCH_TIMESTAMP:
            return await self._client.search_offset(queue, self.consume_timestamp_ms)
        return -1

    async def fix_illegal_offset(
        self, queue: MessageQueue, process_queue: ProcessQueue, offset: int
    ) -> None:
        """The OFFSET_ILLEGAL fix-up: while ``process_queue`` still is ``queue``'s, store
        ``offset`` as its offset, persist it and remove the queue; the next rebalance adds it
        again from there. Nothing happens when the queue changed hands meanwhile."""
        async with self._lock:
            if self.process_queues.get(queue) is not process_queue:
                return
            self._offset_store.update_offset(queue, offset, increase_only=False)
            await self._drop(queue)

    async def close(self) -> None:
        """No rebalance after this one returns (a running one is waited for): shutdown."""
        async with self._lock:
            self._closed = True

    async def drop_all(self) -> None:
        """Mark every process queue dropped and forget them (shutdown, reset)."""
        async with self._lock:
            self._deferred.clear()
            for queue, process_queue in list(self.process_queues.items()):
                process_queue.dropped = True
                del self.process_queues[queue]
                self._owner.on_queue_removed(queue, process_queue)

    async def reset_offsets(self, topic: str, offsets: Mapping[MessageQueue, int]) -> None:
        """RESET_CONSUMER_CLIENT_OFFSET, in Java's order: mark every queue of ``topic``
        dropped at once (no pull answer or finishing batch commits from then on: the orderly
        service skips commits of a queue dropped by a reset), wait until each is quiesced,
        then write the new offsets, then give the queues up (each persisted with its new
        offset) and rebalance, so pulls resume from what the store now says. A queue still
        busy after the gate's wait stays dropped with its new offset and is given up later."""
        async with self._lock:
            affected = {
                queue: process_queue
                for queue, process_queue in self.process_queues.items()
                if queue.topic == topic
            }
            for process_queue in affected.values():  # no await between these marks
                process_queue.dropped = True
                process_queue.offset_reset = True
            quiesced = [
                queue
                for queue, process_queue in affected.items()
                if await self._quiesce(queue, process_queue)
            ]
            for queue, offset in offsets.items():
                self._offset_store.update_offset(queue, offset, increase_only=False)
            for queue in quiesced:
                await self._give_up(queue, affected[queue])
            for queue in offsets:  # reset queues this consumer did not hold
                if queue.topic == topic and queue not in self.process_queues:
                    await self._offset_store.persist(queue)
                    self._offset_store.remove_offset(queue)
        await self.do_rebalance()
