"""A broker in controller mode in-process, beside a real controller on a real etcd: it starts
with no role, is elected, registers as brokerId 0, refuses sends below minInSyncReplicas with
Java's code 1, fences its sends while the controller is silent, and takes them again when a
controller is back; its identity file keeps its id across restarts."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import generate_latest

from bolide.base.errors import ConfigError, RemoteError
from bolide.broker.broker import Broker
from bolide.broker.config import BrokerConfig
from bolide.broker.controller_mode.identity import IdentityFiles, PendingIdentity
from bolide.broker.controller_mode.settings import ControllerModeSettings
from bolide.broker.security import unhonoured_keys
from bolide.client.config import ConsumeFrom
from bolide.client.consumer.pull_consumer import PullConsumer
from bolide.client.message import Message as ClientMessage
from bolide.client.producer.producer import Producer
from bolide.client.producer.transaction import LocalTransactionState, TransactionProducer
from bolide.controller.controller import Controller
from bolide.protocol.codes import ResponseCode
from bolide.protocol.message import Message, MessageExt
from bolide.testing.cluster import Cluster
from bolide.testing.etcd import EtcdCluster
from bolide.testing.waiting import until

pytestmark = pytest.mark.timeout(120)

TOPIC = "ControllerModeTopic"


def controller_mode(controller: Controller, **extra: str) -> dict[str, object]:
    return {
        "enableControllerMode": "true",
        "controllerAddr": controller.address,
        "brokerId": "-1",
        "brokerRole": "SLAVE",
        **extra,
    }


async def wait_master(broker: Broker) -> None:
    """Until the broker leads and the name servers list it as brokerId 0."""

    def registered_master() -> bool:
        manager = broker.replicas_manager
        return (
            manager is not None
            and manager.is_master
            and broker.registration.identity.broker_id == 0
            and broker.registration.registration_count > 0
        )

    await until(registered_master)


async def send_code(producer: Producer) -> int:
    try:
        await producer.send(Message(TOPIC, b"x"), timeout_ms=5_000)
    except RemoteError as error:
        return error.code
    return ResponseCode.SUCCESS


async def test_elected_master_registers_as_id_zero_and_counts_in_sync_replicas(
    etcd: EtcdCluster, tmp_path: Path
) -> None:
    controller = Controller(etcd.endpoints, "127.0.0.1", 0)
    await controller.start()
    try:
        async with Cluster(tmp_path / "c", broker_names=()) as cluster:
            broker = await cluster.add_broker(
                "broker-m", **controller_mode(controller, minInSyncReplicas="2")
            )
            await wait_master(broker)
            assert broker.replicas_manager is not None
            assert broker.replicas_manager.broker_id == 1
            async with Producer(
                "cm-producers", namesrv=cluster.namesrv_address, retry_count=0
            ) as producer:
                code = await send_code(producer)
            assert code == ResponseCode.SYSTEM_ERROR  # the SyncStateSet {1} < minInSyncReplicas 2
            assert broker.metrics is not None
            text = generate_latest(broker.metrics.registry).decode()
            labels = '{broker="broker-m",brokerIP="127.0.0.1",cluster="DefaultCluster"}'
            assert f"bolide_controller_mode_is_master{labels} 1.0" in text
            assert f"bolide_controller_mode_master_epoch{labels} 1.0" in text
            assert f"bolide_controller_mode_sync_state_set_size{labels} 1.0" in text
            assert f"bolide_controller_mode_role_changes_total{labels} 1.0" in text
            store_root = broker.config.store_path_root_dir
        assert IdentityFiles(store_root, "DefaultCluster", "broker-m").applied() == 1
    finally:
        await controller.stop()


async def test_master_fences_sends_while_the_controller_is_silent(
    etcd: EtcdCluster, tmp_path: Path
) -> None:
    controller = Controller(etcd.endpoints, "127.0.0.1", 0)
    await controller.start()
    port = int(controller.address.rsplit(":", 1)[1])
    async with Cluster(tmp_path / "c", broker_names=()) as cluster:
        broker = await cluster.add_broker(
            "broker-f", **controller_mode(controller, controllerHeartBeatTimeoutMills="3000")
        )
        await wait_master(broker)
        manager = broker.replicas_manager
        assert manager is not None
        async with Producer("cm-fence", namesrv=cluster.namesrv_address, retry_count=0) as producer:
            assert await send_code(producer) == ResponseCode.SUCCESS
            await controller.stop()  # silent from now on
            await until(lambda: manager.fenced)
            assert await send_code(producer) == ResponseCode.SERVICE_NOT_AVAILABLE
            controller = Controller(etcd.endpoints, "127.0.0.1", port)
            await controller.start()
            try:
                await until(lambda: not manager.fenced)
                assert manager.is_master
                assert await send_code(producer) == ResponseCode.SUCCESS
            finally:
                await controller.stop()


def test_settings_and_identity_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="controllerAddr"):
        ControllerModeSettings.from_properties({"enableControllerMode": "true"})
    with pytest.raises(ConfigError, match="not host:port"):
        ControllerModeSettings.from_properties({"controllerAddr": "a:1;nowhere"})
    with pytest.raises(ConfigError, match="minInSyncReplicas"):
        ControllerModeSettings.from_properties({"minInSyncReplicas": "zero"})
    settings = ControllerModeSettings.from_properties(
        {
            "enableControllerMode": "true",
            "controllerAddr": "a:1; b:2",
            "allAckInSyncStateSet": "true",
        }
    )
    assert settings.controller_addresses == ("a:1", "b:2") and settings.all_ack_in_sync_state_set
    config = BrokerConfig.from_mapping(
        {"brokerId": "-1", "brokerRole": "SLAVE", "enableControllerMode": "true",
         "controllerAddr": "a:1", "noSuchKey": "1"}
    )  # fmt: skip
    assert unhonoured_keys(config) == ["noSuchKey"]
    with pytest.raises(ConfigError, match="brokerId"):
        BrokerConfig.from_mapping({"brokerId": "-1", "brokerRole": "SLAVE"})
    files = IdentityFiles(tmp_path, "c", "b")
    assert files.applied() is None and files.pending() is None
    files.write_pending(PendingIdentity(3, "h:1;42"))
    assert files.pending() == PendingIdentity(3, "h:1;42")
    files.commit(3)
    assert files.applied() == 3 and files.pending() is None
    with pytest.raises(ConfigError, match="belongs to c/b"):
        IdentityFiles(tmp_path, "c", "other").applied()


async def test_elected_master_commits_transactions_checks_back_and_serves_pulls(
    etcd: EtcdCluster, tmp_path: Path
) -> None:
    """A controller-mode broker is configured as a SLAVE until elected: once a master, it must
    take END_TRANSACTION, run the transaction checker and serve pulls itself (each of them
    once asked the configured role and treated the elected master as a slave)."""
    controller = Controller(etcd.endpoints, "127.0.0.1", 0)
    await controller.start()
    try:
        async with Cluster(tmp_path / "c", broker_names=()) as cluster:
            broker = await cluster.add_broker(
                "broker-t",
                **controller_mode(
                    controller, transactionCheckInterval="200", transactionTimeOut="0"
                ),
            )
            await wait_master(broker)
            asked: list[bytes] = []

            def decide(
                message: ClientMessage, state: LocalTransactionState
            ) -> LocalTransactionState:
                return state

            async def check_back(message: MessageExt) -> LocalTransactionState:
                asked.append(message.body)
                return LocalTransactionState.COMMIT_MESSAGE

            async with TransactionProducer(
                "cm-tx-producers", namesrv=cluster.namesrv_address, checker=check_back
            ) as producer:
                for body, state in (
                    (b"committed", LocalTransactionState.COMMIT_MESSAGE),
                    (b"checked", LocalTransactionState.UNKNOW),
                ):
                    await producer.send_in_transaction(ClientMessage(TOPIC, body), decide, state)
                consumer = PullConsumer(
                    "cm-readers",
                    namesrv=cluster.namesrv_address,
                    consume_from=ConsumeFrom.FIRST_OFFSET,
                )
                consumer.subscribe(TOPIC)
                received: list[bytes] = []
                async with consumer:
                    for _ in range(120):  # the check-back commits the second within a few
                        received.extend(m.body for m in await consumer.poll(timeout_ms=500))
                        if len(received) >= 2:
                            break
            assert sorted(received) == [b"checked", b"committed"]
            assert asked == [b"checked"]
    finally:
        await controller.stop()
