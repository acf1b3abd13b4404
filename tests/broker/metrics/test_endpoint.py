"""/metrics of a real broker after known traffic: names, labels and values as
rocketmq-exporter and RocketMQ 5 write them, lag = produced - consumed, and the exposition
parses with Prometheus' own parser."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from bolide.base.clock import ManualClock
from bolide.client.admin import AdminClient
from bolide.client.config import ConsumeFrom
from bolide.client.consumer.listener import ConsumeResult
from bolide.client.consumer.options import ConsumerOptions
from bolide.client.consumer.pull_consumer import PullConsumer
from bolide.client.consumer.push_consumer import PushConsumer
from bolide.client.message import Message as ClientMessage
from bolide.client.producer.producer import Producer
from bolide.client.producer.transaction import LocalTransactionState, TransactionProducer
from bolide.protocol.bodies import MessageQueue
from bolide.protocol.message import Message, MessageExt
from bolide.testing.cluster import Cluster
from bolide.testing.waiting import until
from tests.broker.metrics.http_get import http_get
from tests.integration.client_support import eventually

pytestmark = pytest.mark.timeout(120)

TOPIC = "MetricsOrders"
GROUP = "MetricsBilling"
QUEUES = 2
PRODUCED = 40
COMMITTED = {0: 7, 1: 5}  # next offsets committed per queue: 12 consumed


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    settings = {"metricsExporterType": "PROM", "metricsPromExporterPort": "0"}
    async with Cluster(tmp_path, settings=settings) as running:
        yield running


def _samples(text: str) -> dict[str, list[Sample]]:
    by_name: dict[str, list[Sample]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            by_name.setdefault(sample.name, []).append(sample)
    return by_name


def _one(samples: dict[str, list[Sample]], name: str, **labels: str) -> Sample:
    matches = [
        s for s in samples.get(name, []) if all(s.labels.get(k) == v for k, v in labels.items())
    ]
    assert len(matches) == 1, (name, labels, samples.get(name))
    return matches[0]


async def _traffic(cluster: Cluster) -> int:
    async with AdminClient(cluster.namesrv_address) as admin:
        await admin.create_topic(TOPIC, queue_count=QUEUES)
    async with Producer("MetricsProducers", cluster.namesrv_address) as producer:
        for index in range(PRODUCED):
            queue = MessageQueue(TOPIC, "broker-a", index % QUEUES)
            await producer.send(Message(TOPIC, b"x" * 100, keys=f"k{index}"), queue=queue)
    pulled = 0
    consumer = PullConsumer(
        GROUP,
        cluster.namesrv_address,
        consume_from=ConsumeFrom.FIRST_OFFSET,
        options=ConsumerOptions(auto_commit=False),
    )
    consumer.subscribe(TOPIC)
    await consumer.start()
    try:
        queues = [MessageQueue(TOPIC, "broker-a", queue_id) for queue_id in range(QUEUES)]
        while pulled < PRODUCED:
            batch = await consumer.poll(5_000)
            assert batch, "the pull consumer stopped receiving"
            pulled += len(batch)
        await consumer.commit({queues[q]: offset for q, offset in COMMITTED.items()})
    finally:
        await consumer.shutdown()
    return pulled


async def test_exporter_names_labels_and_lag(cluster: Cluster) -> None:
    pulled = await _traffic(cluster)
    broker = cluster.broker("broker-a")
    address = broker.metrics_address
    assert address is not None
    status, headers, body = await http_get(address, "/metrics")
    assert status == 200
    assert headers["content-type"].startswith("text/plain; version=0.0.4")
    samples = _samples(body.decode())
    consumed = sum(COMMITTED.values())
    ids = {"cluster": "DefaultCluster", "broker": "broker-a"}

    diff = _one(samples, "rocketmq_group_diff", group=GROUP, topic=TOPIC)
    assert diff.value == PRODUCED - consumed
    assert set(diff.labels) == {"group", "topic", "countOfOnlineConsumers", "msgModel"}
    assert diff.labels["msgModel"] == "1"  # CLUSTERING
    assert _one(samples, "rocketmq_producer_offset", topic=TOPIC, **ids).value == PRODUCED
    # the committed offsets summed, as the exporter's code does (not the broker offsets)
    assert _one(samples, "rocketmq_consumer_offset", topic=TOPIC, group=GROUP, **ids).value == (
        consumed
    )
    # declared by the exporter but never filled: no series
    assert "rocketmq_group_consume_total_offset" not in samples
    assert "rocketmq_group_consume_tps" not in samples
    # exact values of the latency and the rates: tests/broker/metrics/test_exporter_values.py
    assert _one(samples, "rocketmq_producer_tps", topic=TOPIC, **ids).value > 0
    assert _one(samples, "rocketmq_consumer_tps", topic=TOPIC, group=GROUP, **ids).value > 0
    put_total = _one(samples, "rocketmq_brokeruntime_msg_put_total_today_now")
    assert put_total.value == PRODUCED
    assert set(put_total.labels) == {
        "cluster", "brokerIP", "brokerHost", "des", "boottime", "broker_version"
    }  # fmt: skip
    pmdt = sum(s.value for name, group in samples.items() if "_pmdt_" in name for s in group)
    assert pmdt == PRODUCED  # one send request per message, each in one bucket
    assert _one(samples, "rocketmq_broker_tps", cluster="DefaultCluster").value > 0
    earliest = _one(samples, "rocketmq_brokeruntime_earliest_message_timestamp").value
    booted = _one(samples, "rocketmq_brokeruntime_start_accept_sendrequest_time").value
    assert earliest >= booted  # a fresh store: its first message came after the boot

    # RocketMQ 5 names
    node = {"cluster": "DefaultCluster", "node_type": "broker", "node_id": "broker-a"}
    assert _one(samples, "rocketmq_messages_in_total", topic=TOPIC, **node).value == PRODUCED
    assert _one(samples, "rocketmq_throughput_in_total", topic=TOPIC, **node).value > (
        PRODUCED * 100
    )
    out = _one(samples, "rocketmq_messages_out_total", topic=TOPIC, consumer_group=GROUP)
    assert out.value == pulled
    lag = _one(samples, "rocketmq_consumer_lag_messages", topic=TOPIC, consumer_group=GROUP)
    assert lag.value == PRODUCED - consumed
    assert lag.labels["is_retry"] == "false"
    # Bolide's own histogram: every send observed
    count = _one(samples, "bolide_send_latency_seconds_count")
    assert count.value == PRODUCED


async def test_http_edges(cluster: Cluster) -> None:
    address = cluster.broker("broker-a").metrics_address
    assert address is not None
    status, headers, body = await http_get(address, "/metrics", headers={"Accept-Encoding": "gzip"})
    assert status == 200 and headers["content-encoding"] == "gzip"
    assert b"rocketmq_brokeruntime_put_tps10" in body
    assert (await http_get(address, "/nope"))[0] == 404
    assert (await http_get(address, "/metrics", method="POST"))[0] == 405
    status, _, body = await http_get(address, "/metrics", method="HEAD")
    assert status == 200 and body == b""
    # the broker still serves after the bad requests
    assert (await http_get(address, "/metrics"))[0] == 200


async def test_sync_flush_latency_histogram(tmp_path: Path) -> None:
    settings = {
        "metricsExporterType": "PROM",
        "metricsPromExporterPort": "0",
        "flushDiskType": "SYNC_FLUSH",
    }
    async with Cluster(tmp_path, settings=settings) as cluster:
        async with Producer("MetricsProducers", cluster.namesrv_address) as producer:
            for index in range(5):
                await producer.send(Message("FlushedTopic", f"m{index}".encode()))
        address = cluster.broker("broker-a").metrics_address
        assert address is not None
        samples = _samples((await http_get(address, "/metrics"))[2].decode())
        rounds = _one(samples, "bolide_flush_latency_seconds_count").value
        assert rounds >= 1  # every SYNC_FLUSH send waited for a timed fsync round
        assert _one(samples, "bolide_flush_latency_seconds_bucket", le="+Inf").value == rounds


async def test_transaction_metrics(cluster: Cluster) -> None:
    def never_asked(message: MessageExt) -> LocalTransactionState:
        del message
        return LocalTransactionState.UNKNOW

    async with TransactionProducer(
        "MetricsTx", cluster.namesrv_address, checker=never_asked
    ) as producer:
        for state in (LocalTransactionState.COMMIT_MESSAGE, LocalTransactionState.ROLLBACK_MESSAGE):

            def decide(
                message: ClientMessage, arg: object, decided: LocalTransactionState = state
            ) -> LocalTransactionState:
                del message, arg
                return decided

            await producer.send_in_transaction(ClientMessage("MetricsTxTopic", b"tx"), decide)
    address = cluster.broker("broker-a").metrics_address
    assert address is not None
    # END_TRANSACTION is oneway: poll (bounded) until the broker has settled both halves.
    async with asyncio.timeout(10):
        while True:
            samples = _samples((await http_get(address, "/metrics"))[2].decode())
            if _one(samples, "rocketmq_half_messages").value == 0:
                break
            await asyncio.sleep(0.05)
    assert _one(samples, "rocketmq_commit_messages_total").value == 1
    assert _one(samples, "rocketmq_rollback_messages_total").value == 1


async def test_client_family_from_the_consumers_running_info(cluster: Cluster) -> None:
    arrived = asyncio.Event()
    clock = ManualClock()  # the consumer's: its measured figures are then exact
    listener_ms, asked_after_ms = 30, 50

    async def listener(messages: list[MessageExt]) -> ConsumeResult:
        del messages
        clock.advance_ms(listener_ms)
        arrived.set()
        return ConsumeResult.SUCCESS

    async with AdminClient(cluster.namesrv_address) as admin:
        await admin.create_topic("ClientStatsTopic", queue_count=1)
    consumer = PushConsumer(
        "ClientStatsGroup",
        cluster.namesrv_address,
        consume_from=ConsumeFrom.FIRST_OFFSET,
        clock=clock,
    )
    consumer.subscribe("ClientStatsTopic")
    consumer.register_listener(listener)
    await consumer.start()
    try:
        async with Producer("MetricsProducers", cluster.namesrv_address) as producer:
            await producer.send(Message("ClientStatsTopic", b"x"))
        async with asyncio.timeout(20):
            await arrived.wait()
        rates = consumer.consume_service.rates
        await until(lambda: rates.status("ClientStatsTopic", clock.now_ms())[2] > 0)
        clock.advance_ms(asked_after_ms)
        broker = cluster.broker("broker-a")
        assert broker.metrics is not None and broker.metrics_address is not None
        await broker.metrics.client_stats.poll_once()  # the minute's poll, now
        samples = _samples((await http_get(broker.metrics_address, "/metrics"))[2].decode())
        ok = _one(samples, "rocketmq_client_consume_ok_msg_tps", group="ClientStatsGroup")
        assert list(ok.labels) == ["clientAddr", "clientId", "group", "topic"]
        assert ok.labels["clientId"] == consumer.instance.client_id
        assert ok.labels["topic"] == "ClientStatsTopic"
        # one OK call of listener_ms; its window opens at the call's end
        assert ok.value == pytest.approx(1000 / asked_after_ms)
        rt = _one(samples, "rocketmq_client_consume_rt", group="ClientStatsGroup")
        assert rt.value == listener_ms
        assert (
            _one(samples, "rocketmq_client_consume_fail_msg_tps", group="ClientStatsGroup").value
            == 0
        )
        online = _one(samples, "rocketmq_group_count", group="ClientStatsGroup")
        assert online.labels["localaddr"] == consumer.instance.client_id
        assert online.value == 1
    finally:
        await consumer.shutdown()


async def test_commit_log_diff_of_a_slave(tmp_path: Path) -> None:
    settings = {
        "broker_role": "SYNC_MASTER",
        "ha_listen_port": 0,
        "metricsExporterType": "PROM",
        "metricsPromExporterPort": "0",
    }
    async with Cluster(tmp_path, settings=settings) as cluster:
        master = cluster.broker("broker-a")
        await cluster.add_broker(
            "broker-a",
            broker_id=1,
            broker_role="SLAVE",
            store_path_root_dir=tmp_path / "slave" / "store",
            metrics_exporter_type="DISABLE",
        )
        await eventually(
            lambda: bool(master.replication.master and master.replication.master.links)
        )
        async with Producer("MetricsProducers", cluster.namesrv_address) as producer:
            for index in range(3):  # SYNC_MASTER: each answered once the slave has it
                await producer.send(Message("ReplicatedMetrics", f"m{index}".encode()))
        address = master.metrics_address
        assert address is not None
        samples = _samples((await http_get(address, "/metrics"))[2].decode())
        diff = _one(samples, "rocketmq_broker_commitlog_diff", broker="broker-a")
        assert diff.value == 0  # the slave acknowledged everything
        links = master.replication.master.links if master.replication.master else []
        assert diff.labels["brokerIP"] == links[0].peer
