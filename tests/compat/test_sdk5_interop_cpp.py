"""4.x and 5.x clients on one topic of ``bolide standalone``: what the real C++ 4.x client
(rocketmq 0.4.4) sends, the official 5.x SDK receives through the proxy, and the reverse;
a 4.x clustering group and a 5.x POP group each consume every message.

The C++ clients shut down once the standalone has stopped: a route the client factory cannot
fetch is one it cannot apply while it shuts down (tests/compat/native_shutdown.py)."""

from __future__ import annotations

import contextlib
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.compat.cpp_clients import destroy_push_consumer, new_quiet_push_consumer
from tests.compat.cpp_harness import destroy_producer, make_message, new_quiet_producer
from tests.compat.sdk5_support import (
    configuration,
    create_topic,
    sdk_message,
    standalone,
    wait_until,
)

pytestmark = [pytest.mark.compat, pytest.mark.timeout(180)]

pytest.importorskip("rocketmq.v5")


def test_cpp_and_sdk5_clients_exchange_messages(tmp_path: Path, cpp_home: Path) -> None:
    from rocketmq import FilterExpression, Producer, SimpleConsumer

    del cpp_home
    with contextlib.ExitStack() as after_the_standalone, standalone(tmp_path / "data") as server:
        create_topic(server.namesrv, "Interop5")
        cpp_seen: list[tuple[str, str, str]] = []
        lock = threading.Lock()

        def on_message(message: Any) -> None:
            with lock:
                cpp_seen.append(
                    (message.body.decode(), message.tags.decode(), message.keys.decode())
                )

        cpp_consumer = new_quiet_push_consumer(
            "cpp4-group", server.namesrv, instance_name="interop"
        )
        cpp_consumer.subscribe("Interop5", on_message, "*")
        after_the_standalone.callback(destroy_push_consumer, cpp_consumer)
        cpp_consumer.start()
        cpp_producer = new_quiet_producer("cpp4-producers", server.namesrv)
        after_the_standalone.callback(destroy_producer, cpp_producer)
        cpp_producer.start()
        sdk_producer = Producer(configuration(server.proxy), ("Interop5",))
        sdk_producer.startup()
        sdk_consumer = SimpleConsumer(
            configuration(server.proxy),
            "sdk5-group",
            {"Interop5": FilterExpression("*")},
            await_duration=2,
        )
        sdk_consumer.startup()
        try:
            for index in range(3):
                message = make_message("Interop5", f"from-cpp-{index}", tags="C", keys=f"c{index}")
                cpp_producer.send_sync(message)
                sdk_producer.send(
                    sdk_message("Interop5", f"from-sdk-{index}".encode(), tag="S", keys=f"s{index}")
                )
            received: list[Any] = []
            for _ in range(30):
                if len(received) >= 6:
                    break
                batch = sdk_consumer.receive(32, 30)
                received.extend(batch)
                for message in batch:
                    sdk_consumer.ack(message)
            wait_until(lambda: len(cpp_seen) >= 6)
        finally:
            sdk_consumer.shutdown()
            sdk_producer.shutdown()
    expected = sorted([f"from-cpp-{i}" for i in range(3)] + [f"from-sdk-{i}" for i in range(3)])
    assert sorted(m.body.decode() for m in received) == expected
    from_cpp = next(m for m in received if m.body == b"from-cpp-1")
    assert from_cpp.tag == "C" and from_cpp.keys == {"c1"}
    assert sorted(body for body, _, _ in cpp_seen) == expected
    assert ("from-sdk-2", "S", "s2") in cpp_seen
