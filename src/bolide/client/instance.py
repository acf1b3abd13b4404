"""ClientInstance: what the producers and consumers of one client id share (RocketMQ's rebalancing).

An explicit object, never a singleton: facades make one per producer or consumer unless the
caller passes one to share. It owns

* the connections (one :class:`~bolide.remoting.ClientPool`, whose dispatcher answers the
  requests brokers send us);
* the route table and the name-server fail-over;
* four background :class:`~bolide.base.service.Service` loops on the injected clock:

  ==============  ==============================  ===========================================
  loop            period (first run)              does
  ==============  ==============================  ===========================================
  routes          30 s (10 ms)                    refresh every topic in use from a name server
  heartbeat       30 s (1 s)                      HEART_BEAT to every broker: producer and
                                                  consumer groups (masters only when no
                                                  consumer is registered)
  persist         5 s (10 s)                      each consumer's ``persist_offsets``
  rebalance       20 s, and at once when woken    each consumer's ``do_rebalance``
  ==============  ==============================  ===========================================

* the broker requests: NOTIFY_CONSUMER_IDS_CHANGED wakes the rebalance loop;
  CHECK_TRANSACTION_STATE goes to the transaction producer of the half message's group;
  RESET_CONSUMER_CLIENT_OFFSET (Java object-key body or C++ list body) and
  GET_CONSUMER_RUNNING_INFO go to the registered consumer of the group.

Consumers plug in through :class:`InstanceConsumer` (the push and pull consumers implement
it). Lifecycle: :meth:`ClientInstance.acquire` / :meth:`ClientInstance.release` count users;
the first acquire starts the loops, the last release stops them and closes the connections.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import Protocol, TypeVar, runtime_checkable

from bolide.base import limits
from bolide.base.clock import Clock, SystemClock
from bolide.base.errors import (
    BolideError,
    ConfigError,
    InvariantViolationError,
    NameServerUnavailableError,
    NoRouteError,
    ProtocolError,
    RemoteError,
    TopicNotFoundError,
    TransportError,
    invariant,
)
from bolide.base.service import Service
from bolide.client import rpc
from bolide.client.config import ClientConfig
from bolide.client.reply import ReplyWaiters, answer_pushed_reply
from bolide.client.route import DEFAULT_TOPIC, RouteTable, TopicRoute, default_topic_route
from bolide.protocol.bodies import (
    MASTER_BROKER_ID,
    ConsumerData,
    ConsumerRunningInfo,
    HeartbeatData,
    MessageQueue,
    ProducerData,
    ResetOffsetBody,
    TopicRouteData,
)
from bolide.protocol.bodies.consumer_status import GetConsumerStatusBody
from bolide.protocol.bodies.stats import ConsumeMessageDirectlyResult
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import BOLIDE_WIRE_VERSION, RemotingCommand
from bolide.protocol.headers import (
    CheckTransactionStateRequestHeader,
    ConsumeMessageDirectlyResultRequestHeader,
    ConsumerGroupRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetConsumerStatusRequestHeader,
    ResetOffsetRequestHeader,
)
from bolide.protocol.message import MessageExt, PropertyKey
from bolide.protocol.record import decode_record
from bolide.remoting import ClientPool, Connection, ConnectionSettings, Dispatcher

__all__ = ["ClientInstance", "InstanceConsumer", "TransactionCheckHandler"]

TransactionCheckHandler = Callable[
    [Connection, CheckTransactionStateRequestHeader, MessageExt], None
]
"""Takes a CHECK_TRANSACTION_STATE (the connection it came on, its header, the decoded half
message) and must not block: it schedules the check and the answer."""
_PRODUCER_GROUP_PROPERTY = PropertyKey.PGROUP

_log = logging.getLogger("bolide.client.instance")

T = TypeVar("T")

BROKER_REQUEST_FAMILY = "client"
"""Dispatcher family of the requests brokers send to clients."""
PROPERTY_NAMESRV_ADDRESS = "PROP_NAMESERVER_ADDR"
PROPERTY_CLIENT_VERSION = "PROP_CLIENT_VERSION"
PROPERTY_CLIENT_ID = "PROP_CLIENT_ID"


class InstanceConsumer(Protocol):
    """What a consumer gives the instance it registers with."""

    @property
    def group(self) -> str:
        """The consumer group (one consumer per group per instance)."""
        ...

    def consumer_data(self) -> ConsumerData:
        """The group as the next heartbeat reports it (model, consume-from, subscriptions)."""
        ...

    def subscribed_topics(self) -> Collection[str]:
        """Topics whose routes the instance must keep fresh (retry topic included)."""
        ...

    async def do_rebalance(self) -> None:
        """Recompute and apply this consumer's queues (called every 20 s and on notify)."""
        ...

    async def persist_offsets(self) -> None:
        """Persist the consumed offsets (called every 5 s)."""
        ...

    async def reset_offsets(self, topic: str, offsets: Mapping[MessageQueue, int]) -> None:
        """Move the consumer of ``topic`` to ``offsets`` (broker-pushed reset)."""
        ...

    def running_info(self) -> ConsumerRunningInfo:
        """The consumer's state for GET_CONSUMER_RUNNING_INFO."""
        ...


@runtime_checkable
class DirectConsumer(Protocol):
    """A consumer that can run its listener on one message on request (push consumers)."""

    async def consume_directly(
        self, message: MessageExt, broker_name: str
    ) -> ConsumeMessageDirectlyResult | None:
        """CONSUME_MESSAGE_DIRECTLY: the listener's verdict (None: cannot consume so)."""
        ...


class ClientInstance:
    """The shared client machinery of one client id; see the module docstring.

    ``clock`` (default: the system clock) times the loops and the reconnect back-off;
    ``connection_settings`` bounds the connections. Nothing runs before :meth:`start`.
    """

    def __init__(
        self,
        config: ClientConfig,
        *,
        clock: Clock | None = None,
        connection_settings: ConnectionSettings | None = None,
    ) -> None:
        self.config = config
        self.clock: Clock = clock or SystemClock()
        self.routes = RouteTable()
        self._connection_settings = connection_settings
        self._producers: set[str] = set()
        self.replies = ReplyWaiters()
        """Requests of this client's request producers waiting for their replies."""
        self._publish_topics: set[str] = set()
        self._consumers: dict[str, InstanceConsumer] = {}
        self._transaction_checkers: dict[str, TransactionCheckHandler] = {}
        self._pool: ClientPool | None = None
        self._services: dict[str, Service] = {}
        self._users = 0
        self._lifecycle = asyncio.Lock()
        self._namesrv_index = 0
        self.broker_versions: dict[str, int] = {}
        """Broker address -> wire version from its last heartbeat answer."""
        self.crash: BaseException | None = None
        """Set when a background loop died of an unexpected error (it is logged too)."""
        self._urgent_refresh_ms: dict[str, int] = {}
        self._urgent_refreshes: dict[str, asyncio.Task[TopicRoute | None]] = {}

    @property
    def client_id(self) -> str:
        return self.config.client_id

    @property
    def pool(self) -> ClientPool:
        """The connections; only while started."""
        pool = self._pool
        if pool is None:
            raise InvariantViolationError(f"client instance {self.client_id} used while stopped")
        return pool

    @property
    def running(self) -> bool:
        return self._pool is not None

    # ---- lifecycle -------------------------------------------------------------------------

    async def acquire(self) -> None:
        """Count one more user; the first one starts the instance."""
        async with self._lifecycle:  # a release shutting down finishes before we start again
            if self._users == 0 and not self.running:
                await self.start()
            self._users += 1

    async def release(self) -> None:
        """Count one user less; the last one shuts the instance down."""
        async with self._lifecycle:
            invariant(self._users > 0, "client instance released more often than acquired")
            self._users -= 1
            if self._users == 0:
                await self.shutdown()

    async def start(self) -> None:
        """Open the connection pool and start the four loops. Idempotent."""
        if self._pool is not None:
            return
        dispatcher = Dispatcher()
        for code, handler in (
            (RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, self._on_notify),
            (RequestCode.RESET_CONSUMER_CLIENT_OFFSET, self._on_reset),
            (RequestCode.GET_CONSUMER_RUNNING_INFO, self._on_running_info),
            (RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT, self._on_consumer_status),
            (RequestCode.CHECK_TRANSACTION_STATE, self._on_check_transaction),
            (RequestCode.CONSUME_MESSAGE_DIRECTLY, self._on_consume_directly),
            (RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, self._on_pushed_reply),
        ):
            dispatcher.register(code, handler, family=BROKER_REQUEST_FAMILY)
        credentials = self.config.credentials
        self._pool = ClientPool(
            dispatcher,
            settings=self._connection_settings,
            clock=self.clock,
            request_hook=None if credentials is None else credentials.sign,
            tls=self.config.tls,
        )
        config = self.config
        loops = (
            ("routes", self._route_step, config.route_poll_interval_ms,
             limits.ROUTE_POLL_INITIAL_DELAY_MS),
            ("heartbeat", self.send_heartbeat_to_all_brokers, config.heartbeat_interval_ms,
             limits.HEARTBEAT_INITIAL_DELAY_MS),
            ("persist", self._persist_step, config.persist_offsets_interval_ms,
             limits.CONSUMER_OFFSET_PERSIST_INITIAL_DELAY_MS),
            ("rebalance", self._rebalance_step, config.rebalance_interval_ms,
             config.rebalance_interval_ms),
        )  # fmt: skip
        for name, step, interval_ms, initial_delay_ms in loops:
            service = Service(
                f"{self.client_id}:{name}",
                step,
                interval_ms=interval_ms,
                clock=self.clock,
                on_crash=self._on_service_crash,
                initial_delay_ms=initial_delay_ms,
            )
            self._services[name] = service
            service.start()
        _log.info("client %s started (name servers %s)", self.client_id, config.namesrv_addresses)

    async def shutdown(self) -> None:
        """Stop the loops (rebalance first: no new queues), then close the connections.
        Idempotent. Groups should have unregistered before (their own shutdown does it)."""
        pool = self._pool
        if pool is None:
            return
        for name in ("rebalance", "persist", "heartbeat", "routes"):
            service = self._services.pop(name, None)
            if service is not None:
                await service.stop(limits.REMOTING_STOP_GRACE_MS)
        self._pool = None
        await pool.close()
        _log.info("client %s shut down", self.client_id)

    def _on_service_crash(self, service: Service, error: BaseException) -> None:
        self.crash = service.crash or error
        _log.error("client %s: background loop %s stopped: %s", self.client_id, service.name, error)

    # ---- registration ------------------------------------------------------------------------

    def register_producer(self, group: str) -> None:
        """Add a producer group (reported by heartbeats).

        Raises:
            ConfigError: the group is already registered on this instance.
        """
        if group in self._producers:
            raise ConfigError(f"producer group {group!r} already runs on client {self.client_id}")
        self._producers.add(group)

    async def unregister_producer(self, group: str) -> None:
        """Drop a producer group and tell every known broker (errors are logged)."""
        self._producers.discard(group)
        await self._unregister_everywhere(producer_group=group)

    def register_transaction_checker(self, group: str, handler: TransactionCheckHandler) -> None:
        """Send CHECK_TRANSACTION_STATE requests for producer ``group`` to ``handler``
        (its transaction producer); ``None``-safe to call again after a restart."""
        self._transaction_checkers[group] = handler

    def unregister_transaction_checker(self, group: str) -> None:
        self._transaction_checkers.pop(group, None)

    def register_consumer(self, consumer: InstanceConsumer) -> None:
        """Add a consumer (its group must be new on this instance).

        Raises:
            ConfigError: another consumer of the group is registered here.
        """
        if consumer.group in self._consumers:
            raise ConfigError(
                f"consumer group {consumer.group!r} already runs on client {self.client_id}"
            )
        self._consumers[consumer.group] = consumer

    async def unregister_consumer(self, group: str) -> None:
        """Drop a consumer group and tell every known broker, so the group rebalances."""
        self._consumers.pop(group, None)
        await self._unregister_everywhere(consumer_group=group)

    def consumer(self, group: str) -> InstanceConsumer | None:
        """The registered consumer of ``group``, or None."""
        return self._consumers.get(group)

    async def _unregister_everywhere(
        self, *, producer_group: str | None = None, consumer_group: str | None = None
    ) -> None:
        if self._pool is None:
            return
        for _, _, address in self.routes.addresses(masters_only=False):
            try:
                await rpc.unregister_client(
                    self.pool,
                    address,
                    self.client_id,
                    self.config.api_timeout_ms,
                    producer_group=producer_group,
                    consumer_group=consumer_group,
                )
            except BolideError as error:
                _log.warning("unregister from %s failed: %s", address, error)

    # ---- name servers and routes -------------------------------------------------------------

    async def _namesrv_call(
        self, action: Callable[[str, int], Awaitable[T]], what: str, timeout_ms: int
    ) -> T:
        """Run ``action(address, remaining_ms)`` on the current name server, failing over to
        the next ones when one cannot be reached, within ``timeout_ms`` in all."""
        addresses = self.config.namesrv_addresses
        deadline_ms = self.clock.monotonic_ms() + timeout_ms
        failures: list[str] = []
        last_error: BolideError | None = None
        for attempt in range(len(addresses)):
            index = (self._namesrv_index + attempt) % len(addresses)
            remaining_ms = deadline_ms - self.clock.monotonic_ms()
            if remaining_ms <= 0:
                break
            try:
                result = await action(addresses[index], remaining_ms)
            except TransportError as error:
                failures.append(f"{addresses[index]}: {error}")
                last_error = error
                continue
            self._namesrv_index = index
            return result
        tried = "; ".join(failures) or "no time left"
        raise NameServerUnavailableError(
            f"no name server answered {what} within {timeout_ms} ms ({tried})"
        ) from last_error

    async def fetch_route(self, topic: str, timeout_ms: int | None = None) -> TopicRouteData:
        """The route of ``topic`` from a name server (not stored).

        Raises:
            RemoteError: TOPIC_NOT_EXIST (17) when no broker holds the topic.
            NameServerUnavailableError: no name server answered within ``timeout_ms``
                (default: the config's api timeout).
        """
        timeout_ms = timeout_ms or self.config.api_timeout_ms

        async def action(address: str, remaining_ms: int) -> TopicRouteData:
            return await rpc.get_route(self.pool, address, topic, remaining_ms)

        return await self._namesrv_call(action, f"the route of {topic!r}", timeout_ms)

    async def update_route(self, topic: str) -> TopicRoute | None:
        """Fetch and store ``topic``'s route; returns it, or None when the name servers know
        no broker for it (the stored route, if any, is kept).

        Raises NameServerUnavailableError.
        """
        try:
            data = await self.fetch_route(topic)
        except RemoteError as error:
            if error.code != ResponseCode.TOPIC_NOT_EXIST:
                raise
            return None
        if self.routes.update(topic, data):
            _log.info("route of %s changed: %s", topic, data)
        return self.routes.get(topic)

    async def refresh_route_after_failure(self, topic: str) -> TopicRoute | None:
        """Refresh ``topic``'s route now: a broker of it failed (connection error, timeout, or
        a not-master answer), so the route may name a dead or deposed master.

        Fetches at most once per ``limits.ROUTE_REFRESH_MIN_INTERVAL_MS`` per topic; callers
        arriving while a fetch runs share it. Returns the stored route afterwards (None when
        there is none). A name-server failure is logged, not raised: the 30 s poll retries.
        """
        running = self._urgent_refreshes.get(topic)
        if running is not None:
            return await asyncio.shield(running)
        now_ms = self.clock.monotonic_ms()
        last_ms = self._urgent_refresh_ms.get(topic)
        if last_ms is not None and now_ms - last_ms < limits.ROUTE_REFRESH_MIN_INTERVAL_MS:
            return self.routes.get(topic)
        self._urgent_refresh_ms[topic] = now_ms
        task = asyncio.get_running_loop().create_task(self._urgent_refresh(topic))
        self._urgent_refreshes[topic] = task
        task.add_done_callback(lambda _: self._urgent_refreshes.pop(topic, None))
        return await asyncio.shield(task)

    @property
    def urgent_route_refreshes(self) -> int:
        """Topics refreshed out of turn so far (each at most once per interval)."""
        return len(self._urgent_refresh_ms)

    async def _urgent_refresh(self, topic: str) -> TopicRoute | None:
        try:
            await self.update_route(topic)
        except BolideError as error:
            _log.warning("route refresh of %s after a broker failure failed: %s", topic, error)
        return self.routes.get(topic)

    def stored_publish_route(self, topic: str) -> TopicRoute | None:
        """:meth:`publish_route`'s answer when the stored route has writable queues, without
        an await (every send asks); None when :meth:`publish_route` has more to do."""
        self._publish_topics.add(topic)
        route = self.routes.get(topic)
        return route if route is not None and route.publish_queues else None

    async def publish_route(
        self,
        topic: str,
        *,
        default_topic: str = DEFAULT_TOPIC,
        default_topic_queue_count: int = limits.PRODUCER_DEFAULT_TOPIC_QUEUE_COUNT,
    ) -> TopicRoute:
        """A route with writable queues for ``topic``, for a producer.

        The stored one if it has queues; else a fresh one; else, when the name servers do not
        know the topic, ``default_topic``'s route clamped to ``default_topic_queue_count``
        queues (the broker creates the topic on the first send), as Java producers do.

        Raises:
            TopicNotFoundError: neither the topic nor the default topic has a route.
            NoRouteError: the route has no writable queue (no master, or no write perm).
            NameServerUnavailableError: no name server answered.
        """
        route = self.stored_publish_route(topic)
        if route is not None:
            return route
        route = await self.update_route(topic)
        if route is None:
            try:
                default_data = await self.fetch_route(default_topic)
            except RemoteError as error:
                if error.code != ResponseCode.TOPIC_NOT_EXIST:
                    raise
                raise TopicNotFoundError(
                    f"topic {topic!r} does not exist, and it cannot be created automatically:"
                    f" the name servers know no broker for {default_topic!r} either"
                    " (create the topic, or enable autoCreateTopicEnable on a broker)"
                ) from error
            clamped = default_topic_route(default_data, default_topic_queue_count)
            self.routes.update(topic, clamped, borrowed=True)
            route = self.routes.get(topic)
        if route is None:
            raise InvariantViolationError(f"the route of {topic!r} was just stored")
        if not route.publish_queues:
            raise NoRouteError(
                f"topic {topic!r} has no writable queue: no broker holding it has a master"
                " with write permission"
            )
        return route

    def subscribe_queues(self, topic: str) -> list[MessageQueue] | None:
        """The readable queues of ``topic`` by the stored route, sorted (None: no route)."""
        route = self.routes.get(topic)
        return None if route is None else list(route.subscribe_queues)

    async def update_all_routes(self) -> None:
        """Refresh the route of every topic a producer sent to or a consumer subscribes to.
        Failures are logged per topic (a name server outage must not stop the loop)."""
        topics = set(self._publish_topics)
        for consumer in list(self._consumers.values()):
            topics.update(consumer.subscribed_topics())
        for topic in sorted(topics):
            try:
                await self.update_route(topic)
            except BolideError as error:
                _log.warning("route refresh of %s failed: %s", topic, error)

    async def _route_step(self) -> None:
        await self.update_all_routes()

    # ---- brokers ----------------------------------------------------------------------------

    def broker_address(self, broker_name: str, broker_id: int = MASTER_BROKER_ID) -> str | None:
        """The address of ``broker_id`` of ``broker_name``, else its master, else any."""
        address = self.routes.brokers.get(broker_name, {}).get(broker_id)
        return address or self.routes.broker_address(broker_name)

    async def queue_broker_address(self, queue: MessageQueue) -> str:
        """The address to ask about ``queue`` (its broker's master when known), refreshing
        the topic's route once when the broker is unknown.

        Raises NoRouteError (still unknown), NameServerUnavailableError.
        """
        address = self.broker_address(queue.broker_name)
        if address is None:
            await self.update_route(queue.topic)
            address = self.broker_address(queue.broker_name)
        if address is None:
            raise NoRouteError(f"no address known for broker {queue.broker_name!r} of {queue}")
        return address

    async def max_offset(self, queue: MessageQueue) -> int:
        """The queue's max offset (exclusive). Raises NoRouteError, RemoteError, transport."""
        address = await self.queue_broker_address(queue)
        timeout_ms = self.config.api_timeout_ms
        return await rpc.get_max_offset(self.pool, address, queue.topic, queue.queue_id, timeout_ms)

    async def min_offset(self, queue: MessageQueue) -> int:
        """The queue's min offset. Raises NoRouteError, RemoteError, transport."""
        address = await self.queue_broker_address(queue)
        timeout_ms = self.config.api_timeout_ms
        return await rpc.get_min_offset(self.pool, address, queue.topic, queue.queue_id, timeout_ms)

    async def search_offset(self, queue: MessageQueue, timestamp_ms: int) -> int:
        """The queue offset stored nearest ``timestamp_ms``. Raises as :meth:`max_offset`."""
        address = await self.queue_broker_address(queue)
        return await rpc.search_offset_by_timestamp(
            self.pool,
            address,
            queue.topic,
            queue.queue_id,
            timestamp_ms,
            self.config.api_timeout_ms,
        )

    async def find_consumer_ids(self, topic: str, group: str) -> list[str] | None:
        """The client ids of ``group`` as a broker holding ``topic`` lists them: the first
        broker that answers, in name order. None when no broker of the topic is known or
        none answered (logged), as Java's findConsumerIdList.

        Raises NameServerUnavailableError (the route had to be fetched and could not be).
        """
        route = self.routes.get(topic) or await self.update_route(topic)
        names = sorted({b.broker_name for b in route.data.broker_datas}) if route else []
        for name in names:
            address = self.routes.broker_address(name)
            if address is None:
                continue
            try:
                return await rpc.get_consumer_list_by_group(
                    self.pool, address, group, self.config.api_timeout_ms
                )
            except BolideError as error:
                _log.warning("consumers of %s from %s: %s", group, address, error)
        return None

    def heartbeat_data(self) -> HeartbeatData:
        """The HEART_BEAT body of this client right now."""
        return HeartbeatData(
            self.client_id,
            tuple(ProducerData(group) for group in sorted(self._producers)),
            tuple(consumer.consumer_data() for consumer in list(self._consumers.values())),
        )

    async def send_heartbeat_to_all_brokers(self) -> None:
        """HEART_BEAT to every known broker (masters only when no consumer is registered);
        a broker that fails is logged and skipped."""
        if self._pool is None or (not self._producers and not self._consumers):
            return
        data = self.heartbeat_data()
        targets = self.routes.addresses(masters_only=not self._consumers)
        results = await asyncio.gather(
            *(
                rpc.heartbeat(self.pool, address, data, self.config.api_timeout_ms)
                for _, _, address in targets
            ),
            return_exceptions=True,
        )
        for (_, _, address), result in zip(targets, results, strict=True):
            if isinstance(result, BaseException):
                if not isinstance(result, BolideError):
                    raise result
                _log.warning("heartbeat to %s failed: %s", address, result)
            else:
                self.broker_versions[address] = result

    # ---- consumers' loops -------------------------------------------------------------------

    def rebalance_now(self) -> None:
        """Run every consumer's rebalance at once (on the rebalance loop)."""
        service = self._services.get("rebalance")
        if service is not None:
            service.wakeup()

    async def _rebalance_step(self) -> None:
        await self._each_consumer(lambda consumer: consumer.do_rebalance(), "rebalance")

    async def _persist_step(self) -> None:
        await self.persist_all_offsets()

    async def persist_all_offsets(self) -> None:
        """Every consumer's ``persist_offsets``; failures are logged."""
        await self._each_consumer(lambda consumer: consumer.persist_offsets(), "offset persistence")

    async def _each_consumer(
        self, step: Callable[[InstanceConsumer], Awaitable[None]], what: str
    ) -> None:
        """``step`` on every registered consumer in turn; an operating error (BolideError) is
        logged as ``what`` of that consumer's group failing and the others still run."""
        for consumer in list(self._consumers.values()):
            try:
                await step(consumer)
            except BolideError as error:
                _log.warning("%s of group %s failed: %s", what, consumer.group, error)

    # ---- requests from brokers ----------------------------------------------------------------

    async def _on_notify(self, connection: Connection, request: RemotingCommand) -> None:
        header = ConsumerGroupRequestHeader.from_ext_fields(request.ext_fields)
        _log.info(
            "broker %s: consumers of %s changed; rebalancing",
            connection.remote_address,
            header.consumer_group,
        )
        self.rebalance_now()

    async def _on_check_transaction(self, connection: Connection, request: RemotingCommand) -> None:
        """CHECK_TRANSACTION_STATE (oneway): hand it to the producer of the group the half
        message names (its PGROUP property), as Java's ClientRemotingProcessor does."""
        try:
            header = CheckTransactionStateRequestHeader.from_ext_fields(request.ext_fields)
            message, _ = decode_record(request.body)
        except ProtocolError as error:
            _log.warning("bad CHECK_TRANSACTION_STATE from %s: %s", connection.remote_address,
                         error)  # fmt: skip
            return
        group = message.properties.get(_PRODUCER_GROUP_PROPERTY, "")
        handler = self._transaction_checkers.get(group)
        if handler is None:
            _log.warning("CHECK_TRANSACTION_STATE for group %r, which no transaction producer "
                         "here runs; ignored", group)  # fmt: skip
            return
        handler(connection, header, message)

    async def _on_reset(self, connection: Connection, request: RemotingCommand) -> None:
        header = ResetOffsetRequestHeader.from_ext_fields(request.ext_fields)
        offsets = ResetOffsetBody.from_json(request.body).offset_table if request.body else {}
        consumer = self._consumers.get(header.group)
        if consumer is None:
            _log.warning("reset of offsets for unknown group %s ignored", header.group)
            return
        _log.info(
            "broker %s resets %s of %s to %s",
            connection.remote_address,
            header.topic,
            header.group,
            offsets,
        )
        await consumer.reset_offsets(header.topic, offsets)
        self.rebalance_now()

    def _not_running_here(self, request: RemotingCommand, group: str) -> RemotingCommand:
        """SYSTEM_ERROR answering a broker's request about consumer ``group``, which no
        consumer of this client instance runs."""
        remark = f"the consumer group {group} does not run in {self.client_id}"
        return request.make_response(ResponseCode.SYSTEM_ERROR, remark)

    async def _on_running_info(
        self, connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """GET_CONSUMER_RUNNING_INFO (307): the group's running info, with this client's name
        servers, wire version and id added to its properties."""
        header = GetConsumerRunningInfoRequestHeader.from_ext_fields(request.ext_fields)
        consumer = self._consumers.get(header.consumer_group)
        if consumer is None:
            return self._not_running_here(request, header.consumer_group)
        info = consumer.running_info()
        properties = {
            **info.properties,
            PROPERTY_NAMESRV_ADDRESS: ";".join(self.config.namesrv_addresses),
            PROPERTY_CLIENT_VERSION: str(BOLIDE_WIRE_VERSION),
            PROPERTY_CLIENT_ID: self.client_id,
        }
        info = dataclasses.replace(info, properties=properties)
        return request.make_response(ResponseCode.SUCCESS, body=info.to_json())

    async def _on_consumer_status(
        self, connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """GET_CONSUMER_STATUS_FROM_CLIENT (221): the group's committed offsets of the topic
        on the queues it holds (Java answers its offset store's table of the topic)."""
        header = GetConsumerStatusRequestHeader.from_ext_fields(request.ext_fields)
        consumer = self._consumers.get(header.group)
        if consumer is None:
            return self._not_running_here(request, header.group)
        table = {
            queue: int(info.get("commitOffset", -1))
            for queue, info in consumer.running_info().mq_table.items()
            if queue.topic == header.topic
        }
        body = GetConsumerStatusBody(message_queue_table=table)
        return request.make_response(ResponseCode.SUCCESS, body=body.to_json())

    async def _on_pushed_reply(
        self, connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        return await answer_pushed_reply(self.replies, request)

    async def _on_consume_directly(
        self, connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """CONSUME_MESSAGE_DIRECTLY (309): hand the message in the body to the group's
        listener and answer its verdict; SYSTEM_ERROR when the group cannot consume so."""
        header = ConsumeMessageDirectlyResultRequestHeader.from_ext_fields(request.ext_fields)
        consumer = self._consumers.get(header.consumer_group)
        if consumer is None:
            return self._not_running_here(request, header.consumer_group)
        try:
            message, _ = decode_record(request.body)
        except ProtocolError as error:
            return request.make_response(ResponseCode.SYSTEM_ERROR, f"bad message: {error}")
        result = None
        if isinstance(consumer, DirectConsumer):
            result = await consumer.consume_directly(message, header.broker_name or "")
        if result is None:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR,
                f"the consumer group {header.consumer_group} cannot consume directly "
                "(pull or orderly consumer)",
            )
        return request.make_response(ResponseCode.SUCCESS, body=result.to_json())
