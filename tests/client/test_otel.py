"""OpenTelemetry across processes: a producer process and a consumer process, each with the
SDK's in-memory exporter, see one trace: the consumer's ``process`` span is the child of the
producer's ``publish`` span through the message's ``traceparent`` property."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from bolide.client.admin import AdminClient
from bolide.testing.cluster import Cluster

pytest.importorskip("opentelemetry.sdk")
pytestmark = pytest.mark.timeout(120)

CHILD = Path(__file__).with_name("otel_child.py")
TOPIC = "OtelTraced"


async def _child(role: str, namesrv: str) -> dict[str, Any]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(CHILD), role, namesrv, TOPIC,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    async with asyncio.timeout(90):
        stdout, stderr = await process.communicate()
    assert process.returncode == 0, stderr.decode()[-2000:]
    result: dict[str, Any] = json.loads(stdout.decode().strip().splitlines()[-1])
    return result


def _one(spans: list[dict[str, Any]], name: str) -> dict[str, Any]:
    (span,) = [s for s in spans if s["name"] == name]
    return span


async def test_one_trace_spans_producer_and_consumer_processes(tmp_path: Path) -> None:
    async with Cluster(tmp_path) as cluster:
        async with AdminClient(cluster.namesrv_address) as admin:
            await admin.create_topic(TOPIC, queue_count=1)
        produced = await _child("produce", cluster.namesrv_address)
        consumed = await _child("consume", cluster.namesrv_address)
    publish = _one(produced["spans"], f"{TOPIC} publish")
    assert publish["kind"] == "PRODUCER" and publish["parent"] is None
    assert publish["attributes"]["messaging.system"] == "rocketmq"
    assert publish["attributes"]["messaging.destination.name"] == TOPIC
    assert publish["attributes"]["messaging.message.id"] == produced["msg_id"]
    assert publish["attributes"]["messaging.rocketmq.message.keys"] == "otel-1"
    # the W3C context travelled as an ordinary message property
    assert consumed["msg_id"] == produced["msg_id"]
    traceparent = consumed["properties"]["traceparent"]
    assert traceparent.startswith(f"00-{publish['trace_id']}-{publish['span_id']}-")
    assert int(traceparent[-2:], 16) & 1  # sampled
    process = _one(consumed["spans"], f"{TOPIC} process")
    assert process["kind"] == "CONSUMER"
    assert process["trace_id"] == publish["trace_id"]  # one trace across the two processes
    assert process["parent"] == publish["span_id"]
    assert process["attributes"]["messaging.rocketmq.client_group"] == "OtelReaders"
    receive = _one(consumed["spans"], f"{TOPIC} receive")
    assert receive["links"] == [publish["span_id"]]


async def test_nothing_without_a_configured_sdk(tmp_path: Path) -> None:
    """No provider configured (this process never sets one): no span, no property."""
    from bolide.client import otel
    from bolide.client.producer.producer import Producer
    from bolide.protocol.message import Message

    assert not otel.active()
    async with Cluster(tmp_path) as cluster:
        async with Producer("PlainProducers", cluster.namesrv_address) as producer:
            sent = await producer.send(Message(TOPIC, b"plain"))
        async with AdminClient(cluster.namesrv_address) as admin:
            (stored,) = await admin.get_message(sent.offset_msg_id)
    assert otel.TRACEPARENT not in stored.properties
