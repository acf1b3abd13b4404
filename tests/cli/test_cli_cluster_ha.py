"""``bolide cluster list`` on a master/slave pair of real processes: roles and replication lag."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bolide.protocol.codes import ResponseCode
from tests.chaos.replication_support import HaGroup
from tests.cli.conftest import run_bolide
from tests.integration.wire import send_request

pytestmark = pytest.mark.timeout(120)


async def test_cluster_list_shows_roles_and_replication_lag(tmp_path: Path) -> None:
    group = HaGroup(tmp_path / "ha")
    try:
        await group.start()
        await group.wait_until(group.slave_in_sync)
        for index in range(20):
            request = send_request("HaListed", f"m{index}".encode(), queue_id=0)
            response = await group.pool.invoke(group.master_address, request, 10_000)
            assert response.code == ResponseCode.SUCCESS

        async def slave_caught_up() -> bool:
            master = await group.runtime(group.master_address)
            slave = await group.runtime(group.slave_address)
            return master["commitLogMaxOffset"] == slave["commitLogMaxOffset"]

        await group.wait_until(slave_caught_up)
        listed = await asyncio.to_thread(
            run_bolide, "cluster", "list", "--json", namesrv=group.namesrv_address
        )
        assert listed.code == 0, listed.stderr
        rows = {row["brokerId"]: row for row in listed.json()}
        assert rows[0]["role"] == "SYNC_MASTER"
        assert rows[1]["role"] == "SLAVE"
        assert rows[1]["replicationLagBytes"] == 0
        assert rows[1]["replicationLagMs"] == 0
        assert rows[0]["replicationLagBytes"] == 0
        table = await asyncio.to_thread(
            run_bolide, "cluster", "list", namesrv=group.namesrv_address
        )
        assert "SLAVE" in table.stdout and "lag bytes" in table.stdout
    finally:
        await group.stop()
