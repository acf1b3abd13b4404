"""The async push consumer (``bolide.aio.PushConsumer``; ``bolide.PushConsumer`` is its
blocking facade), concurrent or orderly.

::

    consumer = PushConsumer("billing", namesrv="127.0.0.1:9876",
                            consume_from=ConsumeFrom.FIRST_OFFSET)
    consumer.subscribe("orders", "paid || refunded")
    consumer.register_listener(on_messages)
    await consumer.start()
    ...
    await consumer.shutdown()

Start (RocketMQ's rebalancing): the offset store is loaded, the consume workers start, the group
joins
the client instance; then the routes of the subscribed topics are fetched, a heartbeat goes
to every broker (the brokers now list this client in the group and tell the other members to
rebalance) and a rebalance is asked for at once. From there the instance rebalances every
20 s and on every NOTIFY_CONSUMER_IDS_CHANGED, persists offsets every 5 s, and the pull loop
long-polls every owned queue (:mod:`.pull_loop`), handing messages to the listener
(:mod:`.consume_concurrently`).

In clustering mode the group's retry topic ``%RETRY%<group>`` is subscribed automatically
(failed messages come back through it, shown with their original topic); progress is kept on
the broker (:class:`RemoteOffsetStore`). In broadcasting mode every consumer gets every
message, keeps its progress in a local file (:class:`LocalFileOffsetStore`, under the
options' ``offset_base_directory``) and logs and drops failures. The tuning knobs (threads,
batches, retries, flow control, lock timings) come in one
:class:`~bolide.client.consumer.options.ConsumerOptions`.

With ``orderly=True`` (RocketMQ's orderly consumption, :mod:`.consume_orderly`) each queue is
consumed by one member
of the group at a time, one batch at a time, in queue order: the rebalance takes a queue only
once its broker lock is held, the lock is renewed every 20 s, a failure suspends the queue and
retries in memory (after ``max_reconsume_times``, unlimited by default, it goes to the DLQ),
and the listener returns an :class:`~bolide.client.consumer.listener.OrderlyResult`.

Shutdown: stop pulling, let listener calls in progress finish, persist the offsets, unlock
the queues (orderly), unregister from every broker (the others rebalance at once), release
the client instance.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from collections.abc import Callable, Collection, Coroutine, Iterable, Mapping
from typing import Any

from bolide.base import limits
from bolide.base.clock import Clock
from bolide.base.errors import BolideError, ConfigError, RemoteError
from bolide.client import rpc
from bolide.client.config import ConsumeFrom
from bolide.client.consumer import group_member
from bolide.client.consumer.allocate import AllocateStrategy
from bolide.client.consumer.consume_concurrently import ConcurrentConsumeService
from bolide.client.consumer.consume_orderly import OrderlyConsumeService
from bolide.client.consumer.instance_ports import (
    InstancePullClient,
    InstanceRebalanceClient,
    InstanceSendBack,
)
from bolide.client.consumer.listener import AdaptedListener, adapt_listener
from bolide.client.consumer.offset_store import (
    OffsetStore,
    ReadOffsetType,
)
from bolide.client.consumer.options import LITE_PULL_ONLY_OPTIONS, ConsumerOptions
from bolide.client.consumer.orderly_locks import InstanceLockClient, QueueLocker
from bolide.client.consumer.process_queue import ProcessQueue
from bolide.client.consumer.pull_loop import MessageSink, PullLoop, PullSettings
from bolide.client.consumer.rebalance import Rebalancer
from bolide.client.consumer.selector import MessageSelector, subscription_of
from bolide.client.instance import ClientInstance
from bolide.client.lifecycle import AsyncLifecycle
from bolide.client.namespace import with_namespace, without_namespace
from bolide.client.producer.producer import client_trace
from bolide.protocol.bodies import (
    EXPRESSION_TYPE_TAG,
    ConsumerData,
    ConsumerRunningInfo,
    ConsumeType,
    MessageModel,
    MessageQueue,
    SubscriptionData,
)
from bolide.protocol.bodies.stats import ConsumeMessageDirectlyResult
from bolide.protocol.message import MessageExt
from bolide.protocol.system_topics import DEFAULT_TRACE_TOPIC, is_retry_topic, retry_topic
from bolide.remoting.tls import TlsClientSettings

__all__ = ["PushConsumer"]

_log = logging.getLogger("bolide.client.push_consumer")


class PushConsumer(AsyncLifecycle):
    """A push consumer of ``group`` (see the module docstring).

    Pass ``namesrv`` (``"host:port;host:port"``) or a shared ``instance``. Keywords, with
    RocketMQ's defaults: ``message_model`` (CLUSTERING), ``consume_from`` (LAST_OFFSET) and
    ``consume_timestamp`` (for TIMESTAMP; ms, datetime, default 30 min ago), ``orderly``
    (False), ``namespace`` (none; as Java's withNamespace: group and topics go out as
    ``<namespace>%<name>``, the listener sees topics without it), ``access_key`` /
    ``secret_key``, ``tls``, ``enable_trace`` / ``trace_topic``. How it consumes — threads,
    batch sizes, retries, flow control, the orderly lock timings, where broadcasting progress
    is kept — comes in ``options``
    (:class:`~bolide.client.consumer.options.ConsumerOptions`, defaults when None).

    Raises:
        ConfigError: no group, neither ``namesrv`` nor ``instance``, ``options`` setting a
            lite pull consumer's knob, or a namespace with characters other than letters,
            digits, '-' and '_'.
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
        orderly: bool = False,
        options: ConsumerOptions | None = None,
        access_key: str | None = None,
        secret_key: str | None = None,
        tls: TlsClientSettings | bool | None = None,
        enable_trace: bool = False,
        trace_topic: str = DEFAULT_TRACE_TOPIC,
        namespace: str | None = None,
    ) -> None:
        member = group_member.member_settings(
            group,
            namesrv,
            options,
            (LITE_PULL_ONLY_OPTIONS, "a push consumer"),
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
        """Java's withNamespace: the group and topics go out as ``<namespace>%<name>`` (the
        retry and dead-letter topics ``%RETRY%<namespace>%<group>``); the listener sees
        topics without it."""
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
        self.consume_thread_max = options.consume_thread_max
        self.consume_batch_max_size = options.consume_batch_max_size
        self.orderly = orderly
        max_reconsume_times = options.max_reconsume_times
        self.max_reconsume_times = (
            limits.RECONSUME_DEFAULT_MAX_TIMES if max_reconsume_times == -1 else max_reconsume_times
        )
        # Orderly retries stay in memory; RocketMQ bounds them only when asked (-1: never).
        self.orderly_max_reconsume_times = (
            None if max_reconsume_times == -1 else max_reconsume_times
        )
        self.suspend_time_ms = options.suspend_time_ms
        self.lock_renew_interval_ms = options.lock_renew_interval_ms
        self.client_lock_max_live_ms = options.client_lock_max_live_ms
        self.consume_timeout_ms = options.consume_timeout_ms
        self.pull_settings = PullSettings(
            batch_size=options.pull_batch_size or limits.PULL_BATCH_SIZE_MESSAGES,
            max_cached_messages=options.pull_threshold_messages,
            max_cached_bytes=options.pull_threshold_bytes,
            max_span_offsets=options.max_span_offsets,
            commit_offset_enabled=message_model is MessageModel.CLUSTERING,
        )
        self._subscriptions: dict[str, SubscriptionData] = {}
        self._listener: AdaptedListener | None = None
        self._running = False
        self._shut_down = False
        self._started_ms = 0
        # Made at start: they need the running loop, the offset store and the listener.
        self._offset_store: OffsetStore | None = None
        self._rebalancer: Rebalancer | None = None
        self._pull_loop: PullLoop | None = None
        self._consume: ConcurrentConsumeService | None = None
        self._orderly: OrderlyConsumeService | None = None
        self._send_back: InstanceSendBack | None = None
        self._background: set[asyncio.Task[None]] = set()
        self.trace = client_trace(self.group, self.instance, trace_topic) if enable_trace else None
        """With ``enable_trace``: SubBefore / SubAfter records of its listener calls
        (client/trace.py; concurrent and orderly consumption)."""

    # ---- configuration -----------------------------------------------------------------------

    def subscribe(self, topic: str, expression: str | MessageSelector | None = "*") -> None:
        """Consume ``topic``'s messages whose tag matches ``expression`` (``"*"``: all;
        ``"TagA || TagB"``), or that a :class:`MessageSelector` selects
        (``MessageSelector.by_sql("a > 5")``: on the broker, by their properties).
        Subscribing again replaces the expression. Allowed while running: the brokers learn
        it at the next heartbeat, sent at once.

        Raises:
            ConfigError: an empty topic, a retry topic, or an expression without a tag.
        """
        if not topic or is_retry_topic(topic):
            raise ConfigError(f"cannot subscribe to topic {topic!r}")
        topic = with_namespace(self.namespace, topic)
        subscription = subscription_of(topic, expression, self.clock.now_ms())
        self._subscriptions[topic] = subscription
        if self._rebalancer is not None:
            self._rebalancer.subscriptions[topic] = subscription
            self._after_subscription_change()

    def unsubscribe(self, topic: str) -> None:
        """Stop consuming ``topic`` (its queues are dropped at the next rebalance)."""
        topic = with_namespace(self.namespace, topic)
        self._subscriptions.pop(topic, None)
        if self._rebalancer is not None:
            self._rebalancer.subscriptions.pop(topic, None)
            self._after_subscription_change()

    def register_listener(self, listener: Callable[..., Any]) -> None:
        """Set the listener: ``f(messages)`` or ``f(messages, context)``, plain or ``async``,
        returning a :class:`~bolide.client.consumer.listener.ConsumeResult` (orderly: an
        :class:`~bolide.client.consumer.listener.OrderlyResult`, the context an
        :class:`~bolide.client.consumer.consume_orderly.OrderlyContext`).

        Raises:
            ConfigError: already started, or ``listener`` has the wrong shape.
        """
        if self._running:
            raise ConfigError("register the listener before start()")
        try:
            self._listener = adapt_listener(listener)
        except TypeError as error:
            raise ConfigError(str(error)) from error

    @property
    def running(self) -> bool:
        return self._running

    @property
    def subscriptions(self) -> Mapping[str, SubscriptionData]:
        """The user's subscriptions (the retry topic not included), by topic as the user
        named it (without the namespace)."""
        return {
            without_namespace(self.namespace, topic): subscription
            for topic, subscription in self._subscriptions.items()
        }

    @property
    def process_queues(self) -> Mapping[MessageQueue, ProcessQueue]:
        """The queues this consumer owns now (empty before start)."""
        return {} if self._rebalancer is None else dict(self._rebalancer.process_queues)

    @property
    def offset_store(self) -> OffsetStore:
        """The offset store (only after start)."""
        return group_member.require_started(self._offset_store, self.group)

    @property
    def rebalancer(self) -> Rebalancer:
        """The rebalance state (only after start)."""
        return group_member.require_started(self._rebalancer, self.group)

    @property
    def orderly_service(self) -> OrderlyConsumeService:
        """The orderly consumption service (only after start, with ``orderly=True``)."""
        return group_member.require_started(
            self._orderly, self.group, "is not an orderly consumer, or not started"
        )

    @property
    def consume_service(self) -> ConcurrentConsumeService:
        """The consumption service (only after start)."""
        return group_member.require_started(self._consume, self.group)

    # ---- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Start consuming (module docstring). Idempotent while running.

        Raises:
            ConfigError: no listener, no subscription, started after shutdown, or the group
                already runs on the client instance.
            CorruptDataError: the broadcasting offset file and its backup are unreadable.
        """
        if self._running:
            return
        if self._shut_down:
            raise ConfigError(f"consumer {self.group!r} was shut down; make a new one")
        if self._listener is None:
            raise ConfigError("register a listener before start()")
        if not self._subscriptions:
            raise ConfigError("subscribe to a topic before start()")
        self._build(self._listener)
        await self.offset_store.load()
        await group_member.register_on(self.instance, self)
        if self._orderly is not None:
            self._orderly.trace = self.trace
            self._orderly.start()
        else:
            self.consume_service.trace = self.trace
            self.consume_service.start()
        if self.trace is not None:
            await self.trace.start()
        self._running = True
        self._started_ms = self.clock.now_ms()
        await group_member.refresh_routes(self.instance, self.group, self.subscribed_topics(), _log)
        try:
            await self._check_selectors()
        except ConfigError:
            await self.shutdown()
            raise
        await self.instance.send_heartbeat_to_all_brokers()
        self.instance.rebalance_now()
        if self.message_model is MessageModel.CLUSTERING:
            self._spawn(self._wait_for_retry_route())
        _log.info("push consumer %s started on client %s", self.group, self.instance.client_id)

    async def _check_selectors(self) -> None:
        """CHECK_CLIENT_CONFIG for every SQL92 subscription on each broker of its topic, as
        Java's consumer does at start. Raises ConfigError with the broker's remark (property
        filters off, or where the expression is wrong)."""
        instance = self.instance
        for topic, subscription in self._subscriptions.items():
            if subscription.expression_type == EXPRESSION_TYPE_TAG:
                continue
            route = instance.routes.get(topic)
            brokers = {data.broker_name for data in route.data.broker_datas} if route else set()
            for broker_name in sorted(brokers):
                address = instance.broker_address(broker_name)
                if address is None:
                    continue
                try:
                    await rpc.check_client_config(
                        instance.pool,
                        address,
                        instance.client_id,
                        self.group,
                        subscription,
                        instance.config.api_timeout_ms,
                    )
                except RemoteError as error:
                    raise ConfigError(
                        f"broker {broker_name} refuses the selector of {topic!r}: "
                        f"{error.remark or error}"
                    ) from error

    def _build(self, listener: AdaptedListener) -> None:
        instance = self.instance
        self._offset_store = group_member.offset_store_for(
            instance, self.group, self.message_model, self.offset_base_directory
        )
        subscriptions = dict(self._subscriptions)
        if self.message_model is MessageModel.CLUSTERING:  # failed messages come back there
            retry = retry_topic(self.group)
            subscriptions[retry] = SubscriptionData.from_expression(retry, "*", self.clock.now_ms())
        self._send_back = InstanceSendBack(instance, self.group, self.namespace)
        if self.orderly:
            self._orderly = self._build_orderly(listener, self._offset_store, self._send_back)
        self._rebalancer = Rebalancer(
            self.group,
            client=InstanceRebalanceClient(instance),
            offset_store=self._offset_store,
            strategy=self.allocate_strategy,
            message_model=self.message_model,
            consume_type=ConsumeType.CONSUME_PASSIVELY,
            consume_from=self.consume_from,
            consume_timestamp_ms=self.consume_timestamp_ms,
            clock=self.clock,
            owner=self,
            gate=self._orderly,
        )
        self._rebalancer.subscriptions.update(subscriptions)
        if self._orderly is not None:
            self._pull_loop = self._build_pull_loop(
                self._orderly.submit, hold=self._orderly.pull_hold_ms
            )
            return
        self._consume = ConcurrentConsumeService(
            self.group,
            listener,
            message_model=self.message_model,
            offset_store=self._offset_store,
            send_back=self._send_back,
            clock=self.clock,
            owned_queues=lambda: self.rebalancer.process_queues,
            batch_max_size=self.consume_batch_max_size,
            thread_max=self.consume_thread_max,
            max_reconsume_times=self.max_reconsume_times,
            consume_timeout_ms=self.consume_timeout_ms,
            namespace=self.namespace,
        )
        self._pull_loop = self._build_pull_loop(self._consume.submit)

    def _build_pull_loop(
        self, sink: MessageSink, *, hold: Callable[[MessageQueue], int] = lambda queue: 0
    ) -> PullLoop:
        return PullLoop(
            self.group,
            client=InstancePullClient(self.instance),
            offset_store=self.offset_store,
            subscription=self.rebalancer.subscriptions.get,
            sink=sink,
            fix_offset=self._fix_illegal_offset,
            clock=self.clock,
            settings=self.pull_settings,
            hold=hold,
        )

    def _build_orderly(
        self, listener: AdaptedListener, offset_store: OffsetStore, send_back: InstanceSendBack
    ) -> OrderlyConsumeService:
        clustering = self.message_model is MessageModel.CLUSTERING
        locker = QueueLocker(
            self.group,
            InstanceLockClient(self.instance),
            self.clock,
            process_queues=lambda: self.rebalancer.process_queues,
        )
        return OrderlyConsumeService(
            self.group,
            listener,
            message_model=self.message_model,
            offset_store=offset_store,
            send_back=send_back,
            locker=locker if clustering else None,
            clock=self.clock,
            owned_queues=lambda: self.rebalancer.process_queues,
            request_rebalance=self.instance.rebalance_now,
            batch_max_size=self.consume_batch_max_size,
            thread_max=self.consume_thread_max,
            max_reconsume_times=self.orderly_max_reconsume_times,
            namespace=self.namespace,
            suspend_time_ms=self.suspend_time_ms,
            client_lock_max_live_ms=self.client_lock_max_live_ms,
            lock_renew_interval_ms=self.lock_renew_interval_ms,
        )

    async def shutdown(self) -> None:
        """Stop pulling, finish listener calls in progress, persist offsets, unregister from
        the brokers, release the client instance. Idempotent."""
        if not self._running:
            return
        self._running = False
        self._shut_down = True
        rebalancer, pull_loop = self.rebalancer, self._pull_loop
        background = list(self._background)
        for task in background:
            task.cancel()
        await asyncio.gather(*background, return_exceptions=True)
        await rebalancer.close()
        if pull_loop is not None:
            await pull_loop.shutdown()
        if self._consume is not None:
            await self._consume.shutdown()
        if self._orderly is not None:
            await self._orderly.shutdown()
        await self._persist_owned()
        if self._orderly is not None:  # after the offsets: the next owner starts from them
            await self._orderly.unlock_all()
        if self.trace is not None:
            await self.trace.shutdown()
        await self.instance.unregister_consumer(self.group)
        await rebalancer.drop_all()
        if self._send_back is not None:
            await self._send_back.close()
        await self.instance.release()
        _log.info("push consumer %s shut down", self.group)

    async def _close(self) -> None:
        await self.shutdown()

    def _after_subscription_change(self) -> None:
        """Brokers learn a changed subscription from a heartbeat: send one now, then
        rebalance (Java does the same in subscribe/unsubscribe)."""
        if not self._running:
            return

        async def heartbeat_then_rebalance() -> None:
            await group_member.refresh_routes(
                self.instance, self.group, self.subscribed_topics(), _log
            )
            await self.instance.send_heartbeat_to_all_brokers()
            self.instance.rebalance_now()

        self._spawn(heartbeat_then_rebalance())

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work, name=f"push-consumer-{self.group}")
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _wait_for_retry_route(self) -> None:
        """A new group's retry topic is created by the first heartbeat and reaches the name
        servers a moment later: look for its route a few times, rebalancing once it is there,
        so that failed messages come back without waiting for the 30 s route refresh."""
        topic = retry_topic(self.group)
        wait_ms = limits.RETRY_ROUTE_WAIT_INITIAL_MS
        for _ in range(limits.RETRY_ROUTE_WAIT_ATTEMPTS):
            if self.instance.subscribe_queues(topic) is not None:
                break
            await self.clock.sleep_ms(wait_ms)
            wait_ms = min(2 * wait_ms, limits.RETRY_ROUTE_WAIT_MAX_MS)
            try:
                if await self.instance.update_route(topic) is not None:
                    self.instance.rebalance_now()
                    return
            except BolideError as error:
                _log.debug("%s: route of %s: %s", self.group, topic, error)

    async def _persist_owned(self) -> None:
        store = self._offset_store
        if store is not None and self._rebalancer is not None:
            await store.persist_all(list(self._rebalancer.process_queues))

    async def _fix_illegal_offset(
        self, queue: MessageQueue, process_queue: ProcessQueue, offset: int
    ) -> None:
        await self.rebalancer.fix_illegal_offset(queue, process_queue, offset)
        self.instance.rebalance_now()

    # ---- InstanceConsumer ----------------------------------------------------------------------

    def consumer_data(self) -> ConsumerData:
        """The group as heartbeats report it."""
        subscriptions = (
            self._rebalancer.subscriptions if self._rebalancer is not None else self._subscriptions
        )
        return ConsumerData(
            group_name=self.group,
            consume_type=ConsumeType.CONSUME_PASSIVELY,
            message_model=self.message_model,
            consume_from_where=self.consume_from.to_wire(),
            subscription_data_set=tuple(subscriptions[topic] for topic in sorted(subscriptions)),
        )

    def subscribed_topics(self) -> Collection[str]:
        """The subscribed topics, retry topic included (clustering)."""
        if self._rebalancer is not None:
            return tuple(self._rebalancer.subscriptions)
        return tuple(self._subscriptions)

    async def do_rebalance(self) -> None:
        if self._running:
            await self.rebalancer.do_rebalance()

    async def persist_offsets(self) -> None:
        if self._running:
            await self._persist_owned()

    async def reset_offsets(self, topic: str, offsets: Mapping[MessageQueue, int]) -> None:
        """RESET_CONSUMER_CLIENT_OFFSET: drop ``topic``'s queues, move their offsets, resume."""
        if self._running:
            await self.rebalancer.reset_offsets(topic, offsets)

    def _status(self, topic: str, failed: int) -> dict[str, float | int]:
        """One topic's ConsumeStatus: measured listener rates (concurrent or orderly) and
        pull round trips / pulled messages per second, over the last minute."""
        now_ms = self.instance.clock.now_ms()
        consume_rates = self._consume.rates if self._consume is not None else None
        if consume_rates is None and self._orderly is not None:
            consume_rates = self._orderly.rates
        ok_tps = failed_tps = rt_ms = pull_tps = pull_rt_ms = 0.0
        if consume_rates is not None:
            ok_tps, failed_tps, rt_ms = consume_rates.status(topic, now_ms)
        if self._pull_loop is not None:
            pull_tps, _, pull_rt_ms = self._pull_loop.rates.status(topic, now_ms)
        return {
            "consumeOKTPS": ok_tps,
            "consumeFailedTPS": failed_tps,
            "consumeFailedMsgs": failed,
            "consumeRT": rt_ms,
            "pullRT": pull_rt_ms,
            "pullTPS": pull_tps,
        }

    async def consume_directly(
        self, message: MessageExt, broker_name: str
    ) -> ConsumeMessageDirectlyResult | None:
        """CONSUME_MESSAGE_DIRECTLY: the listener's verdict on ``message`` (None: orderly
        consumers and stopped ones do not consume directly)."""
        if self._consume is None:
            return None
        return await self._consume.consume_directly(message, broker_name)

    def running_info(self) -> ConsumerRunningInfo:
        """This consumer's state for GET_CONSUMER_RUNNING_INFO."""
        rebalancer = self._rebalancer
        store = self._offset_store
        mq_table: dict[MessageQueue, dict[str, Any]] = {}
        if rebalancer is not None and store is not None:
            offsets = {
                queue: offset
                for topic in {queue.topic for queue in rebalancer.process_queues}
                for queue, offset in store.clone_offset_table(topic).items()
            }
            mq_table = {
                queue: process_queue.info(offsets.get(queue, -1))
                for queue, process_queue in rebalancer.process_queues.items()
            }
            if self._orderly is not None:  # each queue's retry count and blocked time
                for queue, process_queue in rebalancer.process_queues.items():
                    mq_table[queue].update(self._orderly.queue_info(process_queue))
        failed = 0
        if self._consume is not None:
            failed = self._consume.stats.consumed_failed
        elif self._orderly is not None:
            failed = self._orderly.stats.suspended
        status_table = {topic: self._status(topic, failed) for topic in self._subscriptions}
        properties = {
            "PROP_CONSUME_TYPE": ConsumeType.CONSUME_PASSIVELY.name,
            "PROP_CONSUMEORDERLY": str(self.orderly).lower(),
            "PROP_THREADPOOL_CORE_SIZE": str(self.consume_thread_max),
            "PROP_CONSUMER_START_TIMESTAMP": str(self._started_ms),
            "messageModel": self.message_model.name,
            "consumeFromWhere": self.consume_from.to_wire().name,
            "allocateMessageQueueStrategy": self.allocate_strategy.name,
            "consumeMessageBatchMaxSize": str(self.consume_batch_max_size),
            "pullBatchSize": str(self.pull_settings.batch_size),
            "maxReconsumeTimes": str(self._max_reconsume_times_shown()),
        }
        subscriptions = rebalancer.subscriptions if rebalancer else self._subscriptions
        return ConsumerRunningInfo(
            properties=properties,
            subscription_set=tuple(subscriptions[topic] for topic in sorted(subscriptions)),
            mq_table=mq_table,
            status_table=status_table,
        )

    def _max_reconsume_times_shown(self) -> int:
        if not self.orderly:
            return self.max_reconsume_times
        limit = self.orderly_max_reconsume_times
        return -1 if limit is None else limit

    # ---- QueueOwner ----------------------------------------------------------------------------

    def on_queue_added(
        self, queue: MessageQueue, process_queue: ProcessQueue, next_offset: int
    ) -> None:
        if self._pull_loop is not None and self._running:
            self._pull_loop.start(queue, process_queue, next_offset)

    def on_queue_removed(self, queue: MessageQueue, process_queue: ProcessQueue) -> None:
        if self._pull_loop is not None:
            self._pull_loop.stop(queue)

    def on_assignment_changed(self, topic: str, assigned: frozenset[MessageQueue]) -> None:
        _log.info("%s: %s assigned %s", self.group, topic, sorted(assigned))

    # ---- helpers for tests and tools -----------------------------------------------------------

    async def committed_offset(self, queue: MessageQueue) -> int:
        """The in-memory committed offset of ``queue`` (-1 when none)."""
        return await self.offset_store.read_offset(queue, ReadOffsetType.READ_FROM_MEMORY)

    def consumed_messages(self) -> int:
        """Messages the listener consumed successfully so far."""
        if self._orderly is not None:
            return self._orderly.stats.consumed_ok
        return 0 if self._consume is None else self._consume.stats.consumed_ok
