"""Debian's Prometheus scrapes a real broker, and Grafana dashboard 10477's backlog expression
(``rocketmq_message_accumulation``) answers the group's true lag."""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import urllib.parse
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bolide.client.admin import AdminClient
from bolide.client.config import ConsumeFrom
from bolide.client.consumer.options import ConsumerOptions
from bolide.client.consumer.pull_consumer import PullConsumer
from bolide.client.producer.producer import Producer
from bolide.protocol.bodies import MessageQueue
from bolide.protocol.message import Message
from bolide.testing.cluster import Cluster
from tests.broker.metrics.http_get import http_get

PROMETHEUS = shutil.which("prometheus")
pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.skipif(
        PROMETHEUS is None, reason="prometheus missing (apt-get install prometheus)"
    ),
]

TOPIC = "PromOrders"
GROUP = "PromBilling"
PRODUCED = 30
COMMITTED = {0: 4, 1: 6}
BACKLOG_10477 = (
    "sum(rocketmq_producer_offset) by (topic) - on(topic) group_right "
    "sum(rocketmq_consumer_offset) by (group,topic)"
)
WAIT_S = 60


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    settings = {"metricsExporterType": "PROM", "metricsPromExporterPort": "0"}
    async with Cluster(tmp_path / "bolide", settings=settings) as running:
        yield running


async def _lagging_group(cluster: Cluster) -> None:
    async with AdminClient(cluster.namesrv_address) as admin:
        await admin.create_topic(TOPIC, queue_count=2)
    async with Producer("PromProducers", cluster.namesrv_address) as producer:
        for index in range(PRODUCED):
            queue = MessageQueue(TOPIC, "broker-a", index % 2)
            await producer.send(Message(TOPIC, b"x"), queue=queue)
    consumer = PullConsumer(
        GROUP,
        cluster.namesrv_address,
        consume_from=ConsumeFrom.FIRST_OFFSET,
        options=ConsumerOptions(auto_commit=False),
    )
    consumer.subscribe(TOPIC)
    await consumer.start()
    try:
        pulled = 0
        while pulled < PRODUCED:  # every queue assigned and read
            batch = await consumer.poll(5_000)
            assert batch, "the pull consumer stopped receiving"
            pulled += len(batch)
        queues = {q: MessageQueue(TOPIC, "broker-a", q) for q in COMMITTED}
        await consumer.commit({queues[q]: offset for q, offset in COMMITTED.items()})
    finally:
        await consumer.shutdown()


async def test_prometheus_answers_the_10477_backlog_with_the_true_lag(
    cluster: Cluster, tmp_path: Path
) -> None:
    await _lagging_group(cluster)
    target = cluster.broker("broker-a").metrics_address
    assert target is not None
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        f"scrape_configs:\n  - job_name: bolide\n    static_configs:\n"
        f"      - targets: ['{target}']\n"
    )
    listen = f"127.0.0.1:{_free_port()}"
    assert PROMETHEUS is not None
    process = await asyncio.create_subprocess_exec(
        PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
        f"--web.listen-address={listen}",
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    try:
        try:
            lag = await _query_until_answered(listen, BACKLOG_10477, process)
        except TimeoutError:
            targets = await http_get(listen, "/api/v1/targets", headers={"Connection": "close"})
            raise AssertionError(f"no answer; targets: {targets[2][:1500]!r}") from None
    finally:
        process.terminate()
        async with asyncio.timeout(30):
            await process.wait()
    assert lag == {(GROUP, TOPIC): PRODUCED - sum(COMMITTED.values())}


async def _query_until_answered(
    listen: str, expression: str, process: asyncio.subprocess.Process
) -> dict[tuple[str, str], float]:
    """Ask Prometheus' query API until the expression has a value (the first scrape done)."""
    path = "/api/v1/query?query=" + urllib.parse.quote(expression)
    async with asyncio.timeout(WAIT_S):
        while True:
            assert process.returncode is None, "prometheus exited"
            try:
                status, _, body = await http_get(listen, path, headers={"Connection": "close"})
            except OSError:  # not listening yet
                status, body = 0, b""
            if status == 200:
                result = json.loads(body)["data"]["result"]
                if result:
                    return {
                        (row["metric"]["group"], row["metric"]["topic"]): float(row["value"][1])
                        for row in result
                    }
            await asyncio.sleep(0.2)  # a poll for the next scrape, not a wait for correctness
