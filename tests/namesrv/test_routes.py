"""Route tables: registration, master-only queue data, expiry, connection drops, admin."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from bolide.base.clock import ManualClock
from bolide.base.errors import BackpressureError
from bolide.base.limits import BROKER_EXPIRY_MS
from bolide.base.types import Address, BrokerName, ClusterName, Topic
from bolide.namesrv.routes import BrokerRegistration, RouteTables
from bolide.protocol.bodies import DataVersion, QueueData, TopicConfig

CLUSTER = ClusterName("DefaultCluster")
BROKER_A = BrokerName("broker-a")
BROKER_B = BrokerName("broker-b")
MASTER_A = Address("10.0.0.1:10911")
SLAVE_A = Address("10.0.0.2:10911")
MASTER_B = Address("10.0.0.3:10911")
ORDERS = Topic("orders")
TBW102 = Topic("TBW102")

RW = TopicConfig("orders", read_queue_count=4, write_queue_count=4, perm=6)


def registration(
    *,
    broker_name: BrokerName = BROKER_A,
    broker_addr: Address = MASTER_A,
    broker_id: int = 0,
    topics: Mapping[str, TopicConfig] | None = None,
    version: int = 1,
    connection: object = None,
    cluster: ClusterName = CLUSTER,
) -> BrokerRegistration:
    return BrokerRegistration(
        cluster_name=cluster,
        broker_name=broker_name,
        broker_addr=broker_addr,
        broker_id=broker_id,
        ha_server_addr=broker_addr.replace("10911", "10912"),
        data_version=DataVersion(1_700_000_000_000, version),
        topic_configs={ORDERS: RW} if topics is None else topics,
        connection_key=connection,
    )


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def tables(clock: ManualClock) -> RouteTables:
    return RouteTables(clock)


def test_master_registration_makes_topic_routable(tables: RouteTables) -> None:
    result = tables.register_broker(registration())
    assert result.topic_config_changed
    assert result.master_addr is None
    route = tables.route_for_topic(ORDERS)
    assert route is not None
    assert route.queue_datas == (QueueData(BROKER_A, 4, 4, 6, 0),)
    assert len(route.broker_datas) == 1
    broker = route.broker_datas[0]
    assert (broker.broker_name, broker.cluster) == (BROKER_A, CLUSTER)
    assert dict(broker.broker_addrs) == {0: MASTER_A}


def test_unknown_topic_has_no_route(tables: RouteTables) -> None:
    tables.register_broker(registration())
    assert tables.route_for_topic(Topic("nope")) is None


def test_same_data_version_is_not_a_change(tables: RouteTables) -> None:
    assert tables.register_broker(registration(version=1)).topic_config_changed
    assert not tables.register_broker(registration(version=1)).topic_config_changed
    assert tables.register_broker(registration(version=2)).topic_config_changed


def test_unchanged_data_version_does_not_rewrite_queue_data(tables: RouteTables) -> None:
    tables.register_broker(registration(version=1))
    wider = TopicConfig(ORDERS, read_queue_count=8, write_queue_count=8, perm=6)
    tables.register_broker(registration(version=1, topics={ORDERS: wider}))
    route = tables.route_for_topic(ORDERS)
    assert route is not None and route.queue_datas[0].write_queue_count == 4
    tables.register_broker(registration(version=2, topics={ORDERS: wider}))
    route = tables.route_for_topic(ORDERS)
    assert route is not None and route.queue_datas[0].write_queue_count == 8


def test_slave_address_is_kept_but_slave_topics_are_ignored(tables: RouteTables) -> None:
    tables.register_broker(registration())
    slave_topics: dict[str, TopicConfig] = {ORDERS: RW, Topic("slave-only"): RW}
    result = tables.register_broker(
        registration(broker_addr=SLAVE_A, broker_id=1, topics=slave_topics)
    )
    assert not result.topic_config_changed
    assert result.master_addr == MASTER_A
    assert result.ha_server_addr == "10.0.0.1:10912"
    assert tables.route_for_topic(Topic("slave-only")) is None
    route = tables.route_for_topic(ORDERS)
    assert route is not None
    assert dict(route.broker_datas[0].broker_addrs) == {0: MASTER_A, 1: SLAVE_A}
    assert len(route.queue_datas) == 1


def test_slave_alone_gives_no_route_and_no_master(tables: RouteTables) -> None:
    result = tables.register_broker(registration(broker_addr=SLAVE_A, broker_id=1))
    assert result.master_addr is None
    assert tables.route_for_topic(ORDERS) is None
    assert tables.cluster_info().broker_addr_table[BROKER_A].broker_addrs == {1: SLAVE_A}


def test_two_brokers_share_a_topic(tables: RouteTables) -> None:
    tables.register_broker(registration())
    tables.register_broker(registration(broker_name=BROKER_B, broker_addr=MASTER_B))
    route = tables.route_for_topic(ORDERS)
    assert route is not None
    assert [q.broker_name for q in route.queue_datas] == [BROKER_A, BROKER_B]
    assert [b.broker_name for b in route.broker_datas] == [BROKER_A, BROKER_B]
    info = tables.cluster_info()
    assert info.cluster_addr_table == {CLUSTER: (BROKER_A, BROKER_B)}


def test_tbw102_is_routable_when_a_broker_registers_it(tables: RouteTables) -> None:
    inherit = TopicConfig(TBW102, read_queue_count=8, write_queue_count=8, perm=7)
    tables.register_broker(registration(topics={TBW102: inherit, ORDERS: RW}))
    route = tables.route_for_topic(TBW102)
    assert route is not None
    assert route.queue_datas == (QueueData(BROKER_A, 8, 8, 7, 0),)
    assert route.broker_datas[0].broker_addrs[0] == MASTER_A


def test_reregistration_without_a_topic_keeps_its_queue_data_by_default(
    tables: RouteTables,
) -> None:
    """As Java's default (deleteTopicWithBrokerRegistration=false): a master that stops
    reporting a topic (a slave promoted before it copied it) leaves the topic routable."""
    tables.register_broker(registration(topics={ORDERS: RW}, version=1))
    tables.register_broker(registration(topics={}, version=2))
    route = tables.route_for_topic(ORDERS)
    assert route is not None
    assert [q.broker_name for q in route.queue_datas] == [BROKER_A]


def test_reregistration_without_a_topic_removes_its_queue_data_when_asked(
    clock: ManualClock,
) -> None:
    tables = RouteTables(clock, delete_topic_with_broker_registration=True)
    other = Topic("other")
    tables.register_broker(registration(topics={ORDERS: RW, other: RW}, version=1))
    tables.register_broker(
        registration(broker_name=BROKER_B, broker_addr=MASTER_B, topics={other: RW})
    )
    tables.register_broker(registration(topics={ORDERS: RW}, version=2))
    assert tables.route_for_topic(ORDERS) is not None
    route = tables.route_for_topic(other)
    assert route is not None
    assert [q.broker_name for q in route.queue_datas] == [BROKER_B]
    tables.register_broker(registration(topics={}, version=3))
    assert tables.route_for_topic(ORDERS) is None
    assert tables.all_topics() == [other]


def test_expiry_after_120_seconds_of_silence(clock: ManualClock, tables: RouteTables) -> None:
    tables.register_broker(registration())
    clock.advance_ms(BROKER_EXPIRY_MS)
    assert tables.expire() == []
    assert tables.route_for_topic(ORDERS) is not None
    clock.advance_ms(1)
    assert tables.expire() == [(MASTER_A, None)]
    assert tables.route_for_topic(ORDERS) is None
    assert tables.cluster_info().broker_addr_table == {}
    assert tables.cluster_info().cluster_addr_table == {}
    assert tables.all_topics() == []


def test_reregistration_keeps_a_broker_alive(clock: ManualClock, tables: RouteTables) -> None:
    tables.register_broker(registration())
    clock.advance_ms(100_000)
    tables.register_broker(registration())
    clock.advance_ms(100_000)
    assert tables.expire() == []
    assert tables.last_update_ms(MASTER_A) == 100_000


def test_expired_slave_leaves_master_routes(clock: ManualClock, tables: RouteTables) -> None:
    tables.register_broker(registration(broker_addr=SLAVE_A, broker_id=1))
    clock.advance_ms(60_000)
    tables.register_broker(registration())
    clock.advance_ms(60_001)
    assert tables.expire() == [(SLAVE_A, None)]
    route = tables.route_for_topic(ORDERS)
    assert route is not None
    assert dict(route.broker_datas[0].broker_addrs) == {0: MASTER_A}


def test_unregister_master_then_slave(tables: RouteTables) -> None:
    tables.register_broker(registration())
    tables.register_broker(registration(broker_addr=SLAVE_A, broker_id=1))
    assert tables.unregister_broker(CLUSTER, BROKER_A, MASTER_A, 0)
    assert not tables.is_live(MASTER_A)
    route = tables.route_for_topic(ORDERS)
    assert route is not None  # the name keeps its queue data while a slave remains
    assert dict(route.broker_datas[0].broker_addrs) == {1: SLAVE_A}
    assert tables.unregister_broker(CLUSTER, BROKER_A, SLAVE_A, 1)
    assert tables.route_for_topic(ORDERS) is None
    assert tables.cluster_info().cluster_addr_table == {}


def test_unregister_with_a_stale_address_keeps_the_successor(tables: RouteTables) -> None:
    tables.register_broker(registration())
    assert not tables.unregister_broker(CLUSTER, BROKER_A, Address("10.9.9.9:10911"), 0)
    assert tables.route_for_topic(ORDERS) is not None


def test_connection_close_drops_its_brokers_at_once(tables: RouteTables) -> None:
    connection_a, connection_b = object(), object()
    tables.register_broker(registration(connection=connection_a))
    tables.register_broker(
        registration(broker_name=BROKER_B, broker_addr=MASTER_B, connection=connection_b)
    )
    assert tables.drop_connection(connection_a) == [MASTER_A]
    route = tables.route_for_topic(ORDERS)
    assert route is not None
    assert [q.broker_name for q in route.queue_datas] == [BROKER_B]
    assert tables.drop_connection(connection_a) == []
    assert tables.drop_connection(connection_b) == [MASTER_B]
    assert tables.route_for_topic(ORDERS) is None


def test_slave_promoted_to_master_keeps_one_id_per_address(tables: RouteTables) -> None:
    tables.register_broker(registration(broker_addr=SLAVE_A, broker_id=1))
    tables.register_broker(registration(broker_addr=SLAVE_A, broker_id=0))
    info = tables.cluster_info()
    assert info.broker_addr_table[BROKER_A].broker_addrs == {0: SLAVE_A}
    assert tables.route_for_topic(ORDERS) is not None


def test_broker_moving_cluster_leaves_the_old_one(tables: RouteTables) -> None:
    tables.register_broker(registration())
    other_cluster = ClusterName("other")
    tables.register_broker(registration(cluster=other_cluster, version=2))
    info = tables.cluster_info()
    assert info.cluster_addr_table == {other_cluster: (BROKER_A,)}
    assert info.broker_addr_table[BROKER_A].cluster == other_cluster


def test_topics_by_cluster_and_delete_topic(tables: RouteTables) -> None:
    other_cluster = ClusterName("other")
    tables.register_broker(registration())
    tables.register_broker(
        registration(broker_name=BROKER_B, broker_addr=MASTER_B, cluster=other_cluster)
    )
    assert tables.topics_by_cluster(CLUSTER) == [ORDERS]
    assert tables.topics_by_cluster(ClusterName("none")) == []
    assert tables.delete_topic(ORDERS, other_cluster)
    route = tables.route_for_topic(ORDERS)
    assert route is not None
    assert [q.broker_name for q in route.queue_datas] == [BROKER_A]
    assert tables.delete_topic(ORDERS)
    assert tables.route_for_topic(ORDERS) is None
    assert not tables.delete_topic(ORDERS)


def test_deleted_topic_returns_with_a_new_data_version(tables: RouteTables) -> None:
    tables.register_broker(registration(version=1))
    tables.delete_topic(ORDERS)
    tables.register_broker(registration(version=1))
    assert tables.route_for_topic(ORDERS) is None
    tables.register_broker(registration(version=2))
    assert tables.route_for_topic(ORDERS) is not None


def test_wipe_and_add_write_perm(tables: RouteTables) -> None:
    tables.register_broker(registration(topics={ORDERS: RW, TBW102: RW}))
    assert tables.wipe_write_perm(BROKER_A) == 2
    route = tables.route_for_topic(ORDERS)
    assert route is not None and route.queue_datas[0].perm == 4
    assert tables.add_write_perm(BROKER_A) == 2
    route = tables.route_for_topic(ORDERS)
    assert route is not None and route.queue_datas[0].perm == 6
    assert tables.wipe_write_perm(BROKER_B) == 0


def test_live_table_is_bounded(clock: ManualClock) -> None:
    tables = RouteTables(clock, max_live_brokers=1)
    tables.register_broker(registration())
    tables.register_broker(registration())  # re-registering a known address is fine
    with pytest.raises(BackpressureError):
        tables.register_broker(registration(broker_name=BROKER_B, broker_addr=MASTER_B))


def test_empty_topic_table_means_no_topic_update(tables: RouteTables) -> None:
    tables.register_broker(registration())
    none = BrokerRegistration(
        cluster_name=CLUSTER,
        broker_name=BROKER_A,
        broker_addr=MASTER_A,
        broker_id=0,
        ha_server_addr="",
        data_version=DataVersion(),
        topic_configs=None,
    )
    assert not tables.register_broker(none).topic_config_changed
    assert tables.route_for_topic(ORDERS) is not None


def test_instances_share_nothing(clock: ManualClock) -> None:
    first, second = RouteTables(clock), RouteTables(clock)
    first.register_broker(registration())
    assert second.route_for_topic(ORDERS) is None
    assert second.live_addresses() == []
