"""Controller mode joined to the epochs, every part a real process (etcd, `bolide controller`,
`bolide namesrv`, two brokers): the elected master writes ``<epoch, offset>`` to its epoch
file and speaks the AutoSwitch stream; a master SIGKILLed with bytes its replica never got
comes back as a slave of the new master, whose handshake cuts those bytes and whose epoch list
it then follows."""

from __future__ import annotations

import signal
from pathlib import Path

import orjson
import pytest

from bolide.client.producer.producer import Producer
from bolide.client.rpc.admin import get_all_topic_config
from bolide.protocol.bodies import KVTable
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.remoting import ClientPool
from bolide.store.epoch_file import EpochEntry, EpochFile
from bolide.testing.etcd import EtcdCluster
from tests.controller.test_failover_processes import (
    TOPIC,
    broker_conf,
    cluster_masters,
    controller_and_name_server,
    in_sync_ids,
    running,
    send_until_acked,
    until_true,
)

pytestmark = pytest.mark.timeout(240)


async def test_deposed_master_truncates_through_the_autoswitch_handshake(
    etcd: EtcdCluster, tmp_path: Path
) -> None:
    pool = ClientPool()

    async def runtime(address: str) -> dict[str, str]:
        answer = await pool.invoke(
            address, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO)
        )
        assert answer.code == ResponseCode.SUCCESS
        return dict(KVTable.from_json(answer.body).table)

    async with controller_and_name_server(
        etcd.endpoints, tmp_path, "--enable-elect-unclean-master"
    ) as (ctl, ns):

        async def masters() -> dict[int, str]:
            return await cluster_masters(pool, ns)

        async def in_sync() -> list[int]:
            return await in_sync_ids(pool, ctl)

        conf_a = broker_conf(tmp_path / "a", ns, ctl)
        conf_b = broker_conf(tmp_path / "b", ns, ctl)
        async with running("broker", "-c", str(conf_a), "--data-dir", str(tmp_path / "a"),
                           cwd=tmp_path) as first:  # fmt: skip
            first_address = first.address("broker")

            async def first_is_master() -> bool:
                return (await masters()).get(0) == first_address

            await until_true(first_is_master, "the first broker registered as brokerId 0")
            assert (await runtime(first_address))["haEpochEntries"] == "1-0"
            async with running("broker", "-c", str(conf_b), "--data-dir", str(tmp_path / "b"),
                               cwd=tmp_path) as second:  # fmt: skip
                second_address = second.address("broker")
                async with Producer("epoch-producers", namesrv=ns) as producer:
                    await send_until_acked(producer, "before")

                    async def both_in_sync() -> bool:
                        return await in_sync() == [1, 2]

                    await until_true(both_in_sync, "the replica joined the SyncStateSet")
                    await send_until_acked(producer, "acked-by-both")

                    async def replica_holds_the_topic() -> bool:
                        topics = await get_all_topic_config(pool, second_address, 3_000)
                        return TOPIC in topics

                    # Both brokers die below, so the name server forgets broker-a's queues:
                    # the replica, elected, brings the topic back only if its metadata sync
                    # (3 s after its start, then every 10 s, as Java's) copied the topic.
                    await until_true(replica_holds_the_topic, "the replica copied the topic")
                    replica = await runtime(second_address)
                    assert replica["haEpochEntries"] == "1-0"
                    # the replica dies; the master, alone in the SyncStateSet, takes sends
                    second.process.send_signal(signal.SIGKILL)
                    await second.process.wait()

                    async def master_alone() -> bool:
                        return await in_sync() == [1]

                    await until_true(master_alone, "the dead replica left the SyncStateSet")
                    await send_until_acked(producer, "acked-by-the-master-alone")
                    first.process.send_signal(signal.SIGKILL)
                    await first.process.wait()
                    # the replica returns and is elected uncleanly: its epoch lacks those bytes
                    b_again = ("broker", "-c", str(conf_b), "--data-dir", str(tmp_path / "b"))
                    async with running(*b_again, cwd=tmp_path) as second_again:
                        second_address = second_again.address("broker")

                        async def second_is_master() -> bool:
                            return (await masters()).get(0) == second_address

                        await until_true(second_is_master, "the replica elected and listed")
                        await send_until_acked(producer, "after-failover")
                        new_master = await runtime(second_address)
                        entries = new_master["haEpochEntries"].split(",")
                        assert len(entries) == 2 and entries[0] == "1-0"
                        new_epoch, new_start = (int(part) for part in entries[1].split("-"))
                        assert new_epoch > 1
                        # its registrations carry the epoch: stateVersion of its data version
                        topics = await pool.invoke(
                            second_address,
                            RemotingCommand.request(RequestCode.GET_ALL_TOPIC_CONFIG),
                        )
                        data_version = orjson.loads(topics.body)["dataVersion"]
                        assert data_version["stateVersion"] == new_epoch
                        # the deposed master restarts on its data: it follows, cuts its tail
                        async with running("broker", "-c", str(conf_a), "--data-dir",
                                           str(tmp_path / "a"), cwd=tmp_path):  # fmt: skip

                            async def old_master_follows() -> bool:
                                return await masters() == {0: second_address, 1: first_address}

                            await until_true(old_master_follows, "the old master listed as id 1")
                            await until_true(both_in_sync, "the old master rejoined the set")
                            deposed = await runtime(first_address)
                            assert deposed["brokerRole"] == "SLAVE"
                            assert int(deposed["haTruncatedBytes"]) > 0
                            assert deposed["haEpochEntries"] == new_master["haEpochEntries"]
                    epochs = EpochFile(next((tmp_path / "a").rglob("epochFileCheckpoint")))
                    assert epochs.entries == [EpochEntry(1, 0), EpochEntry(new_epoch, new_start)]
    await pool.close()
