"""`bolide controller` as a real process: the ready line, a clear failure when etcd cannot be
reached, a SIGKILLed leader replaced by a standby, and a clean stop on SIGTERM."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest

from bolide.base.children import child_pids
from bolide.protocol.codes import RequestCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers.controller import GetMetadataInfoResponseHeader
from bolide.remoting import ClientPool
from bolide.testing.etcd import EtcdCluster, free_port
from bolide.testing.processes import pid_alive
from bolide.testing.waiting import until
from tests.controller.support import running_controller

pytestmark = pytest.mark.timeout(120)

BOLIDE = str(Path(sys.executable).parent / "bolide")
READY_TIMEOUT_S = 60.0


def _env() -> dict[str, str]:
    source = str(Path(__file__).resolve().parents[2] / "src")
    return {**os.environ, "PYTHONPATH": source}


async def _start(*arguments: str, cwd: Path) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        BOLIDE, *arguments, cwd=cwd, env=_env(),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip


async def test_unreachable_etcd_is_a_clear_error(tmp_path: Path) -> None:
    dead = f"127.0.0.1:{free_port()},127.0.0.1:{free_port()}"
    process = await _start("controller", "--etcd", dead, "--port", "0",
                           "--data-dir", str(tmp_path), cwd=tmp_path)  # fmt: skip
    stdout, stderr = await asyncio.wait_for(process.communicate(), READY_TIMEOUT_S)
    assert process.returncode == 1
    assert stdout == b""
    assert f"etcd unreachable at {dead}".encode() in stderr


async def test_killed_leader_is_replaced(etcd: EtcdCluster, tmp_path: Path) -> None:
    process = await _start("controller", "--etcd", etcd.endpoints, "--port", "0",
                           "--data-dir", str(tmp_path), cwd=tmp_path)  # fmt: skip
    pool = ClientPool()
    try:
        assert process.stdout is not None
        line = (await asyncio.wait_for(process.stdout.readline(), READY_TIMEOUT_S)).decode()
        assert line.startswith("bolide ready controller=127.0.0.1:")
        first = line.split("=", 1)[1].strip()

        async def leader_seen_by(address: str) -> str | None:
            answer = await pool.invoke(
                address, RemotingCommand.request(RequestCode.CONTROLLER_GET_METADATA_INFO)
            )
            header = GetMetadataInfoResponseHeader.from_ext_fields(answer.ext_fields)
            return header.controller_leader_address

        for _ in range(1200):  # the process campaigns every 0.5 s once it has started
            if await leader_seen_by(first) == first:
                break
            await asyncio.sleep(0.05)
        assert await leader_seen_by(first) == first
        async with running_controller(etcd.endpoints) as standby:
            assert not standby.is_leader
            process.send_signal(signal.SIGKILL)
            await process.wait()
            await until(lambda: standby.is_leader)  # after the dead leader's lease lapses
            assert await leader_seen_by(standby.address) == standby.address
    finally:
        await pool.close()
        if process.returncode is None:
            process.kill()
        await process.wait()


async def test_namesrv_embeds_a_controller(etcd: EtcdCluster, tmp_path: Path) -> None:
    process = await _start("namesrv", "--port", "0", "--controller-etcd", etcd.endpoints,
                           "--controller-port", "0", "--data-dir", str(tmp_path),
                           cwd=tmp_path)  # fmt: skip
    pool = ClientPool()
    try:
        assert process.stdout is not None
        line = (await asyncio.wait_for(process.stdout.readline(), READY_TIMEOUT_S)).decode()
        fields = dict(part.split("=", 1) for part in line.split()[2:])
        assert set(fields) == {"namesrv", "controller"}
        answer = await pool.invoke(
            fields["controller"],
            RemotingCommand.request(RequestCode.CONTROLLER_GET_METADATA_INFO),
        )
        assert answer.code == 0
    finally:
        await pool.close()
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(process.wait(), READY_TIMEOUT_S) == 0


async def test_controller_stops_on_sigterm(etcd: EtcdCluster, tmp_path: Path) -> None:
    """Issue 30: ``bolide controller`` ends with status 0 on SIGTERM, leaving no child."""
    process = await _start("controller", "--etcd", etcd.endpoints, "--port", "0",
                           "--data-dir", str(tmp_path), cwd=tmp_path)  # fmt: skip
    try:
        assert process.stdout is not None
        line = (await asyncio.wait_for(process.stdout.readline(), READY_TIMEOUT_S)).decode()
        assert line.startswith("bolide ready controller=127.0.0.1:")
        children = child_pids(process.pid)
        process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(process.wait(), READY_TIMEOUT_S) == 0
        assert not [pid for pid in children if pid_alive(pid)]
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
