"""Two brokers of one brokerName in controller mode (in-process, a real controller on a real
etcd, real sockets) under allAckInSyncStateSet=true: once both are in the SyncStateSet, a
plain send is acknowledged only when the replica holds it, and, once the replica stops
copying, only after the controller took it out of the SyncStateSet. Issue 25's lost
messages came from the send fast path answering such sends at once (it read brokerRole,
which stays SLAVE in controller mode)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bolide.broker.broker import Broker
from bolide.client.message import Message, SendStatus
from bolide.client.producer.producer import Producer
from bolide.controller.controller import Controller
from bolide.protocol.msgid import decode_offset_message_id
from bolide.store.file_store import FileMessageStore
from bolide.testing.cluster import Cluster
from bolide.testing.etcd import EtcdCluster
from bolide.testing.waiting import until
from tests.controller.support import controller_mode_settings

pytestmark = pytest.mark.timeout(180)

TOPIC = "AllAckTopic"
SENDS = 20


def _settings(controller: Controller, root: Path) -> dict[str, object]:
    # The replica stays a member throughout.
    return {**controller_mode_settings(controller, root), "haMaxTimeSlaveNotCatchup": "120000"}


def _store(broker: Broker) -> FileMessageStore:
    store = broker.context.store
    assert isinstance(store, FileMessageStore)
    return store


async def test_a_send_is_acknowledged_only_once_the_in_sync_replica_holds_it(
    etcd: EtcdCluster, tmp_path: Path
) -> None:
    controller = Controller(etcd.endpoints, "127.0.0.1", 0)
    await controller.start()
    try:
        async with Cluster(tmp_path / "c", broker_names=()) as cluster:
            master = await cluster.add_broker(
                "broker-x", **_settings(controller, tmp_path / "x"), autoCreateTopicEnable="true"
            )
            manager = master.replicas_manager
            assert manager is not None
            await until(lambda: manager.is_master)
            replica = await cluster.add_broker(
                "broker-x", **_settings(controller, tmp_path / "y"), autoCreateTopicEnable="true"
            )
            await until(lambda: manager.sync_state_set.sync_state_set == {1, 2})
            async with Producer(
                "all-ack", namesrv=cluster.namesrv_address, retry_count=0
            ) as producer:
                for index in range(SENDS):
                    result = await producer.send(
                        Message(TOPIC, f"m{index}".encode()), timeout_ms=10_000
                    )
                    assert result.status is SendStatus.SEND_OK
                    _, offset = decode_offset_message_id(result.offset_msg_id)
                    # acknowledged: the replica already holds the record
                    assert _store(replica).commit_log_max_offset > offset
                copier = replica.replication.slave
                assert copier is not None
                await copier.stop()  # the replica stops copying, still a member
                stalled = await producer.send(Message(TOPIC, b"not-copied"), timeout_ms=10_000)
                # never acknowledged while the replica is a member: only once the controller
                # confirmed the SyncStateSet without it (it left: no HA connection)
                if stalled.status is SendStatus.SEND_OK:
                    assert manager.sync_state_set.sync_state_set == {1}
                    stored, _ = await controller.store.read_set("broker-x")
                    assert stored is not None and stored.sync_state_set == {1}
    finally:
        await controller.stop()
