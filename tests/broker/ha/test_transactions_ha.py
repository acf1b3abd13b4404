"""Transactions with a slave: half and op records replicate like any record, only the master
decides — END_TRANSACTION on a slave answers SLAVE_NOT_AVAILABLE and a slave never checks."""

from __future__ import annotations

from pathlib import Path

from bolide.protocol.codes import ResponseCode
from bolide.protocol.system_topics import TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC
from bolide.testing.cluster import Cluster
from tests.broker.ha.test_replication import _slave
from tests.broker.transaction_support import COMMIT, WireProducer, topic_messages
from tests.integration.client_support import eventually


async def test_only_the_master_decides(tmp_path: Path) -> None:
    settings = {"broker_role": "SYNC_MASTER", "ha_listen_port": 0}
    async with Cluster(tmp_path, settings=settings) as cluster:
        master = cluster.broker("broker-a")
        slave = await _slave(cluster, tmp_path)
        await eventually(
            lambda: bool(master.replication.master and master.replication.master.links)
        )
        to_master = WireProducer(master.address, "tx-ha", "10.0.0.7@ha")
        to_slave = WireProducer(slave.address, "tx-ha", "10.0.0.7@ha")
        try:
            half = await to_master.send_half("HaOrders", b"replicated half")
            assert len(topic_messages(slave, TRANS_HALF_TOPIC)) == 1
            refused = await to_slave.end(half, COMMIT)
            assert refused.code == ResponseCode.SLAVE_NOT_AVAILABLE
            transactions = slave.context.transactions
            assert transactions is not None and transactions.pending_count == 0
            assert (await to_master.end(half, COMMIT)).code == ResponseCode.SUCCESS
            await eventually(lambda: len(topic_messages(slave, TRANS_OP_HALF_TOPIC)) == 1)
            [delivered] = topic_messages(slave, "HaOrders")
            assert delivered.body == b"replicated half"
        finally:
            await to_master.close()
            await to_slave.close()
