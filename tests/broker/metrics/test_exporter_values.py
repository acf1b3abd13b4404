"""Every rocketmq-exporter family of a real broker, valued exactly after known traffic.

The broker runs on a manual clock, so store times, stats windows and "now" are known: each
family is checked against the number rocketmq-exporter's MetricsCollectTask would compute from
the same broker (round3-facts §3), not only for its name. Dashboard 10477's backlog expression
is evaluated on the scraped samples as Prometheus would and must give the true lag."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from bolide.base import limits
from bolide.base.clock import ManualClock
from bolide.client.admin import AdminClient
from bolide.client.config import ConsumeFrom
from bolide.client.consumer.listener import ConsumeResult
from bolide.client.consumer.options import ConsumerOptions
from bolide.client.consumer.pull_consumer import PullConsumer
from bolide.client.consumer.push_consumer import PushConsumer
from bolide.client.producer.producer import Producer
from bolide.protocol.bodies import MessageQueue
from bolide.protocol.bodies.heartbeat import MessageModel
from bolide.protocol.message import Message, MessageExt
from bolide.testing.cluster import Cluster
from tests.broker.metrics.http_get import http_get

pytestmark = pytest.mark.timeout(120)

TOPIC = "ExactOrders"
GROUP = "ExactBilling"
QUEUES = 2
PRODUCED = 20
BODY_BYTES = 100
SEND_STEP_MS = 100  # the manual clock moves this much before each send
COMMITTED = {0: 4, 1: 7}  # next offsets committed per queue
START_MS = 1_700_000_000_000
ADMIN_STEP_MS = 50  # the pull happens this long after the last send
SCRAPE_AFTER_MS = 2_000  # and the scrape this long after the pull
IDS = {"cluster": "DefaultCluster", "broker": "broker-a"}


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[tuple[Cluster, ManualClock]]:
    clock = ManualClock(START_MS)
    settings = {"metricsExporterType": "PROM", "metricsPromExporterPort": "0"}
    async with Cluster(tmp_path, settings=settings, clock=clock) as running:
        yield running, clock


def _samples(text: str) -> dict[str, list[Sample]]:
    by_name: dict[str, list[Sample]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            by_name.setdefault(sample.name, []).append(sample)
    return by_name


def _value(samples: dict[str, list[Sample]], name: str, **labels: str) -> float:
    matches = [
        s for s in samples.get(name, []) if all(s.labels.get(k) == v for k, v in labels.items())
    ]
    assert len(matches) == 1, (name, labels, samples.get(name))
    return matches[0].value


def _backlog_10477(samples: dict[str, list[Sample]]) -> dict[tuple[str, str], float]:
    """``sum(rocketmq_producer_offset) by (topic) - on(topic) group_right
    sum(rocketmq_consumer_offset) by (group,topic)``, evaluated as PromQL does."""
    produced: dict[str, float] = {}
    for sample in samples.get("rocketmq_producer_offset", []):
        topic = sample.labels["topic"]
        produced[topic] = produced.get(topic, 0.0) + sample.value
    consumed: dict[tuple[str, str], float] = {}
    for sample in samples.get("rocketmq_consumer_offset", []):
        key = (sample.labels["group"], sample.labels["topic"])
        consumed[key] = consumed.get(key, 0.0) + sample.value
    return {key: produced[key[1]] - value for key, value in consumed.items() if key[1] in produced}


async def test_every_exporter_family_after_known_traffic(
    cluster: tuple[Cluster, ManualClock],
) -> None:
    running, clock = cluster
    async with AdminClient(running.namesrv_address) as admin:
        await admin.create_topic(TOPIC, queue_count=QUEUES)
    first_send_ms = START_MS + SEND_STEP_MS
    async with Producer("ExactProducers", running.namesrv_address) as producer:
        for index in range(PRODUCED):
            clock.advance_ms(SEND_STEP_MS)
            queue = MessageQueue(TOPIC, "broker-a", index % QUEUES)
            await producer.send(Message(TOPIC, b"x" * BODY_BYTES), queue=queue)
    # message i of queue q was stored at first_send_ms + (2 * i + q) * SEND_STEP_MS
    clock.advance_ms(ADMIN_STEP_MS)
    pulled_at_ms = clock.now_ms()
    consumer = PullConsumer(
        GROUP,
        running.namesrv_address,
        consume_from=ConsumeFrom.FIRST_OFFSET,
        options=ConsumerOptions(auto_commit=False),
    )
    consumer.subscribe(TOPIC)
    await consumer.start()
    try:
        pulled = 0
        while pulled < PRODUCED:
            batch = await consumer.poll(5_000)
            assert batch, "the pull consumer stopped receiving"
            pulled += len(batch)
        queues = [MessageQueue(TOPIC, "broker-a", queue_id) for queue_id in range(QUEUES)]
        await consumer.commit({queues[q]: offset for q, offset in COMMITTED.items()})
    finally:
        await consumer.shutdown()
    clock.advance_ms(SCRAPE_AFTER_MS)
    now_ms = clock.now_ms()
    address = running.broker("broker-a").metrics_address
    assert address is not None
    samples = _samples((await http_get(address, "/metrics"))[2].decode())

    consumed = sum(COMMITTED.values())
    lag = PRODUCED - consumed
    topic, group = {"topic": TOPIC, **IDS}, {"topic": TOPIC, "group": GROUP, **IDS}
    assert _value(samples, "rocketmq_producer_offset", **topic) == PRODUCED
    assert _value(samples, "rocketmq_consumer_offset", **group) == consumed
    assert _value(samples, "rocketmq_group_diff", topic=TOPIC, group=GROUP) == lag
    assert _backlog_10477(samples)[(GROUP, TOPIC)] == lag  # Grafana 10477's backlog panel

    # the oldest unconsumed message: queue 0 at offset 4 (stored 9th, index 8)
    oldest_stored_ms = min(
        first_send_ms + (2 * offset + queue_id) * SEND_STEP_MS
        for queue_id, offset in COMMITTED.items()
    )
    latency = _value(samples, "rocketmq_group_get_latency_by_storetime", **group)
    assert latency == now_ms - oldest_stored_ms

    # rates: the minute window runs from the key's first add (no 10 s sample in between),
    # counted over at least one full sample interval while it starts at the key's birth
    floor_ms = limits.STATS_MINUTE_SAMPLE_INTERVAL_MS
    put_tps = PRODUCED * 1000 / max(now_ms - first_send_ms, floor_ms)
    assert _value(samples, "rocketmq_producer_tps", **topic) == pytest.approx(put_tps)
    get_tps = PRODUCED * 1000 / max(now_ms - pulled_at_ms, floor_ms)
    assert _value(samples, "rocketmq_consumer_tps", **group) == pytest.approx(get_tps)
    assert _value(samples, "rocketmq_send_back_nums", **group) == 0  # nothing sent back
    # declared by the exporter, never filled
    assert "rocketmq_group_consume_total_offset" not in samples
    assert "rocketmq_group_consume_tps" not in samples


async def test_broadcasting_group_has_offsets_but_no_diff_or_latency(
    cluster: tuple[Cluster, ManualClock], tmp_path: Path
) -> None:
    """The exporter fills rocketmq_consumer_offset for every message model, the diff and the
    latency for clustering groups only."""
    running, clock = cluster
    async with AdminClient(running.namesrv_address) as admin:
        await admin.create_topic(TOPIC, queue_count=QUEUES)
    async with Producer("ExactProducers", running.namesrv_address) as producer:
        for _ in range(3):
            clock.advance_ms(SEND_STEP_MS)
            await producer.send(Message(TOPIC, b"x"))
    consumer = PushConsumer(
        "ExactEveryone",
        running.namesrv_address,
        message_model=MessageModel.BROADCASTING,
        options=ConsumerOptions(offset_base_directory=tmp_path / "offsets"),
    )
    consumer.subscribe(TOPIC)
    consumer.register_listener(_ignore)
    await consumer.start()
    try:
        address = running.broker("broker-a").metrics_address
        assert address is not None
        samples = _samples((await http_get(address, "/metrics"))[2].decode())
    finally:
        await consumer.shutdown()
    group = {"topic": TOPIC, "group": "ExactEveryone", **IDS}
    assert _value(samples, "rocketmq_consumer_offset", **group) == 0  # nothing committed here
    for name in ("rocketmq_group_diff", "rocketmq_group_get_latency_by_storetime"):
        assert not [s for s in samples.get(name, []) if s.labels["group"] == "ExactEveryone"]


async def _ignore(messages: list[MessageExt]) -> ConsumeResult:
    del messages
    return ConsumeResult.SUCCESS
