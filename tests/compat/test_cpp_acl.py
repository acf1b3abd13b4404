"""The real C++ client (rocketmq==0.4.4) against a Bolide broker with aclEnable=true: with
``set_session_credentials`` and the right secret it sends and consumes; a wrong secret, an
account without the permission, and a denied topic or group are refused (nothing stored)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bolide.broker.broker import Broker
from bolide.protocol.bodies import TopicConfig
from bolide.testing.cluster import Cluster
from tests.compat.cpp_clients import (
    Inbox,
    destroy_push_consumer,
    eventually,
    new_quiet_push_consumer,
    stored_messages,
)
from tests.compat.cpp_harness import destroy_producer, make_message, new_quiet_producer

pytestmark = [pytest.mark.compat, pytest.mark.timeout(180)]

ACCOUNTS = """
accounts:
  - accessKey: cppProducer
    secretKey: right-secret
    defaultTopicPerm: DENY
    topicPerms: [CppAcl=PUB, CppHidden=DENY]
  - accessKey: cppConsumer
    secretKey: consumer-secret
    defaultTopicPerm: SUB
    defaultGroupPerm: SUB
    groupPerms: [CG_DENIED=DENY]
"""
TOPIC = "CppAcl"
CHANNEL = "ALIYUN"  # what C++ callers pass as the ONS channel; signed as an ordinary field


@pytest.fixture
async def acl_cluster(tmp_path: Path, cpp_home: Path) -> AsyncIterator[Cluster]:
    del cpp_home
    acl_file = tmp_path / "plain_acl.yml"
    acl_file.write_text(ACCOUNTS)
    settings = {"aclEnable": "true", "aclFile": str(acl_file)}
    async with Cluster(tmp_path / "cluster", settings=settings) as cluster:
        broker = cluster.broker("broker-a")
        for topic in (TOPIC, "CppHidden"):
            await broker.context.topics.update_topic_config(TopicConfig(topic, 2, 2))
        await broker.registration.register_once()
        yield cluster


class Producers:
    def __init__(self, cluster: Cluster) -> None:
        self._cluster = cluster
        self._started: list[Any] = []

    def start(self, group: str, access_key: str, secret_key: str) -> Any:
        producer = new_quiet_producer(group, self._cluster.namesrv_address)
        producer.set_session_credentials(access_key, secret_key, CHANNEL)
        producer.start()
        self._started.append(producer)
        return producer

    async def stop_all(self) -> None:
        for producer in self._started:
            await asyncio.to_thread(destroy_producer, producer)


@pytest.fixture
async def producers(acl_cluster: Cluster) -> AsyncIterator[Producers]:
    started = Producers(acl_cluster)
    try:
        yield started
    finally:
        await started.stop_all()


def _validator(cluster: Cluster) -> Any:
    validator = cluster.broker("broker-a").acl
    assert validator is not None
    return validator


async def _refused(
    producer: Any, topic: str, reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The send fails (the C++ wrapper raises its own exception types) and the broker's log
    says the ACL refused it for ``reason``."""
    caplog.clear()
    from rocketmq.exceptions import ProducerSendSyncFailed

    with (
        caplog.at_level(logging.DEBUG, logger="bolide.acl"),
        pytest.raises(ProducerSendSyncFailed),
    ):
        await asyncio.to_thread(producer.send_sync, make_message(topic, "refused"))
    assert reason in caplog.text


async def test_right_secret_sends(acl_cluster: Cluster, producers: Producers) -> None:
    producer = producers.start("PG_CPP_ACL_OK", "cppProducer", "right-secret")
    result = await asyncio.to_thread(producer.send_sync, make_message(TOPIC, "signed by C++"))
    assert result.status.name == "OK"
    [stored] = stored_messages(acl_cluster.broker("broker-a"), TOPIC)
    assert stored.body == b"signed by C++"


async def test_wrong_secret_no_permission_and_denied_topic_are_refused(
    acl_cluster: Cluster, producers: Producers, caplog: pytest.LogCaptureFixture
) -> None:
    validator = _validator(acl_cluster)
    wrong = producers.start("PG_CPP_ACL_WRONG", "cppProducer", "wrong-secret")
    await _refused(wrong, TOPIC, "Check signature failed for accessKey=cppProducer", caplog)
    no_permission = producers.start("PG_CPP_ACL_SUB", "cppConsumer", "consumer-secret")
    reason = "No PUB permission for topic=CppAcl, accessKey=cppConsumer"
    await _refused(no_permission, TOPIC, reason, caplog)
    right = producers.start("PG_CPP_ACL_DENIED", "cppProducer", "right-secret")
    reason = "No PUB permission for topic=CppHidden, accessKey=cppProducer"
    await _refused(right, "CppHidden", reason, caplog)
    assert validator.denied_count >= 3
    broker = acl_cluster.broker("broker-a")
    assert stored_messages(broker, TOPIC) == []
    assert stored_messages(broker, "CppHidden") == []


@pytest.fixture
async def push_consumers(acl_cluster: Cluster) -> AsyncIterator[list[Any]]:
    """Consumers shut down while the broker still serves on the running loop: their final
    offset commits and UNREGISTER_CLIENT get answers (a blocking shutdown outside the loop
    waited for each request's timeout, ~25 s)."""
    del acl_cluster  # torn down after the consumers
    started: list[Any] = []
    try:
        yield started
    finally:
        for consumer in started:
            await asyncio.to_thread(destroy_push_consumer, consumer)


@pytest.mark.slow  # the C++ consumer rebalances on its own 10-20 s timer
async def test_consumer_with_right_secret_consumes_and_denied_group_is_refused(
    acl_cluster: Cluster, producers: Producers, push_consumers: list[Any]
) -> None:
    producer = producers.start("PG_CPP_ACL_FEED", "cppProducer", "right-secret")
    for index in range(4):
        await asyncio.to_thread(producer.send_sync, make_message(TOPIC, f"m{index}"))
    inbox = Inbox(asyncio.get_running_loop())
    consumer = new_quiet_push_consumer("CG_CPP_ACL", acl_cluster.namesrv_address,
                                       instance_name="acl-ok")  # fmt: skip
    consumer.set_session_credentials("cppConsumer", "consumer-secret", CHANNEL)
    consumer.subscribe(TOPIC, inbox.listener("acl-ok"))
    await asyncio.to_thread(consumer.start)
    push_consumers.append(consumer)
    await inbox.wait_for(lambda messages: len(messages) >= 4)
    assert sorted(inbox.bodies()) == ["m0", "m1", "m2", "m3"]

    broker: Broker = acl_cluster.broker("broker-a")
    validator = _validator(acl_cluster)
    refused_before = validator.denied_count
    denied = new_quiet_push_consumer("CG_DENIED", acl_cluster.namesrv_address,
                                     instance_name="acl-denied")  # fmt: skip
    denied.set_session_credentials("cppConsumer", "consumer-secret", CHANNEL)
    denied.subscribe(TOPIC, inbox.listener("acl-denied"))
    await asyncio.to_thread(denied.start)
    push_consumers.append(denied)
    await eventually(lambda: validator.denied_count > refused_before)  # its heartbeat refused
    assert broker.context.consumers.get_consumer_group_info("CG_DENIED") is None
    assert inbox.bodies("acl-denied") == []
