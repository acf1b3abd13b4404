"""``bolide offset reset`` reaching a live Bolide consumer, ``bolide group progress`` showing
the owners and new offsets, and ``bolide message resend`` bringing dead letters back — the
real binary against a running ``bolide standalone``, the consumer in this test process."""

from __future__ import annotations

import asyncio
import datetime
import json
import time
from collections.abc import AsyncIterator, Callable

import pytest

from bolide.client.admin import AdminClient
from bolide.client.config import ConsumeFrom
from bolide.client.consumer.listener import ConsumeResult
from bolide.client.consumer.push_consumer import PushConsumer
from bolide.protocol.bodies import MessageQueue
from bolide.protocol.message import Message, MessageExt, PropertyKey
from bolide.remoting import ClientPool
from tests.cli.conftest import BOLIDE, PROCESS_GUARD_S, Standalone
from tests.integration.wire import send_request

pytestmark = pytest.mark.timeout(240)

TOPIC = "CliReset"
QUEUES = 2
PER_QUEUE = 6


class Inbox:
    def __init__(self) -> None:
        self.messages: list[MessageExt] = []
        self.arrived = asyncio.Event()

    async def __call__(self, messages: list[MessageExt]) -> ConsumeResult:
        self.messages.extend(messages)
        self.arrived.set()
        return ConsumeResult.SUCCESS

    async def wait_for(self, predicate: Callable[[list[MessageExt]], bool]) -> None:
        async with asyncio.timeout(PROCESS_GUARD_S):
            while not predicate(self.messages):
                self.arrived.clear()
                await self.arrived.wait()


async def bolide(standalone: Standalone, *arguments: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        BOLIDE,
        *arguments,
        "--namesrv",
        standalone.namesrv,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), PROCESS_GUARD_S)
    assert process.returncode is not None
    return process.returncode, stdout.decode(), stderr.decode()


@pytest.fixture
async def consumer(standalone: Standalone) -> AsyncIterator[tuple[PushConsumer, Inbox]]:
    async with AdminClient(standalone.namesrv) as admin:
        await admin.create_topic(TOPIC, queue_count=QUEUES)
        for index in range(PER_QUEUE):
            for queue_id in range(QUEUES):
                queue = MessageQueue(TOPIC, "broker-a", queue_id)
                producer = await admin.producer()
                await producer.send(Message(TOPIC, f"{queue_id}-{index}".encode()), queue=queue)
    inbox = Inbox()
    push = PushConsumer("CliResetGroup", standalone.namesrv, consume_from=ConsumeFrom.FIRST_OFFSET)
    push.subscribe(TOPIC, "*")
    push.register_listener(inbox)
    await push.start()
    try:
        await inbox.wait_for(lambda got: len(got) >= PER_QUEUE * QUEUES)
        yield push, inbox
    finally:
        await push.shutdown()


async def test_reset_through_the_cli_reaches_a_live_consumer(
    standalone: Standalone, consumer: tuple[PushConsumer, Inbox]
) -> None:
    push, inbox = consumer
    # A point between the third and fourth message of each queue: the store times tell.
    third = sorted(m.store_timestamp_ms for m in inbox.messages if m.queue_offset == 2)
    fourth = sorted(m.store_timestamp_ms for m in inbox.messages if m.queue_offset == 3)
    point_ms = max(third) + 1 if max(third) < min(fourth) else min(fourth)
    point = datetime.datetime.fromtimestamp(point_ms / 1000).isoformat(timespec="milliseconds")
    before = len(inbox.messages)
    started = time.monotonic()
    code, stdout, stderr = await bolide(
        standalone, "offset", "reset", "CliResetGroup", TOPIC, "--to", point, "--json"
    )
    assert code == 0, stderr
    result = json.loads(stdout)
    assert [c["clientId"] for c in result["clients"]] == [push.instance.client_id]
    targets = {entry["queueId"]: entry["offset"] for entry in result["offsets"]}
    expected = sum(PER_QUEUE - offset for offset in targets.values())
    await inbox.wait_for(lambda got: len(got) >= before + expected)
    print(
        f"`bolide offset reset` to consumption from the reset point: "
        f"{time.monotonic() - started:.2f} s (process start included)"
    )
    again = inbox.messages[before:]
    for queue_id, offset in targets.items():
        assert min(m.queue_offset for m in again if m.queue_id == queue_id) == offset

    async def progress() -> dict[str, object]:
        code, stdout, stderr = await bolide(
            standalone, "group", "progress", "CliResetGroup", "--json"
        )
        assert code == 0, stderr
        return dict(json.loads(stdout))

    await push.persist_offsets()
    report = await progress()
    rows = [row for row in report["queues"] if row["topic"] == TOPIC]  # type: ignore[attr-defined]
    assert {row["clientId"] for row in rows} == {push.instance.client_id}
    assert {row["brokerOffset"] for row in rows} == {PER_QUEUE}
    code, stdout, stderr = await bolide(standalone, "group", "progress", "CliResetGroup")
    assert code == 0, stderr
    assert push.instance.client_id in stdout


async def test_resend_through_the_cli(
    standalone: Standalone, consumer: tuple[PushConsumer, Inbox]
) -> None:
    _, inbox = consumer
    pool = ClientPool()
    try:
        request = send_request(
            "%RETRY%CliResetGroup",
            b"dead letter",
            properties={PropertyKey.RETRY_TOPIC: TOPIC},
            reconsume_times=16,
            max_reconsume_times=16,
        )
        response = await pool.invoke(standalone.broker, request, 10_000)
        assert response.code == 0, response.remark
    finally:
        await pool.close()
    before = len(inbox.messages)
    code, stdout, stderr = await bolide(standalone, "message", "resend", "CliResetGroup", "--json")
    assert code == 0, stderr
    [outcome] = json.loads(stdout)["resent"]
    assert (outcome["originalTopic"], outcome["error"]) == (TOPIC, None)
    await inbox.wait_for(lambda got: len(got) > before)
    [back] = inbox.messages[before:]
    assert (back.body, back.topic, back.reconsume_times) == (b"dead letter", TOPIC, 0)
