"""Several servers together over real sockets: two brokers sharing a topic behind one name
server, one broker registered with two name servers, and a broker restarted on its data."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from bolide.base.errors import CorruptDataError
from bolide.base.types import Topic
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import CreateTopicRequestHeader, PullSysFlag
from bolide.remoting import ClientPool
from bolide.testing.cluster import Cluster
from tests.compat.cpp_clients import stored_messages
from tests.integration.wire import BrokerWire, heartbeat_request, records


async def _route(pool: ClientPool, namesrv: str, topic: str) -> RemotingCommand:
    request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
    return await pool.invoke(namesrv, request)


async def test_two_brokers_share_a_topic_and_consumers_get_all(tmp_path: Path) -> None:
    async with Cluster(tmp_path, broker_names=("broker-a", "broker-b")) as cluster:
        pool = ClientPool()
        try:
            wires = {b.config.broker_name: BrokerWire(pool, b.address) for b in cluster.brokers}
            create = CreateTopicRequestHeader("Shared", "TBW102", 2, 2, 6)
            for wire in wires.values():
                request = RemotingCommand.request(
                    RequestCode.UPDATE_AND_CREATE_TOPIC, create.to_ext_fields()
                )
                assert (await wire.invoke(request)).code == ResponseCode.SUCCESS
            route = orjson.loads((await _route(pool, cluster.namesrv_address, "Shared")).body)
            assert sorted(q["brokerName"] for q in route["queueDatas"]) == ["broker-a", "broker-b"]
            assert {b["brokerName"]: b["brokerAddrs"]["0"] for b in route["brokerDatas"]} == {
                name: wire.address for name, wire in wires.items()
            }
            sent = set()
            for index in range(12):  # a producer's round robin over the route's four queues
                name = ("broker-a", "broker-b")[index % 2]
                body = f"shared {index}".encode()
                response = await wires[name].send("Shared", body, queue_id=(index // 2) % 2)
                assert response.code == ResponseCode.SUCCESS
                sent.add(body)
            received = set()
            for wire in wires.values():
                for queue_id in range(2):
                    response = await wire.pull("Shared", queue_id, 0, group="CG_SHARED")
                    assert response.code == ResponseCode.SUCCESS
                    received |= {m.body for m in records(response)}
            assert received == sent
            for broker in cluster.brokers:
                assert len(stored_messages(broker, "Shared")) == 6
        finally:
            await pool.close()


async def test_a_broker_registers_with_every_name_server(tmp_path: Path) -> None:
    async with Cluster(tmp_path, namesrv_count=2) as cluster:
        broker = cluster.brokers[0]
        pool = ClientPool()
        try:
            for namesrv in cluster.namesrvs:
                route = await _route(pool, namesrv.address, "TBW102")
                assert route.code == ResponseCode.SUCCESS
                assert (
                    orjson.loads(route.body)["brokerDatas"][0]["brokerAddrs"]["0"] == broker.address
                )
            await BrokerWire(pool, broker.address).send("EverywhereTopic", b"x")
            await broker.registration.register_once()
            for namesrv in cluster.namesrvs:
                assert namesrv.routes.route_for_topic(Topic("EverywhereTopic")) is not None
            await broker.stop()  # unregisters
            cluster.brokers.remove(broker)
            for namesrv in cluster.namesrvs:
                assert (await _route(pool, namesrv.address, "TBW102")).code == (
                    ResponseCode.TOPIC_NOT_EXIST
                )
        finally:
            await pool.close()


async def test_a_restarted_broker_keeps_topics_offsets_and_messages(tmp_path: Path) -> None:
    async with Cluster(tmp_path) as cluster:
        pool = ClientPool()
        try:
            broker = cluster.brokers[0]
            wire = BrokerWire(pool, broker.address)
            for index in range(5):
                assert (await wire.send("Durable", f"m{index}".encode())).code == 0
            heartbeat = heartbeat_request("kept", consumer_groups={"CG_KEPT": {"Durable": "*"}})
            await wire.invoke(heartbeat)
            flags = PullSysFlag.SUBSCRIPTION | PullSysFlag.COMMIT_OFFSET
            await wire.pull("Durable", 0, 3, group="CG_KEPT", sys_flag=flags, commit_offset=3)
            await broker.stop()
            cluster.brokers.remove(broker)
            restarted = await cluster.add_broker("broker-a")
            context = restarted.context
            assert context.topics.find("Durable") is not None
            assert context.topics.find("%RETRY%CG_KEPT") is not None
            assert context.groups.find("CG_KEPT") is not None
            assert context.offsets.query_offset("CG_KEPT", "Durable", 0) == 3
            again = BrokerWire(pool, restarted.address)
            response = await again.pull("Durable", 0, 3, group="CG_KEPT")
            assert [m.body for m in records(response)] == [b"m3", b"m4"]
            assert response.ext_fields["maxOffset"] == "5"
        finally:
            await pool.close()


async def test_a_broker_that_cannot_start_leaves_its_store_closed(tmp_path: Path) -> None:
    store_root = tmp_path / "broker-a" / "store"
    (store_root / "config").mkdir(parents=True)
    for name in ("topics.json", "topics.json.bak"):
        (store_root / "config" / name).write_text("{damaged")
    async with Cluster(tmp_path, broker_names=()) as cluster:
        with pytest.raises(CorruptDataError):
            await cluster.add_broker("broker-a")
        assert cluster.brokers == []
    assert (store_root / "checkpoint").exists()
    assert not (store_root / "abort").exists()  # shut down cleanly, not left running
