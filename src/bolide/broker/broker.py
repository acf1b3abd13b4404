"""Broker: the composition root of one broker (wiring only; behaviour lives in the parts).

Start order (reverse at stop)::

    listener bound (first only when listenPort is 0: the store needs the real port)
    store started (recovery)          -> FileMessageStore, STOREHOST = brokerIP1:port
    topics / groups / offsets loaded  -> topics.json, subscriptionGroup.json, consumerOffset.json
    consumers, producers, long polling, stats, handlers installed on the dispatcher
    offset flush (5 s), client expiry scan (10 s)
    delay-level and timer delivery    -> delayOffset.json, timerProgress.json, store/timerlog
    transactions                      -> pending halves rebuilt, checker every
                                         transactionCheckInterval
    listener bound (when the port was fixed)
    registration with every name server (now, every 30 s, and on topic creation)

Stop: unregister from the name servers, stop the scans, close the listener and its
connections (parked pulls are answered or dropped), write consumer offsets, stop delayed and
timer delivery (progress written), write topics and groups, then shut the store down
(checkpoint written, ``abort`` removed).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
from collections.abc import Awaitable, Callable
from pathlib import Path

from bolide.acl import AclValidator
from bolide.acl.v2_auth import AuthV2
from bolide.base import compiled, limits
from bolide.base.clock import Clock, SystemClock
from bolide.base.errors import BolideError, ConnectionClosedError, invariant
from bolide.base.service import Service
from bolide.broker.config import BrokerConfig, BrokerRole, MetricsExporterType
from bolide.broker.consumers import ConsumerManager
from bolide.broker.context import BrokerContext
from bolide.broker.controller_mode.assembly import follow_controller
from bolide.broker.controller_mode.epochs import epoch_file_path, open_epoch_file
from bolide.broker.controller_mode.replicas_manager import ReplicasManager
from bolide.broker.controller_mode.settings import ControllerModeSettings
from bolide.broker.group_start import memory_window_bytes, physical_memory_bytes, starts_at_zero
from bolide.broker.ha.metadata_sync import ReplicationHandlers
from bolide.broker.ha.replication import Replication
from bolide.broker.handlers.acl_admin import AclAdminHandlers
from bolide.broker.handlers.admin import AdminHandlers
from bolide.broker.handlers.admin_producers import AdminProducerHandlers
from bolide.broker.handlers.auth_admin import AuthAdminHandlers
from bolide.broker.handlers.client_manage import ClientManageHandlers
from bolide.broker.handlers.consumer_manage import ConsumerManageHandlers
from bolide.broker.handlers.locks import LockHandlers
from bolide.broker.handlers.pop import PopHandlers
from bolide.broker.handlers.pull import PullHandlers
from bolide.broker.handlers.query import QueryHandlers
from bolide.broker.handlers.recall import RecallHandlers
from bolide.broker.handlers.reply import ReplyHandlers
from bolide.broker.handlers.send import SendHandlers
from bolide.broker.handlers.send_back import SendBackHandlers
from bolide.broker.handlers.subscription_group import SubscriptionGroupHandlers
from bolide.broker.handlers.transaction import TransactionHandlers
from bolide.broker.locks import RebalanceLockManager
from bolide.broker.long_polling import LongPollingService
from bolide.broker.metrics.exporter import BrokerMetrics
from bolide.broker.metrics.history import restore_history, save_history, take_history_sample
from bolide.broker.offsets import ConsumerOffsetFlushService, ConsumerOffsetManager
from bolide.broker.outbound import notify_consumer_ids_changed_request
from bolide.broker.pop.retry import PopRetry
from bolide.broker.pop.service import PopService
from bolide.broker.producers import ProducerManager
from bolide.broker.registration import BrokerIdentity, NameServerRegistration
from bolide.broker.retry import VERSION_V3_4_9, SendBackService, SendBackStatus
from bolide.broker.schedule import DelayLevels, ScheduleMessageService
from bolide.broker.security import (
    BrokerSecurity,
    inner_request_signer,
    tls_client_settings,
    tls_server_settings,
    warn_unhonoured_keys,
)
from bolide.broker.stats import BrokerStats
from bolide.broker.subscription_groups import SubscriptionGroupManager
from bolide.broker.timer import TIMER_PROGRESS_FILE_NAME, TimerMessageService
from bolide.broker.topics import TopicConfigManager
from bolide.broker.trace import BrokerTrace
from bolide.broker.transactions import TransactionService, TransactionSettings
from bolide.protocol.codes import RequestCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import (
    ConsumerSendMsgBackRequestHeader,
)
from bolide.remoting import ClientPool, Connection, Dispatcher, RemotingServer
from bolide.store.config_files import MetadataFile, metadata_path
from bolide.store.file_store import FileMessageStore
from bolide.store.timer_log import TimerLog, timer_log_dir

__all__ = ["Broker"]

_log = logging.getLogger("bolide.broker")

_NOT_ON_THE_VIP_CHANNEL = frozenset({RequestCode.PULL_MESSAGE})
"""Requests a RocketMQ broker serves only on its main port (pulls may park for 30 s)."""


class Broker:
    """One broker listening on ``host`` (the bind address; ``config.broker_ip1`` is the address
    clients are told) and ``config.listen_port`` (0 picks a free port, see :attr:`port`).

    ``clock`` (default the system clock) drives every timer; ``seed`` makes the random queue
    choice of sends with a negative queue id repeatable. ``config_file``: the broker.conf it
    was started from, where UPDATE_BROKER_CONFIG (25) writes its changes back (None: they
    last until the broker stops, with a warning). After :meth:`start`, :attr:`context`
    holds the managers and the store, and :attr:`config` has the real listen port.
    """

    def __init__(
        self,
        config: BrokerConfig,
        *,
        host: str = "127.0.0.1",
        clock: Clock | None = None,
        seed: int | None = None,
        config_file: Path | None = None,
    ) -> None:
        self.controller_mode = ControllerModeSettings.from_properties(config.extra_properties)
        if self.controller_mode.enabled:  # no role until the controller gives one
            config = config.replace(broker_role=BrokerRole.SLAVE, broker_id=-1)
        self.config = config
        self._config_file = config_file
        self._clock = clock or SystemClock()
        self._random = random.Random(seed)
        self._dispatcher = Dispatcher(
            family_limits={
                "pull": limits.LONG_POLL_MAX_PARKED_REQUESTS
                + limits.HANDLER_CONCURRENCY_MAX_REQUESTS
            }
        )
        self._host = host
        # haListenPort defaults to listenPort + 1; with listenPort 0 (a free port) it is free too.
        self._ha_listen_port = 0 if config.listen_port == 0 and config.ha_listen_port < 0 else -1
        if config.broker_role.is_master and config.broker_id != 0:
            _log.warning(
                "brokerId=%d on a %s: a master is always id 0",
                config.broker_id,
                config.broker_role.value,
            )
            self.config = config = config.replace(broker_id=0)
        self.server = RemotingServer(
            self._dispatcher,
            host,
            config.listen_port,
            on_connection_close=self._connection_closed,
            tls=tls_server_settings(config),
        )
        self._host = host
        self._any_port = config.listen_port == 0
        self.vip_server: RemotingServer | None = None
        """The VIP channel (listenPort - 2, no pulls) once started; None when off."""
        self._pool = ClientPool(
            clock=self._clock,
            request_hook=inner_request_signer(config),
            tls=tls_client_settings(config),
        )
        self._security = BrokerSecurity(config, self._clock, self._service_crashed)
        self._context: BrokerContext | None = None
        self._stats_sampler: Service | None = None
        self._stats_history: Service | None = None
        self.metrics: BrokerMetrics | None = None
        """The Prometheus registry (after start); serving /metrics when metricsExporterType
        is PROM (see :attr:`metrics_address`)."""
        self._store: FileMessageStore | None = None
        self._replication: Replication | None = None
        self._registration: NameServerRegistration | None = None
        self.replicas_manager: ReplicasManager | None = None
        self._master_services_started = False
        """Controller mode's agent (enableControllerMode=true, after start)."""
        self._offset_flush: ConsumerOffsetFlushService | None = None
        self._client_scan: Service | None = None
        self._notifications: set[asyncio.Task[None]] = set()
        self._listening = False
        self.crash: BaseException | None = None
        """Set when a background service of the broker died."""

    # --- accessors ------------------------------------------------------------------------

    @property
    def context(self) -> BrokerContext:
        """The managers, store and clock; valid after :meth:`start`."""
        invariant(self._context is not None, "broker context read before start()")
        assert self._context is not None  # for mypy; the invariant says why
        return self._context

    @property
    def registration(self) -> NameServerRegistration:
        invariant(self._registration is not None, "registration read before start()")
        assert self._registration is not None  # for mypy
        return self._registration

    @property
    def acl(self) -> AclValidator | None:
        """The accounts in force (aclEnable=true, after :meth:`start`), else None: what the
        broker's other front ends (dashboard, metrics, proxy) check credentials against."""
        acl_file = self._security.acl_file
        return None if acl_file is None else acl_file.validator

    @property
    def auth(self) -> AuthV2 | None:
        """ACL 2.0's users and policies in force (after :meth:`start`), else None: the
        decision the broker's other front ends (proxy, dashboard) use too."""
        return self._security.auth

    @property
    def port(self) -> int:
        """The port listened on; valid after :meth:`start`."""
        return self.server.port

    @property
    def address(self) -> str:
        """``brokerIP1:port``: what clients and name servers are told; valid after start."""
        return self.config.broker_address

    # --- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        """Open the store, load the tables, listen, and register with the name servers.

        Raises StoreError / CorruptDataError / OSError when the store or a config file cannot
        be opened or the port cannot be bound; nothing keeps running then.
        """
        warn_unhonoured_keys(self.config)
        self._security.open(self._dispatcher)  # before listening: never serve without the ACL
        if self.config.listen_port == 0:
            await self._listen()
        try:
            await self._open_parts()
            if not self._listening:
                await self._listen()
            await self._listen_vip()
            await self._start_metrics()
            if self.controller_mode.enabled:
                self._start_controller_mode()
            else:
                await self.registration.start()
        except BaseException:
            await self.stop()
            raise
        _log.info(
            "broker %s (%s) serving on %s, store %s",
            self.config.broker_name,
            self.config.broker_cluster_name,
            self.address,
            self.config.store_path_root_dir,
        )
        _log.info("broker hot path: %s", compiled.describe())

    def _store_or_fail(self) -> FileMessageStore:
        invariant(self._store is not None, "store read before start()")
        assert self._store is not None  # for mypy; the invariant says why
        return self._store

    def _start_controller_mode(self) -> None:
        """Follow the controller (docs/replication.md): registration waits for a role."""
        self.replicas_manager = follow_controller(
            self.controller_mode,
            self.config,
            context=self.context,
            replication=self.replication,
            store=self._store_or_fail(),
            registration=lambda: self.registration,
            start_master_services=self._start_master_services,
            ha_port=self._ha_port,
            own_id=lambda: self.replicas_manager.broker_id if self.replicas_manager else None,
            clock=self._clock,
            metrics=self.metrics,
            on_crash=self._service_crashed,
        )

    @property
    def metrics_address(self) -> str | None:
        """``host:port`` of /metrics, or None when the broker serves no metrics."""
        server = self.metrics.server if self.metrics is not None else None
        return server.address if server is not None else None

    async def _start_metrics(self) -> None:
        config = self.config
        self.metrics = metrics = BrokerMetrics(self.context)
        if self._store is not None:
            metrics.collector.flush_latency_us = self._store.flush_latency_us
        replication = self._replication
        if replication is not None:
            metrics.set_commit_log_diff_source(_slave_diffs(replication, self.context))
        kind = config.metrics_exporter_type
        if kind is MetricsExporterType.PROM:
            host = config.metrics_prom_exporter_host or self._host
            await metrics.serve(host, config.metrics_prom_exporter_port)
        elif kind is not MetricsExporterType.DISABLE:
            _log.warning(
                "metricsExporterType=%s is not supported (PROM is): no metrics served", kind.value
            )

    async def _listen(self) -> None:
        await self.server.start()
        self._listening = True
        if self.config.listen_port == 0:
            self.config = self.config.replace(listen_port=self.server.port)

    async def _listen_vip(self) -> None:
        """Open the VIP channel on listenPort - 2 with every handler but the pulls, as a
        RocketMQ broker does (clients up to 4.4.0 send there). A fixed port that cannot be
        bound fails the start; with listenPort 0 a taken port only leaves it off."""
        config = self.config
        vip_port = config.listen_port - 2
        if not config.vip_channel_enabled or vip_port <= 0:
            return
        view = self._dispatcher.without(_NOT_ON_THE_VIP_CHANNEL)
        server = RemotingServer(
            view,
            self._host,
            vip_port,
            on_connection_close=self._connection_closed,
            tls=tls_server_settings(config),
        )
        try:
            await server.start()
        except OSError as error:
            if self._any_port:  # listenPort 0: best effort
                _log.info("VIP channel not opened on port %d: %s", vip_port, error)
                return
            raise
        self.vip_server = server

    async def _open_parts(self) -> None:
        config, clock = self.config, self._clock
        store = FileMessageStore(
            config.store_config(), clock=clock, store_host=(config.broker_ip1, config.listen_port)
        )
        await store.start()
        self._store = store
        root = config.store_path_root_dir
        topics = TopicConfigManager(config, metadata_path(root, MetadataFile.TOPICS), clock)
        groups = SubscriptionGroupManager(
            config, metadata_path(root, MetadataFile.SUBSCRIPTION_GROUPS), clock
        )
        offsets = ConsumerOffsetManager(metadata_path(root, MetadataFile.CONSUMER_OFFSETS))
        for table in (topics, groups):
            table.load()
            await table.persist()
        offsets.load()
        long_polling = LongPollingService(
            clock, max_offset_lookup=store.max_offset, on_crash=self._service_crashed
        )
        store.add_arrival_listener(long_polling.notify_message_arriving)
        self._context = context = BrokerContext(
            config=config,
            clock=clock,
            store=store,
            topics=topics,
            groups=groups,
            offsets=offsets,
            consumers=ConsumerManager(clock, self._notify_consumer_ids_changed),
            producers=ProducerManager(clock),
            long_polling=long_polling,
            stats=BrokerStats(clock, cluster_name=config.broker_cluster_name),
            register_soon=self._register_soon,
            register_now=self._register_now,
            locks=RebalanceLockManager(clock, lock_max_live_ms=config.rebalance_lock_max_live_ms),
            random=self._random,
            schedule=_schedule_service(config, store, clock),
            timer=_timer_service(config, store, clock),
            config_file=self._config_file,
        )
        context.transactions = self._transaction_service(context)
        send_back = SendBackService(
            store,
            topics,
            groups,
            DelayLevels(config.message_delay_levels_ms),
            register_soon=self._register_soon,
            rng=self._random,
        )
        send_handlers = SendHandlers(context)
        for handlers in (
            send_handlers,
            ReplyHandlers(context, send_handlers),
            PullHandlers(context, commit_log_max_offset=lambda: store.commit_log_max_offset),
            ReplicationHandlers(context),
            ConsumerManageHandlers(context),
            ClientManageHandlers(context),
            LockHandlers(context.locks),
            QueryHandlers(context),
            AdminHandlers(context),
            AdminProducerHandlers(context),
            SendBackHandlers(context, send_back),
            SubscriptionGroupHandlers(context, context.schedule),
            PopHandlers(context, self._pop_service(context, send_back)),
            RecallHandlers(context),
            TransactionHandlers(context),
            AclAdminHandlers(config, self._security.acl_file),
            AuthAdminHandlers(self._security.auth),
        ):
            handlers.install(self._dispatcher)
        self._security.start()
        self._replication = Replication(
            config,
            store,
            context,
            self._pool,
            host=self._host,
            clock=clock,
            ha_listen_port=self._ha_listen_port if self._ha_listen_port >= 0 else None,
            on_crash=self._service_crashed,
            epoch_file=(
                open_epoch_file(
                    epoch_file_path(config.extra_properties, config.store_path_root_dir),
                    store.commit_log_max_offset,
                )
                if self.controller_mode.enabled
                else None
            ),
        )
        await self._replication.start()
        context.replication = self._replication
        self._start_services(context)
        if config.broker_role.is_master:
            await self._start_master_services()

    async def _start_master_services(self) -> None:
        """Delayed delivery and transaction checks: a master's work (once)."""
        context = self.context
        if self._master_services_started:
            return
        self._master_services_started = True
        # A slave delivers nothing itself: delayed messages arrive copied from the master.
        for delivery in (context.schedule, context.timer):
            if delivery is not None:
                await delivery.start()
        # Nor does it decide transactions: half and op records arrive from the master.
        if context.transactions is not None:
            await context.transactions.start()

    def _transaction_service(self, context: BrokerContext) -> TransactionService:
        config = self.config
        return TransactionService(
            context.store,
            context.topics,
            context.offsets,
            context.producers,
            context.clock,
            settings=TransactionSettings(
                check_interval_ms=config.transaction_check_interval_ms,
                timeout_ms=config.transaction_timeout_ms,
                check_max=config.transaction_check_max_count,
                file_reserved_ms=config.file_reserved_time_ms,
                # In controller mode the role comes later: start() runs once it is a master.
                checker_enabled=config.broker_role.is_master or self.controller_mode.enabled,
            ),
            store_host=(config.broker_ip1, config.listen_port),
            max_message_bytes=config.max_message_size_bytes,
            on_crash=self._service_crashed,
        )

    def _pop_service(self, context: BrokerContext, send_back: SendBackService) -> PopService:
        """The POP engine, its checkpoint log replayed (context.pop)."""
        service = PopService(
            context.store,
            context.offsets,
            self.config.store_path_root_dir,
            self._clock,
            broker_name=self.config.broker_name,
            dead_letter=functools.partial(_dead_letter, send_back),
            max_attempts=functools.partial(_max_attempts, context),
            starts_at_zero=functools.partial(_starts_at_zero, context),
            retry=PopRetry(
                context.store,
                context.topics,
                context.groups,
                self._register_soon,
                v2=self.config.enable_retry_topic_v2,
                read_v1=self.config.retrieve_message_from_pop_retry_topic_v1,
            ),
            rng=self._random,
            on_crash=self._service_crashed,
        )
        service.open()
        context.store.add_arrival_listener(service.on_arrival)
        context.pop = service
        return service

    def _periodic(
        self, name: str, step: Callable[[], Awaitable[int | None]], interval_ms: int
    ) -> Service:
        """A started service running ``step`` every ``interval_ms`` on the broker's clock (a
        crash of it stops the broker)."""
        service = Service(
            name, step, interval_ms=interval_ms, clock=self._clock, on_crash=self._service_crashed
        )
        service.start()
        return service

    def _start_services(self, context: BrokerContext) -> None:
        config = self.config
        context.long_polling.start()
        if config.trace_on_broker_enable:
            context.trace = self._broker_trace(context)
        if context.pop is not None:
            context.pop.start()
        self._offset_flush = ConsumerOffsetFlushService(
            context.offsets,
            clock=self._clock,
            interval_ms=config.flush_consumer_offset_interval_ms,
            on_crash=self._service_crashed,
        )
        self._offset_flush.start()
        self._client_scan = self._periodic(
            "broker-client-expiry", self._expire_clients, limits.CLIENT_HOUSEKEEPING_INTERVAL_MS
        )
        self._stats_sampler = self._periodic(
            "broker-stats-sampler", _sample(context), limits.STATS_MINUTE_SAMPLE_INTERVAL_MS
        )
        restore_history(context)
        self._stats_history = self._periodic(
            "broker-stats-history", _sample_history(context), limits.STATS_HISTORY_INTERVAL_MS
        )
        self._registration = NameServerRegistration(
            BrokerIdentity(
                cluster_name=config.broker_cluster_name,
                broker_name=config.broker_name,
                broker_id=config.broker_id,
                broker_addr=config.broker_address,
                ha_server_addr=f"{config.broker_ip1}:{self._ha_port()}",
            ),
            config.namesrv_addresses,
            context.topics.wrapper,
            self._pool,
            clock=self._clock,
            interval_ms=config.register_name_server_period_ms,
            on_crash=self._service_crashed,
            on_registered=self._master_learned,
        )

    def _broker_trace(self, context: BrokerContext) -> BrokerTrace:
        """traceOnBrokerEnable: the trace takes notes of puts, pulls and commits."""
        trace = BrokerTrace(
            self.config,
            context.store,
            self._clock,
            context.topics.is_system_topic,
            on_crash=self._service_crashed,
        )
        context.store.add_arrival_listener(trace.on_arrival)
        context.offsets.on_commit = trace.committed
        trace.start()
        return trace

    def _ha_port(self) -> int:
        replication = self._replication
        port = replication.ha_port if replication is not None else None
        return port if port is not None else self.config.effective_ha_listen_port

    def _master_learned(self, master_address: str | None, ha_address: str | None) -> None:
        if self._replication is not None:
            self._replication.master_learned(master_address, ha_address)

    @property
    def replication(self) -> Replication:
        """The master/slave parts; valid after :meth:`start`."""
        invariant(self._replication is not None, "replication read before start()")
        assert self._replication is not None  # for mypy
        return self._replication

    async def stop(self, timeout_ms: int = limits.REMOTING_STOP_GRACE_MS) -> None:
        """Unregister, stop serving, persist offsets and tables, shut the store down.

        Idempotent; every step runs even when an earlier one failed (failures are logged).
        """
        manager, self.replicas_manager = self.replicas_manager, None
        if manager is not None:
            await _logged("leaving controller mode", manager.stop())
        registration, self._registration = self._registration, None
        if registration is not None:
            await _logged("unregistering", registration.stop())
        replication, self._replication = self._replication, None
        if replication is not None:
            await _logged("stopping replication", replication.stop())
        await self._pool.close(timeout_ms)
        await self._security.stop(timeout_ms)
        periodic = (self._client_scan, self._stats_sampler, self._stats_history)
        self._client_scan = self._stats_sampler = self._stats_history = None
        for service in periodic:
            if service is not None:
                await service.stop(timeout_ms)
        if self.metrics is not None:
            await self.metrics.stop()
        await self.server.stop(timeout_ms)
        vip_server, self.vip_server = self.vip_server, None
        if vip_server is not None:
            await vip_server.stop(timeout_ms)
        for task in list(self._notifications):
            task.cancel()
        context, self._context = self._context, None
        store, self._store = self._store, None
        if context is None:
            if store is not None:  # the start failed after the store opened
                await store.shutdown()
            return
        await context.long_polling.stop(timeout_ms)
        if context.pop is not None:
            await _logged("closing the POP log", context.pop.stop(timeout_ms))
        if context.transactions is not None:
            await _logged("stopping the transaction checker", context.transactions.stop())
        offset_flush, self._offset_flush = self._offset_flush, None
        if offset_flush is not None:
            await _logged("writing consumer offsets", offset_flush.stop(timeout_ms))
        for name, delivery in (("timer", context.timer), ("schedule", context.schedule)):
            if delivery is not None:
                await _logged(f"stopping {name} delivery", delivery.stop())
        if context.trace is not None:
            await _logged("writing the last trace records", context.trace.stop(timeout_ms))
        await _logged("writing topics.json", context.topics.persist())
        await _logged("writing subscriptionGroup.json", context.groups.persist())
        await context.store.shutdown()
        _log.info("broker %s on %s stopped", self.config.broker_name, self.address)

    # --- glue between the parts -----------------------------------------------------------

    def _register_soon(self) -> None:
        if self._registration is not None:
            self._registration.register_soon()

    async def _register_now(self) -> int:
        if self._registration is None:
            return 0
        return await self._registration.register_once()

    def _notify_consumer_ids_changed(self, group: str, channels: list[Connection]) -> None:
        if not self.config.notify_consumer_ids_changed_enable:
            return  # broker.conf turned notices off: consumers rebalance on their 20 s timer
        if self._context is not None:
            self._context.stats.rebalance_notifications += 1
        for connection in channels:
            if connection.is_closed:
                continue
            request = notify_consumer_ids_changed_request(group)
            task = asyncio.ensure_future(
                _notify(connection, request, limits.CONSUMER_NOTIFY_TIMEOUT_MS)
            )
            self._notifications.add(task)
            task.add_done_callback(self._notifications.discard)

    def _connection_closed(self, connection: Connection) -> None:
        context = self._context
        if context is None:
            return
        context.long_polling.cancel(connection)
        context.consumers.do_channel_close(connection)
        context.producers.do_channel_close(connection)

    async def _expire_clients(self) -> None:
        context = self._context
        if context is None:
            return
        expired = set(context.consumers.scan_not_active_channel())
        expired.update(context.producers.scan_not_active_channel())
        for connection in expired:
            connection.close(ConnectionClosedError("no heartbeat within the channel expiry"))

    def _service_crashed(self, service: Service, error: BaseException) -> None:
        self.crash = error
        _log.error(
            "broker %s: service %s stopped: %s", self.config.broker_name, service.name, error
        )


def _schedule_service(
    config: BrokerConfig, store: FileMessageStore, clock: Clock
) -> ScheduleMessageService:
    """The delay-level deliverer, its delayOffset.json read."""
    service = ScheduleMessageService(
        store,
        DelayLevels(config.message_delay_levels_ms),
        config.metadata_path(MetadataFile.DELAY_OFFSETS),
        clock,
        segment_bytes=config.commit_log_segment_bytes,
        persist_interval_ms=config.flush_delay_offset_interval_ms,
        flush_store=store.flush,
    )
    service.load()
    return service


def _timer_service(
    config: BrokerConfig, store: FileMessageStore, clock: Clock
) -> TimerMessageService:
    """The timer-message deliverer, its timer log opened and progress read."""
    service = TimerMessageService(
        store,
        TimerLog(timer_log_dir(config.store_path_root_dir)),
        config.config_dir / TIMER_PROGRESS_FILE_NAME,
        clock,
        segment_bytes=config.commit_log_segment_bytes,
        max_delay_ms=config.timer_max_delay_seconds * 1_000,
        persist_interval_ms=config.flush_delay_offset_interval_ms,
        flush_store=store.flush,
    )
    service.load()
    return service


def _slave_diffs(
    replication: Replication, context: BrokerContext
) -> Callable[[], list[tuple[str, int]]]:
    """(slave address, master commit-log max offset - slave's acknowledged offset) per slave
    that reported: ``rocketmq_broker_commitlog_diff``."""

    def diffs() -> list[tuple[str, int]]:
        master = replication.master
        if master is None:
            return []
        end = context.store.stats().commit_log_max_offset
        return [
            (link.peer, max(0, end - link.ack_offset))
            for link in master.links
            if link.ack_offset >= 0
        ]

    return diffs


def _sample(context: BrokerContext) -> Callable[[], Awaitable[None]]:
    async def step() -> None:
        context.stats.sample()

    return step


def _sample_history(context: BrokerContext) -> Callable[[], Awaitable[None]]:
    async def step() -> None:
        take_history_sample(context)
        try:
            await save_history(context)
        except OSError as error:  # the charts still work; the next minute tries again
            _log.warning("stats history not written: %s", error)

    return step


async def _dead_letter(send_back: SendBackService, group: str, commit_log_offset: int) -> bool:
    """Move a message POP consumers failed too often to %DLQ%group (a send-back with a
    negative delay level, as the Apache proxy does)."""
    header = ConsumerSendMsgBackRequestHeader(
        commit_log_offset=commit_log_offset, group=group, delay_level=-1
    )
    outcome = await send_back.send_back(header, VERSION_V3_4_9)
    return outcome.status in (SendBackStatus.STORED, SendBackStatus.SKIPPED)


def _starts_at_zero(context: BrokerContext, topic: str, queue_id: int) -> bool:
    """The broker's newGroupStartRule for a new POP group (the 4.x path's rule)."""
    window_bytes = memory_window_bytes(physical_memory_bytes())
    rule = context.config.new_group_start
    return starts_at_zero(rule, context.store, topic, queue_id, window_bytes)


def _max_attempts(context: BrokerContext, group: str) -> int:
    config = context.groups.subscription_group_table().get(group)
    return (config.retry_max_times if config is not None else 16) + 1


async def _notify(connection: Connection, request: RemotingCommand, timeout_ms: int) -> None:
    try:
        await connection.invoke_oneway(request, timeout_ms)
    except BolideError as error:
        # The consumer rebalances on its own timer anyway; a lost notice only delays that.
        _log.info(
            "NOTIFY_CONSUMER_IDS_CHANGED to %s not sent: %s", connection.remote_address, error
        )


async def _logged(what: str, step: Awaitable[object]) -> None:
    """Await ``step``, logging (not raising) an operating error: shutdown goes on."""
    try:
        await step
    except (BolideError, OSError) as error:
        _log.error("broker shutdown: %s failed: %s", what, error)
