"""kill -9 ``bolide standalone`` while 5.x POP consumers hold unacked messages: after the
restart the unacked ones are delivered again (once their invisible time is over, with one
more delivery attempt) and the acked ones never are."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.compat.sdk5_support import (
    configuration,
    create_topic,
    sdk_message,
    start_standalone,
)

pytestmark = [pytest.mark.compat, pytest.mark.timeout(180)]

pytest.importorskip("rocketmq.v5")


def _consumer(endpoint: str) -> Any:
    from rocketmq import FilterExpression, SimpleConsumer

    consumer = SimpleConsumer(
        configuration(endpoint), "crash5", {"Crash5": FilterExpression("*")}, await_duration=2
    )
    consumer.startup()
    return consumer


def _receive(consumer: Any, count: int, invisible_s: int) -> list[Any]:
    got: list[Any] = []
    for _ in range(30):  # bounded: 30 long polls of at most 2 s
        if len(got) >= count:
            break
        got.extend(consumer.receive(32, invisible_s))
    return got


def test_unacked_pop_messages_survive_kill_9(tmp_path: Path) -> None:
    from rocketmq import Producer

    data = tmp_path / "data"
    first = start_standalone(data)
    try:
        create_topic(first.namesrv, "Crash5")
        producer = Producer(configuration(first.proxy), ("Crash5",))
        producer.startup()
        for index in range(6):
            producer.send(sdk_message("Crash5", f"m{index}".encode()))
        producer.shutdown()
        consumer = _consumer(first.proxy)
        got = _receive(consumer, 6, invisible_s=3)
        assert sorted(m.body for m in got) == [f"m{i}".encode() for i in range(6)]
        acked = {b"m0", b"m2", b"m4"}
        for message in got:
            if message.body in acked:
                consumer.ack(message)
        consumer.shutdown()
    finally:
        first.kill()  # kill -9: no clean shutdown, POP state only from its log
    second = start_standalone(data)
    try:
        consumer = _consumer(second.proxy)
        again = _receive(consumer, 3, invisible_s=30)
        assert sorted(m.body for m in again) == [b"m1", b"m3", b"m5"]
        assert {m.delivery_attempt for m in again} == {2}
        for message in again:
            consumer.ack(message)
        assert consumer.receive(32, 30) == []
        consumer.shutdown()
    finally:
        assert second.stop() == 0
