"""The official 5.x Python SDK (rocketmq-python-client 5.1.2) through ``bolide standalone``'s
gRPC proxy with aclEnable=true: the proxy checks each call's ``authorization`` header against
the broker's accounts (a right secret sends, a wrong one is refused), authorizes each call
with the calling account's permissions (FORBIDDEN naming the key and permission) and reaches
the broker with the standalone's in-memory account."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

import bolide
from tests.cli.conftest import BOLIDE
from tests.compat.sdk5_support import (
    SDK_REQUEST_TIMEOUT_S,
    sdk_message,
    standalone,
    wait_until,
)

pytestmark = [pytest.mark.compat, pytest.mark.timeout(180)]

rocketmq = pytest.importorskip("rocketmq.v5")

ACCOUNTS = """
accounts:
  - accessKey: sdkUser01
    secretKey: sdk-secret
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: SUB
  - accessKey: sdkAdmin1
    secretKey: admin-secret
    admin: true
"""


def _producer(endpoint: str, access_key: str, secret_key: str, topic: str) -> object:
    from rocketmq import ClientConfiguration, Credentials, Producer

    credentials = Credentials(access_key, secret_key)
    config = ClientConfiguration(endpoint, credentials, request_timeout=SDK_REQUEST_TIMEOUT_S)
    producer = Producer(config, (topic,))
    producer.startup()
    return producer


def test_sdk_producer_signs_through_the_proxy(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    acl_file = tmp_path / "plain_acl.yml"
    acl_file.write_text(ACCOUNTS)
    conf = tmp_path / "broker.conf"
    conf.write_text(f"aclEnable=true\naclFile={acl_file}\n")
    with standalone(tmp_path / "data", "-c", str(conf)) as server:
        with bolide.AdminClient(
            server.namesrv, access_key="sdkAdmin1", secret_key="admin-secret"
        ) as admin:
            admin.create_topic("Secured5", queue_count=2)
        producer = _producer(server.proxy, "sdkUser01", "sdk-secret", "Secured5")
        try:
            receipt = producer.send(sdk_message("Secured5", b"signed by the 5.x SDK"))  # type: ignore[attr-defined]
            assert receipt.message_id
        finally:
            producer.shutdown()  # type: ignore[attr-defined]
        # the SDK logs the proxy's refusal and fails the send (its own exception types)
        wrong = _producer(server.proxy, "sdkUser01", "wrong-secret", "Secured5")
        try:
            with pytest.raises(Exception):  # noqa: B017
                wrong.send(sdk_message("Secured5", b"refused"))  # type: ignore[attr-defined]
        finally:
            wrong.shutdown()  # type: ignore[attr-defined]
        assert "Check signature failed for accessKey=sdkUser01" in caplog.text
        with bolide.AdminClient(
            server.namesrv, access_key="sdkAdmin1", secret_key="admin-secret"
        ) as admin:
            status = admin.topic_status("Secured5")
        assert sum(queue.max_offset - queue.min_offset for queue in status) == 1


def test_proxy_run_apart_checks_and_signs(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    acl_file = tmp_path / "plain_acl.yml"
    acl_file.write_text(ACCOUNTS)
    conf = tmp_path / "broker.conf"
    conf.write_text(f"aclEnable=true\naclFile={acl_file}\n")
    with standalone(tmp_path / "data", "-c", str(conf), "--no-proxy") as server:
        with bolide.AdminClient(
            server.namesrv, access_key="sdkAdmin1", secret_key="admin-secret"
        ) as admin:
            admin.create_topic("Apart5", queue_count=2)
        process = subprocess.Popen(
            [BOLIDE, "proxy", "--namesrv", server.namesrv, "--port", "0",
             "--acl-file", str(acl_file), "--access-key", "sdkAdmin1"],
            env={**os.environ, "BOLIDE_SECRET_KEY": "admin-secret"},
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            assert process.stdout is not None
            ready = process.stdout.readline().decode()
            endpoint = ready.split("proxy=", 1)[1].strip()
            producer = _producer(endpoint, "sdkUser01", "sdk-secret", "Apart5")
            try:
                assert producer.send(sdk_message("Apart5", b"via the proxy")).message_id  # type: ignore[attr-defined]
            finally:
                producer.shutdown()  # type: ignore[attr-defined]
            wrong = _producer(endpoint, "sdkUser01", "bad-secret", "Apart5")
            try:
                with pytest.raises(Exception):  # noqa: B017
                    wrong.send(sdk_message("Apart5", b"refused"))  # type: ignore[attr-defined]
            finally:
                wrong.shutdown()  # type: ignore[attr-defined]
            assert "Check signature failed for accessKey=sdkUser01" in caplog.text
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            if process.stdout is not None:
                process.stdout.close()


PERMISSIONS = """
accounts:
  - accessKey: sdkPub001
    secretKey: pub-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms: [Open5=PUB, Closed5=SUB]
  - accessKey: sdkSub001
    secretKey: sub-secret
    defaultTopicPerm: SUB
    defaultGroupPerm: DENY
    groupPerms: [groupOk=SUB]
  - accessKey: sdkAdmin1
    secretKey: admin-secret
    admin: true
"""


def _consumer(endpoint: str, access_key: str, secret_key: str, group: str, topic: str) -> object:
    from rocketmq import ClientConfiguration, Credentials, FilterExpression, SimpleConsumer

    credentials = Credentials(access_key, secret_key)
    config = ClientConfiguration(endpoint, credentials, request_timeout=SDK_REQUEST_TIMEOUT_S)
    consumer = SimpleConsumer(config, group, {topic: FilterExpression("*")}, 2)
    consumer.startup()
    return consumer


def _receive_all(consumer: object, count: int) -> list[bytes]:
    got: list[bytes] = []
    wait_until(lambda: _took(consumer, got) >= count)
    return got


def _took(consumer: object, got: list[bytes]) -> int:
    for message in consumer.receive(32, 20):  # type: ignore[attr-defined]
        got.append(message.body)
        consumer.ack(message)  # type: ignore[attr-defined]
    return len(got)


def test_sdk_clients_are_held_to_their_permissions(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Through the proxy, each SDK call is checked with its own account: no PUB, no send;
    SUB on another group only, no receive; an admin may do both."""
    acl_file = tmp_path / "plain_acl.yml"
    acl_file.write_text(PERMISSIONS)
    conf = tmp_path / "broker.conf"
    conf.write_text(f"aclEnable=true\naclFile={acl_file}\n")
    with standalone(tmp_path / "data", "-c", str(conf)) as server:
        with bolide.AdminClient(
            server.namesrv, access_key="sdkAdmin1", secret_key="admin-secret"
        ) as admin:
            admin.create_topic("Open5", queue_count=2)
            admin.create_topic("Closed5", queue_count=2)
        producer = _producer(server.proxy, "sdkPub001", "pub-secret", "Open5")
        try:
            assert producer.send(sdk_message("Open5", b"allowed")).message_id  # type: ignore[attr-defined]
            with pytest.raises(Exception):  # noqa: B017
                producer.send(sdk_message("Closed5", b"refused"))  # type: ignore[attr-defined]
        finally:
            producer.shutdown()  # type: ignore[attr-defined]
        assert "No PUB permission for topic=Closed5, accessKey=sdkPub001" in caplog.text
        with pytest.raises(Exception) as refused:
            denied = _consumer(server.proxy, "sdkSub001", "sub-secret", "groupNo", "Open5")
            try:
                denied.receive(32, 20)  # type: ignore[attr-defined]
            finally:
                denied.shutdown()  # type: ignore[attr-defined]
        assert "No SUB permission for group=groupNo, accessKey=sdkSub001" in str(refused.value)
        consumer = _consumer(server.proxy, "sdkSub001", "sub-secret", "groupOk", "Open5")
        try:
            assert _receive_all(consumer, 1) == [b"allowed"]
        finally:
            consumer.shutdown()  # type: ignore[attr-defined]
        admin_producer = _producer(server.proxy, "sdkAdmin1", "admin-secret", "Closed5")
        try:
            assert admin_producer.send(sdk_message("Closed5", b"by the admin")).message_id  # type: ignore[attr-defined]
        finally:
            admin_producer.shutdown()  # type: ignore[attr-defined]
        admin_consumer = _consumer(server.proxy, "sdkAdmin1", "admin-secret", "groupNo", "Closed5")
        try:
            assert _receive_all(admin_consumer, 1) == [b"by the admin"]
        finally:
            admin_consumer.shutdown()  # type: ignore[attr-defined]
