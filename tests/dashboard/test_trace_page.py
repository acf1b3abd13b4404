"""The message trace page in Debian's Chromium against ``bolide standalone`` with broker-side
trace on: a message failed once, retried and consumed shows its timeline picture and its
steps, and they agree with ``bolide message trace --json``."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.async_api import Page, expect

from bolide.client.admin import AdminClient
from bolide.client.admin.trace import message_trace
from bolide.client.config import ConsumeFrom
from bolide.client.consumer.listener import ConsumeResult
from bolide.client.consumer.push_consumer import PushConsumer
from bolide.client.producer.producer import Producer
from bolide.protocol.message import Message, MessageExt
from tests.dashboard.conftest import (
    BOLIDE,
    PROCESS_GUARD_S,
    Screenshots,
    Standalone,
    _read_ready_line,
)

pytestmark = [pytest.mark.timeout(180), pytest.mark.slow]

WAIT_S = 60.0
TOPIC, GROUP = "DashTraced", "DashTraceReaders"


@pytest.fixture
def traced(tmp_path: Path) -> Iterator[Standalone]:
    """``bolide standalone`` with traceOnBrokerEnable and one-second delay levels."""
    conf = tmp_path / "broker.conf"
    conf.write_text("traceOnBrokerEnable=true\nmessageDelayLevel=1s 1s 1s 1s 1s\n")
    process = subprocess.Popen(
        [BOLIDE, "standalone", "--namesrv-port", "0", "--broker-port", "0", "--no-proxy",
         "--metrics-port", "0", "--dashboard-port", "0", "-c", str(conf),
         "--data-dir", str(tmp_path / "data")],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        ready = _read_ready_line(process)
        fields = dict(part.split("=", 1) for part in ready.split()[2:])
        yield Standalone(
            fields["namesrv"], fields["broker"], fields["metrics"], fields["dashboard"]
        )
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(PROCESS_GUARD_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()


async def _fail_once_then_consume(standalone: Standalone) -> str:
    attempts: list[int] = []
    done = asyncio.Event()

    async def listener(messages: list[MessageExt]) -> ConsumeResult:
        attempts.append(messages[0].reconsume_times)
        if len(attempts) == 1:
            return ConsumeResult.RECONSUME_LATER
        done.set()
        return ConsumeResult.SUCCESS

    async with AdminClient(standalone.namesrv) as admin:
        await admin.create_topic(TOPIC, queue_count=1)
        consumer = PushConsumer(GROUP, standalone.namesrv, consume_from=ConsumeFrom.FIRST_OFFSET)
        consumer.subscribe(TOPIC)
        consumer.register_listener(listener)
        await consumer.start()
        try:
            async with Producer("DashTraceProducers", standalone.namesrv) as producer:
                sent = await producer.send(Message(TOPIC, b"refund 7", keys="refund-7"))
            async with asyncio.timeout(WAIT_S):
                await done.wait()
                # the broker's trace service writes once a second; the commit comes later
                while True:
                    if len((await message_trace(admin, sent.msg_id)).steps) == 5:
                        break
                    await asyncio.sleep(0.2)  # a poll of another process, not a wait
        finally:
            await consumer.shutdown()
    assert attempts == [0, 1]
    return sent.msg_id


async def _cli_steps(standalone: Standalone, msg_id: str) -> list[dict[str, object]]:
    environment = {key: value for key, value in os.environ.items() if key != "BOLIDE_NAMESRV"}
    process = await asyncio.create_subprocess_exec(
        BOLIDE, "message", "trace", msg_id, "--json", "--namesrv", standalone.namesrv,
        stdout=asyncio.subprocess.PIPE, env=environment,
    )  # fmt: skip
    async with asyncio.timeout(PROCESS_GUARD_S):
        stdout, _ = await process.communicate()
    assert process.returncode == 0
    steps: list[dict[str, object]] = json.loads(stdout)
    return steps


async def test_trace_page_timeline_agrees_with_the_cli(
    page: Page, traced: Standalone, screenshots: Screenshots
) -> None:
    msg_id = await _fail_once_then_consume(traced)
    cli = await _cli_steps(traced, msg_id)
    assert [(s["type"], s["status"]) for s in cli] == [
        ("Pub", "success"),
        ("SubBefore", "delivered"),
        ("SubAfter", "failed"),
        ("SubBefore", "delivered"),
        ("SubAfter", "success"),
    ]

    await page.goto(traced.url + f"/messages/view?id={msg_id}&topic={TOPIC}")
    await page.click("#trace-link")
    timeline = page.locator("svg#trace-timeline")
    await expect(timeline).to_be_visible()
    await expect(timeline.locator("rect.step-attempt.failed")).to_have_count(1)
    await expect(timeline.locator("rect.step-attempt.success")).to_have_count(1)
    await expect(timeline.locator("circle.step-put")).to_have_count(1)
    await expect(timeline).to_contain_text(GROUP)
    await expect(timeline.locator("text.axis").first).to_have_text("+0 ms")
    rows = page.locator("#trace-steps tbody tr")
    await expect(rows).to_have_count(len(cli))
    for index, step in enumerate(cli):
        cells = rows.nth(index).locator("td")
        await expect(cells.nth(0)).to_have_text(str(step["type"]))
        await expect(cells.nth(3)).to_have_text(str(step["group"] or "-"))
        await expect(cells.nth(5)).to_have_text(str(step["status"]))
    assert (await screenshots.take(page, "trace")).stat().st_size > 0

    await page.goto(traced.url + "/messages/trace?id=0123456789ABCDEF0123456789ABCDEF")
    await expect(page.locator("#no-trace")).to_be_visible()
