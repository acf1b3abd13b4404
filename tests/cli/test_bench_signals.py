"""``bolide bench`` stopped by a signal at every phase of its run leaves no process behind.

Issue 30: a SIGTERM that landed while a client call swallowed the cancellation was lost, the
run went on to its ``--max-seconds`` and, once the test killed the bench, its ``bolide
standalone`` child ran on as an orphan. Each case here records the whole process tree (by pid)
when it sends the signal and checks that none of it is alive afterwards.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from bolide.base.children import child_pids
from tests.cli.conftest import BOLIDE, PROCESS_GUARD_S
from tests.cli.test_bench import LineReader

RUN = [
    "--json", "--message-bytes", "256", "--producers", "2", "--in-flight", "4",
    "--consumers", "1", "--queues", "2",
]  # fmt: skip
BY_TIME = [*RUN, "--messages", "0", "--max-seconds", "120"]
_POLL_S = 0.01
"""Interval of the /proc polls below: they wait for another process, bounded by the guard."""


def _alive(pid: int) -> bool:
    """Running (a zombie has stopped: only its exit status is left to collect)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return text[text.rindex(")") + 2] != "Z"


def _tree(root_pid: int) -> set[int]:
    found, frontier = {root_pid}, [root_pid]
    while frontier:
        children = child_pids(frontier.pop())
        found.update(children)
        frontier.extend(children)
    return found


def _wait_for(predicate: object, what: str) -> None:
    assert callable(predicate)
    deadline = time.monotonic() + PROCESS_GUARD_S  # a hang guard only
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(_POLL_S)


def _start(arguments: list[str], cwd: Path) -> subprocess.Popen[bytes]:
    ignored = ("BOLIDE_NAMESRV", "BOLIDE_BENCH_MODE")
    environment = {key: value for key, value in os.environ.items() if key not in ignored}
    return subprocess.Popen(
        [BOLIDE, "bench", "produce", *arguments],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=environment,
        cwd=cwd,
    )


def _finish(process: subprocess.Popen[bytes]) -> tuple[str, str]:
    try:
        stdout, stderr = process.communicate(timeout=PROCESS_GUARD_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    return stdout.decode(), stderr.decode()


PHASES = {
    # phase: (options, the stderr line that says the phase began; None: the broker's spawn)
    "broker starting": ([*BY_TIME, "--no-warm-up"], None),
    "warm-up": (BY_TIME, r"produce on topic"),
    "timed run": (BY_TIME, r"timed phase next"),
    "broker stopping": ([*RUN, "--messages", "200", "--no-warm-up"], r"stopping broker pid"),
}


@pytest.mark.parametrize(
    ("phase", "number"),
    [(phase, signal.SIGTERM) for phase in PHASES] + [("timed run", signal.SIGINT)],
)
def test_a_signal_at_any_phase_stops_the_whole_tree(
    phase: str, number: signal.Signals, tmp_path: Path
) -> None:
    options, marker = PHASES[phase]
    process = _start(options, tmp_path)
    assert process.stderr is not None
    try:
        if marker is None:
            _wait_for(lambda: bool(child_pids(process.pid)), "the bench started no broker")
        else:
            LineReader(process.stderr).until(marker)
        tree = _tree(process.pid)
        assert len(tree) >= 2, f"no broker under the bench in phase {phase}"
        process.send_signal(number)
    finally:
        stdout, stderr = _finish(process)

    code = {signal.SIGTERM: 143, signal.SIGINT: 130}[number]
    if phase == "broker stopping":  # the run may have ended before the signal landed
        assert process.returncode in (0, code), stderr
    else:
        assert process.returncode == code, stderr
        assert f"stopped by {number.name}" in stderr
        assert not [line for line in stdout.splitlines() if line.startswith("{")]
    _wait_for(lambda: not any(_alive(pid) for pid in tree), f"survivors of {sorted(tree)}")


def test_a_killed_bench_takes_its_broker_along(tmp_path: Path) -> None:
    """SIGKILL cannot be handled: the broker stops by itself (parent-death signal)."""
    process = _start([*BY_TIME, "--no-warm-up"], tmp_path)
    assert process.stderr is not None
    try:
        broker_pid = int(LineReader(process.stderr).until(r"broker pid (\d+)").group(1))
        process.kill()
    finally:
        _finish(process)

    assert process.returncode == -signal.SIGKILL
    _wait_for(lambda: not _alive(broker_pid), f"broker {broker_pid} outlived its bench")
