"""A worker that dies mid-run, under ``--dist loadgroup`` with the suite's scheduler: the run
ends, the dead worker's test is reported, and every other test runs once.

Each case runs pytest in a child process on a small suite of its own, whose one test kills its
worker the first time it runs (as an aborting native client or pytest-timeout's thread method
does). With xdist 3.8.0's own scheduler the first two cases hang every time (the replacement
worker is given one item, or a finished unit as an empty list, and waits for more); the bound
below turns a hang into a failure.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[2]

RUN_BOUND_S = 240
"""A hang's bound, not a speed check: each case ends in a few seconds when it does not hang."""

PYTEST = (sys.executable, "-m", "pytest", "-p", "no:cacheprovider")

PYTEST_INI = "[pytest]\nasyncio_default_fixture_loop_scope = function\n"

CONFTEST = """\
from tests.suite.crash_safe_scheduling import CrashSafeLoadGroupScheduling


def pytest_xdist_make_scheduler(config, log):
    return CrashSafeLoadGroupScheduling(config, log)
"""

TEST_MODULE = """\
import os
from pathlib import Path

CRASHED_ONCE = Path(__file__).with_name("crashed-once")


def test_crashes_its_worker_once():
    if not CRASHED_ONCE.exists():
        CRASHED_ONCE.touch()
        os._exit(1)


{others}
"""


def _suite(directory: Path, *, before: int, after: int) -> None:
    """``before`` passing tests, the crashing one, then ``after`` passing tests (one file each,
    so that each is its own unit of work, as in the suite)."""
    (directory / "pytest.ini").write_text(PYTEST_INI)
    (directory / "conftest.py").write_text(CONFTEST)
    for number in range(before):
        (directory / f"test_a{number:02}.py").write_text("def test_passes():\n    pass\n")
    (directory / "test_b.py").write_text(TEST_MODULE.format(others=""))
    for number in range(after):
        (directory / f"test_c{number:02}.py").write_text("def test_passes():\n    pass\n")


@pytest.mark.parametrize(
    ("workers", "before", "after"),
    [
        (1, 0, 1),  # the replacement is given one item: xdist 3.8.0 waits for a second for ever
        (1, 3, 0),  # the finished units of the dead worker come back as empty ones
        (2, 6, 6),  # a crash with the other worker busy
    ],
)
def test_a_crashed_worker_is_replaced_and_the_run_ends(
    tmp_path: Path, workers: int, before: int, after: int
) -> None:
    _suite(tmp_path, before=before, after=after)
    try:
        finished = subprocess.run(
            [*PYTEST, "-n", str(workers), "--dist", "loadgroup"],
            cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": str(REPOSITORY)},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=RUN_BOUND_S,
            check=False,
        )
    except subprocess.TimeoutExpired as hung:
        pytest.fail(f"pytest did not end after its worker crashed:\n{hung.stdout!r}")
    output = finished.stdout
    assert "replacing crashed worker" in output, output
    assert "INTERNALERROR" not in output, output
    # The crash is reported against the test that was running; the test then runs again on the
    # replacement and passes, as every other test does.
    assert f"1 failed, {before + after + 1} passed" in output, output
    assert "test_b.py::test_crashes_its_worker_once" in output, output
    assert finished.returncode == 1, output
