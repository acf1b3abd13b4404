"""A real ``bolide standalone`` process for the command-line tests, and a runner for the real
``bolide`` binary."""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bolide.base.children import child_environment

BOLIDE = str(Path(sys.executable).parent / "bolide")
PROCESS_GUARD_S = 60.0
"""Guard on a process start, stop or command: fails a hung test instead of blocking it."""


@dataclass(frozen=True)
class Standalone:
    """The running standalone: its addresses (from the ready line)."""

    namesrv: str
    broker: str


@dataclass(frozen=True)
class Result:
    """One ``bolide`` run."""

    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)


def run_bolide(*arguments: str, namesrv: str | None, env: dict[str, str] | None = None) -> Result:
    """Run ``bolide ARGUMENTS`` (with ``--namesrv`` when given) and wait for it."""
    command = [BOLIDE, *arguments]
    if namesrv is not None:
        command += ["--namesrv", namesrv]
    # The test's own $BOLIDE_NAMESRV must not leak in: only what the test gives counts.
    environment = {key: value for key, value in os.environ.items() if key != "BOLIDE_NAMESRV"}
    environment.update(env or {})
    finished = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=PROCESS_GUARD_S,
        env=environment,
        check=False,
    )
    return Result(finished.returncode, finished.stdout, finished.stderr)


def _read_ready_line(process: subprocess.Popen[bytes]) -> str:
    assert process.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        if not selector.select(PROCESS_GUARD_S):
            raise TimeoutError("bolide standalone printed no ready line")
    return process.stdout.readline().decode().strip()


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standalone]:
    """``bolide standalone`` on free ports in a temporary data directory, stopped (SIGTERM)
    after the module's tests."""
    data = tmp_path_factory.mktemp("standalone")
    process = subprocess.Popen(
        [BOLIDE, "standalone", "--namesrv-port", "0", "--broker-port", "0", "--proxy-port", "0",
         "--no-metrics", "--no-dashboard",
         "--data-dir", str(data / "data")],
        cwd=data,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=child_environment(),  # a killed pytest leaves no server behind (issue 30)
    )  # fmt: skip
    try:
        ready = _read_ready_line(process)
        fields = dict(part.split("=", 1) for part in ready.split()[2:])
        yield Standalone(fields["namesrv"], fields["broker"])
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(PROCESS_GUARD_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if process.stdout is not None:
            process.stdout.close()
