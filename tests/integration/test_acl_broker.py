"""A broker with aclEnable=true over real sockets: Bolide's signed clients allowed, wrong
secrets, missing permissions, unsigned raw requests and non-admins refused; the accounts file
reloaded without a restart; a broken file keeps the rules; a broker without a working file
refuses to start; unknown broker.conf keys named in one warning."""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from bolide.base.errors import ConfigError, RemoteError
from bolide.broker.broker import Broker
from bolide.broker.config import BrokerConfig
from bolide.client.admin import AdminClient
from bolide.client.admin import acl as admin_acl
from bolide.client.config import ConsumeFrom
from bolide.client.consumer.pull_consumer import PullConsumer
from bolide.client.message import Message as ClientMessage
from bolide.client.producer.producer import Producer
from bolide.client.producer.transaction import LocalTransactionState, TransactionProducer
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.message import Message, MessageExt
from bolide.remoting import ClientPool
from bolide.testing.cluster import Cluster

pytestmark = pytest.mark.timeout(120)

TOPIC = "AclOrders"
ACCOUNTS = """
accounts:
  - accessKey: producer1
    secretKey: prod-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms: [AclOrders=PUB, Hidden=DENY]
  - accessKey: consumer1
    secretKey: cons-secret
    defaultTopicPerm: SUB
    defaultGroupPerm: SUB
    groupPerms: [blocked=DENY]
  - accessKey: admin001
    secretKey: admin-secret
    admin: true
"""
SECRET = "long-enough-secret"
DEADLINE_S = 60.0
"""Guard on waiting for a condition: fails a hung test, never a measurement."""


async def eventually(condition: Callable[[], bool]) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DEADLINE_S
    while not condition():
        assert loop.time() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


def write(path: Path, text: str) -> None:
    path.write_text(text)


def read(path: Path) -> bytes:
    return path.read_bytes()


async def raises_remote(call: Awaitable[object]) -> RemoteError:
    with pytest.raises(RemoteError) as caught:
        await call
    return caught.value


@pytest.fixture
def acl_file(tmp_path: Path) -> Path:
    path = tmp_path / "conf" / "plain_acl.yml"
    path.parent.mkdir()
    path.write_text(ACCOUNTS)
    return path


@pytest.fixture
async def cluster(tmp_path: Path, acl_file: Path) -> AsyncIterator[Cluster]:
    settings = {"aclEnable": "true", "aclFile": str(acl_file)}
    async with Cluster(tmp_path / "cluster", settings=settings) as running:
        async with AdminClient(
            running.namesrv_address, access_key="admin001", secret_key="admin-secret"
        ) as admin:
            await admin.create_topic(TOPIC, queue_count=2)
        yield running


def producer_for(cluster: Cluster, access_key: str | None, secret_key: str | None) -> Producer:
    return Producer(
        "acl-producers",
        namesrv=cluster.namesrv_address,
        access_key=access_key,
        secret_key=secret_key,
        retry_count=0,
    )


async def test_signed_producer_and_consumer_work(cluster: Cluster) -> None:
    async with producer_for(cluster, "producer1", "prod-secret") as producer:
        for index in range(4):
            await producer.send(Message(TOPIC, f"m{index}".encode()))
    consumer = PullConsumer(
        "billing",
        namesrv=cluster.namesrv_address,
        consume_from=ConsumeFrom.FIRST_OFFSET,
        access_key="consumer1",
        secret_key="cons-secret",
    )
    consumer.subscribe(TOPIC)
    received: list[MessageExt] = []
    async with consumer:
        for _ in range(50):
            received += await consumer.poll(timeout_ms=2_000)
            if len(received) >= 4:
                break
    assert sorted(m.body for m in received) == [b"m0", b"m1", b"m2", b"m3"]


async def test_wrong_secret_missing_permission_and_unknown_key_are_refused(
    cluster: Cluster,
) -> None:
    async with producer_for(cluster, "producer1", "not-the-secret") as producer:
        error = await raises_remote(producer.send(Message(TOPIC, b"x")))
    assert error.code == ResponseCode.SYSTEM_ERROR
    assert "AclException: Check signature failed for accessKey=producer1" in str(error)
    assert "not-the-secret" not in str(error)
    async with producer_for(cluster, "consumer1", "cons-secret") as producer:
        error = await raises_remote(producer.send(Message(TOPIC, b"x")))
    assert "No PUB permission for topic=AclOrders, accessKey=consumer1" in str(error)
    async with producer_for(cluster, "nobody77", "whatever1") as producer:
        error = await raises_remote(producer.send(Message(TOPIC, b"x")))
    assert "No acl config for nobody77" in str(error)
    assert cluster.brokers[0].context.store.max_offset(TOPIC, 0) == 0  # nothing written


async def test_denied_group_cannot_consume(cluster: Cluster) -> None:
    consumer = PullConsumer(
        "blocked",
        namesrv=cluster.namesrv_address,
        access_key="consumer1",
        secret_key="cons-secret",
    )
    consumer.subscribe(TOPIC)
    async with consumer:
        assert await consumer.poll(timeout_ms=300) == []
    assert cluster.brokers[0].context.consumers.get_consumer_group_info("blocked") is None


async def test_unsigned_raw_request_is_refused(cluster: Cluster) -> None:
    pool = ClientPool()
    broker = cluster.brokers[0]
    listeners = [broker.address]
    if broker.vip_server is not None:  # listenPort - 2 was free: the VIP channel is checked too
        listeners.append(f"127.0.0.1:{broker.vip_server.port}")
    try:
        for (code, fields), address in itertools.product(
            (
                (RequestCode.SEND_MESSAGE, {"topic": TOPIC, "producerGroup": "p"}),
                (RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "Evil"}),
                (9999, {}),  # an unknown code is refused before anything else
            ),
            listeners,
        ):
            request = RemotingCommand.request(code, fields, b"raw")
            response = await pool.invoke(address, request, 5_000)
            assert response.code == ResponseCode.SYSTEM_ERROR
            assert response.remark == (
                "org.apache.rocketmq.acl.common.AclException: No accessKey is configured"
            )
        # the broker keeps serving signed requests
        async with producer_for(cluster, "producer1", "prod-secret") as producer:
            await producer.send(Message(TOPIC, b"after"))
    finally:
        await pool.close()


async def test_huge_and_binary_ext_fields_are_refused_and_the_broker_keeps_serving(
    cluster: Cluster,
) -> None:
    pool = ClientPool()
    try:
        address = cluster.brokers[0].address
        cases = [
            {"AccessKey": "k" * 2_000_000, "topic": TOPIC},  # a 2 MB access key
            {"AccessKey": "producer1", "Signature": "\x00\xff" * 500_000, "topic": TOPIC},
            {"AccessKey": "\x00\x01bin\xff", "topic": TOPIC},
            {"AccessKey": "producer1", "topic": "\x00" * 1000, "Signature": "!!"},
        ]
        for fields in cases:
            request = RemotingCommand.request(RequestCode.SEND_MESSAGE, fields, b"body")
            response = await pool.invoke(address, request, 10_000)
            assert response.code == ResponseCode.SYSTEM_ERROR
            assert (response.remark or "").startswith("org.apache.rocketmq.acl.common.AclException")
            assert len(response.remark or "") < 300  # the bad input is not echoed back
        assert cluster.brokers[0].context.store.max_offset(TOPIC, 0) == 0
        async with producer_for(cluster, "producer1", "prod-secret") as producer:
            await producer.send(Message(TOPIC, b"still serving"))
    finally:
        await pool.close()


async def test_non_admin_cannot_create_delete_topics_or_reset_offsets(cluster: Cluster) -> None:
    async with AdminClient(
        cluster.namesrv_address, access_key="consumer1", secret_key="cons-secret"
    ) as admin:
        error = await raises_remote(admin.create_topic("NotAllowed"))
        assert "is not admin" in str(error)
        error = await raises_remote(admin.delete_topic(TOPIC))
        assert "is not admin" in str(error)
        with pytest.raises(RemoteError, match="is not admin"):
            await admin.reset_offset("billing", TOPIC, 0)
    assert "NotAllowed" not in cluster.brokers[0].context.topics
    assert TOPIC in cluster.brokers[0].context.topics


async def test_file_changes_apply_without_restart_and_broken_file_keeps_rules(
    cluster: Cluster, acl_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    broker = cluster.brokers[0]
    watcher = broker._security.watcher
    assert watcher is not None
    async with producer_for(cluster, "producer1", "prod-secret") as producer:
        await producer.send(Message(TOPIC, b"before"))
        write(acl_file, ACCOUNTS.replace("AclOrders=PUB", "AclOrders=DENY"))
        watcher.wakeup()
        await eventually(lambda: watcher.reload_count == 1)
        error = await raises_remote(producer.send(Message(TOPIC, b"after-deny")))
        assert "No PUB permission" in str(error)
        with caplog.at_level(logging.ERROR, logger="bolide.acl"):
            write(acl_file, "accounts: [ {accessKey: broken")
            watcher.wakeup()
            await eventually(lambda: watcher.last_error is not None)
        assert "previous rules stay in force" in caplog.text
        assert "not valid YAML" in caplog.text
        error = await raises_remote(producer.send(Message(TOPIC, b"still-denied")))
        assert "No PUB permission" in str(error)
        write(acl_file, ACCOUNTS)
        watcher.wakeup()
        await eventually(lambda: watcher.reload_count == 2)
        await producer.send(Message(TOPIC, b"allowed-again"))


@pytest.mark.parametrize("content", [None, "accounts: {", "accounts:\n  - accessKey: x\n"])
async def test_broker_refuses_to_start_without_a_working_acl_file(
    tmp_path: Path, content: str | None
) -> None:
    path = tmp_path / "plain_acl.yml"
    if content is not None:
        path.write_text(content)
    config = BrokerConfig.from_mapping(
        {"aclEnable": "true", "aclFile": str(path), "listenPort": "0",
         "storePathRootDir": str(tmp_path / "store")}
    )  # fmt: skip
    broker = Broker(config)
    with pytest.raises(ConfigError, match="aclEnable=true but the ACL file cannot be used"):
        await broker.start()
    await broker.stop()
    assert not (tmp_path / "store").exists()  # refused before the store was touched


async def test_unknown_and_unhonoured_keys_are_named_in_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = BrokerConfig.from_mapping(
        {"listenPort": "0", "storePathRootDir": str(tmp_path / "store"),
         "sendMessageThreadPoolNums": "16", "notifyConsumerIdsChangedEnable": "false",
         "brokerClusterNmae": "typo"}
    )  # fmt: skip
    broker = Broker(config)
    with caplog.at_level(logging.WARNING, logger="bolide.broker"):
        await broker.start()
    await broker.stop()
    warnings = [r.getMessage() for r in caplog.records if "not honoured" in r.getMessage()]
    assert len(warnings) == 1
    assert warnings[0].endswith("brokerClusterNmae, sendMessageThreadPoolNums")
    assert "notifyConsumerIdsChangedEnable" not in warnings[0]  # honoured (issue 29 finding 9)


async def test_acl_admin_requests_change_the_file_and_refuse_bad_input(
    cluster: Cluster, acl_file: Path
) -> None:
    async with AdminClient(
        cluster.namesrv_address, access_key="admin001", secret_key="admin-secret"
    ) as admin:
        update = admin_acl.AclAccountUpdate(
            "newUser01", secret_key="new-secret", default_topic_perm="PUB",
            topic_perms=["Hidden=DENY"],
        )  # fmt: skip
        assert await admin_acl.update_acl_account(admin, update) == ["broker-a"]
        config = (await admin_acl.acl_config(admin))["broker-a"]
        assert {a["accessKey"] for a in config.accounts} >= {"producer1", "newUser01"}
        info = (await admin_acl.acl_info(admin))["broker-a"]
        assert '"counter":1' in info.version
        async with producer_for(cluster, "newUser01", "new-secret") as producer:
            await producer.send(Message(TOPIC, b"by the new account"))
        before = read(acl_file)
        for bad in (
            admin_acl.AclAccountUpdate("newUser02", secret_key="short"),
            admin_acl.AclAccountUpdate("newUser02"),  # a new account without a secret
            admin_acl.AclAccountUpdate("newUser02", secret_key=SECRET, default_topic_perm="X"),
            admin_acl.AclAccountUpdate("newUser02", secret_key=SECRET, topic_perms=["x"]),
        ):  # fmt: skip
            error = await raises_remote(admin_acl.update_acl_account(admin, bad))
            assert error.code == ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED
        error = await raises_remote(admin_acl.delete_acl_account(admin, "nobody99"))
        assert error.code == ResponseCode.DELETE_ACL_CONFIG_FAILED
        error = await raises_remote(admin_acl.update_global_white_addresses(admin, ["1.2.3"]))
        assert error.code == ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED
        assert read(acl_file) == before  # nothing written
        assert await admin_acl.delete_acl_account(admin, "newUser01") == ["broker-a"]
        async with producer_for(cluster, "newUser01", "new-secret") as producer:
            error = await raises_remote(producer.send(Message(TOPIC, b"gone")))
        assert "No acl config for newUser01" in str(error)


async def test_transaction_producer_signs_its_half_and_its_end(cluster: Cluster) -> None:
    async def never_asked(message: MessageExt) -> LocalTransactionState:
        raise AssertionError("no check-back expected")

    async with TransactionProducer(
        "acl-tx-producers",
        namesrv=cluster.namesrv_address,
        checker=never_asked,
        access_key="producer1",
        secret_key="prod-secret",
    ) as producer:
        result = await producer.send_in_transaction(
            ClientMessage(TOPIC, b"committed"),
            lambda message, arg: LocalTransactionState.COMMIT_MESSAGE,
        )
        assert result.local_transaction_state is LocalTransactionState.COMMIT_MESSAGE
    store = cluster.brokers[0].context.store
    # END_TRANSACTION is oneway: wait until the committed message lands in the topic
    await eventually(lambda: sum(store.max_offset(TOPIC, queue) for queue in (0, 1)) == 1)
