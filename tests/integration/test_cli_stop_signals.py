"""Issue 30: every long-running command stops on SIGTERM with exit status 0 and no child left.

standalone, namesrv and broker are covered with their store in test_cli_servers.py, the
controller in tests/controller, bench in tests/cli/test_bench_signals.py; this table covers the
commands that front the others: the 5.x proxy and the dashboard, each beside a running
name server and broker."""

from __future__ import annotations

import signal
from pathlib import Path

import orjson
import pytest

from bolide.base.children import child_pids
from bolide.testing.processes import pid_alive
from tests.broker.metrics.http_get import http_get
from tests.integration.test_cli_servers import running

pytestmark = pytest.mark.timeout(180)


@pytest.mark.parametrize(
    ("command", "port_option", "role"),
    [("proxy", "--port", "proxy"), ("dashboard", "--port", "dashboard")],
)
async def test_a_fronting_command_stops_on_sigterm(
    tmp_path: Path, command: str, port_option: str, role: str
) -> None:
    namesrv_arguments = ("namesrv", "--port", "0", "--data-dir", str(tmp_path / "ns"))
    async with running(*namesrv_arguments, cwd=tmp_path) as namesrv:
        address = namesrv.address("namesrv")
        broker_arguments = (
            "broker", "--namesrv", address, "--port", "0",
            "--data-dir", str(tmp_path / "broker"),
        )  # fmt: skip
        async with running(*broker_arguments, cwd=tmp_path) as broker:
            arguments = [command, "--namesrv", address, port_option, "0", "--json"]
            if command == "proxy":
                arguments += ["--data-dir", str(tmp_path / "proxy")]
            async with running(*arguments, cwd=tmp_path) as front:
                listening = orjson.loads(front.ready)[role]
                if command == "dashboard":
                    status, _, page = await http_get(listening, "/")
                    assert status == 200 and b"Cluster" in page
                children = child_pids(front.process.pid)
                assert await front.stop(signal.SIGTERM) == 0
                assert not [c for c in children if pid_alive(c)]
            assert await broker.stop() == 0
        assert await namesrv.stop() == 0
    assert (tmp_path / "broker" / "store" / "checkpoint").exists()
    assert not (tmp_path / "broker" / "store" / "abort").exists()
