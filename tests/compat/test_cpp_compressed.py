"""LZ4 and ZSTD bodies, as Java 4.9.4+ producers write them with compressType (here Bolide's
producer with ``compress_type``), reach a real C++ consumer (rocketmq==0.4.4) intact.

The C++ client ignores the compression-type bits, runs zlib on every compressed body and
aborts its whole process when that fails — against Apache's broker too. A Bolide broker serves
it those records re-compressed as zlib (it knows a C++ puller by the request's language), so a
Java LZ4 producer and a C++ consumer can share a topic. A Bolide consumer on the same topic gets
the bodies inflated from the stored LZ4/ZSTD.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bolide.client.config import ConsumeFrom
from bolide.client.consumer.listener import ConsumeResult
from bolide.client.consumer.push_consumer import PushConsumer
from bolide.client.producer.producer import Producer
from bolide.protocol.bodies import TopicConfig
from bolide.protocol.message import Message, MessageExt, MessageSysFlag
from bolide.protocol.record import decode_record
from bolide.store.api import GetResult
from bolide.testing.cluster import Cluster
from tests.compat.cpp_clients import Inbox, destroy_push_consumer, new_quiet_push_consumer

pytestmark = [pytest.mark.compat, pytest.mark.timeout(180)]

TOPIC = "CppCompressed"
BODIES = {
    "LZ4": "lz4 body written like Java's LZ4FrameOutputStream " * 40,
    "ZSTD": "zstd body written like Java's ZstdOutputStream " * 40,
    "ZLIB": "zlib body as every client writes it " * 40,
}


async def _produce(cluster: Cluster) -> None:
    broker = cluster.broker("broker-a")
    await broker.context.topics.update_topic_config(TopicConfig(TOPIC, 2, 2))
    await broker.registration.register_once()
    for name, text in BODIES.items():
        async with Producer(
            f"PG_{name}", cluster.namesrv_address, compress_over_bytes=64, compress_type=name
        ) as producer:
            await producer.send(Message(TOPIC, text.encode(), tags=name))
    # both queues: where the three sends land follows the producers' random rotation start
    flags = {
        m.sys_flag & 0x701
        for queue_id in (0, 1)
        for m in _records(broker.context.store.get_message(TOPIC, queue_id, 0, 32, 1 << 20))
    }
    assert int(MessageSysFlag.COMPRESSION_LZ4) | 1 in flags  # stored as the producer wrote it


def _records(result: GetResult) -> list[MessageExt]:
    return [decode_record(view, decompress=False)[0] for view in result.buffers]


async def test_a_cpp_consumer_reads_lz4_and_zstd_records(
    cpp_home: Path, bolide_cluster: Cluster
) -> None:
    del cpp_home
    await _produce(bolide_cluster)
    inbox = Inbox(asyncio.get_running_loop())
    consumer = new_quiet_push_consumer(
        "CG_CPP_COMPRESSED", bolide_cluster.namesrv_address, instance_name="cpp"
    )
    consumer.subscribe(TOPIC, inbox.listener("cpp"), "*")
    await asyncio.to_thread(consumer.start)
    try:
        received = await inbox.wait_for(lambda ms: len(ms) >= len(BODIES))
        assert sorted(m.body for m in received) == sorted(BODIES.values())
        assert {m.tags for m in received} == set(BODIES)
    finally:
        await asyncio.to_thread(destroy_push_consumer, consumer)


async def test_a_bolide_consumer_reads_them_inflated(bolide_cluster: Cluster) -> None:
    await _produce(bolide_cluster)
    seen: list[MessageExt] = []
    done = asyncio.Event()

    async def listener(messages: list[MessageExt]) -> ConsumeResult:
        seen.extend(messages)
        if len(seen) >= len(BODIES):
            done.set()
        return ConsumeResult.SUCCESS

    consumer = PushConsumer(
        "CG_BOLIDE_COMPRESSED",
        bolide_cluster.namesrv_address,
        consume_from=ConsumeFrom.FIRST_OFFSET,
    )
    consumer.subscribe(TOPIC, "*")
    consumer.register_listener(listener)
    async with consumer:
        await asyncio.wait_for(done.wait(), 60)
    assert sorted(m.body.decode() for m in seen) == sorted(BODIES.values())
    assert all(m.body_error is None for m in seen)
