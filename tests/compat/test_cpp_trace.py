"""Broker-side trace with the real C++ producer and push consumer (rocketmq==0.4.4), which
write no trace of their own: a consumed message's trace shows its put, its delivery and its
result; a message failed twice, retried, then dead-lettered shows every step."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bolide.broker.broker import Broker
from bolide.client.admin import AdminClient
from bolide.client.admin.trace import MessageTrace, message_trace
from bolide.protocol.bodies import SubscriptionGroupConfig, TopicConfig
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.trace import TraceType
from bolide.remoting import ClientPool
from bolide.testing.cluster import Cluster
from tests.compat.cpp_clients import (
    destroy_push_consumer,
    eventually,
    new_quiet_push_consumer,
    stored_messages,
)
from tests.compat.cpp_harness import destroy_producer, make_message, new_quiet_producer, send_sync

pytestmark = [pytest.mark.compat, pytest.mark.timeout(240)]

SETTINGS = {"traceOnBrokerEnable": "true", "messageDelayLevel": "1s 1s 1s 1s 1s"}
WAIT_S = 90.0


class Listener:
    """Counts calls (from the C++ threads); raises for bodies starting "fail"."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls = 0

    def __call__(self, message: Any) -> None:
        with self._lock:
            self.calls += 1
        body = message.body
        if (body.decode() if isinstance(body, bytes) else str(body)).startswith("fail"):
            raise RuntimeError("the listener fails this message on purpose")


@pytest.fixture
async def cluster(cpp_home: Path, tmp_path: Path) -> AsyncIterator[Cluster]:
    del cpp_home  # a private HOME before the native library logs
    async with Cluster(tmp_path / "cluster", settings=SETTINGS) as started:
        yield started


async def _send_and_consume(cluster: Cluster, group: str, topic: str, body: str, done: Any) -> str:
    """Send ``body`` with the C++ producer, consume it with a C++ push consumer until
    ``done(broker, listener)``; the message id."""
    broker = cluster.broker("broker-a")
    await broker.context.topics.update_topic_config(TopicConfig(topic, 1, 1))
    await broker.registration.register_once()
    producer = new_quiet_producer("PG_CPP_TRACE", cluster.namesrv_address)
    producer.start()
    try:
        result = await send_sync(producer, make_message(topic, body, tags="T", keys="cpp-key"))
        assert result.status.name == "OK"
    finally:
        await asyncio.to_thread(destroy_producer, producer)
    listener = Listener()
    consumer = new_quiet_push_consumer(group, cluster.namesrv_address, instance_name=group)
    consumer.subscribe(topic, listener)
    await asyncio.to_thread(consumer.start)
    try:
        await eventually(lambda: done(broker, listener), WAIT_S)
    finally:
        await asyncio.to_thread(destroy_push_consumer, consumer)
    return str(result.msg_id)


async def _trace(cluster: Cluster, msg_id: str) -> MessageTrace:
    trace = cluster.broker("broker-a").context.trace
    assert trace is not None
    await trace.flush()
    async with AdminClient(cluster.namesrv_address) as admin:
        return await message_trace(admin, msg_id)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
async def test_cpp_message_put_delivered_and_consumed(cluster: Cluster) -> None:
    def committed(broker: Broker, listener: Listener) -> bool:
        offsets = broker.context.offsets.queue_offsets("CG_CPP_TRACED", "CppTraced")
        return listener.calls == 1 and offsets.get(0) == 1

    msg_id = await _send_and_consume(cluster, "CG_CPP_TRACED", "CppTraced", "ok", committed)
    found = await _trace(cluster, msg_id)
    steps = [(s.record.type, s.record.group, s.status) for s in found.steps]
    assert steps == [
        (TraceType.PUB, "", "success"),
        (TraceType.SUB_BEFORE, "CG_CPP_TRACED", "delivered"),
        (TraceType.SUB_AFTER, "CG_CPP_TRACED", "success"),
    ]
    pub = found.steps[0].record
    assert (pub.topic, pub.tags, pub.keys) == ("CppTraced", "T", "cpp-key")


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
async def test_cpp_message_retried_twice_then_dead_lettered(cluster: Cluster) -> None:
    broker = cluster.broker("broker-a")
    pool = ClientPool()
    try:  # at most 2 retries, so the third failure dead-letters it
        update = RemotingCommand.request(
            RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
            body=SubscriptionGroupConfig("CG_CPP_DEAD", retry_max_times=2).to_json(),
        )
        response = await pool.invoke(broker.address, update, 10_000)
        assert response.code == ResponseCode.SUCCESS, response.remark
    finally:
        await pool.close()

    def dead(broker: Broker, listener: Listener) -> bool:
        return len(stored_messages(broker, "%DLQ%CG_CPP_DEAD")) == 1

    msg_id = await _send_and_consume(cluster, "CG_CPP_DEAD", "CppDead", "fail always", dead)
    found = await _trace(cluster, msg_id)
    steps = [(s.record.type, s.status) for s in found.steps]
    attempt = [(TraceType.SUB_BEFORE, "delivered"), (TraceType.SUB_AFTER, "failed")]
    assert steps == [(TraceType.PUB, "success"), *attempt * 3, (TraceType.PUB, "success")]
    records = [s.record for s in found.steps]
    assert [r.retry_times for r in records if r.type is TraceType.SUB_BEFORE] == [0, 1, 2]
    assert records[-1].topic == "%DLQ%CG_CPP_DEAD"
    assert {r.group for r in records[1:]} == {"CG_CPP_DEAD"}
