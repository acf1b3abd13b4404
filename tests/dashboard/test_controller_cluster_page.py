"""The cluster page in controller mode, in Debian's Chromium: two brokers of one brokerName
(in-process, a real controller on a real etcd) show the roles the controller assigned, the
master epoch and the SyncStateSet, and the last election (which broker, epoch, when); once
the master stops, the page shows the replica elected in the next epoch."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from playwright.async_api import Page, expect

from bolide.base.clock import SystemClock
from bolide.client.admin import AdminClient
from bolide.controller.controller import Controller
from bolide.dashboard.app import DashboardSettings
from bolide.dashboard.data import format_time_ms
from bolide.dashboard.server import DashboardServer
from bolide.testing.cluster import Cluster
from bolide.testing.etcd import EtcdCluster
from bolide.testing.waiting import until
from tests.controller.support import controller_mode_settings

pytestmark = [pytest.mark.timeout(180), pytest.mark.slow]

NAME = "broker-x"
LISTED_POLLS = 1_200
LISTED_POLL_S = 0.05
"""The name-server poll of :func:`_listed` (a guard of one minute)."""


async def test_roles_epochs_and_last_election(
    etcd: EtcdCluster, tmp_path: Path, page: Page
) -> None:
    controller = Controller(etcd.endpoints, "127.0.0.1", 0)
    await controller.start()
    try:
        async with Cluster(tmp_path / "c", broker_names=()) as cluster:
            master = await cluster.add_broker(
                NAME, **controller_mode_settings(controller, tmp_path / "m")
            )
            manager = master.replicas_manager
            assert manager is not None
            await until(lambda: manager.is_master)
            replica = await cluster.add_broker(
                NAME, **controller_mode_settings(controller, tmp_path / "r")
            )
            await until(lambda: manager.sync_state_set.sync_state_set == {1, 2})
            server = DashboardServer(DashboardSettings(cluster.namesrv_address), "127.0.0.1", 0)
            await server.start()
            try:
                async with AdminClient(cluster.namesrv_address) as admin:
                    await _listed(admin, {0: master.address, 2: replica.address})
                    await page.goto(f"http://127.0.0.1:{server.port}/")
                    first = page.locator(f'#brokers tr[data-broker="{NAME}/0"]')
                    await expect(first.locator("td.role")).to_have_text("master (controller id 1)")
                    await expect(first.locator("td.epoch")).to_have_text("1")
                    await expect(first.locator("td.sync-state-set")).to_have_text("{1,2} epoch 2")
                    second = page.locator(f'#brokers tr[data-broker="{NAME}/2"]')
                    await expect(second.locator("td.role")).to_have_text("slave (controller id 2)")
                    await expect(second.locator("td.epoch")).to_have_text("1")
                    await expect(second.locator("td.sync-state-set")).to_have_text("-")
                    election = page.locator(f'#last-elections tr[data-broker="{NAME}"]')
                    await expect(election.locator("td.elected")).to_have_text("1")
                    await expect(election.locator("td.epoch")).to_have_text("1")
                    await expect(election).to_contain_text(master.address)
                    assert manager.role_changed_at_ms is not None
                    await expect(election.locator("td.when")).to_have_text(
                        format_time_ms(manager.role_changed_at_ms)
                    )

                    stopped_at_ms = SystemClock().now_ms()
                    await master.stop()  # its controller connection closes: re-elected
                    cluster.brokers.remove(master)
                    await _listed(admin, {0: replica.address})
                    await page.goto(f"http://127.0.0.1:{server.port}/")
                    new_master = page.locator(f'#brokers tr[data-broker="{NAME}/0"]')
                    await expect(new_master).to_contain_text(replica.address)
                    await expect(new_master.locator("td.role")).to_have_text(
                        "master (controller id 2)"
                    )
                    await expect(new_master.locator("td.epoch")).to_have_text("2")
                    await expect(election.locator("td.elected")).to_have_text("2")
                    await expect(election.locator("td.epoch")).to_have_text("2")
                    await expect(election).to_contain_text(replica.address)
                    replica_manager = replica.replicas_manager
                    assert replica_manager is not None
                    since = replica_manager.role_changed_at_ms
                    assert since is not None and since >= stopped_at_ms
                    await expect(election.locator("td.when")).to_have_text(format_time_ms(since))
            finally:
                await server.stop()
    finally:
        await controller.stop()


async def _listed(admin: AdminClient, expected: dict[int, str]) -> None:
    """Until the name server lists exactly ``expected`` (id → address) for NAME."""
    seen: dict[int, str] = {}
    for _ in range(LISTED_POLLS):
        info = await admin.cluster_info()
        data = info.broker_addr_table.get(NAME)
        seen = {} if data is None else dict(data.broker_addrs)
        if seen == expected:
            return
        await asyncio.sleep(LISTED_POLL_S)
    raise AssertionError(f"the name server lists {seen}, not {expected}")
