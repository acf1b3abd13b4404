"""A producer's round robin starts at a random queue (issue 29, finding 11): a seeded ``rng``
repeats the start; fresh producers, such as the admin session behind ``bolide message send``,
spread over the queues instead of all writing to queue 0."""

from __future__ import annotations

import random

from bolide.base import limits
from bolide.client.admin import AdminClient
from bolide.client.message import Message
from bolide.client.producer.producer import Producer
from bolide.testing.cluster import Cluster

TOPIC = "Rotation"
QUEUES = 4
FRESH_PRODUCERS = 16
"""All 16 on queue 0 by chance: 4**-16, about 2e-10."""


def _start_queue(seed: int) -> int:
    return random.Random(seed).randrange(limits.PRODUCER_QUEUE_START_INDEX_SPAN_COUNT) % QUEUES


async def test_a_seeded_producer_starts_where_its_rng_says(cluster: Cluster) -> None:
    async with AdminClient(cluster.namesrv_address) as admin:
        await admin.create_topic(TOPIC, queue_count=QUEUES)
    seeds = [seed for seed in range(50) if _start_queue(seed) != 0][:2]
    assert _start_queue(seeds[0]) != 0
    for seed in seeds:
        producer = Producer("rotation", cluster.namesrv_address, rng=random.Random(seed))
        async with producer:
            first, second = [await producer.send(Message(TOPIC, b"x")) for _ in range(2)]
        assert first.queue.queue_id == _start_queue(seed)
        assert second.queue.queue_id == (_start_queue(seed) + 1) % QUEUES


async def test_fresh_admin_producers_do_not_all_write_to_queue_0(cluster: Cluster) -> None:
    async with AdminClient(cluster.namesrv_address) as admin:
        await admin.create_topic(TOPIC, queue_count=QUEUES)
    queues = set()
    for _ in range(FRESH_PRODUCERS):
        async with AdminClient(cluster.namesrv_address) as admin:  # as one `bolide message send`
            queues.add((await admin.send_message(Message(TOPIC, b"one"))).queue.queue_id)
    assert queues != {0}
