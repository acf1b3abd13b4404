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


async def _send_many(wire: BrokerWire, topic: str, count: int, size: int = 1000) -> list[bytes]:
    bodies = []
    for index in range(count):
        body = f"{index:08d}".encode() + b"x" * size
        response = await wire.send(topic, body, queue_id=index % 2)
        assert response.code == ResponseCode.SUCCESS, response.remark
        bodies.append(body)
    return bodies


def _bodies_on(broker: Broker, topic: str) -> list[bytes]:
    return sorted(m.body for m in stored_messages(broker, topic))


async def test_a_slave_started_late_and_restarted_while_copying_catches_up_exactly(
    tmp_path: Path,
) -> None:
    async with Cluster(tmp_path, settings={"ha_listen_port": 0}) as cluster:
        master = cluster.broker("broker-a")
        pool = ClientPool()
        try:
            wire = BrokerWire(pool, master.address)
            await _create_topic(wire, "Backlog", queues=2)
            sent = await _send_many(wire, "Backlog", 3000)
            slave = await _slave(cluster, tmp_path)
            store = slave.context.store.stats
            master_end = master.context.store.stats().commit_log_max_offset
            # Stop it once it is copying (a record may be half received when it stops).
            await eventually(lambda: 0 < store().commit_log_max_offset)
            await slave.stop()
            cluster.brokers.remove(slave)
            slave = Broker(slave.config, host="127.0.0.1")
            await slave.start()
            cluster.brokers.append(slave)
            await eventually(
                lambda: slave.context.store.stats().commit_log_max_offset == master_end
            )
            assert _bodies_on(slave, "Backlog") == sorted(sent)
            for queue_id in range(2):
                entries = slave.context.store.consume_queue_entries("Backlog", queue_id, 0, 2000)
                assert len(entries) == 1500  # each record once, queue offsets consecutive
            ha = master.replication.master
            assert ha is not None
            await eventually(lambda: len(ha.links) == 1 and ha.lag().bytes_behind == 0)
            assert master.replication.runtime_info()["haReplicaLagBytes"] == "0"
        finally:
            await pool.close()


async def test_sync_master_without_a_slave_in_sync_answers_slave_not_available(
    tmp_path: Path,
) -> None:
    settings = {"broker_role": "SYNC_MASTER", "ha_listen_port": 0}
    async with Cluster(tmp_path, settings=settings) as cluster:
        master = cluster.broker("broker-a")
        pool = ClientPool()
        try:
            wire = BrokerWire(pool, master.address)
            await _create_topic(wire, "Lonely")
            response = await wire.send("Lonely", b"no slave yet", queue_id=0)
            assert response.code == ResponseCode.SLAVE_NOT_AVAILABLE  # stored all the same
            assert response.ext_fields["msgId"]
            assert _bodies_on(master, "Lonely") == [b"no slave yet"]
        finally:
            await pool.close()
