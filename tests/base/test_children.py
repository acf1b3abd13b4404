"""A child given :func:`child_environment` stops with its parent (issue 30)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from bolide.base.children import PARENT_PID_VARIABLE, child_environment, die_with_parent

GUARD_S = 60.0
"""Hang guard on each child process."""
_CHILD = (
    "import os; from bolide.base.children import die_with_parent, PARENT_PID_VARIABLE;"
    " print(die_with_parent(), PARENT_PID_VARIABLE in os.environ, flush=True)"
)


def _run_child(environment: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _CHILD],
        env=environment,
        capture_output=True,
        text=True,
        timeout=GUARD_S,
        check=False,
    )


def test_the_child_asks_the_kernel_and_hides_the_variable_from_its_own_children() -> None:
    finished = _run_child(child_environment())

    assert finished.returncode == 0, finished.stderr
    how, still_set = finished.stdout.split()
    assert how == ("prctl" if sys.platform.startswith("linux") else "watchdog")
    assert still_set == "False"


def test_a_parent_already_gone_stops_the_child_at_once() -> None:
    environment = child_environment()
    environment[PARENT_PID_VARIABLE] = str(os.getpid() + 1_000_000)  # not its parent

    finished = _run_child(environment)

    assert finished.returncode == -signal.SIGTERM  # before it could print anything
    assert finished.stdout == ""


def test_without_the_variable_nothing_is_done() -> None:
    os.environ.pop(PARENT_PID_VARIABLE, None)

    assert die_with_parent() == ""
