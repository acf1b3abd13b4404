"""A NameServer on 127.0.0.1 port 0, driven over real sockets by a ClientPool."""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator

import orjson
import pytest

from bolide.base.clock import ManualClock
from bolide.base.limits import BROKER_EXPIRY_MS, NAMESRV_SCAN_INTERVAL_MS
from bolide.base.types import Topic
from bolide.namesrv import NameServer
from bolide.namesrv.kv_config import ORDER_TOPIC_CONFIG_NAMESPACE
from bolide.protocol.bodies import (
    ClusterInfo,
    DataVersion,
    KVTable,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicList,
    TopicRouteData,
)
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.frame import SerializeType
from bolide.protocol.headers import (
    DeleteTopicFromNamesrvRequestHeader,
    GetRouteInfoRequestHeader,
    RegisterBrokerRequestHeader,
    UnregisterBrokerRequestHeader,
)
from bolide.remoting import ClientPool
from bolide.testing.waiting import until

pytestmark = pytest.mark.timeout(30)

MASTER_ADDR = "127.0.0.1:10911"
SLAVE_ADDR = "127.0.0.1:20911"


@pytest.fixture
async def namesrv() -> AsyncIterator[NameServer]:
    server = NameServer()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
async def pool() -> AsyncIterator[ClientPool]:
    client_pool = ClientPool()
    try:
        yield client_pool
    finally:
        await client_pool.close()


def register_body(topics: dict[str, TopicConfig], counter: int = 1) -> bytes:
    wrapper = TopicConfigSerializeWrapper(topics, DataVersion(1_700_000_000_000, counter))
    return RegisterBrokerBody(wrapper).to_json()


def register_request(
    body: bytes,
    *,
    broker_addr: str = MASTER_ADDR,
    broker_id: int = 0,
    broker_name: str = "broker-a",
    crc: int | None = None,
    compressed: bool = False,
) -> RemotingCommand:
    header = RegisterBrokerRequestHeader(
        broker_name=broker_name,
        broker_addr=broker_addr,
        cluster_name="DefaultCluster",
        ha_server_addr=broker_addr.replace("0911", "0912"),
        broker_id=broker_id,
        compressed=compressed,
        body_crc32=zlib.crc32(body) & 0x7FFFFFFF if crc is None else crc,
    )
    return RemotingCommand.request(RequestCode.REGISTER_BROKER, header.to_ext_fields(), body)


ORDERS = TopicConfig("orders", read_queue_count=4, write_queue_count=4, perm=6)
TBW102 = TopicConfig("TBW102", read_queue_count=8, write_queue_count=8, perm=7)


async def route(pool: ClientPool, address: str, topic: str) -> RemotingCommand:
    header = GetRouteInfoRequestHeader(topic)
    request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, header.to_ext_fields())
    return await pool.invoke(address, request)


async def call(
    pool: ClientPool, address: str, code: int, fields: dict[str, str] | None = None
) -> RemotingCommand:
    return await pool.invoke(address, RemotingCommand.request(code, fields))


async def test_register_then_route_json_is_exactly_the_wire_shape(
    namesrv: NameServer, pool: ClientPool
) -> None:
    body = register_body({"orders": ORDERS, "TBW102": TBW102})
    response = await pool.invoke(namesrv.address, register_request(body))
    assert response.code == ResponseCode.SUCCESS
    assert response.is_response
    assert "masterAddr" not in response.ext_fields
    assert response.body == b""

    answer = await route(pool, namesrv.address, "orders")
    assert answer.code == ResponseCode.SUCCESS
    assert orjson.loads(answer.body) == {
        "brokerDatas": [
            {
                "brokerAddrs": {"0": MASTER_ADDR},
                "brokerName": "broker-a",
                "cluster": "DefaultCluster",
            }
        ],
        "filterServerTable": {},
        "queueDatas": [
            {
                "brokerName": "broker-a",
                "perm": 6,
                "readQueueNums": 4,
                "topicSynFlag": 0,
                "topicSysFlag": 0,
                "writeQueueNums": 4,
            }
        ],
    }
    assert b'"brokerAddrs":{"0":"127.0.0.1:10911"}' in answer.body  # standard JSON key

    default_topic = TopicRouteData.from_json((await route(pool, namesrv.address, "TBW102")).body)
    assert [(q.perm, q.write_queue_count) for q in default_topic.queue_datas] == [(7, 8)]


async def test_unknown_topic_is_topic_not_exist(namesrv: NameServer, pool: ClientPool) -> None:
    answer = await route(pool, namesrv.address, "nowhere")
    assert answer.code == 17  # TOPIC_NOT_EXIST
    assert answer.remark == "No topic route info in name server for the topic: nowhere"
    assert answer.body == b""


async def test_crc_mismatch_is_system_error_and_registers_nothing(
    namesrv: NameServer, pool: ClientPool
) -> None:
    body = register_body({"orders": ORDERS})
    good_crc = zlib.crc32(body) & 0x7FFFFFFF
    response = await pool.invoke(namesrv.address, register_request(body, crc=good_crc ^ 1))
    assert response.code == ResponseCode.SYSTEM_ERROR
    assert response.remark == "crc32 not match"
    assert namesrv.routes.live_addresses() == []
    zero_crc = await pool.invoke(namesrv.address, register_request(body, crc=0))
    assert zero_crc.code == ResponseCode.SUCCESS  # 0 means "not checked"


async def test_compressed_register_body_is_refused_clearly(
    namesrv: NameServer, pool: ClientPool
) -> None:
    body = zlib.compress(register_body({"orders": ORDERS}))
    response = await pool.invoke(namesrv.address, register_request(body, compressed=True))
    assert response.code == ResponseCode.SYSTEM_ERROR
    assert response.remark is not None and "compressed" in response.remark
    assert "compressedRegister=false" in response.remark


async def test_malformed_body_is_system_error(namesrv: NameServer, pool: ClientPool) -> None:
    response = await pool.invoke(namesrv.address, register_request(b"{not json"))
    assert response.code == ResponseCode.SYSTEM_ERROR
    assert namesrv.routes.live_addresses() == []


async def test_missing_header_field_is_system_error(namesrv: NameServer, pool: ClientPool) -> None:
    response = await call(pool, namesrv.address, RequestCode.GET_ROUTEINFO_BY_TOPIC, {})
    assert response.code == ResponseCode.SYSTEM_ERROR
    assert response.remark is not None and "topic" in response.remark


async def test_unknown_code_is_not_supported(namesrv: NameServer, pool: ClientPool) -> None:
    response = await call(pool, namesrv.address, RequestCode.PULL_MESSAGE)
    assert response.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert response.remark == " request type 11 not supported"


async def test_binary_request_gets_binary_answer(namesrv: NameServer, pool: ClientPool) -> None:
    request = RemotingCommand.request(
        RequestCode.GET_ROUTEINFO_BY_TOPIC, GetRouteInfoRequestHeader("x").to_ext_fields()
    )
    request.serialize_type = SerializeType.ROCKETMQ
    response = await pool.invoke(namesrv.address, request)
    assert response.serialize_type == SerializeType.ROCKETMQ
    assert response.code == ResponseCode.TOPIC_NOT_EXIST


async def test_slave_gets_master_and_ha_address(namesrv: NameServer, pool: ClientPool) -> None:
    body = register_body({"orders": ORDERS})
    await pool.invoke(namesrv.address, register_request(body))
    response = await pool.invoke(
        namesrv.address, register_request(body, broker_addr=SLAVE_ADDR, broker_id=1)
    )
    assert response.code == ResponseCode.SUCCESS
    assert response.ext_fields == {"masterAddr": MASTER_ADDR, "haServerAddr": "127.0.0.1:10912"}
    data = TopicRouteData.from_json((await route(pool, namesrv.address, "orders")).body)
    assert data.broker_datas[0].broker_addrs == {0: MASTER_ADDR, 1: SLAVE_ADDR}
    assert len(data.queue_datas) == 1


async def test_closing_the_broker_connection_removes_its_routes(namesrv: NameServer) -> None:
    broker_pool, client_pool = ClientPool(), ClientPool()
    try:
        body = register_body({"orders": ORDERS})
        registered = await broker_pool.invoke(namesrv.address, register_request(body))
        assert registered.code == ResponseCode.SUCCESS
        assert (await route(client_pool, namesrv.address, "orders")).code == ResponseCode.SUCCESS
        await broker_pool.close()
        await until(lambda: namesrv.routes.live_addresses() == [])
        answer = await route(client_pool, namesrv.address, "orders")
        assert answer.code == ResponseCode.TOPIC_NOT_EXIST
        # A client's connection closing does not touch the brokers'.
        assert namesrv.routes.cluster_info().broker_addr_table == {}
    finally:
        await broker_pool.close()
        await client_pool.close()


async def test_client_connection_close_keeps_broker_routes(namesrv: NameServer) -> None:
    broker_pool, client_pool = ClientPool(), ClientPool()
    try:
        await broker_pool.invoke(namesrv.address, register_request(register_body({"o": ORDERS})))
        await route(client_pool, namesrv.address, "o")
        await client_pool.close()
        await until(lambda: len(namesrv.connections) == 1)
        assert namesrv.routes.live_addresses() == [MASTER_ADDR]
    finally:
        await broker_pool.close()
        await client_pool.close()


async def test_two_name_servers_are_independent(pool: ClientPool) -> None:
    first, second = NameServer(), NameServer()
    await first.start()
    await second.start()
    try:
        assert first.address != second.address
        response = await pool.invoke(first.address, register_request(register_body({"o": ORDERS})))
        assert response.code == ResponseCode.SUCCESS
        assert (await route(pool, first.address, "o")).code == ResponseCode.SUCCESS
        assert (await route(pool, second.address, "o")).code == ResponseCode.TOPIC_NOT_EXIST
        assert second.routes.live_addresses() == []
    finally:
        await first.stop()
        await second.stop()


async def test_silent_broker_expires_and_its_connection_is_closed(pool: ClientPool) -> None:
    clock = ManualClock()
    namesrv = NameServer(clock=clock)
    await namesrv.start()
    try:
        await pool.invoke(namesrv.address, register_request(register_body({"o": ORDERS})))
        assert namesrv.address in pool.connections
        scans = BROKER_EXPIRY_MS // NAMESRV_SCAN_INTERVAL_MS + 1
        for _ in range(scans):
            await _one_scan(clock, namesrv)
        assert namesrv.routes.live_addresses() == []
        assert (await _route_via_new_pool(namesrv.address, "o")).code == 17
        await until(lambda: namesrv.address not in pool.connections)
    finally:
        await namesrv.stop()


async def _one_scan(clock: ManualClock, namesrv: NameServer) -> None:
    await until(lambda: clock.sleeper_count == 1)
    target_steps = namesrv.housekeeping.service.step_count + 1
    clock.advance_ms(NAMESRV_SCAN_INTERVAL_MS)
    await until(lambda: namesrv.housekeeping.service.step_count == target_steps)


async def _route_via_new_pool(address: str, topic: str) -> RemotingCommand:
    other = ClientPool()
    try:
        return await route(other, address, topic)
    finally:
        await other.close()


async def test_unregister_broker(namesrv: NameServer, pool: ClientPool) -> None:
    await pool.invoke(namesrv.address, register_request(register_body({"o": ORDERS})))
    header = UnregisterBrokerRequestHeader("broker-a", MASTER_ADDR, "DefaultCluster", 0)
    response = await call(
        pool, namesrv.address, RequestCode.UNREGISTER_BROKER, header.to_ext_fields()
    )
    assert response.code == ResponseCode.SUCCESS
    assert (await route(pool, namesrv.address, "o")).code == ResponseCode.TOPIC_NOT_EXIST
    assert namesrv.routes.live_addresses() == []


async def test_cluster_info_topic_lists_and_delete(namesrv: NameServer, pool: ClientPool) -> None:
    body = register_body({"orders": ORDERS, "TBW102": TBW102})
    await pool.invoke(namesrv.address, register_request(body))
    info = ClusterInfo.from_json(
        (await call(pool, namesrv.address, RequestCode.GET_BROKER_CLUSTER_INFO)).body
    )
    assert info.cluster_addr_table == {"DefaultCluster": ("broker-a",)}
    assert info.broker_addr_table["broker-a"].broker_addrs == {0: MASTER_ADDR}

    everything = await call(pool, namesrv.address, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
    assert TopicList.from_json(everything.body).topic_list == ("TBW102", "orders")
    by_cluster = await call(
        pool, namesrv.address, RequestCode.GET_TOPICS_BY_CLUSTER, {"cluster": "DefaultCluster"}
    )
    assert TopicList.from_json(by_cluster.body).topic_list == ("TBW102", "orders")

    delete = DeleteTopicFromNamesrvRequestHeader("orders").to_ext_fields()
    deleted = await call(pool, namesrv.address, RequestCode.DELETE_TOPIC_IN_NAMESRV, delete)
    assert deleted.code == ResponseCode.SUCCESS
    assert (await route(pool, namesrv.address, "orders")).code == ResponseCode.TOPIC_NOT_EXIST
    assert namesrv.routes.all_topics() == [Topic("TBW102")]


async def test_wipe_and_add_write_perm(namesrv: NameServer, pool: ClientPool) -> None:
    await pool.invoke(namesrv.address, register_request(register_body({"orders": ORDERS})))
    fields = {"brokerName": "broker-a"}
    wiped = await call(pool, namesrv.address, RequestCode.WIPE_WRITE_PERM_OF_BROKER, fields)
    assert wiped.ext_fields == {"wipeTopicCount": "1"}
    data = TopicRouteData.from_json((await route(pool, namesrv.address, "orders")).body)
    assert data.queue_datas[0].perm == 4
    added = await call(pool, namesrv.address, RequestCode.ADD_WRITE_PERM_OF_BROKER, fields)
    assert added.ext_fields == {"addTopicCount": "1"}
    data = TopicRouteData.from_json((await route(pool, namesrv.address, "orders")).body)
    assert data.queue_datas[0].perm == 6


async def test_kv_config_and_order_topic_conf(pool: ClientPool) -> None:
    namesrv = NameServer(order_message_enable=True)
    await namesrv.start()
    try:
        address = namesrv.address
        item = {"namespace": ORDER_TOPIC_CONFIG_NAMESPACE, "key": "orders"}
        missing = await call(pool, address, RequestCode.GET_KV_CONFIG, item)
        assert missing.code == ResponseCode.QUERY_NOT_FOUND
        put = await call(pool, address, RequestCode.PUT_KV_CONFIG, {**item, "value": "broker-a:4"})
        assert put.code == ResponseCode.SUCCESS
        got = await call(pool, address, RequestCode.GET_KV_CONFIG, item)
        assert (got.code, got.ext_fields) == (ResponseCode.SUCCESS, {"value": "broker-a:4"})
        listing = await call(
            pool,
            address,
            RequestCode.GET_KVLIST_BY_NAMESPACE,
            {"namespace": ORDER_TOPIC_CONFIG_NAMESPACE},
        )
        assert KVTable.from_json(listing.body).table == {"orders": "broker-a:4"}

        registered = await pool.invoke(address, register_request(register_body({"orders": ORDERS})))
        assert KVTable.from_json(registered.body).table == {"orders": "broker-a:4"}
        data = TopicRouteData.from_json((await route(pool, address, "orders")).body)
        assert data.order_topic_conf == "broker-a:4"

        deleted = await call(pool, address, RequestCode.DELETE_KV_CONFIG, item)
        assert deleted.code == ResponseCode.SUCCESS
        empty = await call(
            pool,
            address,
            RequestCode.GET_KVLIST_BY_NAMESPACE,
            {"namespace": ORDER_TOPIC_CONFIG_NAMESPACE},
        )
        assert empty.code == ResponseCode.QUERY_NOT_FOUND
        data = TopicRouteData.from_json((await route(pool, address, "orders")).body)
        assert data.order_topic_conf is None
    finally:
        await namesrv.stop()


async def test_query_data_version(namesrv: NameServer, pool: ClientPool) -> None:
    header = UnregisterBrokerRequestHeader("broker-a", MASTER_ADDR, "DefaultCluster", 0)
    version_one = orjson.dumps(DataVersion(1_700_000_000_000, 1).to_object())

    async def query(body: bytes) -> RemotingCommand:
        request = RemotingCommand.request(
            RequestCode.QUERY_DATA_VERSION, header.to_ext_fields(), body
        )
        return await pool.invoke(namesrv.address, request)

    unknown = await query(version_one)
    assert (unknown.code, unknown.ext_fields, unknown.body) == (0, {"changed": "true"}, b"")
    await pool.invoke(namesrv.address, register_request(register_body({"o": ORDERS}, counter=1)))
    same = await query(version_one)
    assert same.ext_fields == {"changed": "false"}
    assert orjson.loads(same.body) == {"counter": 1, "timestamp": 1_700_000_000_000}
    newer = await query(orjson.dumps(DataVersion(1_700_000_000_000, 2).to_object()))
    assert newer.ext_fields == {"changed": "true"}
