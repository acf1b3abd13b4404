"""Broker-side trace (traceOnBrokerEnable=true) with the official 5.x Python SDK, which writes
no trace of its own, through ``bolide standalone``'s proxy: a message received and acked shows
its put, its POP delivery and its ack; a message nacked once, then left to expire twice, shows
three deliveries with their failures (FAILED for the nack, TIME_OUT for the expiries) and its
dead letter."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bolide.client.admin import AdminClient
from bolide.client.admin.trace import TraceStep, message_trace
from bolide.protocol.trace import TraceType
from tests.compat.sdk5_support import (
    Standalone,
    configuration,
    create_group,
    create_topic,
    sdk_message,
    standalone,
    wait_until,
)

pytestmark = [pytest.mark.compat, pytest.mark.timeout(240)]

rocketmq = pytest.importorskip("rocketmq.v5")

TIME_OUT = 1
FAILED = 4


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Standalone]:
    conf = tmp_path / "broker.conf"
    conf.write_text("traceOnBrokerEnable=true\n")
    with standalone(tmp_path / "data", "-c", str(conf)) as running:
        yield running


def _clients(server: Standalone, group: str, topic: str) -> tuple[Any, Any]:
    from rocketmq import FilterExpression, Producer, SimpleConsumer

    producer = Producer(configuration(server.proxy), (topic,))
    producer.startup()
    consumer = SimpleConsumer(
        configuration(server.proxy), group, {topic: FilterExpression("*")}, await_duration=2
    )
    consumer.startup()
    return producer, consumer


def _receive_one(consumer: Any, invisible_s: int) -> Any:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        got = consumer.receive(1, invisible_s)
        if got:
            return got[0]
    raise AssertionError("no message received in time")


def _steps(server: Standalone, msg_id: str) -> list[TraceStep]:
    async def look() -> list[TraceStep]:
        async with AdminClient(server.namesrv) as admin:
            return (await message_trace(admin, msg_id)).steps

    try:
        return asyncio.run(look())
    except Exception:  # the trace topic is not routed yet
        return []


def _wait_for_steps(server: Standalone, msg_id: str, count: int) -> list[TraceStep]:
    found: list[TraceStep] = []

    def enough() -> bool:
        found[:] = _steps(server, msg_id)
        return len(found) >= count

    wait_until(enough)
    return found


def test_a_received_and_acked_message_shows_put_delivery_and_ack(server: Standalone) -> None:
    create_topic(server.namesrv, "Traced5", queues=2)
    create_group(server.namesrv, "traced5")
    producer, consumer = _clients(server, "traced5", "Traced5")
    try:
        receipt = producer.send(sdk_message("Traced5", b"hello", keys="k5", tag="T5"))
        message = _receive_one(consumer, 20)
        consumer.ack(message)
    finally:
        consumer.shutdown()
        producer.shutdown()
    msg_id = receipt.message_id
    assert message.message_id == msg_id
    steps = _wait_for_steps(server, msg_id, 3)
    assert [(s.record.type, s.record.group, s.status) for s in steps] == [
        (TraceType.PUB, "", "success"),
        (TraceType.SUB_BEFORE, "traced5", "delivered"),
        (TraceType.SUB_AFTER, "traced5", "success"),
    ]
    pub, before, after = (s.record for s in steps)
    assert (pub.topic, pub.tags, pub.keys) == ("Traced5", "T5", "k5")
    assert before.retry_times == 0 and before.keys == "k5"
    assert after.request_id == before.request_id and after.context_code == 0


def test_a_nacked_then_expired_message_shows_every_step_to_its_dead_letter(
    server: Standalone,
) -> None:
    create_topic(server.namesrv, "Dying5", queues=1)
    create_group(server.namesrv, "dying5", retry_max_times=2)  # 3 deliveries at most
    producer, consumer = _clients(server, "dying5", "Dying5")
    try:
        msg_id = producer.send(sdk_message("Dying5", b"fails")).message_id
        first = _receive_one(consumer, 20)
        consumer.change_invisible_duration(first, 1)  # the SDKs' nack
        second = _receive_one(consumer, 1)  # left to expire
        third = _receive_one(consumer, 1)  # left to expire: the last attempt
        assert [m.delivery_attempt for m in (first, second, third)] == [1, 2, 3]
        steps = _wait_for_steps(server, msg_id, 8)
    finally:
        consumer.shutdown()
        producer.shutdown()
    attempt = [(TraceType.SUB_BEFORE, "delivered"), (TraceType.SUB_AFTER, "failed")]
    assert [(s.record.type, s.status) for s in steps] == [
        (TraceType.PUB, "success"),
        *attempt * 3,
        (TraceType.PUB, "success"),
    ]
    records = [s.record for s in steps]
    assert [r.retry_times for r in records if r.type is TraceType.SUB_BEFORE] == [0, 1, 2]
    results = [r for r in records if r.type is TraceType.SUB_AFTER]
    assert [r.context_code for r in results] == [FAILED, TIME_OUT, TIME_OUT]
    befores = [r for r in records if r.type is TraceType.SUB_BEFORE]
    assert [r.request_id for r in results] == [r.request_id for r in befores]
    assert records[-1].topic == "%DLQ%dying5"
    assert {r.group for r in records[1:]} == {"dying5"}
