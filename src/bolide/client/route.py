"""Topic routes as the client uses them (docs/protocol.md §2.3 "How the Java client uses the
route").

Pure: the instance fetches :class:`TopicRouteData` from a name server and hands it here.

* **Publish queues** (where a producer may send): for each QueueData, in broker-name order,
  that has the WRITE perm and whose broker has a master (broker id 0) address: queue ids
  ``0 .. writeQueueNums-1``. A non-empty ``orderTopicConf`` (``"brokerA:4;brokerB:4"``)
  replaces that list with its own brokers and counts, and marks the topic orderly.
* **Subscribe queues** (what consumers rebalance over): for each QueueData with the READ
  perm: queue ids ``0 .. readQueueNums-1``.
* **Auto-create**: when the name server does not know a topic, a producer sends through the
  route of ``TBW102`` with every queue count clamped to ``defaultTopicQueueNums`` (4); the
  broker then creates the topic (§2.2). :func:`default_topic_route` makes that route.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from bolide.base import limits
from bolide.base.errors import BolideError, RemoteError, TransportError
from bolide.protocol.bodies import (
    MASTER_BROKER_ID,
    PERM_READ,
    PERM_WRITE,
    BrokerData,
    MessageQueue,
    QueueData,
    TopicRouteData,
)
from bolide.protocol.codes import ResponseCode
from bolide.protocol.system_topics import AUTO_CREATE_TOPIC_KEY_TOPIC

__all__ = [
    "DEFAULT_TOPIC",
    "RouteTable",
    "TopicRoute",
    "default_topic_route",
    "publish_queues",
    "subscribe_queues",
    "suggests_stale_route",
]

DEFAULT_TOPIC = AUTO_CREATE_TOPIC_KEY_TOPIC
"""The topic whose route producers borrow for topics that do not exist yet (auto-create)."""

_ORDER_CONF_BROKERS_SEPARATOR = ";"
_ORDER_CONF_COUNT_SEPARATOR = ":"


_STALE_ROUTE_CODES = frozenset({ResponseCode.SERVICE_NOT_AVAILABLE})
"""Answers that mean "this address is not (or no longer) a writable master": a slave refuses a
send with SERVICE_NOT_AVAILABLE (Java's checkStoreStatus on a SLAVE), as does a store that is
shutting down."""


def suggests_stale_route(error: BolideError) -> bool:
    """Whether a failed request to a broker suggests the route is out of date: the address
    did not answer (connection refused or closed, timeout) or answered as a non-master."""
    if isinstance(error, TransportError):
        return True
    return isinstance(error, RemoteError) and error.code in _STALE_ROUTE_CODES


def _brokers_by_name(route: TopicRouteData) -> dict[str, BrokerData]:
    return {broker.broker_name: broker for broker in route.broker_datas}


def _order_queues(topic: str, order_topic_conf: str) -> tuple[MessageQueue, ...]:
    queues: list[MessageQueue] = []
    for item in order_topic_conf.split(_ORDER_CONF_BROKERS_SEPARATOR):
        name, separator, count_text = item.strip().partition(_ORDER_CONF_COUNT_SEPARATOR)
        if not separator or not name or not count_text.strip().isdigit():
            continue  # Java would fail to parse; skipping keeps the well-formed entries
        queues.extend(MessageQueue(topic, name, queue_id) for queue_id in range(int(count_text)))
    return tuple(queues)


def publish_queues(topic: str, route: TopicRouteData) -> tuple[MessageQueue, ...]:
    """The queues a producer may send ``topic``'s messages to (rules in the module docstring)."""
    if route.order_topic_conf:
        return _order_queues(topic, route.order_topic_conf)
    brokers = _brokers_by_name(route)
    queues: list[MessageQueue] = []
    for queue_data in sorted(route.queue_datas, key=lambda item: item.broker_name):
        if not queue_data.perm & PERM_WRITE:
            continue
        broker = brokers.get(queue_data.broker_name)
        if broker is None or broker.master_addr is None:
            continue
        queues.extend(
            MessageQueue(topic, queue_data.broker_name, queue_id)
            for queue_id in range(queue_data.write_queue_count)
        )
    return tuple(queues)


def subscribe_queues(topic: str, route: TopicRouteData) -> tuple[MessageQueue, ...]:
    """The queues consumers of ``topic`` share, sorted (rules in the module docstring)."""
    queues = [
        MessageQueue(topic, queue_data.broker_name, queue_id)
        for queue_data in route.queue_datas
        if queue_data.perm & PERM_READ
        for queue_id in range(queue_data.read_queue_count)
    ]
    return tuple(sorted(queues))


def default_topic_route(
    default_route: TopicRouteData,
    queue_count: int = limits.PRODUCER_DEFAULT_TOPIC_QUEUE_COUNT,
) -> TopicRouteData:
    """The route to send a not-yet-existing topic through: ``default_route`` (TBW102's) with
    read and write queue counts clamped to ``min(queue_count, readQueueNums)``."""
    clamped = tuple(
        dataclasses.replace(
            queue_data,
            read_queue_count=min(queue_count, queue_data.read_queue_count),
            write_queue_count=min(queue_count, queue_data.read_queue_count),
        )
        for queue_data in default_route.queue_datas
    )
    return dataclasses.replace(default_route, queue_datas=clamped)


@dataclass(frozen=True, slots=True)
class TopicRoute:
    """One topic's route and the queue lists derived from it.

    ``borrowed`` is true when the route is TBW102's, used to auto-create the topic.
    """

    topic: str
    data: TopicRouteData
    publish_queues: tuple[MessageQueue, ...]
    subscribe_queues: tuple[MessageQueue, ...]
    borrowed: bool = False

    @classmethod
    def of(cls, topic: str, data: TopicRouteData, *, borrowed: bool = False) -> TopicRoute:
        return cls(
            topic, data, publish_queues(topic, data), subscribe_queues(topic, data), borrowed
        )

    @property
    def is_order_topic(self) -> bool:
        """Whether the route carries an ``orderTopicConf``."""
        return bool(self.data.order_topic_conf)

    def write_queue_count(self, broker_name: str) -> int:
        """Write queues of ``broker_name`` for this topic (0 when it holds none)."""
        for queue_data in self.data.queue_datas:
            if queue_data.broker_name == broker_name:
                return queue_data.write_queue_count
        return 0


def _same_route(first: TopicRouteData, second: TopicRouteData) -> bool:
    """Equal ignoring the order of queue and broker data (name servers may reorder them)."""

    def queues(route: TopicRouteData) -> list[QueueData]:
        return sorted(route.queue_datas, key=lambda item: item.broker_name)

    def brokers(route: TopicRouteData) -> list[tuple[str, str, list[tuple[int, str]]]]:
        return sorted(
            (b.broker_name, b.cluster, sorted(b.broker_addrs.items())) for b in route.broker_datas
        )

    return (
        queues(first) == queues(second)
        and brokers(first) == brokers(second)
        and first.order_topic_conf == second.order_topic_conf
    )


class RouteTable:
    """The routes a client knows, and the broker addresses they name.

    Broker addresses come from the routes currently held: a broker that no route mentions any
    more is forgotten (Java's cleanOfflineBroker), so heartbeats stop going to it.
    """

    def __init__(self) -> None:
        self._routes: dict[str, TopicRoute] = {}
        self._brokers: dict[str, dict[int, str]] = {}

    def get(self, topic: str) -> TopicRoute | None:
        """The route of ``topic``, or None when it was never fetched."""
        return self._routes.get(topic)

    @property
    def topics(self) -> frozenset[str]:
        return frozenset(self._routes)

    def update(self, topic: str, data: TopicRouteData, *, borrowed: bool = False) -> bool:
        """Store ``data`` as ``topic``'s route; returns whether anything changed.

        A borrowed (TBW102) route never replaces the topic's own route.
        """
        current = self._routes.get(topic)
        if current is not None and borrowed and not current.borrowed:
            return False
        if current is not None and current.borrowed == borrowed and _same_route(current.data, data):
            return False
        self._routes[topic] = TopicRoute.of(topic, data, borrowed=borrowed)
        self._rebuild_brokers()
        return True

    def remove(self, topic: str) -> None:
        """Forget ``topic``'s route (and brokers only it named)."""
        if self._routes.pop(topic, None) is not None:
            self._rebuild_brokers()

    def retain(self, topics: Iterable[str]) -> None:
        """Forget every route but those of ``topics``."""
        keep = set(topics)
        for topic in [t for t in self._routes if t not in keep]:
            del self._routes[topic]
        self._rebuild_brokers()

    def _rebuild_brokers(self) -> None:
        brokers: dict[str, dict[int, str]] = {}
        for route in self._routes.values():
            for broker in route.data.broker_datas:
                brokers.setdefault(broker.broker_name, {}).update(broker.broker_addrs)
        self._brokers = brokers

    @property
    def brokers(self) -> Mapping[str, Mapping[int, str]]:
        """Broker name -> {broker id: address} over every route held."""
        return self._brokers

    def master_address(self, broker_name: str) -> str | None:
        """The master (id 0) address of ``broker_name``, or None."""
        return self._brokers.get(broker_name, {}).get(MASTER_BROKER_ID)

    def broker_address(self, broker_name: str) -> str | None:
        """The master's address, else the lowest-id slave's (reads may go to a slave)."""
        addresses = self._brokers.get(broker_name)
        if not addresses:
            return None
        master = addresses.get(MASTER_BROKER_ID)
        return master if master is not None else addresses[min(addresses)]

    def broker_name_of(self, address: str) -> str | None:
        """The broker name that ``address`` belongs to, or None."""
        for name, addresses in self._brokers.items():
            if address in addresses.values():
                return name
        return None

    def addresses(self, *, masters_only: bool) -> list[tuple[str, int, str]]:
        """Every known ``(broker name, broker id, address)``, sorted; masters only if asked."""
        return sorted(
            (name, broker_id, address)
            for name, addresses in self._brokers.items()
            for broker_id, address in addresses.items()
            if not masters_only or broker_id == MASTER_BROKER_ID
        )
