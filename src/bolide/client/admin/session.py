"""The admin client's session: connections, name-server fail-over, fan-out to brokers, and
the single-request queries every admin operation builds on.

:class:`AdminSession` is the lower layer of :class:`bolide.client.admin.AdminClient`: the
operation modules (:mod:`.operations`, :mod:`.progress`, :mod:`.messages`) take a session and
the facade inherits it, so the operations sit under the facade and never import it. Requests
go through :mod:`bolide.client.rpc` (one coroutine per request code).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TypeVar

from bolide.base import limits
from bolide.base.clock import Clock, SystemClock
from bolide.base.errors import (
    BolideError,
    ConnectionClosedError,
    InvariantViolationError,
    NameServerUnavailableError,
    NoRouteError,
    NotFoundError,
    RemoteError,
    TopicNotFoundError,
    TransportError,
)
from bolide.base.gathering import gather_outcomes
from bolide.client.config import parse_namesrv_addresses
from bolide.client.lifecycle import AsyncLifecycle
from bolide.client.message import SendResult
from bolide.client.namespace import check_namespace, with_namespace, without_namespace
from bolide.client.producer.producer import Producer
from bolide.client.rpc import admin as requests
from bolide.client.rpc import get_route
from bolide.client.security import TlsClientSettings, client_tls, credentials_of
from bolide.protocol.bodies import (
    MASTER_BROKER_ID,
    ClusterInfo,
    Connection,
    ConsumerConnection,
    ConsumerRunningInfo,
    SubscriptionGroupConfig,
    TopicConfig,
    TopicRouteData,
)
from bolide.protocol.codes import ResponseCode
from bolide.protocol.message import Message
from bolide.remoting import ClientPool

__all__ = ["ADMIN_PRODUCER_GROUP", "AdminSession", "is_code", "reason", "with_broker"]

T = TypeVar("T")
A = TypeVar("A")

ADMIN_PRODUCER_GROUP = "BOLIDE_ADMIN_PRODUCER"
"""Producer group of the messages the admin client sends (``message send``, resends)."""


def is_code(result: object, code: ResponseCode) -> bool:
    """Whether ``result`` is a RemoteError with ``code``."""
    return isinstance(result, RemoteError) and result.code == code


def with_broker(error: BolideError, broker: str, what: str | None = None) -> BolideError:
    """``error`` with a message naming the broker (same type, so callers still match it)."""
    prefix = f"{what}: " if what else ""
    error.args = (f"{prefix}broker {broker}: {reason(error)}",)
    return error


def reason(error: BaseException) -> str:
    """The error's text, with the underlying cause of a connection failure."""
    text = str(error) or type(error).__name__
    cause = error.__cause__
    if isinstance(error, ConnectionClosedError) and cause is not None:
        detail = str(cause)
        if detail and detail not in text:
            text = f"{text} ({detail})"
    return text


class AdminSession(AsyncLifecycle):
    """Connections and single-request queries of an admin client reached through ``namesrv``
    (``"host:port;host:port"``); see the module docstring.

    Raises ConfigError for a malformed name-server list or namespace.
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
        namespace: str | None = None,
    ) -> None:
        self.namesrv_addresses = parse_namesrv_addresses(namesrv)
        self.namespace = check_namespace(namespace)
        """As the producer's (Java's withNamespace): the topics and groups the operations are
        given go out as ``<namespace>%<name>`` (retry / DLQ prefixes kept in front)."""
        self.credentials = credentials_of(access_key, secret_key)
        """Signs every request (ACL; admin requests need an admin account)."""
        self.tls = client_tls(tls)
        self.timeout_ms = timeout_ms
        self.clock: Clock = clock or SystemClock()
        self._pool: ClientPool | None = None
        self._producer: Producer | None = None
        self._namesrv_index = 0

    def ns(self, name: str) -> str:
        """``name`` (a topic or group) in the client's namespace; unchanged without one, for
        system names, and for names already in it."""
        return with_namespace(self.namespace, name)

    def bare(self, name: str) -> str:
        """``name`` without the client's namespace (unchanged when outside it)."""
        return without_namespace(self.namespace, name)

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
            except TransportError as error:
                failures.append(f"{addresses[index]}: {reason(error)}")
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
        return await gather_outcomes(calls, limits.ADMIN_IN_FLIGHT_MAX_REQUESTS)

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

    async def broker_runtime_info(self, address: str) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO of the broker at ``address``: counters as strings."""
        return await requests.get_broker_runtime_info(self.pool, address, self.timeout_ms)

    async def topic_list(self) -> list[str]:
        """Every topic with a route, sorted (retry, DLQ and system topics included)."""
        topics = await self._namesrv(
            lambda address: requests.get_topic_list(self.pool, address, self.timeout_ms),
            "the topic list",
        )
        return sorted(topics)

    async def topic_route(self, topic: str) -> TopicRouteData:
        """The topic's route. Raises TopicNotFoundError when no broker holds it."""
        topic = self.ns(topic)

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
        topic = self.ns(topic)
        route = await self.topic_route(topic)
        masters = {
            data.broker_name: address
            for data in route.broker_datas
            if (address := data.broker_addrs.get(MASTER_BROKER_ID)) is not None
        }
        if not masters:
            raise NoRouteError(f"no broker holding topic {topic!r} has a master")
        return dict(sorted(masters.items()))

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
        topic = self.ns(topic)
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
        topic = self.ns(topic)
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

    async def consumer_connections(self, group: str) -> ConsumerConnection | None:
        """The group's online clients, merged over every master (each client appears once);
        None when no broker has a client of the group."""
        group = self.ns(group)
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
                and not is_code(result, ResponseCode.CONSUMER_NOT_ONLINE)
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

    async def consumer_running_info(
        self, group: str, client_id: str, *, jstack: bool = False
    ) -> ConsumerRunningInfo:
        """The client's own report (queues it holds with their offsets, settings, rates),
        asked through a broker it is connected to.

        Raises NotFoundError when no broker has the client online, RemoteError
        CONSUME_MSG_TIMEOUT when it does not answer.
        """
        group = self.ns(group)
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
                namespace=self.namespace,
            )
            await producer.start()
            self._producer = producer
        return self._producer

    async def send_message(self, message: Message) -> SendResult:
        """Send one message with the admin's producer."""
        return await (await self.producer()).send(message)

    async def targets(self, cluster: str | None, brokers: Iterable[str]) -> dict[str, str]:
        """The brokers a change goes to, name -> address: those of ``brokers`` (names or
        host:port) when any are given, else every master (of ``cluster``)."""
        chosen = list(brokers)
        if chosen:
            return await self.resolve_brokers(chosen)
        return await self.master_addresses(cluster=cluster)

    async def _ask_each(
        self,
        targets: dict[str, str],
        request: Callable[[ClientPool, str, A, int], Awaitable[T]],
        argument: A,
        what: str,
    ) -> dict[str, T]:
        """:meth:`_on_each` of one request of ``client/rpc`` (``request(pool, address,
        argument, timeout_ms)``) with the same ``argument`` for every target broker."""
        return await self._on_each(
            targets,
            lambda _name, address: request(self.pool, address, argument, self.timeout_ms),
            what,
        )

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
            raise with_broker(error, name, f"{what}{succeeded}")
        return done
