"""The canonical example of the README, run as written against an in-process
cluster: once with the blocking API (``bolide``), once with ``bolide.aio``. Only the name
server address differs, and ``...`` becomes "wait until the listener printed the message".

The blocking API runs in a worker thread: the cluster shares this test's event loop, which
must stay free to serve it.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import bolide
import bolide.aio
from bolide.testing.cluster import Cluster

WAIT_S = 30.0


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    async with Cluster(tmp_path / "cluster") as running:
        yield running


def run_blocking_example(namesrv: str, seen: threading.Event) -> bolide.SendResult:
    producer = bolide.Producer("order-producers", namesrv=namesrv)
    producer.start()
    result = producer.send(bolide.Message("orders", b'{"id": 17}', tags="paid", keys="order-17"))
    producer.shutdown()

    def on_messages(messages: list[bolide.MessageExt]) -> bolide.ConsumeResult:
        for m in messages:  # m.topic, m.body, m.tags, m.keys, m.properties, m.queue_id,
            print(m.keys, m.body)  # m.queue_offset, m.msg_id, m.reconsume_times, ...
            seen.set()
        return bolide.ConsumeResult.SUCCESS

    consumer = bolide.PushConsumer(
        "billing",
        namesrv=namesrv,
        instance_name="worker-1",
        consume_from=bolide.ConsumeFrom.FIRST_OFFSET,
    )
    consumer.subscribe("orders", "paid || refunded")
    consumer.register_listener(on_messages)
    consumer.start()
    if not seen.wait(WAIT_S):  # the example's "..."
        raise TimeoutError("the listener never ran")
    consumer.shutdown()
    return result


async def test_blocking_example(cluster: Cluster, capsys: pytest.CaptureFixture[str]) -> None:
    seen = threading.Event()
    result = await asyncio.to_thread(run_blocking_example, cluster.namesrv_address, seen)
    assert result.status is bolide.SendStatus.SEND_OK
    assert "order-17 b'{\"id\": 17}'" in capsys.readouterr().out
    offsets = cluster.brokers[0].context.offsets
    assert offsets.query_offset("billing", "orders", result.queue.queue_id) == 1


async def test_aio_example(cluster: Cluster, capsys: pytest.CaptureFixture[str]) -> None:
    namesrv = cluster.namesrv_address
    seen = asyncio.Event()

    producer = bolide.aio.Producer("order-producers", namesrv=namesrv)
    await producer.start()
    result = await producer.send(
        bolide.aio.Message("orders", b'{"id": 17}', tags="paid", keys="order-17")
    )
    await producer.shutdown()

    async def on_messages(messages: list[bolide.aio.MessageExt]) -> bolide.aio.ConsumeResult:
        for m in messages:
            print(m.keys, m.body)
            seen.set()
        return bolide.aio.ConsumeResult.SUCCESS

    consumer = bolide.aio.PushConsumer(
        "billing",
        namesrv=namesrv,
        instance_name="worker-1",
        consume_from=bolide.aio.ConsumeFrom.FIRST_OFFSET,
    )
    consumer.subscribe("orders", "paid || refunded")
    consumer.register_listener(on_messages)
    await consumer.start()
    await asyncio.wait_for(seen.wait(), WAIT_S)  # the example's "..."
    await consumer.shutdown()

    assert result.status is bolide.aio.SendStatus.SEND_OK
    assert "order-17 b'{\"id\": 17}'" in capsys.readouterr().out


async def test_context_managers(cluster: Cluster) -> None:
    namesrv = cluster.namesrv_address
    seen = asyncio.Event()

    def on_messages(messages: list[bolide.aio.MessageExt]) -> bolide.aio.ConsumeResult:
        seen.set()
        return bolide.aio.ConsumeResult.SUCCESS

    async with bolide.aio.Producer("order-producers", namesrv=namesrv) as producer:
        await producer.send(bolide.aio.Message("orders", b"{}", tags="refunded"))
    consumer = bolide.aio.PushConsumer(
        "billing", namesrv=namesrv, consume_from=bolide.aio.ConsumeFrom.FIRST_OFFSET
    )
    consumer.subscribe("orders", "paid || refunded")
    consumer.register_listener(on_messages)
    async with consumer:
        await asyncio.wait_for(seen.wait(), WAIT_S)
    assert not consumer.running
