"""A child process for tests/client/test_otel.py: an OpenTelemetry SDK with an in-memory
exporter, then either a Bolide producer sending one message or a push consumer receiving
one; prints the finished spans (and what it sent or received) as one JSON line."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from bolide.client.config import ConsumeFrom
from bolide.client.consumer.listener import ConsumeResult
from bolide.client.consumer.push_consumer import PushConsumer
from bolide.client.producer.producer import Producer
from bolide.protocol.message import Message, MessageExt

WAIT_S = 30.0


def _span(span: ReadableSpan) -> dict[str, Any]:
    assert span.context is not None
    return {
        "name": span.name,
        "kind": span.kind.name,
        "trace_id": f"{span.context.trace_id:032x}",
        "span_id": f"{span.context.span_id:016x}",
        "parent": None if span.parent is None else f"{span.parent.span_id:016x}",
        "links": [f"{link.context.span_id:016x}" for link in span.links],
        "attributes": dict(span.attributes or {}),
    }


async def produce(namesrv: str, topic: str) -> dict[str, Any]:
    async with Producer("OtelProducers", namesrv) as producer:
        sent = await producer.send(Message(topic, b"traced", keys="otel-1", tags="O"))
    return {"msg_id": sent.msg_id}


async def consume(namesrv: str, topic: str) -> dict[str, Any]:
    received: list[MessageExt] = []
    arrived = asyncio.Event()

    async def listener(messages: list[MessageExt]) -> ConsumeResult:
        received.extend(messages)
        arrived.set()
        return ConsumeResult.SUCCESS

    consumer = PushConsumer("OtelReaders", namesrv, consume_from=ConsumeFrom.FIRST_OFFSET)
    consumer.subscribe(topic)
    consumer.register_listener(listener)
    await consumer.start()
    try:
        async with asyncio.timeout(WAIT_S):
            await arrived.wait()
    finally:
        await consumer.shutdown()
    return {"msg_id": received[0].msg_id, "properties": received[0].properties}


def main() -> None:
    role, namesrv, topic = sys.argv[1:4]
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    outcome = asyncio.run(produce(namesrv, topic) if role == "produce" else consume(namesrv, topic))
    outcome["spans"] = [_span(span) for span in exporter.get_finished_spans()]
    print(json.dumps(outcome))


if __name__ == "__main__":
    main()
