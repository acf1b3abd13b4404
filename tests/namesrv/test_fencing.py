"""Name server fencing in controller mode: registrations carry stateVersion = master epoch, and
a deposed master (older epoch) cannot take back broker id 0 from its live successor."""

from __future__ import annotations

import logging
import zlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bolide.base.clock import ManualClock
from bolide.base.types import Address, BrokerName, ClusterName, Topic
from bolide.namesrv import NameServer
from bolide.namesrv.routes import BrokerRegistration, RouteTables
from bolide.protocol.bodies import (
    DataVersion,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicRouteData,
)
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import GetRouteInfoRequestHeader, RegisterBrokerRequestHeader
from bolide.remoting import ClientPool
from bolide.testing.cluster import Cluster

pytestmark = pytest.mark.timeout(30)

ORDERS = TopicConfig("orders", read_queue_count=4, write_queue_count=4, perm=6)
OLD = Address("127.0.0.1:10911")
NEW = Address("127.0.0.1:20911")


def registration(address: Address, broker_id: int, epoch: int) -> BrokerRegistration:
    return BrokerRegistration(
        cluster_name=ClusterName("c"),
        broker_name=BrokerName("broker-a"),
        broker_addr=address,
        broker_id=broker_id,
        ha_server_addr=address,
        data_version=DataVersion(1, 1, epoch),
        topic_configs={"orders": ORDERS},
    )


def test_data_version_json_carries_state_version_only_when_set() -> None:
    assert DataVersion(5, 2).to_object() == {"counter": 2, "timestamp": 5}
    assert DataVersion(5, 2, 7).to_object() == {"counter": 2, "stateVersion": 7, "timestamp": 5}
    assert DataVersion.from_object({"counter": 2, "stateVersion": 7, "timestamp": 5}) == (
        DataVersion(5, 2, 7)
    )
    assert DataVersion(5, 2, 7).next(9) == DataVersion(9, 3, 7)
    assert DataVersion(5, 2, 7).next_state(8, 9) == DataVersion(9, 3, 8)


def test_promoted_slave_replaces_its_slave_id_and_fences_the_old_master(
    caplog: pytest.LogCaptureFixture,
) -> None:
    tables = RouteTables(ManualClock())
    tables.register_broker(registration(OLD, 0, 1))
    tables.register_broker(registration(NEW, 1, 1))
    # the old master is cut off (still live here); the slave is elected with epoch 2
    tables.register_broker(registration(NEW, 0, 2))
    route = tables.route_for_topic(Topic("orders"))
    assert route is not None and route.broker_datas[0].broker_addrs == {0: NEW}
    # the deposed master re-registers as id 0 with its old epoch: ignored and not live
    with caplog.at_level(logging.WARNING, logger="bolide.namesrv.routes"):
        result = tables.register_broker(registration(OLD, 0, 1))
    assert not result.topic_config_changed
    assert "conflicts" in caplog.text
    route = tables.route_for_topic(Topic("orders"))
    assert route is not None and route.broker_datas[0].broker_addrs == {0: NEW}
    assert not tables.is_live(OLD)
    # as a slave under its new id it is welcome
    answer = tables.register_broker(registration(OLD, 2, 2))
    assert answer.master_addr == NEW
    route = tables.route_for_topic(Topic("orders"))
    assert route is not None and route.broker_datas[0].broker_addrs == {0: NEW, 2: OLD}


def test_equal_or_newer_epoch_takes_the_id_and_a_dead_holder_fences_nothing() -> None:
    tables = RouteTables(ManualClock())
    tables.register_broker(registration(OLD, 0, 3))
    tables.register_broker(registration(NEW, 0, 4))
    route = tables.route_for_topic(Topic("orders"))
    assert route is not None and route.broker_datas[0].broker_addrs[0] == NEW
    # 4.x mode: every stateVersion is 0, so the last registration wins as before
    plain = RouteTables(ManualClock())
    plain.register_broker(registration(OLD, 0, 0))
    plain.register_broker(registration(NEW, 0, 0))
    route = plain.route_for_topic(Topic("orders"))
    assert route is not None and route.broker_datas[0].broker_addrs[0] == NEW
    # a holder that is no longer live fences nothing
    gone = RouteTables(ManualClock())
    gone.register_broker(registration(NEW, 0, 5))
    gone.register_broker(registration(OLD, 1, 5))
    gone.drop_connection(None)
    gone.register_broker(registration(OLD, 0, 1))
    route = gone.route_for_topic(Topic("orders"))
    assert route is not None and route.broker_datas[0].broker_addrs == {0: OLD}


def _register(address: str, broker_id: int, epoch: int) -> RemotingCommand:
    wrapper = TopicConfigSerializeWrapper({"orders": ORDERS}, DataVersion(1, 1, epoch))
    body = RegisterBrokerBody(wrapper).to_json()
    header = RegisterBrokerRequestHeader(
        broker_name="broker-a",
        broker_addr=address,
        cluster_name="DefaultCluster",
        ha_server_addr=address,
        broker_id=broker_id,
        compressed=False,
        body_crc32=zlib.crc32(body) & 0x7FFFFFFF,
    )
    return RemotingCommand.request(RequestCode.REGISTER_BROKER, header.to_ext_fields(), body)


@pytest.fixture
async def namesrv() -> AsyncIterator[NameServer]:
    server = NameServer()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


async def test_stale_registration_over_sockets_keeps_the_new_master(namesrv: NameServer) -> None:
    old_pool, new_pool, client = ClientPool(), ClientPool(), ClientPool()
    try:
        assert (await old_pool.invoke(namesrv.address, _register(OLD, 0, 1))).code == 0
        assert (await new_pool.invoke(namesrv.address, _register(NEW, 0, 2))).code == 0
        stale = await old_pool.invoke(namesrv.address, _register(OLD, 0, 1))
        assert stale.code == ResponseCode.SUCCESS  # Java answers success and ignores it
        header = GetRouteInfoRequestHeader("orders")
        request = RemotingCommand.request(
            RequestCode.GET_ROUTEINFO_BY_TOPIC, header.to_ext_fields()
        )
        data = TopicRouteData.from_json((await client.invoke(namesrv.address, request)).body)
        assert data.broker_datas[0].broker_addrs == {0: NEW}
    finally:
        for pool in (old_pool, new_pool, client):
            await pool.close()


async def test_brokers_register_their_epoch_and_a_stale_master_is_fenced(tmp_path: Path) -> None:
    async with Cluster(tmp_path) as cluster:
        old = cluster.broker("broker-a")
        await old.context.topics.update_topic_config(ORDERS)
        old.context.topics.enter_epoch(1)
        await old.context.register_now()
        namesrv = cluster.namesrvs[0]
        old_version = namesrv.routes.data_version_of(Address(old.address))
        assert old_version is not None and old_version.state_version == 1
        # a second broker-a (the controller's new master) registers under epoch 2
        new = await cluster.add_broker("broker-a", store_path_root_dir=tmp_path / "new")
        await new.context.topics.update_topic_config(ORDERS)
        new.context.topics.enter_epoch(2)
        await new.context.register_now()
        # the old one, still running, registers again with its epoch 1: ignored
        await old.context.register_now()
        route = namesrv.routes.route_for_topic(Topic("orders"))
        assert route is not None and route.broker_datas[0].broker_addrs == {0: new.address}
        assert not namesrv.routes.is_live(Address(old.address))
