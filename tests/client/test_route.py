"""Route -> publish and subscribe queue lists, the TBW102 fallback, and the route table."""

from __future__ import annotations

from bolide.client.route import (
    RouteTable,
    TopicRoute,
    default_topic_route,
    publish_queues,
    subscribe_queues,
)
from bolide.protocol.bodies import BrokerData, MessageQueue, QueueData, TopicRouteData

RW, READ_ONLY, WRITE_ONLY = 6, 4, 2


def route(
    *queue_datas: QueueData,
    masters: dict[str, str] | None = None,
    slaves: dict[str, str] | None = None,
    order_conf: str | None = None,
) -> TopicRouteData:
    masters = (
        masters
        if masters is not None
        else {q.broker_name: f"{q.broker_name}:1" for q in queue_datas}
    )
    brokers = []
    for name in sorted({q.broker_name for q in queue_datas} | set(slaves or {})):
        addresses = {}
        if name in masters:
            addresses[0] = masters[name]
        if slaves and name in slaves:
            addresses[1] = slaves[name]
        brokers.append(BrokerData("DefaultCluster", name, addresses))
    return TopicRouteData(tuple(queue_datas), tuple(brokers), order_conf)


def ids(queues: tuple[MessageQueue, ...]) -> list[tuple[str, int]]:
    return [(q.broker_name, q.queue_id) for q in queues]


def test_publish_queues_need_write_perm_and_a_master() -> None:
    data = route(
        QueueData("b", 4, 3, RW),
        QueueData("a", 4, 2, RW),
        QueueData("c", 4, 4, READ_ONLY),
        QueueData("d", 4, 4, RW),
        masters={"a": "a:1", "b": "b:1", "c": "c:1"},  # d has only a slave
        slaves={"d": "d:2"},
    )
    assert ids(publish_queues("T", data)) == [("a", 0), ("a", 1), ("b", 0), ("b", 1), ("b", 2)]


def test_subscribe_queues_need_read_perm_only() -> None:
    data = route(QueueData("a", 2, 4, RW), QueueData("b", 1, 1, WRITE_ONLY),
                 QueueData("c", 1, 1, READ_ONLY), masters={"a": "a:1"})  # fmt: skip
    assert ids(subscribe_queues("T", data)) == [("a", 0), ("a", 1), ("c", 0)]
    assert all(q.topic == "T" for q in subscribe_queues("T", data))


def test_order_topic_conf_replaces_the_publish_list() -> None:
    data = route(QueueData("a", 8, 8, RW), order_conf="b:2;a:1;broken")
    topic_route = TopicRoute.of("T", data)
    assert topic_route.is_order_topic
    assert ids(topic_route.publish_queues) == [("b", 0), ("b", 1), ("a", 0)]


def test_default_topic_route_is_clamped_to_the_producer_queue_count() -> None:
    tbw102 = route(QueueData("a", 8, 8, 7), QueueData("b", 2, 8, 7))
    clamped = default_topic_route(tbw102, 4)
    assert [(q.read_queue_count, q.write_queue_count) for q in clamped.queue_datas] == [
        (4, 4),
        (2, 2),
    ]
    assert len(publish_queues("new-topic", clamped)) == 6


def test_route_table_tracks_changes_and_broker_addresses() -> None:
    table = RouteTable()
    first = route(QueueData("a", 4, 4, RW), slaves={"a": "a:2"})
    assert table.update("T", first) is True
    assert table.update("T", first) is False
    assert table.master_address("a") == "a:1"
    assert table.addresses(masters_only=True) == [("a", 0, "a:1")]
    assert table.addresses(masters_only=False) == [("a", 0, "a:1"), ("a", 1, "a:2")]
    assert table.broker_name_of("a:2") == "a"
    table.update("T", route(QueueData("b", 4, 4, RW)))
    assert table.master_address("a") is None  # no route names broker a any more
    assert table.broker_address("b") == "b:1"


def test_a_borrowed_route_never_replaces_the_topic_s_own() -> None:
    table = RouteTable()
    table.update("T", route(QueueData("a", 4, 4, 7)), borrowed=True)
    route_t = table.get("T")
    assert route_t is not None and route_t.borrowed
    own = route(QueueData("a", 8, 8, RW))
    assert table.update("T", own) is True
    assert table.update("T", route(QueueData("a", 4, 4, 7)), borrowed=True) is False
    route_t = table.get("T")
    assert route_t is not None and not route_t.borrowed and len(route_t.publish_queues) == 8


def test_slave_address_is_used_when_there_is_no_master() -> None:
    table = RouteTable()
    table.update("T", route(QueueData("a", 4, 4, RW), masters={}, slaves={"a": "a:2"}))
    assert table.master_address("a") is None
    assert table.broker_address("a") == "a:2"
