"""The exactly-once sink under faults, ten seeded times (CI runs one or two).

Without ``--faults``: ``tests/spark/test_exactly_once.py`` with ``BOLIDE_SPARK_EO_SEEDS``
seeds — a Spark driver (its own process) copying a topic with ``exactlyOnce=true`` is
SIGKILLed after a seeded number of recorded batches and restarted from its checkpoint.

With ``--faults``: ``tests/spark/test_exactly_once_faults.py`` with
``BOLIDE_SPARK_EO_FAULT_SEEDS`` seeds — the driver SIGKILLed mid-run and restarted, then the
broker (its own process) SIGKILLed in the middle of a batch's commit (after the ledger record,
or after some of its END_TRANSACTIONs), broker and driver restarted; every input row must be
on the target topic exactly once and no half left pending.

Prints one line per seed (passed or failed, seconds) and the totals, with the load average.
Each seed costs two or three JVM starts (≈ 1-3 min on a loaded 2-core machine).

    .venv/bin/python bench/spark_exactly_once.py [--faults] [--seeds 10]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--faults", action="store_true", help="broker kills mid-commit too")
    arguments = parser.parse_args()
    if arguments.faults:
        variable, test = "BOLIDE_SPARK_EO_FAULT_SEEDS", "tests/spark/test_exactly_once_faults.py"
    else:
        variable, test = "BOLIDE_SPARK_EO_SEEDS", "tests/spark/test_exactly_once.py"
    environment = {**os.environ, variable: str(arguments.seeds),
                   "PYTHONPATH": f"{ROOT / 'src'}:{ROOT}"}  # fmt: skip
    load_before = os.getloadavg()
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as directory:
        report = Path(directory) / "report.xml"
        # A base directory of its own: other pytest runs on the machine cannot rotate it away.
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:logging", test,
                   f"--junitxml={report}", f"--basetemp={Path(directory) / 'runs'}"]  # fmt: skip
        code = subprocess.call(command, cwd=ROOT, env=environment)
        cases = ElementTree.parse(report).getroot().iter("testcase") if report.exists() else []
        passed = failed = 0
        for case in cases:
            ok = not any(child.tag in ("failure", "error") for child in case)
            passed, failed = passed + ok, failed + (not ok)
            print(f"{case.get('name')}: {'passed' if ok else 'FAILED'} "
                  f"in {float(case.get('time', 0)):.0f} s")  # fmt: skip
    elapsed_s = time.monotonic() - started
    load_after = os.getloadavg()
    print(f"{test}: {passed} seeds passed, {failed} failed, {elapsed_s:.0f} s in all; load "
          f"average {load_before[0]:.1f} before, {load_after[0]:.1f} after")  # fmt: skip
    return code


if __name__ == "__main__":
    sys.exit(main())
