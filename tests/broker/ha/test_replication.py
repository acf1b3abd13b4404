"""Master and slave brokers in one process over real sockets: the HA stream, SYNC_MASTER
acks, read-only slaves, pulls from a slave and the slave's copy of the master's tables."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

from bolide.broker.broker import Broker
from bolide.broker.ha.wire import encode_offset_report
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import CreateTopicRequestHeader
from bolide.remoting import ClientPool
from bolide.testing.cluster import Cluster
from tests.compat.cpp_clients import stored_messages
from tests.integration.client_support import eventually
from tests.integration.wire import BrokerWire, records
from tests.store.conftest import copy_store_files


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
            await eventually(lambda: store().commit_log_max_offset > 0)
            await slave.stop()
            cluster.brokers.remove(slave)
            # On fresh ports: the old VIP port (listenPort - 2) was never its own, only free when
            # it first started, and a fixed listenPort makes a taken VIP port fail the start
            # (a test run lost this test to another test's socket there).
            slave = Broker(slave.config.replace(listen_port=0), host="127.0.0.1")
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


async def _ha_peer(master: Broker) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    ha = master.replication.master
    assert ha is not None
    return await asyncio.open_connection("127.0.0.1", ha.port)


async def test_garbage_on_the_ha_port_is_dropped_and_the_master_keeps_serving(
    tmp_path: Path,
) -> None:
    settings = {"broker_role": "SYNC_MASTER", "ha_listen_port": 0}
    async with Cluster(tmp_path, settings=settings) as cluster:
        master = cluster.broker("broker-a")
        ha = master.replication.master
        assert ha is not None
        pool = ClientPool()
        try:
            for garbage in (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", b"\xff" * 16):
                reader, writer = await _ha_peer(master)
                writer.write(garbage)
                assert await reader.read() == b""  # closed by the master
                writer.close()
            # A real slave is still served afterwards.
            slave = await _slave(cluster, tmp_path)
            await eventually(lambda: len(ha.links) == 1)
            wire = BrokerWire(pool, master.address)
            await _create_topic(wire, "AfterGarbage")
            response = await wire.send("AfterGarbage", b"still fine", queue_id=0)
            assert response.code == ResponseCode.SUCCESS
            assert _bodies_on(slave, "AfterGarbage") == [b"still fine"]
        finally:
            await pool.close()


async def test_a_silent_peer_is_dropped_after_the_housekeeping_interval(tmp_path: Path) -> None:
    async with Cluster(tmp_path, settings={"ha_listen_port": 0}) as cluster:
        master = cluster.broker("broker-a")
        ha = master.replication.master
        assert ha is not None
        ha._housekeeping_interval_ms = 200
        reader, writer = await _ha_peer(master)
        writer.write(b"\x00\x00")  # not even one whole offset, then silence
        async with asyncio.timeout(10):
            assert await reader.read() == b""
        writer.close()
        assert ha.links == []


async def test_a_slave_that_falls_behind_makes_sync_sends_answer_slave_not_available(
    tmp_path: Path,
) -> None:
    settings = {"broker_role": "SYNC_MASTER", "ha_listen_port": 0}
    async with Cluster(tmp_path, settings=settings) as cluster:
        master = cluster.broker("broker-a")
        ha = master.replication.master
        assert ha is not None
        pool = ClientPool()
        try:
            wire = BrokerWire(pool, master.address)
            await _create_topic(wire, "Behind")
            for index in range(20):
                await wire.send("Behind", f"before {index}".encode(), queue_id=0)
            # A peer that reports offset 1 000 and never acknowledges anything more.
            _reader, writer = await _ha_peer(master)
            writer.write(encode_offset_report(1_000))
            await eventually(lambda: bool(ha.links) and ha.links[0].start_offset == 1_000)
            ha.fall_behind_max_bytes = 1_024
            behind = await wire.send("Behind", b"too far behind", queue_id=0)
            assert behind.code == ResponseCode.SLAVE_NOT_AVAILABLE
            ha.fall_behind_max_bytes = 1 << 30
            # In sync but silent: the send waits 3 s for the ack, then times out (still stored).
            silent = await wire.send("Behind", b"never acknowledged", queue_id=0)
            assert silent.code == ResponseCode.FLUSH_SLAVE_TIMEOUT
            # It acknowledges everything it was sent: the next send is acknowledged at once.
            await eventually(lambda: ha.links[0].sent_offset == master_end(master))
            writer.write(encode_offset_report(master_end(master)))
            await eventually(lambda: ha.acked_offset == master_end(master))
            assert len(_bodies_on(master, "Behind")) == 22
            writer.close()
        finally:
            await pool.close()


def master_end(broker: Broker) -> int:
    return broker.context.store.stats().commit_log_max_offset


async def test_a_master_restarted_behind_its_slave_refuses_it_and_truncates_nothing(
    tmp_path: Path,
) -> None:
    async with Cluster(tmp_path, settings={"ha_listen_port": 0}) as cluster:
        master = cluster.broker("broker-a")
        slave = await _slave(cluster, tmp_path, slave_read_enable=True)
        pool = ClientPool()
        try:
            wire = BrokerWire(pool, master.address)
            await _create_topic(wire, "Diverged", queues=2)
            await _send_many(wire, "Diverged", 10, size=10)
            # The restarted master must be where the slave looks for it: it takes back the HA
            # port the system gave it at its first start (port 0), instead of a fixed one. Its
            # remoting port is a fresh one: a fixed one would fix the VIP port (listenPort - 2)
            # too, which nobody made sure is free.
            ha_port = master.replication.ha_port
            assert ha_port is not None
            config = master.config.replace(ha_listen_port=ha_port, listen_port=0)
            await master.stop()
            cluster.brokers.remove(master)
            old_image = tmp_path / "old-image"
            copy_store_files(master.config.store_path_root_dir, old_image)
            master = Broker(config, host="127.0.0.1")
            await master.start()
            cluster.brokers.append(master)
            wire = BrokerWire(pool, master.address)
            await _send_many(wire, "Diverged", 10, size=10)
            await eventually(lambda: master_end(slave) == master_end(master))
            # The master comes back from the older disk image: the slave has more.
            await master.stop()
            cluster.brokers.remove(master)
            shutil.rmtree(master.config.store_path_root_dir)
            shutil.copytree(old_image, master.config.store_path_root_dir)
            master = Broker(config, host="127.0.0.1")
            await master.start()
            cluster.brokers.append(master)
            ha = master.replication.master
            assert ha is not None
            await eventually(lambda: ha.refusals > 0)
            assert "ahead of this master" in master.replication.runtime_info()["haLastRefusal"]
            assert master_end(slave) > master_end(master)
            assert len(_bodies_on(slave, "Diverged")) == 20  # nothing truncated
        finally:
            await pool.close()
