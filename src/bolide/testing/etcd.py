"""A real etcd (one member or several) on loopback free ports in a temporary directory, for
tests of controller mode and the chaos harness (round3-facts §1.8).

    async with EtcdCluster(tmp_path, members=1) as etcd:
        etcd.endpoints          # "127.0.0.1:41234"  (comma-separated with several members)
        etcd.kill(0)            # SIGKILL one member (chaos)

Readiness is ``etcdctl endpoint health`` succeeding for every member. Every process started
is killed and reaped on exit, whatever happened in between.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from bolide.client.lifecycle import AsyncLifecycle

__all__ = ["EtcdCluster", "EtcdMember", "EtcdUnavailableError", "etcd_binary", "free_port"]

ETCD_READY_TIMEOUT_S = 60.0
"""Guard on a start: one member is healthy after ~1 s on a quiet 2-core machine, far more on
a loaded one; a failing start pays it once."""
ETCD_HEALTH_POLL_S = 0.1
"""Between two ``etcdctl endpoint health`` probes while waiting for readiness."""
ETCD_PORT_ATTEMPTS = 3
"""Starts on fresh ports when a member lost its port to another process (see ``free_port``)."""


class EtcdUnavailableError(RuntimeError):
    """No etcd binary is installed, or the members did not become healthy."""


def etcd_binary() -> str | None:
    """The path of ``etcd`` (None when not installed; ``make test`` installs it)."""
    return shutil.which("etcd")


def free_port() -> int:
    """A port free on 127.0.0.1 right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class EtcdMember:
    """One etcd process: its name, client and peer ports, and data directory."""

    name: str
    client_port: int
    peer_port: int
    data_dir: Path
    process: asyncio.subprocess.Process | None = None

    @property
    def endpoint(self) -> str:
        """``127.0.0.1:<client port>``."""
        return f"127.0.0.1:{self.client_port}"

    @property
    def peer_url(self) -> str:
        return f"http://127.0.0.1:{self.peer_port}"


class EtcdCluster(AsyncLifecycle):
    """``members`` etcd processes forming one cluster under ``directory``."""

    def __init__(self, directory: Path, members: int = 1) -> None:
        if members < 1:
            raise ValueError(f"an etcd cluster has at least one member, not {members}")
        self._directory = directory
        self.members = [
            EtcdMember(f"n{index}", free_port(), free_port(), directory / f"n{index}")
            for index in range(members)
        ]

    @property
    def endpoints(self) -> str:
        """Every member's client endpoint, comma-separated (the ``--etcd`` flag's form)."""
        return ",".join(member.endpoint for member in self.members)

    async def start(self) -> None:
        """Start every member and wait until all are healthy; raises
        :class:`EtcdUnavailableError` (after killing what it started) otherwise."""
        binary = etcd_binary()
        if binary is None:
            raise EtcdUnavailableError("etcd is not installed (apt-get install etcd-server)")
        for attempt in range(1, ETCD_PORT_ATTEMPTS + 1):
            initial = ",".join(f"{member.name}={member.peer_url}" for member in self.members)
            try:
                for member in self.members:
                    await self._launch(binary, member, initial)
                await self.wait_healthy(*range(len(self.members)))
                return
            except EtcdUnavailableError:
                await self.stop()
                if attempt == ETCD_PORT_ATTEMPTS or not self._lost_a_port_race():
                    raise
                self._new_ports()
            except BaseException:
                await self.stop()
                raise

    def _lost_a_port_race(self) -> bool:
        """True when a member's log says its port was taken: :func:`free_port` only knows the
        port was free when it looked (another process, or a test worker beside this one,
        may bind it before etcd does)."""
        for member in self.members:
            log = self._directory / f"{member.name}.log"
            if log.exists() and "address already in use" in log.read_text(errors="replace"):
                return True
        return False

    def _new_ports(self) -> None:
        for member in self.members:
            shutil.rmtree(member.data_dir, ignore_errors=True)
            member.client_port, member.peer_port = free_port(), free_port()
            (self._directory / f"{member.name}.log").unlink(missing_ok=True)

    async def _launch(self, binary: str, member: EtcdMember, initial_cluster: str) -> None:
        client_url = f"http://{member.endpoint}"
        log = (self._directory / f"{member.name}.log").open("ab")
        with log:
            member.process = await asyncio.create_subprocess_exec(
                binary,
                "--name", member.name,
                "--data-dir", str(member.data_dir),
                "--listen-client-urls", client_url,
                "--advertise-client-urls", client_url,
                "--listen-peer-urls", member.peer_url,
                "--initial-advertise-peer-urls", member.peer_url,
                "--initial-cluster", initial_cluster,
                "--initial-cluster-state", "new",
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env={**os.environ, "ETCD_UNSUPPORTED_ARCH": os.uname().machine},
            )  # fmt: skip

    async def wait_healthy(self, *indexes: int) -> None:
        """Wait until ``etcdctl endpoint health`` succeeds for the members at ``indexes``."""
        deadline = time.monotonic() + ETCD_READY_TIMEOUT_S
        for index in indexes:
            member = self.members[index]
            while not await _healthy(member.endpoint):
                if member.process is not None and member.process.returncode is not None:
                    raise EtcdUnavailableError(
                        f"etcd {member.name} exited with {member.process.returncode};"
                        f" see {self._directory / (member.name + '.log')}"
                    )
                if time.monotonic() > deadline:
                    raise EtcdUnavailableError(f"etcd {member.name} not healthy in time")
                await asyncio.sleep(ETCD_HEALTH_POLL_S)

    def kill(self, index: int, signal_number: int = signal.SIGKILL) -> None:
        """Send ``signal_number`` (default SIGKILL) to the member at ``index``."""
        process = self.members[index].process
        if process is not None and process.returncode is None:
            process.send_signal(signal_number)

    async def leader_index(self) -> int | None:
        """The index of the member that leads the Raft group (``etcdctl endpoint status``
        of the live members), None when none answers."""
        etcdctl = shutil.which("etcdctl")
        if etcdctl is None:
            raise EtcdUnavailableError("etcdctl is not installed (apt-get install etcd-client)")
        live = [m for m in self.members if m.process is not None and m.process.returncode is None]
        probe = await asyncio.create_subprocess_exec(
            etcdctl, "--endpoints=" + ",".join(m.endpoint for m in live),
            "--command-timeout=2s", "endpoint", "status", "--write-out=json",
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        output, _ = await probe.communicate()
        try:
            statuses = json.loads(output or b"[]")
        except ValueError:
            return None
        endpoints = [member.endpoint for member in self.members]
        for status in statuses:
            body = status.get("Status", {})
            if body.get("leader") and body.get("leader") == body.get("header", {}).get("member_id"):
                endpoint = status.get("Endpoint")
                return endpoints.index(endpoint) if endpoint in endpoints else None
        return None

    async def restart(self, index: int) -> None:
        """Start the member at ``index`` again on its data (after :meth:`kill`) and wait
        until it is healthy; raises :class:`EtcdUnavailableError` otherwise."""
        binary = etcd_binary()
        if binary is None:
            raise EtcdUnavailableError("etcd is not installed (apt-get install etcd-server)")
        member = self.members[index]
        if member.process is not None:
            await member.process.wait()
        initial = ",".join(f"{m.name}={m.peer_url}" for m in self.members)
        await self._launch(binary, member, initial)
        await self.wait_healthy(index)

    async def stop(self) -> None:
        """Kill and reap every member. Idempotent."""
        for member in self.members:
            process = member.process
            if process is None:
                continue
            if process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    process.send_signal(signal.SIGCONT)
                    process.kill()
            await process.wait()
            member.process = None

    async def _close(self) -> None:
        """``async with`` ends with :meth:`stop`."""
        await self.stop()


async def _healthy(endpoint: str) -> bool:
    etcdctl = shutil.which("etcdctl")
    if etcdctl is None:
        raise EtcdUnavailableError("etcdctl is not installed (apt-get install etcd-client)")
    probe = await asyncio.create_subprocess_exec(
        etcdctl, f"--endpoints={endpoint}", "--command-timeout=2s", "endpoint", "health",
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    return await probe.wait() == 0
