"""What the proxy knows of the cluster, and the pool its requests to brokers travel on.

The proxy reaches name servers and brokers only through remoting requests, like any client,
so it can run apart from them (``bolide proxy``) or inside ``bolide standalone``. Every one
of them is built in :mod:`bolide.client.rpc` (an import contract keeps it so):

* routes: GET_ROUTEINFO_BY_TOPIC (105) from the name servers;
* topic settings (queue counts, the ``message.type`` attribute): GET_ALL_TOPIC_CONFIG (21);
* group settings (``consumeMessageOrderly``, ``retryMaxTimes``): GET_ALL_SUBSCRIPTIONGROUP_CONFIG
  (201). Each is cached for PROXY_ROUTE_CACHE_MS.
* messages: SEND_MESSAGE_V2 (310), POP_MESSAGE (200050), ACK_MESSAGE (200051),
  CHANGE_MESSAGE_INVISIBLETIME (200053), CONSUMER_SEND_MSG_BACK (36, to the DLQ),
  END_TRANSACTION (37), HEART_BEAT (34, producer groups, so brokers can send
  CHECK_TRANSACTION_STATE (39) back over the same connection).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from bolide.base import limits
from bolide.base.errors import BolideError, NoRouteError, RemoteError, TopicNotFoundError
from bolide.client.rpc import admin as admin_requests
from bolide.client.rpc.namesrv import get_route
from bolide.protocol.bodies import SubscriptionGroupConfig, TopicConfig, TopicRouteData
from bolide.protocol.codes import ResponseCode
from bolide.remoting import ClientPool

__all__ = ["BrokerDirectory", "BrokerQueues"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class BrokerQueues:
    """One broker's share of a topic."""

    broker_name: str
    address: str
    read_queue_count: int
    write_queue_count: int
    perm: int


class BrokerDirectory:
    """Cached routes and settings, looked up through ``pool``."""

    def __init__(self, pool: ClientPool, namesrv_addresses: list[str]) -> None:
        self.pool = pool
        self._namesrvs = namesrv_addresses
        self._routes: dict[str, tuple[float, TopicRouteData]] = {}
        self._topics: dict[str, tuple[float, dict[str, TopicConfig]]] = {}
        self._groups: dict[str, tuple[float, dict[str, SubscriptionGroupConfig]]] = {}
        self._lock = asyncio.Lock()
        self._route_failures: dict[str, float] = {}

    async def route(self, topic: str) -> TopicRouteData:
        """The topic's route; raises TopicNotFoundError or NoRouteError."""
        cached = self._routes.get(topic)
        if cached is not None and _fresh(cached[0]):
            return cached[1]
        error: Exception | None = None
        for address in self._namesrvs:
            try:
                route = await get_route(self.pool, address, topic, limits.PROXY_RPC_TIMEOUT_MS)
            except TopicNotFoundError:
                self._routes.pop(topic, None)
                raise
            except RemoteError as caught:
                if caught.code == ResponseCode.TOPIC_NOT_EXIST:
                    self._routes.pop(topic, None)
                    raise TopicNotFoundError(f"topic {topic} does not exist") from caught
                error = caught
                continue
            except (BolideError, OSError) as caught:  # try the next name server
                error = caught
                continue
            self._routes[topic] = (time.monotonic(), route)
            return route
        raise NoRouteError(f"no name server answered for topic {topic}: {error}")

    async def brokers(self, topic: str) -> list[BrokerQueues]:
        """The masters holding ``topic``, by broker name."""
        route = await self.route(topic)
        addresses = {data.broker_name: data.master_addr for data in route.broker_datas}
        found: list[BrokerQueues] = []
        for queue in sorted(route.queue_datas, key=lambda q: q.broker_name):
            address = addresses.get(queue.broker_name)
            if address:
                found.append(
                    BrokerQueues(
                        queue.broker_name,
                        address,
                        queue.read_queue_count,
                        queue.write_queue_count,
                        queue.perm,
                    )
                )
        return found

    async def broker_address(self, topic: str, broker_name: str) -> str:
        for broker in await self.brokers(topic):
            if broker.broker_name == broker_name:
                return broker.address
        raise NoRouteError(f"broker {broker_name} holds no queue of topic {topic}")

    async def topic_config(self, topic: str) -> TopicConfig | None:
        """The topic's settings on the first broker that has it (None: unknown)."""
        return await self._first_config(topic, topic, self._topics, self._fetch_topics)

    async def group_config(self, topic: str, group: str) -> SubscriptionGroupConfig | None:
        """The group's settings on the brokers of ``topic`` (None: not created yet)."""
        return await self._first_config(topic, group, self._groups, self._fetch_groups)

    async def _first_config(
        self,
        topic: str,
        name: str,
        cache: dict[str, tuple[float, dict[str, T]]],
        fetch: Callable[[str], Awaitable[dict[str, T]]],
    ) -> T | None:
        """``name``'s entry in the first (cached) config table of a broker of ``topic`` that
        holds it; None when none does."""
        for broker in await self.brokers(topic):
            table = await self._cached(cache, broker.address, fetch)
            config = table.get(name)
            if config is not None:
                return config
        return None

    def route_failed(self, topic: str) -> bool:
        """A broker of ``topic`` failed (connection error, timeout, or a not-master answer):
        drop the cached route so the next request asks a name server at once, instead of at
        the cache's expiry. Bounded: at most once per ``ROUTE_REFRESH_MIN_INTERVAL_MS`` per
        topic. Returns whether the route was dropped.
        """
        now = time.monotonic()
        last = self._route_failures.get(topic)
        if last is not None and (now - last) * 1000 < limits.ROUTE_REFRESH_MIN_INTERVAL_MS:
            return False
        self._route_failures[topic] = now
        return self._routes.pop(topic, None) is not None

    def forget(self, topic: str) -> None:
        """Drop what is cached about ``topic`` (after an error that suggests it changed)."""
        self._routes.pop(topic, None)
        self._topics.clear()

    async def _cached(
        self,
        cache: dict[str, tuple[float, T]],
        address: str,
        fetch: Callable[[str], Awaitable[T]],
    ) -> T:
        entry = cache.get(address)
        if entry is not None and _fresh(entry[0]):
            return entry[1]
        value = await fetch(address)
        cache[address] = (time.monotonic(), value)
        return value

    async def _fetch_topics(self, address: str) -> dict[str, TopicConfig]:
        return await admin_requests.get_all_topic_config(
            self.pool, address, limits.PROXY_RPC_TIMEOUT_MS
        )

    async def _fetch_groups(self, address: str) -> dict[str, SubscriptionGroupConfig]:
        return await admin_requests.get_all_groups(self.pool, address, limits.PROXY_RPC_TIMEOUT_MS)


def _fresh(stamp: float) -> bool:
    return (time.monotonic() - stamp) * 1000 < limits.PROXY_ROUTE_CACHE_MS
