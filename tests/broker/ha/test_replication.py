"""Master and slave brokers in one process over real sockets: the HA stream, SYNC_MASTER
acks, read-only slaves, pulls from a slave and the slave's copy of the master's tables."""

from __future__ import annotations

from pathlib import Path

from bolide.broker.broker import Broker
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import CreateTopicRequestHeader
from bolide.remoting import ClientPool
from bolide.testing.cluster import Cluster
from tests.compat.cpp_clients import stored_messages
from tests.integration.client_support import eventually
from tests.integration.wire import BrokerWire, records


async def _slave(cluster: Cluster, tmp_path: Path, **settings: object) -> Broker:
    return await cluster.add_broker(
        "broker-a",
        broker_id=1,
        broker_role="SLAVE",
        store_path_root_dir=tmp_path / "slave" / "store",
        **settings,
    )


async def _create_topic(wire: BrokerWire, topic: str, queues: int = 1) -> None:
    create = CreateTopicRequestHeader(topic, "TBW102", queues, queues, 6)
    request = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, create.to_ext_fields())
    assert (await wire.invoke(request)).code == ResponseCode.SUCCESS


async def test_sync_master_answers_after_the_slave_has_the_message(tmp_path: Path) -> None:
    settings = {"broker_role": "SYNC_MASTER", "ha_listen_port": 0}
    async with Cluster(tmp_path, settings=settings) as cluster:
        master = cluster.broker("broker-a")
        slave = await _slave(cluster, tmp_path, slave_read_enable=True)
        pool = ClientPool()
        try:
            await eventually(
                lambda: bool(master.replication.master and master.replication.master.links)
            )
            wire = BrokerWire(pool, master.address)
            await _create_topic(wire, "Replicated")
            for index in range(50):
                response = await wire.send("Replicated", f"m{index}".encode(), queue_id=0)
                assert response.code == ResponseCode.SUCCESS, response.remark
                # Answered only once the slave acknowledged: it has the record already.
                assert len(stored_messages(slave, "Replicated")) == index + 1
            slave_wire = BrokerWire(pool, slave.address)
            refused = await slave_wire.send("Replicated", b"to the slave", queue_id=0)
            assert refused.code == ResponseCode.SERVICE_NOT_AVAILABLE
            assert "slave" in (refused.remark or "")
            pulled = await slave_wire.pull("Replicated", 0, 0, group="CG_SLAVE")
            assert pulled.code == ResponseCode.SUCCESS
            assert [m.body for m in records(pulled)][:3] == [b"m0", b"m1", b"m2"]
            assert pulled.ext_fields["suggestWhichBrokerId"] == "0"
        finally:
            await pool.close()
