"""The lite pull consumer (``bolide.aio.PullConsumer``; ``bolide.PullConsumer`` blocks): the
application asks for messages with :meth:`PullConsumer.poll` (Java DefaultLitePullConsumer).

Two ways to get queues:

* :meth:`PullConsumer.subscribe` — the group's queues are shared by rebalancing, exactly as
  for a push consumer (:mod:`.rebalance`), every 20 s and when members come and go;
* :meth:`PullConsumer.assign` — the application names the queues; no rebalancing.

Behind the scenes one pull task per queue long-polls its broker and caches what it finds
(flow control: per queue as the push consumer, and at most ``cache_max_messages`` pulled
but not yet polled in all; these knobs and the ones below are fields of
:class:`~bolide.client.consumer.options.ConsumerOptions`). :meth:`poll` returns the next
cached batch (up to ``pull_batch_size`` messages of one queue), waiting up to ``timeout_ms``
for one.

Progress: a queue's *position* moves past each batch :meth:`poll` returns. With
``auto_commit`` (the default) positions are committed into the offset store at the first
poll after each ``auto_commit_interval_ms`` — i.e. once the application came back for more,
which means it has handled what it got: at-least-once. :meth:`commit` commits at once and
persists to the broker (clustering) or the file (broadcasting). :meth:`seek` moves a queue's
position (and drops what was pulled for it); :meth:`pause` stops pulling queues at once
(batches already pulled are still returned), :meth:`resume` restarts them.
"""

from __future__ import annotations

import asyncio
import collections
import datetime
import logging
from collections.abc import AsyncIterator, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from bolide.base import limits
from bolide.base.clock import Clock
from bolide.base.errors import ConfigError, NoRouteError
from bolide.client.config import ConsumeFrom
from bolide.client.consumer import group_member
from bolide.client.consumer.allocate import AllocateStrategy
from bolide.client.consumer.instance_ports import (
    InstancePullClient,
    InstanceRebalanceClient,
)
from bolide.client.consumer.offset_store import (
    OffsetStore,
    ReadOffsetType,
)
from bolide.client.consumer.options import PUSH_ONLY_OPTIONS, ConsumerOptions
from bolide.client.consumer.process_queue import ProcessQueue
from bolide.client.consumer.pull_loop import PullLoop, PullSettings
from bolide.client.consumer.rebalance import Rebalancer
from bolide.client.consumer.selector import MessageSelector, subscription_of
from bolide.client.instance import ClientInstance
from bolide.client.lifecycle import AsyncLifecycle
from bolide.client.namespace import with_namespace, without_namespace
from bolide.protocol.bodies import (
    ConsumerData,
    ConsumerRunningInfo,
    ConsumeType,
    MessageModel,
    MessageQueue,
    SubscriptionData,
)
from bolide.protocol.bodies.stats import ConsumeMessageDirectlyResult
from bolide.protocol.message import MessageExt
from bolide.protocol.system_topics import is_retry_topic
from bolide.remoting.tls import TlsClientSettings

__all__ = ["PullConsumer"]

_log = logging.getLogger("bolide.client.pull_consumer")


@dataclass(slots=True)
class _Assigned:
    """One queue this consumer reads: its cache, its position, whether it is paused."""

    process_queue: ProcessQueue
    position: int
    """Offset of the next message poll() has not returned yet (the offset to commit)."""
    paused: bool = False


@dataclass(slots=True)
class _Batch:
    queue: MessageQueue
    process_queue: ProcessQueue
    messages: list[MessageExt]


class PullConsumer(AsyncLifecycle):
    """A lite pull consumer of ``group`` (see the module docstring).

    Keywords as :class:`~bolide.client.consumer.push_consumer.PushConsumer`'s (no listener,
    orderly or trace). How it pulls and commits comes in ``options``
    (:class:`~bolide.client.consumer.options.ConsumerOptions`, defaults when None):
    ``pull_batch_size`` (10) messages per pull and per poll, ``poll_timeout_ms`` (5 s),
    ``auto_commit`` (on) every ``auto_commit_interval_ms`` (5 s), ``cache_max_messages``
    (10,000 pulled but not polled, all queues together), flow control per queue as the push
    consumer's.

    Raises:
        ConfigError: no group, neither ``namesrv`` nor ``instance``, ``options`` setting a
            push consumer's knob (listener or orderly), or a bad namespace.
    """

    def __init__(
        self,
        group: str,
        namesrv: str | Iterable[str] | None = None,
        *,
        instance_name: str | None = None,
        instance: ClientInstance | None = None,
        clock: Clock | None = None,
        message_model: MessageModel = MessageModel.CLUSTERING,
        consume_from: ConsumeFrom = ConsumeFrom.LAST_OFFSET,
        consume_timestamp: int | datetime.datetime | None = None,
        options: ConsumerOptions | None = None,
        access_key: str | None = None,
        secret_key: str | None = None,
        tls: TlsClientSettings | bool | None = None,
        namespace: str | None = None,
    ) -> None:
        member = group_member.member_settings(
            group,
            namesrv,
            options,
            (PUSH_ONLY_OPTIONS, "a lite pull consumer"),
            namespace=namespace,
            instance_name=instance_name,
            instance=instance,
            clock=clock,
            consume_timestamp=consume_timestamp,
            access_key=access_key,
            secret_key=secret_key,
            tls=tls,
        )
        self.namespace = member.namespace
        """Java's withNamespace: the group and topics go out as ``<namespace>%<name>``;
        messages, queues and assignments are shown without it."""
        self.options = options = member.options
        """The tuning knobs this consumer was made with (defaults when none were given)."""
        self.group = member.group
        self.instance = member.instance
        self.clock: Clock = member.instance.clock
        self.message_model = message_model
        self.consume_from = consume_from
        self.consume_timestamp_ms = member.consume_timestamp_ms
        self.allocate_strategy: AllocateStrategy = member.allocate_strategy
        self.offset_base_directory = member.offset_base_directory
        self.poll_timeout_ms = options.poll_timeout_ms
        self.auto_commit = options.auto_commit
        self.auto_commit_interval_ms = options.auto_commit_interval_ms
        self.cache_max_messages = options.cache_max_messages
        self.pull_settings = PullSettings(
            batch_size=options.pull_batch_size or limits.LITE_PULL_BATCH_SIZE_MESSAGES,
            suspend_timeout_ms=limits.LITE_PULL_SUSPEND_TIMEOUT_MS,
            max_cached_messages=options.pull_threshold_messages,
            max_cached_bytes=options.pull_threshold_bytes,
            max_span_offsets=options.max_span_offsets,
            commit_offset_enabled=False,
            send_subscription=True,
        )
        self._subscriptions: dict[str, SubscriptionData] = {}
        self._assign_mode: bool | None = None
        self._assigned: dict[MessageQueue, _Assigned] = {}
        self._pending_assignment: set[MessageQueue] = set()
        self._batches: collections.deque[_Batch] = collections.deque()
        self._cached_messages = 0
        self._arrived = asyncio.Event()
        self._next_auto_commit_ms = 0
        self._running = False
        self._shut_down = False
        self._offset_store: OffsetStore | None = None
        self._rebalancer: Rebalancer | None = None
        self._pull_loop: PullLoop | None = None

    # ---- configuration -----------------------------------------------------------------------

    def subscribe(self, topic: str, expression: str | MessageSelector | None = "*") -> None:
        """Share ``topic``'s queues with the group (rebalanced), filtered by ``expression``.

        Raises:
            ConfigError: :meth:`assign` was used, or a bad topic or expression.
        """
        if self._assign_mode:
            raise ConfigError("subscribe() and assign() cannot be mixed")
        if not topic or is_retry_topic(topic):
            raise ConfigError(f"cannot subscribe to topic {topic!r}")
        topic = with_namespace(self.namespace, topic)
        subscription = subscription_of(topic, expression, self.clock.now_ms())
        self._assign_mode = False
        self._subscriptions[topic] = subscription
        if self._rebalancer is not None:
            self._rebalancer.subscriptions[topic] = subscription
            self.instance.rebalance_now()

    def unsubscribe(self, topic: str) -> None:
        """Stop reading ``topic`` (its queues go at the next rebalance)."""
        topic = with_namespace(self.namespace, topic)
        self._subscriptions.pop(topic, None)
        if self._rebalancer is not None:
            self._rebalancer.subscriptions.pop(topic, None)
            self.instance.rebalance_now()

    async def assign(self, queues: Iterable[MessageQueue]) -> None:
        """Read exactly ``queues`` (no rebalancing); replaces an earlier assignment. Before
        start the queues are taken at start.

        Raises:
            ConfigError: :meth:`subscribe` was used.
        """
        if self._assign_mode is False:
            raise ConfigError("subscribe() and assign() cannot be mixed")
        self._assign_mode = True
        wanted = {self._queue_in(queue) for queue in queues}
        for queue in wanted:
            self._subscriptions.setdefault(
                queue.topic, SubscriptionData.from_expression(queue.topic, "*", 0)
            )
        self._pending_assignment = wanted
        if self._running:
            await self._apply_assignment(wanted)

    async def fetch_message_queues(self, topic: str) -> list[MessageQueue]:
        """Every readable queue of ``topic`` (from a name server when not cached).

        Raises:
            ConfigError: not started. NoRouteError: no route for ``topic``.
        """
        self._require_running()
        wire_topic = with_namespace(self.namespace, topic)
        queues = await InstanceRebalanceClient(self.instance).subscribe_queues(wire_topic)
        if queues is None:
            raise NoRouteError(f"topic {topic!r} has no route")
        return [self._queue_out(queue) for queue in queues]

    @property
    def running(self) -> bool:
        return self._running

    def assignment(self) -> frozenset[MessageQueue]:
        """The queues this consumer reads now."""
        return frozenset(self._queue_out(queue) for queue in self._assigned)

    def _queue_in(self, queue: MessageQueue) -> MessageQueue:
        """A caller's queue with its topic in the namespace."""
        if self.namespace is None:
            return queue
        topic = with_namespace(self.namespace, queue.topic)
        return MessageQueue(topic, queue.broker_name, queue.queue_id)

    def _queue_out(self, queue: MessageQueue) -> MessageQueue:
        """A queue as the caller names it (without the namespace)."""
        if self.namespace is None:
            return queue
        topic = without_namespace(self.namespace, queue.topic)
        return MessageQueue(topic, queue.broker_name, queue.queue_id)

    # ---- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Start pulling. Idempotent while running.

        Raises:
            ConfigError: nothing subscribed or assigned, restarted after shutdown, or the
                group already runs on the client instance.
        """
        if self._running:
            return
        if self._shut_down:
            raise ConfigError(f"consumer {self.group!r} was shut down; make a new one")
        if self._assign_mode is None:
            raise ConfigError("subscribe() or assign() before start()")
        self._build()
        await self._store().load()
        await group_member.register_on(self.instance, self)
        self._running = True
        self._next_auto_commit_ms = self.clock.now_ms() + self.auto_commit_interval_ms
        await group_member.refresh_routes(
            self.instance, self.group, list(self._subscriptions), _log
        )
        await self.instance.send_heartbeat_to_all_brokers()
        if self._assign_mode:
            await self._apply_assignment(set(self._pending_assignment))
        else:
            self.instance.rebalance_now()
        _log.info("pull consumer %s started on client %s", self.group, self.instance.client_id)

    def _build(self) -> None:
        instance = self.instance
        self._offset_store = group_member.offset_store_for(
            instance, self.group, self.message_model, self.offset_base_directory
        )
        self._rebalancer = Rebalancer(
            self.group,
            client=InstanceRebalanceClient(instance),
            offset_store=self._offset_store,
            strategy=self.allocate_strategy,
            message_model=self.message_model,
            consume_type=ConsumeType.CONSUME_ACTIVELY,
            consume_from=self.consume_from,
            consume_timestamp_ms=self.consume_timestamp_ms,
            clock=self.clock,
            owner=self,
        )
        if not self._assign_mode:
            self._rebalancer.subscriptions.update(self._subscriptions)
        self._pull_loop = PullLoop(
            self.group,
            client=InstancePullClient(instance),
            offset_store=self._offset_store,
            subscription=self._subscriptions.get,
            sink=self._cache,
            fix_offset=self._fix_illegal_offset,
            clock=self.clock,
            settings=self.pull_settings,
            hold=self._hold,
            skipped=self._skipped,
        )

    async def shutdown(self) -> None:
        """Stop pulling, commit (with auto-commit) and persist the positions, unregister,
        release the client instance. Idempotent."""
        if not self._running:
            return
        self._running = False
        self._shut_down = True
        if self._rebalancer is not None:
            await self._rebalancer.close()
        if self._pull_loop is not None:
            await self._pull_loop.shutdown()
        if self.auto_commit:
            self._commit_positions()
        await self._store().persist_all(list(self._assigned))
        await self.instance.unregister_consumer(self.group)
        for state in self._assigned.values():
            state.process_queue.dropped = True
        self._assigned.clear()
        self._batches.clear()
        self._arrived.set()  # a poll() waiting now returns empty
        await self.instance.release()
        _log.info("pull consumer %s shut down", self.group)

    async def _close(self) -> None:
        await self.shutdown()

    # ---- reading -----------------------------------------------------------------------------

    async def poll(self, timeout_ms: int | None = None) -> list[MessageExt]:
        """The next pulled batch (messages of one queue, in offset order), or ``[]`` when
        none arrives within ``timeout_ms`` (default ``poll_timeout_ms``).

        Raises:
            ConfigError: not started.
        """
        self._require_running()
        if self.auto_commit and self.clock.now_ms() >= self._next_auto_commit_ms:
            self._commit_positions()
            self._next_auto_commit_ms = self.clock.now_ms() + self.auto_commit_interval_ms
        timeout_ms = self.poll_timeout_ms if timeout_ms is None else timeout_ms
        deadline_ms = self.clock.monotonic_ms() + timeout_ms
        while self._running:
            batch = self._next_batch()
            if batch is not None:
                return batch
            remaining_ms = deadline_ms - self.clock.monotonic_ms()
            if remaining_ms <= 0:
                return []
            self._arrived.clear()
            await self._wait_arrival(remaining_ms)
        return []

    async def __aiter__(self) -> AsyncIterator[MessageExt]:
        """``async for message in consumer``: the messages of successive :meth:`poll` calls,
        one at a time, until the consumer shuts down. Positions and (with ``auto_commit``)
        commits move as with ``poll``: a batch counts as consumed once handed over, so
        leaving the loop mid-batch skips the rest of that batch.

        Raises:
            ConfigError: not started.
        """
        self._require_running()
        while self._running:
            for message in await self.poll():
                yield message

    async def _wait_arrival(self, timeout_ms: int) -> None:
        sleeper = asyncio.ensure_future(self.clock.sleep_ms(timeout_ms))
        waiter = asyncio.ensure_future(self._arrived.wait())
        try:
            await asyncio.wait({sleeper, waiter}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            sleeper.cancel()
            waiter.cancel()

    def _next_batch(self) -> list[MessageExt] | None:
        while self._batches:
            batch = self._batches.popleft()
            self._cached_messages -= len(batch.messages)
            state = self._assigned.get(batch.queue)
            if state is None or state.process_queue is not batch.process_queue:
                continue  # the queue was dropped or sought since: these are stale
            offset = batch.process_queue.remove_messages(batch.messages, self.clock.now_ms())
            if offset >= 0:
                state.position = offset
            if self.namespace is not None:
                for message in batch.messages:
                    message.topic = without_namespace(self.namespace, message.topic)
            return batch.messages
        return None

    def _cache(
        self, messages: list[MessageExt], process_queue: ProcessQueue, queue: MessageQueue
    ) -> None:
        self._batches.append(_Batch(queue, process_queue, messages))
        self._cached_messages += len(messages)
        self._arrived.set()

    def _skipped(self, queue: MessageQueue, process_queue: ProcessQueue, offset: int) -> None:
        """Filtered or absent entries need no poll: the position moves past them."""
        state = self._assigned.get(queue)
        if state is not None and state.process_queue is process_queue:
            state.position = max(state.position, offset)

    def _hold(self, queue: MessageQueue) -> int:
        if self._cached_messages >= self.cache_max_messages:
            return limits.PULL_DELAY_ON_FLOW_CONTROL_MS
        return 0

    # ---- positions -----------------------------------------------------------------------------

    async def commit(self, offsets: Mapping[MessageQueue, int] | None = None) -> None:
        """Commit the positions of every queue (or ``offsets``, next offsets to read, for
        some queues) and persist them at once.

        Raises:
            ConfigError: not started.
        """
        self._require_running()
        store = self._store()
        if offsets is None:
            self._commit_positions()
        else:
            for given, offset in offsets.items():
                queue = self._queue_in(given)
                if queue in self._assigned:
                    store.update_offset(queue, offset, increase_only=False)
        await store.persist_all(list(self._assigned))

    def _commit_positions(self) -> None:
        store = self._store()
        for queue, state in self._assigned.items():
            if state.position >= 0 and not state.process_queue.dropped:
                store.update_offset(queue, state.position, increase_only=False)

    async def committed(self, queue: MessageQueue) -> int:
        """The committed offset of ``queue`` from the broker or file (-1: none).

        Raises:
            ConfigError: not started.
        """
        self._require_running()
        queue = self._queue_in(queue)
        return await self._store().read_offset(queue, ReadOffsetType.READ_FROM_STORE)

    def position(self, queue: MessageQueue) -> int:
        """The offset of the next message poll() will return for ``queue``.

        Raises:
            ConfigError: ``queue`` is not assigned.
        """
        return self._state(self._queue_in(queue)).position

    async def seek(self, queue: MessageQueue, offset: int) -> None:
        """Read ``queue`` from ``offset`` on (within the queue's min..max offset); messages
        already pulled for it are dropped.

        Raises:
            ConfigError: not started, not assigned, or ``offset`` outside the queue.
        """
        self._require_running()
        queue = self._queue_in(queue)
        state = self._state(queue)
        low, high = await self.instance.min_offset(queue), await self.instance.max_offset(queue)
        if not low <= offset <= high:
            raise ConfigError(f"offset {offset} of {queue} is outside {low}..{high}")
        self._restart(queue, state, offset)

    async def seek_to_begin(self, queue: MessageQueue) -> None:
        """Seek to the queue's min offset."""
        self._require_running()
        queue = self._queue_in(queue)
        self._restart(queue, self._state(queue), await self.instance.min_offset(queue))

    async def seek_to_end(self, queue: MessageQueue) -> None:
        """Seek to the queue's max offset (only new messages)."""
        self._require_running()
        queue = self._queue_in(queue)
        self._restart(queue, self._state(queue), await self.instance.max_offset(queue))

    def pause(self, queues: Iterable[MessageQueue]) -> None:
        """Stop pulling ``queues`` (assigned ones) at once, a parked long poll included;
        batches already pulled are still returned by poll()."""
        for queue in map(self._queue_in, queues):
            state = self._assigned.get(queue)
            if state is not None and not state.paused:
                state.paused = True
                if self._pull_loop is not None:
                    self._pull_loop.stop(queue)

    def resume(self, queues: Iterable[MessageQueue]) -> None:
        """Pull ``queues`` again, from where their pulls stopped."""
        for queue in map(self._queue_in, queues):
            state = self._assigned.get(queue)
            if state is None or not state.paused:
                continue
            state.paused = False
            loop = self._pull_loop
            if loop is not None and self._running:
                next_offset = max(
                    loop.next_offsets.get(queue, state.position),
                    state.process_queue.queue_offset_max + 1,
                    state.position,
                )
                loop.start(queue, state.process_queue, next_offset)

    def _restart(self, queue: MessageQueue, state: _Assigned, offset: int) -> None:
        """Drop what was pulled for ``queue`` and pull it again from ``offset``."""
        state.process_queue.dropped = True
        fresh = ProcessQueue(self.clock.now_ms())
        self._assigned[queue] = _Assigned(fresh, offset, state.paused)
        rebalancer = self._rebalancer
        if rebalancer is not None and queue in rebalancer.process_queues:
            rebalancer.process_queues[queue] = fresh  # the rebalance drops the live one
        if self._pull_loop is not None:
            self._pull_loop.start(queue, fresh, offset)

    def _state(self, queue: MessageQueue) -> _Assigned:
        state = self._assigned.get(queue)
        if state is None:
            raise ConfigError(f"{queue} is not assigned to this consumer")
        return state

    def _store(self) -> OffsetStore:
        return group_member.require_started(self._offset_store, self.group)

    def _require_running(self) -> None:
        if not self._running:
            raise ConfigError(f"consumer {self.group!r} is not running")

    async def _apply_assignment(self, wanted: set[MessageQueue]) -> None:
        rebalancer = self._rebalancer
        if rebalancer is None:
            return
        for queue in [queue for queue in self._assigned if queue not in wanted]:
            state = self._assigned[queue]
            state.process_queue.dropped = True
            self.on_queue_removed(queue, state.process_queue)
            await self._store().persist(queue)
            self._store().remove_offset(queue)
        for queue in sorted(wanted - set(self._assigned)):
            start = await rebalancer.compute_pull_from_where(queue)
            if start < 0:
                _log.warning("%s: no start offset for %s; not reading it", self.group, queue)
                continue
            self.on_queue_added(queue, ProcessQueue(self.clock.now_ms()), start)

    async def _fix_illegal_offset(
        self, queue: MessageQueue, process_queue: ProcessQueue, offset: int
    ) -> None:
        state = self._assigned.get(queue)
        if state is not None and state.process_queue is process_queue and self._running:
            self._restart(queue, state, offset)

    # ---- QueueOwner (rebalance) and InstanceConsumer ------------------------------------------

    def on_queue_added(
        self, queue: MessageQueue, process_queue: ProcessQueue, next_offset: int
    ) -> None:
        self._assigned[queue] = _Assigned(process_queue, next_offset)
        if self._pull_loop is not None and self._running:
            self._pull_loop.start(queue, process_queue, next_offset)

    def on_queue_removed(self, queue: MessageQueue, process_queue: ProcessQueue) -> None:
        state = self._assigned.pop(queue, None)
        if state is not None:
            state.process_queue.dropped = True
            if self._pull_loop is not None:
                self._pull_loop.stop(queue)

    def on_assignment_changed(self, topic: str, assigned: frozenset[MessageQueue]) -> None:
        _log.info("%s: %s assigned %s", self.group, topic, sorted(assigned))

    def consumer_data(self) -> ConsumerData:
        subscriptions = {} if self._assign_mode else self._subscriptions
        return ConsumerData(
            group_name=self.group,
            consume_type=ConsumeType.CONSUME_ACTIVELY,
            message_model=self.message_model,
            consume_from_where=self.consume_from.to_wire(),
            subscription_data_set=tuple(subscriptions[topic] for topic in sorted(subscriptions)),
        )

    def subscribed_topics(self) -> Collection[str]:
        return tuple(self._subscriptions)

    async def do_rebalance(self) -> None:
        if self._running and not self._assign_mode and self._rebalancer is not None:
            await self._rebalancer.do_rebalance()

    async def persist_offsets(self) -> None:
        if self._running:
            await self._store().persist_all(list(self._assigned))

    async def reset_offsets(self, topic: str, offsets: Mapping[MessageQueue, int]) -> None:
        """A broker-pushed reset: move the positions of ``topic``'s queues and re-pull."""
        if not self._running:
            return
        store = self._store()
        for queue, offset in offsets.items():
            store.update_offset(queue, offset, increase_only=False)
            state = self._assigned.get(queue)
            if state is not None:
                self._restart(queue, state, offset)
        await store.persist_all(list(self._assigned))

    async def consume_directly(
        self, message: MessageExt, broker_name: str
    ) -> ConsumeMessageDirectlyResult | None:
        """A pull consumer has no listener to hand a message to (None)."""
        del message, broker_name
        return None

    def running_info(self) -> ConsumerRunningInfo:
        table: dict[MessageQueue, dict[str, Any]] = {
            queue: state.process_queue.info(state.position)
            for queue, state in self._assigned.items()
        }
        properties = {
            "PROP_CONSUME_TYPE": ConsumeType.CONSUME_ACTIVELY.name,
            "messageModel": self.message_model.name,
            "consumeFromWhere": self.consume_from.to_wire().name,
            "pullBatchSize": str(self.pull_settings.batch_size),
            "autoCommit": str(self.auto_commit).lower(),
        }
        return ConsumerRunningInfo(
            properties=properties,
            subscription_set=tuple(self._subscriptions.values()),
            mq_table=table,
        )
