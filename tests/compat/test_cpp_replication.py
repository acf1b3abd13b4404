"""Failover with real clients and real processes: a name server, a SYNC_MASTER and a SLAVE
(``bolide namesrv`` / ``bolide broker``). The C++ producer (rocketmq==0.4.4) sends; the
master is killed with SIGKILL mid-stream; every SEND_OK message is then read from the slave
by a C++ push consumer and by Bolide's push consumer; the master restarts on its data, takes
sends again, and holds every acknowledged message exactly once."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import bolide.aio as bolide
from bolide.protocol.codes import ResponseCode
from tests.chaos.replication_support import HaGroup
from tests.compat.cpp_clients import Inbox, destroy_push_consumer, new_quiet_push_consumer
from tests.compat.cpp_harness import destroy_producer, make_message, new_quiet_producer
from tests.integration.wire import send_request

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

TOPIC = "FailoverTopic"
QUEUES = 4
ACKS_BEFORE_KILL = 150


def _produce(
    producer: Any, acked: list[str], stop: threading.Event, on_ack: Callable[[], None]
) -> None:
    """The C++ producer's loop (a worker thread): record every SEND_OK body."""
    sequence = 0
    while not stop.is_set():
        body = f"cpp-{sequence}"
        sequence += 1
        try:
            result = producer.send_sync(make_message(TOPIC, body))
        except Exception:
            continue  # the master is gone: not acknowledged
        if result.status.name == "OK":
            acked.append(body)
            on_ack()


async def _read_with_bolide(namesrv: str, expected: set[str]) -> set[str]:
    received: set[str] = set()
    done = asyncio.Event()

    async def listener(messages: list[bolide.MessageExt]) -> bolide.ConsumeResult:
        received.update(m.body.decode() for m in messages)
        if expected <= received:
            done.set()
        return bolide.ConsumeResult.SUCCESS

    consumer = bolide.PushConsumer(
        "CG_BOLIDE_FAILOVER",
        namesrv=namesrv,
        instance_name="bolide-reader",
        consume_from=bolide.ConsumeFrom.FIRST_OFFSET,
    )
    consumer.subscribe(TOPIC, "*")
    consumer.register_listener(listener)
    await consumer.start()
    try:
        async with asyncio.timeout(90):
            await done.wait()
    finally:
        await consumer.shutdown()
    return received


async def test_every_send_ok_survives_a_sigkilled_sync_master(
    cpp_home: Path, tmp_path: Path
) -> None:
    del cpp_home  # a private HOME must be in place before the native library logs
    group = HaGroup(tmp_path / "ha")
    acked: list[str] = []
    stop = threading.Event()
    producer: Any = None
    try:
        await group.start()
        await group.wait_until(group.slave_in_sync)
        await group.create_topic(TOPIC, QUEUES)
        producer = new_quiet_producer("PG_CPP_FAILOVER", group.namesrv_address)
        producer.start()
        loop = asyncio.get_running_loop()
        enough = asyncio.Event()

        def on_ack() -> None:
            if len(acked) >= ACKS_BEFORE_KILL:
                loop.call_soon_threadsafe(enough.set)

        sending = asyncio.create_task(asyncio.to_thread(_produce, producer, acked, stop, on_ack))
        async with asyncio.timeout(60):
            await enough.wait()
        await group.kill_master()  # mid-stream: sends are in flight
        stop.set()
        await sending
        expected = set(acked)
        assert len(expected) >= ACKS_BEFORE_KILL

        # The real C++ consumer reads them from the slave.
        inbox = Inbox(asyncio.get_running_loop())
        consumer = new_quiet_push_consumer(
            "CG_CPP_FAILOVER", group.namesrv_address, instance_name="cpp-reader"
        )
        consumer.subscribe(TOPIC, inbox.listener("cpp"), "*")
        await asyncio.to_thread(consumer.start)
        try:
            await inbox.wait_for(lambda _: expected <= set(inbox.bodies()), timeout_s=90)
        finally:
            await asyncio.to_thread(destroy_push_consumer, consumer)
        # And so does Bolide's.
        assert expected <= await _read_with_bolide(group.namesrv_address, expected)

        # The master comes back on its data and serves again.
        await group.start_master()
        await group.wait_until(group.slave_in_sync)
        response = await group.pool.invoke(
            group.master_address, send_request(TOPIC, b"after restart", queue_id=0), 10_000
        )
        assert response.code == ResponseCode.SUCCESS
        on_master = Counter(
            body.decode() for body in await group.read_all(group.master_address, TOPIC, QUEUES)
        )
        assert all(on_master[body] == 1 for body in expected)
        assert on_master["after restart"] == 1
    finally:
        stop.set()
        if producer is not None:
            await asyncio.to_thread(destroy_producer, producer)
        await group.stop()
