"""AdminClient: the operations of mqadmin and the RocketMQ dashboard, as coroutines.

One object per session: it keeps a connection pool to the name servers and brokers and asks
them with the admin requests of protocol.md §2.3 and §2.11 (:mod:`.admin_requests`). It works
against Bolide and against Apache RocketMQ 4.x brokers. Used by the ``bolide`` command line
and the dashboard; ``bolide.AdminClient`` is its blocking facade.

::

    async with AdminClient("127.0.0.1:9876") as admin:
        await admin.create_topic("orders", queue_count=8)
        progress = await admin.group_progress("billing")
        await admin.reset_offset("billing", "orders", RESET_TO_EARLIEST)

Which brokers an operation asks: topic operations the masters in the topic's route (creation:
every master, or those of ``cluster`` / ``brokers``); group operations every master of every
cluster the name servers know (a group lives on every broker its consumers talk to). Requests
fan out with at most ADMIN_IN_FLIGHT_MAX_REQUESTS in flight. Every request has the client's
``timeout_ms`` (default ADMIN_REQUEST_TIMEOUT_MS, 5 s).

Errors: :class:`~bolide.base.errors.NameServerUnavailableError` when no name server answers,
:class:`~bolide.base.errors.TopicNotFoundError` / :class:`~bolide.base.errors.GroupNotFoundError`
/ :class:`~bolide.base.errors.MessageNotFoundError` for what does not exist,
:class:`~bolide.base.errors.RemoteError` for a broker's refusal, transport errors for a
broker that cannot be reached.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Sequence
from typing import TypeVar

from bolide.base import limits
from bolide.base.clock import Clock, SystemClock
from bolide.base.errors import (
    BolideError,
    ConnectionClosedError,
    GroupNotFoundError,
    InvariantViolationError,
    NameServerUnavailableError,
    NoRouteError,
    NotFoundError,
    RemoteError,
    RequestTimeoutError,
    TopicNotFoundError,
)
from bolide.client import admin_messages, admin_progress
from bolide.client import admin_operations as operations
from bolide.client import admin_requests as requests
from bolide.client.admin_operations import ADMIN_PRODUCER_GROUP
from bolide.client.admin_views import (
    BrokerSummary,
    GroupProgress,
    GroupSummary,
    QueueStatus,
    ResendOutcome,
    ResetResult,
)
from bolide.client.config import parse_namesrv_addresses
from bolide.client.lifecycle import AsyncLifecycle
from bolide.client.message import SendResult
from bolide.client.producer.producer import Producer
from bolide.client.rpc import get_route
from bolide.client.security import TlsClientSettings, client_tls, credentials_of
from bolide.protocol.bodies import (
    MASTER_BROKER_ID,
    PERM_READ,
    PERM_WRITE,
    ClusterInfo,
    Connection,
    ConsumerConnection,
    ConsumerRunningInfo,
    ConsumeStats,
    SubscriptionGroupConfig,
    TopicConfig,
    TopicRouteData,
)
from bolide.protocol.codes import ResponseCode
from bolide.protocol.headers import CloneGroupOffsetRequestHeader
from bolide.protocol.message import Message, MessageExt
from bolide.remoting import ClientPool

__all__ = [
    "ADMIN_PRODUCER_GROUP",
    "RESET_TO_EARLIEST",
    "RESET_TO_LATEST",
    "AdminClient",
    "ProgressCallback",
]

T = TypeVar("T")

RESET_TO_LATEST = -1
"""Reset timestamp meaning "to the max offset": skip everything not consumed yet."""
RESET_TO_EARLIEST = 0
"""Reset timestamp before every message: back to the min offset (everything still stored)."""
DEFAULT_QUEUE_COUNT = 8
"""Queues of a topic created without a count (mqadmin updateTopic's default)."""

ProgressCallback = Callable[[int, int], None]
"""``on_progress(done, total)``: called as a long operation moves (queues read, messages
resent)."""


class AdminClient(AsyncLifecycle):
    """Administration of a Bolide (or RocketMQ 4.x) cluster reached through ``namesrv``
    (``"host:port;host:port"``). See the module docstring.

    Raises ConfigError for a malformed name-server list.
    """

    def __init__(
        self,
        namesrv: str | Iterable[str],
        *,
        timeout_ms: int = limits.ADMIN_REQUEST_TIMEOUT_MS,
        clock: Clock | None = None,
        access_key: str | None = None,
        secret_key: str | None = None,
        tls: TlsClientSettings | bool | None = None,
    ) -> None:
        self.namesrv_addresses = parse_namesrv_addresses(namesrv)
        self.credentials = credentials_of(access_key, secret_key)
        """Sign every request (ACL); see :mod:`bolide.client.security`."""
        self.tls = client_tls(tls)
        self.timeout_ms = timeout_ms
        self.clock: Clock = clock or SystemClock()
        self._pool: ClientPool | None = None
        self._producer: Producer | None = None
        self._namesrv_index = 0

    # ---- lifecycle ---------------------------------------------------------------------------

    @property
    def pool(self) -> ClientPool:
        """The connections; only between :meth:`start` and :meth:`close`."""
        if self._pool is None:
            raise InvariantViolationError("AdminClient used before start() or after close()")
        return self._pool

    async def start(self) -> None:
        """Open the connection pool (connections are made on first use). Idempotent."""
        if self._pool is None:
            credentials = self.credentials
            self._pool = ClientPool(
                clock=self.clock,
                request_hook=None if credentials is None else credentials.sign,
                tls=self.tls,
            )

    async def close(self) -> None:
        """Shut the internal producer down (if one was made) and close every connection."""
        producer, self._producer = self._producer, None
        if producer is not None:
            await producer.shutdown()
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    async def _close(self) -> None:
        await self.close()

    # ---- plumbing ----------------------------------------------------------------------------

    async def _namesrv(self, action: Callable[[str], Awaitable[T]], what: str) -> T:
        """``action(address)`` on the name servers in turn until one answers.

        Raises NameServerUnavailableError naming every address and why it failed.
        """
        addresses = self.namesrv_addresses
        failures: list[str] = []
        last: BolideError | None = None
        for attempt in range(len(addresses)):
            index = (self._namesrv_index + attempt) % len(addresses)
            try:
                result = await action(addresses[index])
            except (ConnectionClosedError, RequestTimeoutError) as error:
                failures.append(f"{addresses[index]}: {operations.reason(error)}")
                last = error
                continue
            self._namesrv_index = index
            return result
        raise NameServerUnavailableError(
            f"no name server answered {what} ({'; '.join(failures)})"
        ) from last

    async def fan_out(self, calls: Sequence[Awaitable[T]]) -> list[T | BolideError]:
        """Await ``calls`` (coroutines, not yet started) with at most
        ADMIN_IN_FLIGHT_MAX_REQUESTS running at once; each result is the value or the
        operating error it raised, in the order of ``calls``."""
        gate = asyncio.Semaphore(limits.ADMIN_IN_FLIGHT_MAX_REQUESTS)

        async def one(call: Awaitable[T]) -> T | BolideError:
            async with gate:
                try:
                    return await call
                except BolideError as error:
                    return error

        return list(await asyncio.gather(*(one(call) for call in calls)))

    # ---- clusters and brokers -----------------------------------------------------------------

    async def cluster_info(self) -> ClusterInfo:
        """Clusters and brokers as the name servers know them."""
        return await self._namesrv(
            lambda address: requests.get_cluster_info(self.pool, address, self.timeout_ms),
            "the cluster list",
        )

    async def master_addresses(self, *, cluster: str | None = None) -> dict[str, str]:
        """Broker name -> master address, of ``cluster`` or of every cluster.

        Raises NotFoundError for an unknown cluster; NoRouteError when no master is registered.
        """
        info = await self.cluster_info()
        if cluster is not None and cluster not in info.cluster_addr_table:
            known = ", ".join(sorted(info.cluster_addr_table)) or "none"
            raise NotFoundError(f"no cluster named {cluster!r} (known: {known})")
        names = info.cluster_addr_table[cluster] if cluster else tuple(info.broker_addr_table)
        masters = {}
        for name in sorted(names):
            data = info.broker_addr_table.get(name)
            if data is not None and data.master_addr is not None:
                masters[name] = data.master_addr
        if not masters:
            raise NoRouteError("no broker master is registered with the name servers")
        return masters

    async def resolve_brokers(self, brokers: Iterable[str]) -> dict[str, str]:
        """Broker name (or ``host:port``) -> master address. Raises NotFoundError."""
        info = await self.cluster_info()
        addresses = {
            address: name
            for name, data in info.broker_addr_table.items()
            for address in data.broker_addrs.values()
        }
        resolved: dict[str, str] = {}
        for broker in brokers:
            data = info.broker_addr_table.get(broker)
            if data is not None and data.master_addr is not None:
                resolved[broker] = data.master_addr
            elif broker in addresses:
                resolved[addresses[broker]] = broker
            else:
                raise NotFoundError(f"no broker named {broker!r} is registered")
        return resolved

    async def list_brokers(self) -> list[BrokerSummary]:
        """Every broker address of every cluster, with version and today's put/get counts
        (a broker that does not answer has ``error`` set)."""
        return await operations.list_brokers(self)

    async def broker_runtime_info(self, address: str) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO of the broker at ``address``: counters as strings."""
        return await requests.get_broker_runtime_info(self.pool, address, self.timeout_ms)

    # ---- topics ------------------------------------------------------------------------------

    async def topic_list(self) -> list[str]:
        """Every topic with a route, sorted (retry, DLQ and system topics included)."""
        topics = await self._namesrv(
            lambda address: requests.get_topic_list(self.pool, address, self.timeout_ms),
            "the topic list",
        )
        return sorted(topics)

    async def topic_route(self, topic: str) -> TopicRouteData:
        """The topic's route. Raises TopicNotFoundError when no broker holds it."""

        async def action(address: str) -> TopicRouteData:
            try:
                return await get_route(self.pool, address, topic, self.timeout_ms)
            except RemoteError as error:
                if error.code == ResponseCode.TOPIC_NOT_EXIST:
                    raise TopicNotFoundError(f"topic {topic!r} does not exist") from error
                raise

        return await self._namesrv(action, f"the route of {topic!r}")

    async def topic_masters(self, topic: str) -> dict[str, str]:
        """Broker name -> master address of the brokers holding ``topic``."""
        route = await self.topic_route(topic)
        masters = {
            data.broker_name: address
            for data in route.broker_datas
            if (address := data.broker_addrs.get(MASTER_BROKER_ID)) is not None
        }
        if not masters:
            raise NoRouteError(f"no broker holding topic {topic!r} has a master")
        return dict(sorted(masters.items()))

    async def create_topic(
        self,
        topic: str,
        *,
        queue_count: int = DEFAULT_QUEUE_COUNT,
        read_queue_count: int | None = None,
        write_queue_count: int | None = None,
        perm: int = PERM_READ | PERM_WRITE,
        order: bool = False,
        cluster: str | None = None,
        brokers: Iterable[str] = (),
    ) -> list[str]:
        """Create (or replace) ``topic`` on the given brokers, else on every master of
        ``cluster``, else on every master; returns the broker names. Each broker registers
        the topic with the name servers before it answers.

        Raises RemoteError (an invalid or system topic), NotFoundError (unknown broker or
        cluster), transport errors.
        """
        targets = await self._targets(cluster, brokers)
        config = TopicConfig(
            topic,
            read_queue_count if read_queue_count is not None else queue_count,
            write_queue_count if write_queue_count is not None else queue_count,
            perm,
            order=order,
        )
        await self._on_each(
            targets,
            lambda _name, address: requests.create_or_update_topic(
                self.pool, address, config, self.timeout_ms
            ),
            f"creating topic {topic!r}",
        )
        return sorted(targets)

    async def update_topic(
        self,
        topic: str,
        *,
        read_queue_count: int | None = None,
        write_queue_count: int | None = None,
        perm: int | None = None,
        order: bool | None = None,
    ) -> list[str]:
        """Change settings of an existing topic on every broker holding it (the others keep
        their value); returns the broker names. Raises TopicNotFoundError, RemoteError."""
        configs = await self.topic_configs(topic)
        changes = {
            key: value
            for key, value in (
                ("read_queue_count", read_queue_count),
                ("write_queue_count", write_queue_count),
                ("perm", perm),
                ("order", order),
            )
            if value is not None
        }
        masters = await self.topic_masters(topic)
        updated = {
            name: dataclasses.replace(config, **changes)  # type: ignore[arg-type]
            for name, config in configs.items()
        }
        await self._on_each(
            {name: masters[name] for name in updated},
            lambda name, address: requests.create_or_update_topic(
                self.pool, address, updated[name], self.timeout_ms
            ),
            f"updating topic {topic!r}",
        )
        return sorted(updated)

    async def topic_configs(self, topic: str) -> dict[str, TopicConfig]:
        """Broker name -> the topic's configuration there. Raises TopicNotFoundError."""
        masters = await self.topic_masters(topic)
        tables = await self._on_each(
            masters,
            lambda _name, address: requests.get_all_topic_config(
                self.pool, address, self.timeout_ms
            ),
            f"reading the configuration of {topic!r}",
        )
        configs = {name: table[topic] for name, table in tables.items() if topic in table}
        if not configs:
            raise TopicNotFoundError(f"topic {topic!r} has no configuration on its brokers")
        return configs

    async def delete_topic(self, topic: str, *, cluster: str | None = None) -> list[str]:
        """Delete ``topic`` from the brokers holding it (of ``cluster`` when given) and from
        every name server; returns the broker names. Raises TopicNotFoundError when no broker
        holds it, RemoteError (a system topic)."""
        return await operations.delete_topic(self, topic, cluster)

    async def topic_status(self, topic: str) -> list[QueueStatus]:
        """Every queue of ``topic``: min/max offset and last store time. Raises
        TopicNotFoundError."""
        masters = await self.topic_masters(topic)
        tables = await self._on_each(
            masters,
            lambda _name, address: requests.get_topic_stats(
                self.pool, address, topic, self.timeout_ms
            ),
            f"reading the status of {topic!r}",
        )
        rows = [
            QueueStatus(queue, item.min_offset, item.max_offset, item.last_update_timestamp_ms)
            for table in tables.values()
            for queue, item in table.offset_table.items()
        ]
        return sorted(rows, key=lambda row: row.queue)

    async def topic_consumer_groups(self, topic: str) -> list[str]:
        """The groups consuming ``topic`` (subscribed now or holding offsets), sorted."""
        masters = await self.topic_masters(topic)
        lists = await self._on_each(
            masters,
            lambda _name, address: requests.query_topic_consumers(
                self.pool, address, topic, self.timeout_ms
            ),
            f"finding the consumers of {topic!r}",
        )
        return sorted({group for groups in lists.values() for group in groups})

    # ---- groups ------------------------------------------------------------------------------

    async def group_configs(self) -> dict[str, dict[str, SubscriptionGroupConfig]]:
        """Group -> broker name -> settings, over every master."""
        masters = await self.master_addresses()
        tables = await self._on_each(
            masters,
            lambda _name, address: requests.get_all_groups(self.pool, address, self.timeout_ms),
            "reading the subscription groups",
        )
        groups: dict[str, dict[str, SubscriptionGroupConfig]] = {}
        for broker, table in sorted(tables.items()):
            for group, config in table.items():
                groups.setdefault(group, {})[broker] = config
        return groups

    async def list_groups(self, *, include_system: bool = False) -> list[GroupSummary]:
        """Every subscription group with the brokers holding it and its online clients;
        the brokers' built-in groups only with ``include_system``."""
        return await operations.list_groups(self, include_system)

    async def create_group(
        self,
        config: SubscriptionGroupConfig,
        *,
        cluster: str | None = None,
        brokers: Iterable[str] = (),
    ) -> list[str]:
        """Create (or replace) a subscription group on the given brokers, else those of
        ``cluster``, else every master; returns the broker names."""
        targets = await self._targets(cluster, brokers)
        await self._on_each(
            targets,
            lambda _name, address: requests.create_or_update_group(
                self.pool, address, config, self.timeout_ms
            ),
            f"creating group {config.group_name!r}",
        )
        return sorted(targets)

    async def update_group(self, group: str, **changes: object) -> list[str]:
        """Change settings (SubscriptionGroupConfig field names, e.g. ``retry_max_times=3``)
        of an existing group on every broker holding it; returns the broker names. Raises
        GroupNotFoundError, RemoteError; TypeError for an unknown field name (a bug)."""
        configs = (await self.group_configs()).get(group)
        if not configs:
            raise GroupNotFoundError(f"no broker has the subscription group {group!r}")
        masters = await self.master_addresses()
        updated = {
            name: dataclasses.replace(config, **changes)  # type: ignore[arg-type]
            for name, config in configs.items()
        }
        await self._on_each(
            {name: masters[name] for name in updated if name in masters},
            lambda name, address: requests.create_or_update_group(
                self.pool, address, updated[name], self.timeout_ms
            ),
            f"updating group {group!r}",
        )
        return sorted(updated)

    async def delete_group(
        self, group: str, *, remove_offsets: bool = True, cluster: str | None = None
    ) -> list[str]:
        """Delete the subscription group (and, by default, its offsets) from every master of
        ``cluster`` or of every cluster; returns the brokers that had it. Raises
        GroupNotFoundError when none had it."""
        await self.ensure_group(group)
        configs = (await self.group_configs()).get(group, {})
        masters = await self.master_addresses(cluster=cluster)
        holders = {name: address for name, address in masters.items() if name in configs}
        await self._on_each(
            masters,
            lambda _name, address: requests.delete_group(
                self.pool, address, group, self.timeout_ms, remove_offsets=remove_offsets
            ),
            f"deleting group {group!r}",
        )
        return sorted(holders)

    async def consumer_connections(self, group: str) -> ConsumerConnection | None:
        """The group's online clients, merged over every master (each client appears once);
        None when no broker has a client of the group."""
        masters = await self.master_addresses()
        results = await self.fan_out(
            [
                requests.get_consumer_connections(self.pool, address, group, self.timeout_ms)
                for address in masters.values()
            ]
        )
        found = [result for result in results if isinstance(result, ConsumerConnection)]
        if not found:
            failures = [
                result
                for result in results
                if isinstance(result, BolideError)
                and not operations.is_code(result, ResponseCode.CONSUMER_NOT_ONLINE)
            ]
            if failures and len(failures) == len(results):
                raise failures[0]  # no broker could say whether the group is online
            return None
        clients: dict[str, Connection] = {}
        for connection in found:
            for client in connection.connection_set:
                clients.setdefault(client.client_id, client)
        return dataclasses.replace(
            found[0], connection_set=tuple(clients[key] for key in sorted(clients))
        )

    async def producer_connections(self, group: str) -> list[Connection]:
        """The producer group's online clients over every master (empty when none)."""
        masters = await self.master_addresses()
        results = await self.fan_out(
            [
                requests.get_producer_connections(self.pool, address, group, self.timeout_ms)
                for address in masters.values()
            ]
        )
        clients: dict[str, Connection] = {}
        for result in results:
            if isinstance(result, BolideError):
                continue
            for client in result.connection_set:
                clients.setdefault(client.client_id, client)
        return [clients[key] for key in sorted(clients)]

    async def consumer_running_info(
        self, group: str, client_id: str, *, jstack: bool = False
    ) -> ConsumerRunningInfo:
        """The client's own report (queues it holds with their offsets, settings, rates),
        asked through a broker it is connected to.

        Raises NotFoundError when no broker has the client online, RemoteError
        CONSUME_MSG_TIMEOUT when it does not answer.
        """
        masters = await self.master_addresses()
        last: BolideError | None = None
        for address in masters.values():
            try:
                return await requests.get_consumer_running_info(
                    self.pool,
                    address,
                    group,
                    client_id,
                    limits.ADMIN_RUNNING_INFO_TIMEOUT_MS,
                    jstack=jstack,
                )
            except RemoteError as error:
                if error.code != ResponseCode.SYSTEM_ERROR:
                    raise
                last = error
        raise NotFoundError(
            f"the consumer {client_id!r} of group {group!r} is online on no broker"
        ) from last

    async def group_progress(self, group: str, *, topic: str | None = None) -> GroupProgress:
        """Per queue broker offset, consumer offset, lag and the owning client, over every
        broker; for a broadcasting group the offsets each client reports. Raises
        GroupNotFoundError when no broker knows the group."""
        return await admin_progress.group_progress(self, group, topic)

    async def ensure_group(self, group: str) -> None:
        """Return when some broker has ``group`` (settings, an online client or committed
        offsets); raise GroupNotFoundError otherwise."""
        if group in await self.group_configs():
            return
        if await self.consumer_connections(group) is not None:
            return
        masters = await self.master_addresses()
        results = await self.fan_out(
            [
                requests.get_consume_stats(self.pool, address, group, self.timeout_ms)
                for address in masters.values()
            ]
        )
        if any(isinstance(result, ConsumeStats) and result.offset_table for result in results):
            return
        raise GroupNotFoundError(
            f"no broker knows the consumer group {group!r}: no subscription group, "
            "no online consumer, no committed offset"
        )

    # ---- offsets -----------------------------------------------------------------------------

    async def reset_offset(
        self, group: str, topic: str, timestamp_ms: int, *, force: bool = True
    ) -> ResetResult:
        """Move ``group`` on ``topic`` to the first message stored at or after
        ``timestamp_ms`` (RESET_TO_EARLIEST, RESET_TO_LATEST, or ms since the epoch) on every
        broker holding the topic. The brokers store the new offsets and tell the online
        consumers, each in the form its language reads; an offline group finds them when it
        starts. Without ``force`` a queue only moves backwards.

        Raises TopicNotFoundError, GroupNotFoundError (no broker knows the group).
        """
        return await operations.reset_offset(self, group, topic, timestamp_ms, force)

    async def clone_offsets(
        self, source_group: str, destination_group: str, *, topic: str | None = None
    ) -> list[str]:
        """Copy ``source_group``'s offsets (of ``topic``, or all) to ``destination_group`` on
        every master; returns the broker names."""
        masters = await self.master_addresses()
        header = CloneGroupOffsetRequestHeader(source_group, destination_group, topic, True)
        await self._on_each(
            masters,
            lambda _name, address: requests.clone_group_offset(
                self.pool, address, header, self.timeout_ms
            ),
            f"cloning the offsets of {source_group!r}",
        )
        return sorted(masters)

    # ---- messages ----------------------------------------------------------------------------

    async def producer(self) -> Producer:
        """The admin's own producer (group ADMIN_PRODUCER_GROUP), started on first use."""
        if self._producer is None:
            credentials = self.credentials
            producer = Producer(
                ADMIN_PRODUCER_GROUP,
                self.namesrv_addresses,
                clock=self.clock,
                access_key=None if credentials is None else credentials.access_key,
                secret_key=None if credentials is None else credentials.secret_key,
                tls=self.tls,
            )
            await producer.start()
            self._producer = producer
        return self._producer

    async def send_message(self, message: Message) -> SendResult:
        """Send one message with the admin's producer."""
        return await (await self.producer()).send(message)

    async def get_message(self, msg_id: str, *, topic: str | None = None) -> list[MessageExt]:
        """The message(s) with ``msg_id``: an offset message id, or with ``topic`` a message
        id (UNIQ_KEY). Raises MessageNotFoundError."""
        return await admin_messages.get_message(self, msg_id, topic)

    async def query_by_key(
        self,
        topic: str,
        key: str,
        *,
        begin_ms: int = 0,
        end_ms: int | None = None,
        max_count: int = limits.ADMIN_QUERY_BY_KEY_MAX_MESSAGES,
        unique: bool = False,
    ) -> list[MessageExt]:
        """Messages of ``topic`` whose KEYS hold ``key`` (``unique``: whose UNIQ_KEY is
        ``key``) stored in [begin_ms, end_ms], newest first, at most ``max_count``."""
        return await admin_messages.query_by_key(
            self, topic, key, begin_ms, end_ms, max_count, unique
        )

    async def query_by_time(
        self,
        topic: str,
        begin_ms: int,
        end_ms: int,
        *,
        max_count: int = limits.ADMIN_QUERY_BY_TIME_MAX_MESSAGES,
        on_progress: ProgressCallback | None = None,
    ) -> list[MessageExt]:
        """Messages of ``topic`` stored in [begin_ms, end_ms), oldest first per queue, at most
        ``max_count``; ``on_progress(queues done, queues)`` follows the reading."""
        return await admin_messages.query_by_time(
            self, topic, begin_ms, end_ms, max_count, on_progress
        )

    def tail(
        self, topic: str, *, start_ms: int = RESET_TO_LATEST, expression: str = "*"
    ) -> AsyncGenerator[MessageExt, None]:
        """Messages of ``topic`` as they arrive, from ``start_ms`` (RESET_TO_LATEST: only new
        ones; RESET_TO_EARLIEST: everything stored), matching the tag ``expression``."""
        return admin_messages.tail(self, topic, start_ms, expression)

    async def resend_dead_letters(
        self,
        group: str,
        *,
        msg_ids: Sequence[str] = (),
        begin_ms: int = 0,
        end_ms: int | None = None,
        max_count: int = limits.ADMIN_RESEND_MAX_MESSAGES,
        on_progress: ProgressCallback | None = None,
    ) -> list[ResendOutcome]:
        """Send dead letters of ``group`` (those with ``msg_ids``, else those stored in
        [begin_ms, end_ms]) back to the group through its retry topic: only that group
        consumes them again, with their original topic and a fresh retry count."""
        return await admin_messages.resend_dead_letters(
            self, group, msg_ids, begin_ms, end_ms, max_count, on_progress
        )

    # ---- helpers -----------------------------------------------------------------------------

    async def _targets(self, cluster: str | None, brokers: Iterable[str]) -> dict[str, str]:
        chosen = list(brokers)
        if chosen:
            return await self.resolve_brokers(chosen)
        return await self.master_addresses(cluster=cluster)

    async def _on_each(
        self,
        targets: dict[str, str],
        call: Callable[[str, str], Awaitable[T]],
        what: str,
    ) -> dict[str, T]:
        """``call(broker name, address)`` on every target broker; broker name -> result.
        Raises the first failure, naming the broker and what was done on the others."""
        names = list(targets)
        results = await self.fan_out([call(name, targets[name]) for name in names])
        done: dict[str, T] = {}
        failed: list[tuple[str, BolideError]] = []
        for name, result in zip(names, results, strict=True):
            if isinstance(result, BolideError):
                failed.append((name, result))
            else:
                done[name] = result
        if failed:
            name, error = failed[0]
            succeeded = f" (done on {', '.join(sorted(done))})" if done else ""
            raise operations.with_broker(error, name, f"{what}{succeeded}")
        return done
