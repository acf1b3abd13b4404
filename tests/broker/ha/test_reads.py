"""Reads on a master/slave pair: suggestWhichBrokerId, a slave without slaveReadEnable, and
pulls to a slave that do not store the committed offset."""

from __future__ import annotations

from pathlib import Path

from bolide.broker.broker import Broker
from bolide.protocol.codes import ResponseCode
from bolide.protocol.headers import PullSysFlag
from bolide.remoting import ClientPool
from bolide.testing.cluster import Cluster
from tests.broker.ha.test_replication import _create_topic, _slave
from tests.integration.client_support import eventually
from tests.integration.wire import BrokerWire


async def test_suggestions_and_slave_reads(tmp_path: Path) -> None:
    settings = {"ha_listen_port": 0, "slave_read_enable": True}
    async with Cluster(tmp_path, settings=settings) as cluster:
        master = cluster.broker("broker-a")
        reading_slave = await _slave(cluster, tmp_path, slave_read_enable=True)
        closed_slave = await cluster.add_broker(
            "broker-a",
            broker_id=2,
            broker_role="SLAVE",
            slave_read_enable=False,
            store_path_root_dir=tmp_path / "slave2" / "store",
        )
        pool = ClientPool()
        try:
            wire = BrokerWire(pool, master.address)
            await _create_topic(wire, "Reads")
            for index in range(10):
                await wire.send("Reads", f"r{index}".encode(), queue_id=0)
            end = master.context.store.stats().commit_log_max_offset
            for slave in (reading_slave, closed_slave):

                def caught_up(s: Broker = slave) -> bool:
                    return (
                        s.context.store.stats().commit_log_max_offset == end
                        and s.context.topics.find("Reads") is not None
                    )

                await eventually(caught_up)
            # A consumer not far behind stays on (or is sent back to) the master.
            pulled = await wire.pull("Reads", 0, 0, group="CG_READS")
            assert pulled.ext_fields["suggestWhichBrokerId"] == "0"
            on_slave = BrokerWire(pool, reading_slave.address)
            pulled = await on_slave.pull(
                "Reads",
                0,
                0,
                group="CG_READS",
                sys_flag=PullSysFlag.SUBSCRIPTION | PullSysFlag.COMMIT_OFFSET,
                commit_offset=5,
            )
            assert pulled.code == ResponseCode.SUCCESS
            assert pulled.ext_fields["suggestWhichBrokerId"] == "0"
            # A slave keeps no committed offsets of its own: the master's copy rules.
            assert reading_slave.context.offsets.query_offset("CG_READS", "Reads", 0) < 0
            # A slave without slaveReadEnable sends the consumer back to the master.
            refused = await BrokerWire(pool, closed_slave.address).pull(
                "Reads", 0, 0, group="CG_READS"
            )
            assert refused.code == ResponseCode.PULL_RETRY_IMMEDIATELY
            assert refused.ext_fields["suggestWhichBrokerId"] == "0"
            # A consumer far behind (backlog past the memory share) is sent to a slave.
            far = await cluster.add_broker(
                "broker-far",
                slave_read_enable=True,
                access_message_in_memory_max_ratio_percent=0,
            )
            far_wire = BrokerWire(pool, far.address)
            await _create_topic(far_wire, "Reads")
            for index in range(3):
                await far_wire.send("Reads", f"f{index}".encode(), queue_id=0)
            slow = await far_wire.pull("Reads", 0, 0, group="CG_READS")
            assert slow.code == ResponseCode.SUCCESS
            assert slow.ext_fields["suggestWhichBrokerId"] == "1"
        finally:
            await pool.close()
