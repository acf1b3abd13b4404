"""The official RocketMQ 5.x Python SDK (rocketmq-python-client 5.1.2), unchanged, against
``bolide standalone`` through the gRPC proxy: producers (normal, FIFO, delay), the simple
consumer (receive, ack, change invisible duration, redelivery) and the push consumer
(concurrent with retries and the DLQ, FIFO in order)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import bolide
from bolide.base.errors import BolideError
from tests.compat.sdk5_support import (
    Standalone,
    configuration,
    create_group,
    create_topic,
    sdk_message,
    standalone,
    wait_until,
)

pytestmark = [pytest.mark.compat, pytest.mark.timeout(180)]

rocketmq = pytest.importorskip("rocketmq.v5")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Standalone]:
    with standalone(tmp_path / "data") as running:
        yield running


def _producer(server: Standalone, *topics: str, checker: Any = None) -> Any:
    from rocketmq import Producer

    producer = Producer(configuration(server.proxy), topics, checker)
    producer.startup()
    return producer


def _simple_consumer(server: Standalone, group: str, topic: str, tags: str = "*") -> Any:
    from rocketmq import FilterExpression, SimpleConsumer

    consumer = SimpleConsumer(
        configuration(server.proxy), group, {topic: FilterExpression(tags)}, await_duration=2
    )
    consumer.startup()
    return consumer


def _receive_all(consumer: Any, count: int, invisible_s: int = 20) -> list[Any]:
    got: list[Any] = []
    deadline = time.monotonic() + 60
    while len(got) < count and time.monotonic() < deadline:
        got.extend(consumer.receive(32, invisible_s))
    return got


def test_producer_and_simple_consumer_round_trip(server: Standalone) -> None:
    create_topic(server.namesrv, "Orders5")
    producer = _producer(server, "Orders5")
    consumer = _simple_consumer(server, "billing5", "Orders5", "paid || refunded")
    try:
        sent = [
            producer.send(
                sdk_message(
                    "Orders5", f"order-{index}".encode(), tag="paid" if index % 2 else "created",
                    keys=f"k{index}", properties={"origin": "sdk"},
                )
            )
            for index in range(6)
        ]  # fmt: skip
        assert all(receipt.message_id for receipt in sent)
        got = _receive_all(consumer, 3)
        assert sorted(m.body for m in got) == [b"order-1", b"order-3", b"order-5"]
        first = got[0]
        assert first.tag == "paid" and first.properties == {"origin": "sdk"}
        assert first.delivery_attempt == 1
        assert {m.message_id for m in got} <= {r.message_id for r in sent}
        for message in got:
            consumer.ack(message)
        assert consumer.receive(32, 20) == []
    finally:
        consumer.shutdown()
        producer.shutdown()
    # the 4.x view of the same messages: keys and tags as RocketMQ 4.x stores them
    with bolide.AdminClient(server.namesrv) as admin:
        stored = admin.query_by_key("Orders5", "k3")
    assert [m.body for m in stored] == [b"order-3"]
    assert stored[0].tags == "paid"


def test_unacked_messages_come_back_and_change_invisible_duration(server: Standalone) -> None:
    create_topic(server.namesrv, "Redeliver5")
    producer = _producer(server, "Redeliver5")
    consumer = _simple_consumer(server, "redeliver5", "Redeliver5")
    try:
        producer.send(sdk_message("Redeliver5", b"again"))
        producer.send(sdk_message("Redeliver5", b"later"))
        got = _receive_all(consumer, 2, invisible_s=3)
        assert sorted(m.body for m in got) == [b"again", b"later"]
        later = next(m for m in got if m.body == b"later")
        consumer.change_invisible_duration(later, 60)  # a new handle, hidden for a minute
        back = _receive_all(consumer, 1, invisible_s=20)
        assert [m.body for m in back] == [b"again"]
        assert back[0].delivery_attempt == 2
        consumer.ack(back[0])
        with pytest.raises(Exception, match=r"40013|expired"):
            first = next(m for m in got if m.body == b"again")
            consumer.change_invisible_duration(first, 5)  # the first delivery's handle
    finally:
        consumer.shutdown()
        producer.shutdown()


def test_delay_messages_wait_for_their_delivery_time(server: Standalone) -> None:
    create_topic(server.namesrv, "Delayed5", "DELAY")
    producer = _producer(server, "Delayed5")
    consumer = _simple_consumer(server, "delayed5", "Delayed5")
    try:
        due_ms = (int(time.time()) + 3) * 1000  # the SDK takes seconds since the epoch
        producer.send(sdk_message("Delayed5", b"later", delivery_timestamp=due_ms // 1000))
        got = _receive_all(consumer, 1)
        assert int(time.time() * 1000) >= due_ms - 50  # not delivered early (timer precision)
        assert got[0].body == b"later" and got[0].delivery_timestamp == due_ms
    finally:
        consumer.shutdown()
        producer.shutdown()


def test_fifo_messages_stay_in_order_per_group(server: Standalone) -> None:
    from rocketmq import ConsumeResult, FilterExpression, MessageListener, PushConsumer

    create_topic(server.namesrv, "Fifo5", "FIFO")
    create_group(server.namesrv, "fifo5", orderly=True)
    producer = _producer(server, "Fifo5")
    seen: dict[str, list[bytes]] = {}
    lock = threading.Lock()
    failed_once: set[bytes] = set()

    class Listener(MessageListener):  # type: ignore[misc]
        def consume(self, message: Any) -> Any:
            with lock:
                if message.body == b"a-1" and message.body not in failed_once:
                    failed_once.add(message.body)  # one local retry keeps the order
                    return ConsumeResult.FAILURE
                seen.setdefault(message.message_group, []).append(message.body)
            return ConsumeResult.SUCCESS

    try:
        for index in range(5):
            for group in ("a", "b"):
                producer.send(
                    sdk_message("Fifo5", f"{group}-{index}".encode(), message_group=group)
                )
        consumer = PushConsumer(
            configuration(server.proxy), "fifo5", Listener(), {"Fifo5": FilterExpression("*")}
        )
        consumer.startup()
        try:
            wait_until(lambda: sum(len(v) for v in seen.values()) >= 10)
        finally:
            consumer.shutdown()
    finally:
        producer.shutdown()
    assert seen["a"] == [f"a-{i}".encode() for i in range(5)]
    assert seen["b"] == [f"b-{i}".encode() for i in range(5)]


def test_push_consumer_retries_then_dead_letters(server: Standalone) -> None:
    from rocketmq import ConsumeResult, FilterExpression, MessageListener, PushConsumer

    create_topic(server.namesrv, "Push5")
    create_group(server.namesrv, "push5", retry_max_times=1)
    producer = _producer(server, "Push5")
    attempts: dict[bytes, list[int]] = {}
    lock = threading.Lock()

    class Listener(MessageListener):  # type: ignore[misc]
        def consume(self, message: Any) -> Any:
            with lock:
                attempts.setdefault(message.body, []).append(message.delivery_attempt)
            return ConsumeResult.FAILURE if message.body == b"poison" else ConsumeResult.SUCCESS

    consumer = PushConsumer(
        configuration(server.proxy), "push5", Listener(), {"Push5": FilterExpression("*")}
    )
    consumer.startup()
    try:
        producer.send(sdk_message("Push5", b"fine"))
        producer.send(sdk_message("Push5", b"poison", keys="poison-key"))
        wait_until(lambda: len(attempts.get(b"poison", [])) >= 2 and b"fine" in attempts)

        def in_dlq() -> bool:
            with bolide.AdminClient(server.namesrv) as admin:
                try:
                    return bool(admin.query_by_key("%DLQ%push5", "poison-key"))
                except BolideError:
                    return False

        wait_until(in_dlq)
    finally:
        consumer.shutdown()
        producer.shutdown()
    assert attempts[b"fine"] == [1]
    assert attempts[b"poison"] == [1, 2]


def test_bolide_proxy_runs_apart_from_the_brokers(tmp_path: Path) -> None:
    import os
    import signal
    import subprocess

    from tests.compat.sdk5_support import BOLIDE

    with standalone(tmp_path / "data", "--no-proxy") as server:
        assert "proxy=" not in server.ready
        create_topic(server.namesrv, "Apart5")
        process = subprocess.Popen(
            [
                BOLIDE,
                "proxy",
                "--namesrv",
                server.namesrv,
                "--port",
                "0",
                "--data-dir",
                str(tmp_path / "proxy"),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=tmp_path,
        )
        try:
            assert process.stdout is not None
            ready = process.stdout.readline().decode().split()
            assert ready[:2] == ["bolide", "ready"] and ready[2].startswith("proxy=127.0.0.1:")
            endpoint = ready[2].split("=", 1)[1]
            from rocketmq import FilterExpression, Producer, SimpleConsumer

            producer = Producer(configuration(endpoint), ("Apart5",))
            producer.startup()
            consumer = SimpleConsumer(
                configuration(endpoint), "apart5", {"Apart5": FilterExpression("*")}, 2
            )
            consumer.startup()
            try:
                producer.send(sdk_message("Apart5", b"via a separate proxy"))
                [got] = _receive_all(consumer, 1)
                assert got.body == b"via a separate proxy"
                consumer.ack(got)
            finally:
                consumer.shutdown()
                producer.shutdown()
        finally:
            os.kill(process.pid, signal.SIGTERM)
            assert process.wait(60) == 0
            if process.stdout is not None:
                process.stdout.close()


def test_a_recalled_delay_message_is_never_delivered(server: Standalone) -> None:
    create_topic(server.namesrv, "Recall5", "DELAY")
    producer = _producer(server, "Recall5")
    consumer = _simple_consumer(server, "recall5", "Recall5")
    try:
        due_s = int(time.time()) + 3
        recalled = producer.send(sdk_message("Recall5", b"recalled", delivery_timestamp=due_s))
        kept = producer.send(sdk_message("Recall5", b"kept", delivery_timestamp=due_s))
        assert recalled.recall_handle
        assert producer.recall_message("Recall5", recalled.recall_handle) == recalled.message_id
        got = _receive_all(consumer, 1)
        assert [m.body for m in got] == [b"kept"] and got[0].message_id == kept.message_id
        consumer.ack(got[0])
        assert consumer.receive(32, 20) == []  # the recalled one stays away past its time
        with pytest.raises(Exception, match=r"delivered|due"):
            producer.recall_message("Recall5", kept.recall_handle)  # too late now
        with pytest.raises(Exception, match=r"40000|invalid"):
            producer.recall_message("Recall5", "not-a-handle")
    finally:
        consumer.shutdown()
        producer.shutdown()


def test_fifo_push_consumer_dead_letters_after_its_attempts(server: Standalone) -> None:
    from rocketmq import ConsumeResult, FilterExpression, MessageListener, PushConsumer

    create_topic(server.namesrv, "FifoDlq5", "FIFO")
    create_group(server.namesrv, "fifodlq5", orderly=True, retry_max_times=1)
    producer = _producer(server, "FifoDlq5")
    seen: list[tuple[bytes, int]] = []
    lock = threading.Lock()

    class Listener(MessageListener):  # type: ignore[misc]
        def consume(self, message: Any) -> Any:
            with lock:
                seen.append((message.body, message.delivery_attempt))
            return ConsumeResult.FAILURE if message.body == b"poison" else ConsumeResult.SUCCESS

    consumer = PushConsumer(
        configuration(server.proxy), "fifodlq5", Listener(), {"FifoDlq5": FilterExpression("*")}
    )
    consumer.startup()
    try:
        producer.send(sdk_message("FifoDlq5", b"poison", message_group="g", keys="fifo-poison"))
        producer.send(sdk_message("FifoDlq5", b"after", message_group="g"))
        wait_until(lambda: any(body == b"after" for body, _ in seen))

        def in_dlq() -> bool:
            with bolide.AdminClient(server.namesrv) as admin:
                try:
                    return bool(admin.query_by_key("%DLQ%fifodlq5", "fifo-poison"))
                except BolideError:
                    return False

        wait_until(in_dlq)
    finally:
        consumer.shutdown()
        producer.shutdown()
    poison = [attempt for body, attempt in seen if body == b"poison"]
    # two attempts (retryMaxTimes 1 + 1; the SDK retries FIFO messages locally, so both see
    # the same delivery_attempt), then the DLQ
    assert len(poison) == 2
    assert seen[-1] == (b"after", 1)  # the group's next message only after that, in order
