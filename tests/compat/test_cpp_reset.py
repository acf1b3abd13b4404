"""Reset offset reaching the real C++ client (rocketmq==0.4.4, librocketmq 1.2.3): upstream
bug #1159 is a Java broker sending C++ consumers a body they cannot parse, and issue #481 C++
consumers resuming minutes after a reset.

What the C++ client does with RESET_CONSUMER_CLIENT_OFFSET (list body, ``cpp:src/
MQClientFactory.cpp resetOffset``): it marks the queues' pull requests dropped, stores the new
offsets, persists them to the broker, forgets them locally and rebalances; the rebalance
revives each dropped pull request from the broker's offset, but only once its outstanding
pull has come back. A Bolide broker ends those parked pulls right after the notice, so the
C++ consumer re-reads from the reset point at once instead of after its 15 s hold.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bolide.client.admin import RESET_TO_EARLIEST, AdminClient
from bolide.protocol.bodies import TopicConfig
from bolide.testing.cluster import Cluster
from tests.compat.cpp_clients import (
    Inbox,
    Received,
    destroy_push_consumer,
    new_quiet_push_consumer,
)
from tests.compat.cpp_harness import destroy_producer, make_message, new_quiet_producer

pytestmark = [pytest.mark.compat, pytest.mark.timeout(180)]

QUEUES = 4
PER_QUEUE = 5


@pytest.fixture
async def admin(cpp_home: Path, bolide_cluster: Cluster) -> AsyncIterator[AdminClient]:
    del cpp_home  # a private HOME before the native library logs
    async with AdminClient(bolide_cluster.namesrv_address) as client:
        yield client


async def _fill(cluster: Cluster, topic: str) -> None:
    broker = cluster.brokers[0]
    await broker.context.topics.update_topic_config(TopicConfig(topic, QUEUES, QUEUES))
    await broker.registration.register_once()
    producer = new_quiet_producer("PG_CPP_RESET", cluster.namesrv_address)
    producer.start()
    try:
        for index in range(PER_QUEUE * QUEUES):
            message = make_message(topic, f"{topic} {index}")
            result = await asyncio.to_thread(producer.send_orderly, message, index % QUEUES)
            assert result.status.name == "OK"
    finally:
        await asyncio.to_thread(destroy_producer, producer)


async def _start(cluster: Cluster, group: str, topic: str, inbox: Inbox, name: str) -> Any:
    consumer = new_quiet_push_consumer(group, cluster.namesrv_address, instance_name=name)
    consumer.subscribe(topic, inbox.listener(name), "*")
    await asyncio.to_thread(consumer.start)
    return consumer


def _offsets(messages: list[Received], queue_id: int) -> list[int]:
    return sorted(m.queue_offset for m in messages if m.queue_id == queue_id)


async def test_live_cpp_consumer_rereads_from_the_reset_point(
    admin: AdminClient, bolide_cluster: Cluster
) -> None:
    topic, group = "CppReset", "CG_CPP_RESET"
    await _fill(bolide_cluster, topic)
    inbox = Inbox(asyncio.get_running_loop())
    consumer = await _start(bolide_cluster, group, topic, inbox, "reset-live")
    try:
        await inbox.wait_for(lambda got: len(got) >= PER_QUEUE * QUEUES)
        store = bolide_cluster.brokers[0].context.store
        reset_ms = store.store_time_at(topic, 0, 2)
        before = len(inbox.messages)
        started = time.monotonic()
        result = await admin.reset_offset(group, topic, reset_ms)
        assert [client.language.name for client in result.clients] == ["CPP"]
        targets = {queue.queue_id: offset for queue, offset in result.offsets.items()}
        expected = sum(PER_QUEUE - offset for offset in targets.values())
        assert expected > 0
        # Re-delivery proves the C++ client parsed the list body and acted on it.
        await inbox.wait_for(lambda got: len(got) >= before + expected)
        print(
            f"C++ consumer re-read from the reset point {time.monotonic() - started:.3f} s after it"
        )
        again = inbox.messages[before:]
        for queue_id, offset in targets.items():
            assert _offsets(again, queue_id)[:1] == ([offset] if offset < PER_QUEUE else [])
            assert set(_offsets(again, queue_id)) == set(range(offset, PER_QUEUE))
        # The C++ client reports which queues it holds: progress names it as their owner.
        progress = await admin.group_progress(group, topic=topic)
        assert {row.client_id for row in progress.queues} == {result.clients[0].client_id}
    finally:
        await asyncio.to_thread(destroy_push_consumer, consumer)


async def test_offline_cpp_group_resumes_from_the_reset_point(
    admin: AdminClient, bolide_cluster: Cluster
) -> None:
    topic, group = "CppResetOffline", "CG_CPP_OFFLINE"
    await _fill(bolide_cluster, topic)
    inbox = Inbox(asyncio.get_running_loop())
    consumer = await _start(bolide_cluster, group, topic, inbox, "offline-1")
    await inbox.wait_for(lambda got: len(got) >= PER_QUEUE * QUEUES)
    await asyncio.to_thread(destroy_push_consumer, consumer)  # persists its offsets
    assert (await admin.group_progress(group, topic=topic)).total_lag == 0

    result = await admin.reset_offset(group, topic, RESET_TO_EARLIEST)
    assert not result.online
    assert (await admin.group_progress(group, topic=topic)).total_lag == PER_QUEUE * QUEUES

    restarted = await _start(bolide_cluster, group, topic, inbox, "offline-2")
    try:
        await inbox.wait_for(
            lambda got: len([m for m in got if m.consumer == "offline-2"]) >= PER_QUEUE * QUEUES
        )
        again = [m for m in inbox.messages if m.consumer == "offline-2"]
        for queue_id in range(QUEUES):
            assert _offsets(again, queue_id) == list(range(PER_QUEUE))
    finally:
        await asyncio.to_thread(destroy_push_consumer, restarted)
