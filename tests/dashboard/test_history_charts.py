"""The last-hour charts in Debian's Chromium: a real broker on a manual clock, known traffic
over two minutes, the dashboard served in the same process; the group page plots lag and
consume TPS, the topic page put TPS, with the exact per-minute points."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.async_api import Page, expect

from bolide.base.clock import ManualClock
from bolide.client.admin import AdminClient
from bolide.client.producer.producer import Producer
from bolide.client.rpc.offsets import update_consumer_offset
from bolide.client.rpc.pull import pull_message
from bolide.dashboard.app import DashboardSettings
from bolide.dashboard.server import DashboardServer
from bolide.protocol.bodies.config import SubscriptionGroupConfig
from bolide.protocol.headers import PullMessageRequestHeader, PullSysFlag
from bolide.testing.cluster import Cluster
from tests.broker.metrics.test_stats_history import _next_minute, _send
from tests.dashboard.conftest import Screenshots

pytestmark = [pytest.mark.timeout(180), pytest.mark.slow]

TOPIC = "HistoryOrders"
GROUP = "HistoryBilling"


async def _points(page: Page, chart_id: str) -> list[float]:
    chart = page.locator(f"svg#{chart_id}")
    await expect(chart).to_be_visible()
    values = await chart.locator("circle.point").evaluate_all(
        "dots => dots.map(dot => dot.getAttribute('data-value'))"
    )
    return [float(value) for value in values]


async def test_group_and_topic_pages_chart_the_last_hour(
    tmp_path: Path, page: Page, screenshots: Screenshots
) -> None:
    clock = ManualClock()
    async with Cluster(tmp_path / "cluster", clock=clock) as cluster:
        broker = cluster.broker("broker-a")
        address = broker.address
        server = DashboardServer(DashboardSettings(cluster.namesrv_address), "127.0.0.1", 0)
        await server.start()
        try:
            async with (
                AdminClient(cluster.namesrv_address) as admin,
                Producer("HistoryProducers", cluster.namesrv_address) as producer,
            ):
                await admin.create_topic(TOPIC, queue_count=1)
                await admin.create_group(SubscriptionGroupConfig(GROUP))
                await _send(producer, 30)
                pool = producer.instance.pool
                header = PullMessageRequestHeader(
                    GROUP, TOPIC, 0, 0, 10, PullSysFlag.SUBSCRIPTION, 0, 0, 0, "*"
                )
                assert len((await pull_message(pool, address, header, 5_000)).messages) == 10
                await update_consumer_offset(pool, address, GROUP, TOPIC, 0, 10, 5_000)
                await _next_minute(broker, clock, 1)
                await _send(producer, 6)
                await update_consumer_offset(pool, address, GROUP, TOPIC, 0, 36, 5_000)
                await _next_minute(broker, clock, 2)

            await page.goto(f"http://{server.address}/groups/{GROUP}")
            assert await _points(page, "lag-history") == [20.0, 0.0]
            assert await _points(page, "consume-tps-history") == [
                pytest.approx(10 / 60, abs=1e-6),
                0.0,
            ]
            await expect(page.locator("svg#lag-history text.value-tick").last).to_have_text(
                "20 msgs"
            )
            await expect(page.locator("svg#lag-history text.time-tick")).to_have_count(7)
            assert (await screenshots.take(page, "group-history")).exists()

            await page.goto(f"http://{server.address}/topics/{TOPIC}")
            assert await _points(page, "put-tps-history") == [0.5, 0.1]
            await expect(page.locator("svg#put-tps-history")).to_contain_text("msg/s")
            assert (await screenshots.take(page, "topic-history")).exists()
        finally:
            await server.stop()
