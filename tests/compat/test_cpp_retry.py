"""The real C++ client (rocketmq==0.4.4) with delayed messages, timer messages and retries.

Delay levels are short ("1s 2s 1s": level 2 waits 2 s, and level 3 — where a first send-back
starts — 1 s, so retries take seconds, not minutes). Timing is checked on the broker's
own records (delivery time in SCHEDULE_TOPIC_XXXX's consume queue, store time of the delivered
record), never with a stopwatch; waits are on received messages, bounded.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bolide.broker.broker import Broker
from bolide.protocol.bodies import SubscriptionGroupConfig, TopicConfig
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.message import PropertyKey
from bolide.protocol.system_topics import SCHEDULE_TOPIC
from bolide.remoting import ClientPool
from bolide.testing.cluster import Cluster
from tests.compat.cpp_clients import (
    destroy_push_consumer,
    eventually,
    new_quiet_push_consumer,
    stored_messages,
)
from tests.compat.cpp_harness import (
    destroy_producer,
    make_message,
    new_quiet_producer,
    send_sync,
)

pytestmark = [pytest.mark.compat, pytest.mark.timeout(240)]

LEVELS = "1s 2s 1s"
WAIT_S = 90.0


@dataclass(frozen=True)
class Seen:
    topic: str
    body: str
    reconsume_times: int
    store_timestamp_ms: int
    born_timestamp_ms: int
    retry_topic: str
    delay: str


class Listener:
    """A C++ listener that records each message and raises for bodies starting "fail"."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._lock = threading.Lock()
        self._seen: list[Seen] = []
        self._changed = asyncio.Event()

    def __call__(self, message: Any) -> None:
        body = _text(message.body)
        seen = Seen(
            _text(message.topic),
            body,
            int(message.reconsume_times),
            int(message.store_timestamp),
            int(message.born_timestamp),
            _text(message.get_property(PropertyKey.RETRY_TOPIC)),
            _text(message.get_property(PropertyKey.DELAY)),
        )
        with self._lock:
            self._seen.append(seen)
        self._loop.call_soon_threadsafe(self._changed.set)
        if body.startswith("fail"):
            raise RuntimeError("the listener fails this message on purpose")

    @property
    def seen(self) -> list[Seen]:
        with self._lock:
            return list(self._seen)

    async def wait_for(self, count: int) -> list[Seen]:
        async def wait() -> list[Seen]:
            while len(self.seen) < count:
                self._changed.clear()
                if len(self.seen) >= count:
                    break
                await self._changed.wait()
            return self.seen

        return await asyncio.wait_for(wait(), WAIT_S)


def _text(value: Any) -> str:
    """The wrapper hands back str or bytes depending on the getter; None when absent."""
    if value is None:
        return ""
    return value.decode() if isinstance(value, bytes) else str(value)


@pytest.fixture
async def cluster(cpp_home: Path, tmp_path: Path) -> AsyncIterator[Cluster]:
    del cpp_home  # a private HOME before the native library logs
    async with Cluster(tmp_path / "cluster", settings={"messageDelayLevel": LEVELS}) as started:
        yield started


@pytest.fixture
async def producer(cluster: Cluster) -> AsyncIterator[Any]:
    client = new_quiet_producer("PG_DELAY_TESTS", cluster.namesrv_address)
    client.start()
    try:
        yield client
    finally:
        await asyncio.to_thread(destroy_producer, client)


@pytest.fixture
async def listener() -> Listener:
    return Listener(asyncio.get_running_loop())


async def _consume(cluster: Cluster, group: str, topic: str, listener: Listener) -> Any:
    """A started C++ push consumer of ``topic`` (created first, so its route exists at once)."""
    broker = _broker(cluster)
    await broker.context.topics.update_topic_config(TopicConfig(topic, 1, 1))
    await broker.registration.register_once()
    consumer = new_quiet_push_consumer(group, cluster.namesrv_address, instance_name=group)
    consumer.subscribe(topic, listener)
    await asyncio.to_thread(consumer.start)
    return consumer


def _broker(cluster: Cluster) -> Broker:
    return cluster.broker("broker-a")


async def test_delay_level_2_arrives_after_its_delay_and_promptly(
    cluster: Cluster, producer: Any, listener: Listener
) -> None:
    consumer = await _consume(cluster, "CG_CPP_DELAY", "CppDelayed", listener)
    try:
        message = make_message("CppDelayed", "two seconds later", tags="D")
        message.set_delay_time_level(2)
        result = await send_sync(producer, message)
        assert result.status.name == "OK"
        (seen,) = await listener.wait_for(1)
    finally:
        await asyncio.to_thread(destroy_push_consumer, consumer)
    store = _broker(cluster).context.store
    ((_, _, deliver_ms),) = store.consume_queue_entries(SCHEDULE_TOPIC, 1, 0, 1)
    assert deliver_ms == store.store_time_at(SCHEDULE_TOPIC, 1, 0) + 2_000
    assert seen.topic == "CppDelayed" and seen.body == "two seconds later" and seen.delay == ""
    assert seen.store_timestamp_ms >= seen.born_timestamp_ms + 2_000  # no earlier than 2 s
    # Not before its due time. How promptly it lands is shown on a manual clock in
    # tests/integration/test_delay_retry.py: the C++ client and its timers run on the real
    # clock, so here the only bound on time is the listener's wait, a hang guard.
    assert deliver_ms <= seen.store_timestamp_ms


async def test_a_timer_property_set_by_the_cpp_producer(
    cluster: Cluster, producer: Any, listener: Listener
) -> None:
    consumer = await _consume(cluster, "CG_CPP_TIMER", "CppTimed", listener)
    try:
        message = make_message("CppTimed", "in 1.5 s", properties={"TIMER_DELAY_MS": "1500"})
        result = await send_sync(producer, message)
        assert result.status.name == "OK"
        (seen,) = await listener.wait_for(1)
    finally:
        await asyncio.to_thread(destroy_push_consumer, consumer)
    assert seen.body == "in 1.5 s"
    assert seen.store_timestamp_ms >= seen.born_timestamp_ms + 1_500


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
async def test_a_failing_consumer_gets_retries_then_the_message_is_dead(
    cluster: Cluster, producer: Any, listener: Listener
) -> None:
    """The wrapper re-raises the listener's exception inside the ctypes callback (printed as
    an unraisable exception), which the C++ client takes as RECONSUME_LATER and sends back.
    The group's retryMaxTimes is set to 3 with UPDATE_AND_CREATE_SUBSCRIPTIONGROUP so the test
    takes seconds (the default 16 is walked through in tests/broker/test_retry.py)."""
    broker = _broker(cluster)
    pool = ClientPool()
    try:
        update = RemotingCommand.request(
            RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
            body=SubscriptionGroupConfig("CG_CPP_RETRY", retry_max_times=3).to_json(),
        )
        response = await pool.invoke(broker.address, update, 10_000)
        assert response.code == ResponseCode.SUCCESS, response.remark
    finally:
        await pool.close()
    consumer = await _consume(cluster, "CG_CPP_RETRY", "CppRetried", listener)
    try:
        result = await send_sync(producer, make_message("CppRetried", "fail forever", tags="R"))
        assert result.status.name == "OK"
        # The first delivery and 3 retries, then the DLQ.
        seen = await listener.wait_for(4)
        await eventually(lambda: len(stored_messages(broker, "%DLQ%CG_CPP_RETRY")) == 1, WAIT_S)
    finally:
        await asyncio.to_thread(destroy_push_consumer, consumer)
    assert [s.reconsume_times for s in seen] == [0, 1, 2, 3]
    assert {s.body for s in seen} == {"fail forever"}
    assert {s.topic for s in seen} == {"CppRetried"}  # restored from RETRY_TOPIC
    assert {s.retry_topic for s in seen[1:]} == {"CppRetried"}
    retries = stored_messages(broker, "%RETRY%CG_CPP_RETRY")
    assert [m.reconsume_times for m in retries] == [1, 2, 3]
    (dead,) = stored_messages(broker, "%DLQ%CG_CPP_RETRY")
    assert dead.reconsume_times == 4 and dead.body == b"fail forever"
    assert dead.properties[PropertyKey.RETRY_TOPIC] == "CppRetried"
    dlq = broker.context.topics.find("%DLQ%CG_CPP_RETRY")
    assert dlq is not None and dlq.perm == 2
