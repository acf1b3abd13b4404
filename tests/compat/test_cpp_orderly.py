"""The real C++ orderly push consumer (rocketmq==0.4.4, ``PushConsumer(orderly=True)``) against
a Bolide broker: it locks each queue (LOCK_BATCH_MQ) before pulling it, renews, and unlocks at
shutdown; Bolide's lock table decides which member consumes which queue.

40 sharding keys, each with a sequence 0..11, sent with ``send(..., sharding_key=key)`` in
three phases: one C++ member alone, a second one joining, the first leaving. For every key the
sequence seen (re-deliveries removed) is exactly 0..11; per queue, the listener calls of the
two members never overlap in time and a member's offsets advance one by one; nothing is lost;
while running, the broker shows each member holding the locks of the queues it consumes, and
none once both are gone.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import threading
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bolide.broker.broker import Broker
from bolide.client.message import Message
from bolide.client.producer.producer import Producer
from bolide.protocol.bodies import TopicConfig
from bolide.testing.cluster import Cluster
from tests.compat.cpp_clients import destroy_push_consumer, eventually
from tests.compat.cpp_harness import native_log_level

pytestmark = [
    pytest.mark.compat,
    pytest.mark.slow,
    pytest.mark.timeout(240),
]

TOPIC = "CppOrderly"
GROUP = "CG_ORDERLY"
QUEUES = 4
KEYS = [f"key{index:02d}" for index in range(40)]
SEQUENCE_LENGTH = 12
WORK_BLOCK = bytes(16 * 1024)
WAIT_S = 90.0
"""Generous: a C++ member rebalances every 10 s, and a refused lock waits for the next try."""


@dataclass(frozen=True, slots=True)
class Call:
    member: str
    queue_id: int
    queue_offset: int
    key: str
    seq: int
    start_ns: int
    end_ns: int


class Recorder:
    """Listener calls of the C++ members (one message per call), from the native threads."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._lock = threading.Lock()
        self._calls: list[Call] = []
        self._changed = asyncio.Event()

    def listener(self, member: str) -> Callable[[Any], None]:
        def on_message(message: Any) -> None:
            start_ns = time.monotonic_ns()
            key, seq = message.body.decode().split(":")
            for _ in range(4):  # a little work, so that an overlap of two members would show
                hashlib.sha256(WORK_BLOCK).digest()
            call = Call(
                member,
                int(message.queue_id),
                int(message.queue_offset),
                key,
                int(seq),
                start_ns,
                time.monotonic_ns(),
            )
            with self._lock:
                self._calls.append(call)
            self._loop.call_soon_threadsafe(self._changed.set)

        return on_message

    @property
    def calls(self) -> list[Call]:
        with self._lock:
            return list(self._calls)

    def delivered(self) -> set[tuple[str, int]]:
        return {(call.key, call.seq) for call in self.calls}

    async def wait_for(self, predicate: Callable[[], bool]) -> None:
        async with asyncio.timeout(WAIT_S):
            while not predicate():
                self._changed.clear()
                await self._changed.wait()


def new_orderly_consumer(namesrv: str, instance_name: str) -> Any:
    """A not-yet-started C++ orderly PushConsumer (HOME set by cpp_home)."""
    from rocketmq import ffi
    from rocketmq.client import PushConsumer

    consumer = PushConsumer(GROUP, orderly=True)
    ffi.dll.SetPushConsumerLogLevel(consumer._handle, native_log_level())
    consumer.set_namesrv_addr(namesrv)
    consumer.set_instance_name(instance_name)
    return consumer


@pytest.fixture
async def cluster(cpp_home: Path, bolide_cluster: Cluster) -> AsyncIterator[Cluster]:
    del cpp_home  # a private HOME must be in place before the native library logs
    broker = bolide_cluster.broker("broker-a")
    await broker.context.topics.update_topic_config(TopicConfig(TOPIC, QUEUES, QUEUES))
    await broker.registration.register_once()
    yield bolide_cluster


async def send_rounds(producer: Producer, seqs: range) -> None:
    for seq in seqs:
        await asyncio.gather(
            *(
                producer.send(Message(TOPIC, f"{key}:{seq}".encode()), sharding_key=key)
                for key in KEYS
            )
        )


def cpp_members_holding(broker: Broker) -> dict[str, set[int]]:
    held: dict[str, set[int]] = defaultdict(set)
    for queue, client_id in broker.context.locks.locked_queues(GROUP).items():
        if queue.topic == TOPIC:
            held[client_id].add(queue.queue_id)
    return held


async def test_cpp_orderly_members_consume_each_key_in_order(cluster: Cluster) -> None:
    broker = cluster.broker("broker-a")
    recorder = Recorder(asyncio.get_running_loop())
    first = new_orderly_consumer(cluster.namesrv_address, "orderly-first")
    second = new_orderly_consumer(cluster.namesrv_address, "orderly-second")
    first.subscribe(TOPIC, recorder.listener("first"))
    second.subscribe(TOPIC, recorder.listener("second"))
    started: list[Any] = []
    async with Producer("orderly-cpp-producers", namesrv=cluster.namesrv_address) as producer:
        try:
            await asyncio.to_thread(first.start)
            started.append(first)
            await send_rounds(producer, range(4))
            await recorder.wait_for(lambda: len(recorder.delivered()) == 4 * len(KEYS))
            await eventually(lambda: len(cpp_members_holding(broker)) == 1, WAIT_S)
            assert [len(q) for q in cpp_members_holding(broker).values()] == [QUEUES]

            await asyncio.to_thread(second.start)  # join
            started.append(second)
            await send_rounds(producer, range(4, 8))
            await recorder.wait_for(lambda: len(recorder.delivered()) == 8 * len(KEYS))
            await eventually(
                lambda: sorted(len(q) for q in cpp_members_holding(broker).values()) == [2, 2],
                WAIT_S,
            )
            await send_rounds(producer, range(8, 9))
            await recorder.wait_for(lambda: {"first", "second"} <= members_since(recorder, 8))

            started.remove(first)
            await asyncio.to_thread(destroy_push_consumer, first)  # leave: unlocks its queues
            await send_rounds(producer, range(9, SEQUENCE_LENGTH))
            wanted = {(key, seq) for key in KEYS for seq in range(SEQUENCE_LENGTH)}
            await recorder.wait_for(lambda: wanted <= recorder.delivered())
            await eventually(
                lambda: [len(q) for q in cpp_members_holding(broker).values()] == [QUEUES],
                WAIT_S,
            )
        finally:
            for consumer in started:
                await asyncio.to_thread(destroy_push_consumer, consumer)
    await eventually(lambda: not cpp_members_holding(broker), WAIT_S)
    redeliveries = check_order(recorder.calls)
    print(
        f"\nC++ orderly: {len(recorder.calls)} listener calls for"
        f" {len(KEYS) * SEQUENCE_LENGTH} messages, {redeliveries} re-deliveries"
    )


def members_since(recorder: Recorder, seq: int) -> set[str]:
    return {call.member for call in recorder.calls if call.seq >= seq}


def check_order(calls: list[Call]) -> int:
    """Per key: first deliveries are 0..N; per queue: no overlap, contiguous offsets per
    member, a new owner resumes at or before the last owner's next offset. Returns how many
    messages were delivered again."""
    calls = sorted(calls, key=lambda call: call.start_ns)
    first_seen: dict[str, list[int]] = defaultdict(list)
    seen: set[tuple[str, int]] = set()
    for call in calls:
        if (call.key, call.seq) not in seen:
            seen.add((call.key, call.seq))
            first_seen[call.key].append(call.seq)
    for key in KEYS:
        assert first_seen[key] == list(range(SEQUENCE_LENGTH)), f"{key}: {first_seen[key]}"
    redeliveries = 0
    by_queue: dict[int, list[Call]] = defaultdict(list)
    for call in calls:
        by_queue[call.queue_id].append(call)
    for queue_id, queue_calls in by_queue.items():
        for previous, call in itertools.pairwise(queue_calls):
            assert previous.end_ns <= call.start_ns, f"queue {queue_id}: {previous} / {call}"
            if call.member == previous.member:
                assert call.queue_offset == previous.queue_offset + 1, (previous, call)
            else:
                assert call.queue_offset <= previous.queue_offset + 1, (previous, call)
                redeliveries += previous.queue_offset + 1 - call.queue_offset
    return redeliveries
