"""A dashboard that cannot start says why (issue 30: the start failure's cause was lost)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from bolide.dashboard import server as dashboard_server
from bolide.dashboard.app import DashboardSettings
from bolide.dashboard.server import DashboardServer
from bolide.testing.cluster import Cluster


async def test_a_failed_start_keeps_its_cause_and_frees_the_port(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def failing_startup(self: object, sockets: list[socket.socket] | None = None) -> None:
        raise RuntimeError("the app could not load its templates")

    monkeypatch.setattr(dashboard_server._EmbeddedServer, "startup", failing_startup)
    async with Cluster(tmp_path) as cluster:
        server = DashboardServer(DashboardSettings(cluster.namesrv_address), "127.0.0.1", 0)
        with pytest.raises(OSError, match="did not start: RuntimeError") as raised:
            await server.start()
        await server.stop()  # idempotent after a failed start

    assert isinstance(raised.value.__cause__, RuntimeError)
    assert "templates" in str(raised.value.__cause__)
