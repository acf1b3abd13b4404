"""The dashboard in a real browser (Debian's Chromium through Playwright) against a real
``bolide standalone`` with real messages: open it, find a group's lag, reset its offsets
(with the preview, and a malformed time refused), resend a dead letter, query a message by
key; 404 pages, and forms refused without their CSRF token."""

from __future__ import annotations

import asyncio
import re

import pytest
from playwright.async_api import Page, expect

from bolide.client.admin import AdminClient
from bolide.client.config import ConsumeFrom
from bolide.client.consumer.listener import ConsumeContext, ConsumeResult
from bolide.client.consumer.options import ConsumerOptions
from bolide.client.consumer.pull_consumer import PullConsumer
from bolide.client.consumer.push_consumer import PushConsumer
from bolide.client.producer.producer import Producer
from bolide.protocol.bodies import MessageQueue
from bolide.protocol.message import Message, MessageExt, PropertyKey
from tests.dashboard.conftest import PAGE_WAIT_MS, Screenshots, Standalone

pytestmark = [pytest.mark.timeout(180), pytest.mark.slow]

WAIT_S = 30.0
"""Guard on waiting for consumption: fails a hung test, never a measurement."""


async def _produce(standalone: Standalone, topic: str, count: int, queues: int = 1) -> None:
    async with AdminClient(standalone.namesrv) as admin:
        await admin.create_topic(topic, queue_count=queues)
    async with Producer("DashboardTestProducers", standalone.namesrv) as producer:
        for index in range(count):
            queue = MessageQueue(topic, "broker-a", index % queues)
            message = Message(topic, f"order {index}".encode(), tags="paid", keys=f"order-{index}")
            await producer.send(message, queue=queue)


async def _consume_and_commit(
    standalone: Standalone, group: str, topic: str, next_offset: int
) -> None:
    consumer = PullConsumer(
        group,
        standalone.namesrv,
        consume_from=ConsumeFrom.FIRST_OFFSET,
        options=ConsumerOptions(auto_commit=False),
    )
    consumer.subscribe(topic)
    await consumer.start()
    try:
        batch: list[MessageExt] = []
        async with asyncio.timeout(WAIT_S):
            while not batch:
                batch = await consumer.poll(5_000)
        await consumer.commit({MessageQueue(topic, "broker-a", 0): next_offset})
    finally:
        await consumer.shutdown()


async def test_cluster_page_and_live_tps(
    page: Page, standalone: Standalone, screenshots: Screenshots
) -> None:
    await _produce(standalone, "DashLive", 5)
    await page.goto(standalone.url + "/")
    await expect(page.locator("h1")).to_have_text("Cluster")
    row = page.locator("#brokers tbody tr").first
    await expect(row).to_contain_text("broker-a")
    await expect(row).to_contain_text(standalone.broker)
    # The chart draws a point on every refresh: wait for two (live, no reload).
    await expect(page.locator("#tps-chart")).to_have_attribute(
        "data-points", re.compile(r"[2-9]"), timeout=PAGE_WAIT_MS
    )
    await expect(page.locator("#tps-chart path").first).to_be_attached()
    # axes with units, the disk ratio as a percentage, the uptime as a duration
    await expect(page.locator("#tps-chart text.axis-top")).to_contain_text("msg/s")
    await expect(page.locator("#tps-chart text.axis-time")).to_contain_text("last")
    await expect(row.locator("td.disk")).to_have_text(re.compile(r"^\d+\.\d %$"))
    await expect(row.locator("td.uptime")).to_have_text(re.compile(r"^\d+ (s|min|h|d)"))
    assert (await screenshots.take(page, "cluster")).stat().st_size > 0


async def test_group_lag_then_reset_offsets(
    page: Page, standalone: Standalone, screenshots: Screenshots
) -> None:
    topic, group = "DashOrders", "DashBilling"
    await _produce(standalone, topic, 20)
    await _consume_and_commit(standalone, group, topic, next_offset=5)

    await page.goto(standalone.url + "/groups")
    await expect(page.locator(f'#groups tr[data-group="{group}"] .lag')).to_have_text("15")
    await expect(page.locator(f'#groups tr[data-group="{group}"] .orderly')).to_have_text("no")
    assert (await screenshots.take(page, "groups")).exists()
    await page.click(f'#groups a:text-is("{group}")')
    await expect(page.locator("#group-lag")).to_have_text("15")
    await expect(page.locator("#progress tbody tr")).to_have_count(1)
    assert (await screenshots.take(page, "group")).exists()

    # A malformed time: a clear error, nothing changed.
    await page.fill("#reset-form input[name=time]", "yesterday-ish")
    await page.click("#reset-form button")
    await expect(page.locator("#error-message")).to_contain_text("is not a time")
    await expect(page.locator(".error-code")).to_have_text("400")
    await page.goto(standalone.url + f"/groups/{group}")
    await expect(page.locator("#group-lag")).to_have_text("15")

    # Reset to the latest offset: the preview says what moves, the confirmation does it.
    await page.fill("#reset-form input[name=time]", "latest")
    await page.click("#reset-form button")
    preview = page.locator("#preview tbody tr").first
    await expect(preview).to_contain_text("5")
    await expect(preview).to_contain_text("+15")
    assert (await screenshots.take(page, "reset-preview")).exists()
    await page.click("#confirm-reset button")
    await expect(page.locator(".flash")).to_contain_text(f"Offsets of {group} on {topic} reset")
    await expect(page.locator("#group-lag")).to_have_text("0")

    # Clone the (now caught-up) offsets to a new group: it starts with no lag either.
    await page.fill("#clone-form input[name=target]", "DashBillingCopy")
    await page.click("#clone-form button")
    await expect(page.locator(".flash")).to_contain_text("copied to DashBillingCopy")
    await expect(page.locator("h1")).to_contain_text("DashBillingCopy")
    await expect(page.locator("#progress tbody tr")).to_have_count(1)
    await expect(page.locator("#group-lag")).to_have_text("0")


async def test_resend_a_dead_letter(
    page: Page, standalone: Standalone, screenshots: Screenshots
) -> None:
    topic, group = "DashPayments", "DashLedger"
    received: list[bytes] = []
    arrived = asyncio.Event()
    reject = True

    async def listener(messages: list[MessageExt], context: ConsumeContext) -> ConsumeResult:
        if reject:
            context.delay_level_when_next_consume = -1  # straight to the dead-letter queue
            return ConsumeResult.RECONSUME_LATER
        received.extend(m.body for m in messages)
        arrived.set()
        return ConsumeResult.SUCCESS

    async with AdminClient(standalone.namesrv) as admin:
        await admin.create_topic(topic, queue_count=1)
        consumer = PushConsumer(group, standalone.namesrv, consume_from=ConsumeFrom.FIRST_OFFSET)
        consumer.subscribe(topic)
        consumer.register_listener(listener)
        await consumer.start()
        try:
            async with Producer("DashboardTestProducers", standalone.namesrv) as producer:
                await producer.send(Message(topic, b"refund 42", keys="refund-42"))
            async with asyncio.timeout(WAIT_S):
                while True:
                    try:
                        if await admin.topic_status(f"%DLQ%{group}"):
                            break
                    except Exception:
                        pass
                    await asyncio.sleep(0.2)
            reject = False
            await page.goto(standalone.url + f"/dlq?group={group}")
            row = page.locator("#dead-letters tbody tr").first
            await expect(row).to_contain_text("refund-42")
            await expect(row).to_contain_text(topic)
            assert (await screenshots.take(page, "dead-letters")).exists()
            await row.locator("input[type=checkbox]").check()
            await page.click("#resend")
            await expect(page.locator("#resent tbody tr").first).to_contain_text("resent as")
            async with asyncio.timeout(WAIT_S):
                await arrived.wait()
            assert received == [b"refund 42"]
            # Export: the same dead letter as JSON.
            export = await page.request.get(standalone.url + f"/dlq/export?group={group}")
            assert export.ok and "refund-42" in await export.text()
            # The original message, consumed again directly by the member holding its queue.
            await page.goto(standalone.url + f"/messages?mode=key&topic={topic}&key=refund-42")
            await page.locator("#found tbody tr a").first.click()
            await page.locator("#consumed-by .consume-directly button").first.click()
            await expect(page.locator(".flash")).to_contain_text("CR_SUCCESS")
            assert received == [b"refund 42", b"refund 42"]
        finally:
            await consumer.shutdown()


async def test_query_a_message_by_key(
    page: Page, standalone: Standalone, screenshots: Screenshots
) -> None:
    topic, group = "DashInvoices", "DashArchive"
    await _produce(standalone, topic, 10)
    await _consume_and_commit(standalone, group, topic, next_offset=4)
    await page.goto(standalone.url + "/messages")
    await page.fill("#by-key input[name=topic]", topic)
    await page.fill("#by-key input[name=key]", "order-7")
    await page.click("#by-key button")
    rows = page.locator("#found tbody tr")
    await expect(rows).to_have_count(1)
    await expect(rows.first).to_contain_text("order-7")
    assert (await screenshots.take(page, "messages")).exists()
    await rows.first.locator("a").click()
    await expect(page.locator("#body")).to_have_text("order 7")
    await expect(page.locator("#consumed-by")).to_contain_text(group)
    await expect(page.locator("#consumed-by")).to_contain_text("not yet")  # 7 >= 4
    assert (await screenshots.take(page, "message")).exists()


async def test_topic_pages_create_send_and_delete(
    page: Page, standalone: Standalone, screenshots: Screenshots
) -> None:
    await page.goto(standalone.url + "/topics")
    await page.fill("#create-topic input[name=topic]", "DashCreated")
    await page.fill("#create-topic input[name=queues]", "2")
    await page.click("#create-topic button")
    await expect(page.locator(".flash")).to_contain_text("Topic DashCreated created")
    await expect(page.locator("#queues tbody tr")).to_have_count(2)
    await expect(page.locator("#message-type")).to_have_text("NORMAL")  # what 5.x clients see
    await page.fill("#send-message input[name=keys]", "hello-key")
    await page.fill("#send-message textarea[name=body]", "hello from the dashboard")
    await page.click("#send-message button")
    await expect(page.locator(".flash")).to_contain_text("Sent to DashCreated")
    assert (await screenshots.take(page, "topic")).exists()
    await page.fill("#delete-topic input[name=confirm]", "DashCreated")
    await page.click("#delete-topic button")
    await expect(page.locator(".flash")).to_contain_text("Topic DashCreated deleted")


async def test_unknown_names_are_404_and_forms_need_their_token(
    page: Page, standalone: Standalone
) -> None:
    for path in ("/groups/NoSuchGroup", "/topics/NoSuchTopic", "/no/such/page"):
        response = await page.goto(standalone.url + path)
        assert response is not None and response.status == 404
        await expect(page.locator(".error-code")).to_have_text("404")
    # A cross-site post (no CSRF token, foreign Origin) changes nothing.
    forged = await page.request.post(
        standalone.url + "/topics/create",
        form={"topic": "Forged", "queues": "1"},
        headers={"Origin": "http://evil.example"},
    )
    assert forged.status == 403
    async with AdminClient(standalone.namesrv) as admin:
        assert "Forged" not in await admin.topic_list()


async def test_delay_and_timer_backlog(
    page: Page, standalone: Standalone, screenshots: Screenshots
) -> None:
    topic = "DashLater"
    async with AdminClient(standalone.namesrv) as admin:
        await admin.create_topic(topic, queue_count=1)
    async with Producer("DashboardTestProducers", standalone.namesrv) as producer:
        await producer.send(Message(topic, b"in two hours", delay_level=18))  # 2 h
        await producer.send(
            Message(topic, b"in an hour", properties={PropertyKey.TIMER_DELAY_MS: str(3_600_000)})
        )
    await page.goto(standalone.url + "/delay")
    level = page.locator("#delay tbody tr", has_text="broker-a").filter(
        has=page.locator("td:nth-child(2)", has_text=re.compile(r"^18$"))
    )
    await expect(level.locator("td:nth-child(5)")).to_have_text("1")  # one waiting
    await expect(page.locator("#timers tbody tr").first).to_contain_text("broker-a")
    stored = page.locator("#timers tbody tr").first.locator("td:nth-child(2)")
    await expect(stored).not_to_have_text("0")
    assert (await screenshots.take(page, "delay")).exists()


async def test_producers_page_lists_online_producers(page: Page, standalone: Standalone) -> None:
    async with Producer("DashOnlineProducers", standalone.namesrv) as producer:
        await producer.send(Message("DashProduced", b"hello"))
        await producer.instance.send_heartbeat_to_all_brokers()  # registers, as every 30 s
        await page.goto(standalone.url + "/producers?group=DashOnlineProducers")
        row = page.locator("#producers tbody tr").first
        await expect(row).to_contain_text(producer.instance.client_id)
        await expect(row).to_contain_text("PYTHON")
