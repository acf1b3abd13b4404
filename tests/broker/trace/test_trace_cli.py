"""``bolide message trace MSG_ID`` (the real binary) against a broker with broker-side trace:
the table and the ``--json`` steps, and a message without trace (exit 3)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest

from bolide.client.config import ConsumeFrom
from bolide.client.consumer.listener import ConsumeResult
from bolide.client.consumer.push_consumer import PushConsumer
from bolide.client.producer.producer import Producer
from bolide.protocol.message import Message, MessageExt
from bolide.testing.cluster import Cluster
from bolide.testing.waiting import until

pytestmark = pytest.mark.timeout(120)

BOLIDE = str(Path(sys.executable).parent / "bolide")
TOPIC = "CliTraced"
GROUP = "CliTraceGroup"
WAIT_S = 30.0


async def _bolide(*arguments: str) -> tuple[int, str, str]:
    environment = {key: value for key, value in os.environ.items() if key != "BOLIDE_NAMESRV"}
    process = await asyncio.create_subprocess_exec(
        BOLIDE, *arguments, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**environment, "COLUMNS": "200"},
    )  # fmt: skip
    async with asyncio.timeout(60):
        stdout, stderr = await process.communicate()
    assert process.returncode is not None
    return process.returncode, stdout.decode(), stderr.decode()


async def test_message_trace_command(tmp_path: Path) -> None:
    arrived = asyncio.Event()

    async def listener(messages: list[MessageExt]) -> ConsumeResult:
        arrived.set()
        return ConsumeResult.SUCCESS

    async with Cluster(tmp_path, settings={"traceOnBrokerEnable": "true"}) as cluster:
        broker = cluster.broker("broker-a")
        async with Producer("CliTraceProducers", cluster.namesrv_address) as producer:
            sent = await producer.send(Message(TOPIC, b"traced", keys="cli-1"))
        consumer = PushConsumer(
            GROUP, cluster.namesrv_address, consume_from=ConsumeFrom.FIRST_OFFSET
        )
        consumer.subscribe(TOPIC)
        consumer.register_listener(listener)
        await consumer.start()
        try:
            async with asyncio.timeout(WAIT_S):
                await arrived.wait()
            offsets = broker.context.offsets
            await until(
                lambda: sum(offsets.queue_offsets(GROUP, TOPIC).values()) == 1,
                deadline_s=WAIT_S,
            )
        finally:
            await consumer.shutdown()
        trace = broker.context.trace
        assert trace is not None
        await trace.flush()
        namesrv = ("--namesrv", cluster.namesrv_address)
        code, out, err = await _bolide("message", "trace", sent.msg_id, "--json", *namesrv)
        assert code == 0, err
        steps = json.loads(out)
        assert [step["type"] for step in steps] == ["Pub", "SubBefore", "SubAfter"]
        assert [step["status"] for step in steps] == ["success", "delivered", "success"]
        assert steps[0]["topic"] == TOPIC and steps[0]["keys"] == "cli-1"
        assert steps[1]["group"] == steps[2]["group"] == GROUP
        assert steps[1]["requestId"] == steps[2]["requestId"]
        assert all(isinstance(step["time"], int) and step["time"] > 0 for step in steps)
        assert steps[0]["client"] != ""  # the producer's address

        code, out, err = await _bolide("message", "trace", sent.msg_id, *namesrv)
        assert code == 0, err
        assert f"trace of {sent.msg_id}" in out
        for word in ("Pub", "SubBefore", "SubAfter", GROUP, "delivered", "attempt 1"):
            assert word in out

        code, out, err = await _bolide("message", "trace", "0" * 32, *namesrv)
        assert code == 3 and "no trace records" in err
