"""Failover chaos, long run: the CI test's harness (tests/chaos/failover_run.py) with many
seeded fault schedules (default 500) against a static SYNC_MASTER + SLAVE.

Prints the totals the issue asks for: acknowledged, read back, lost (must be 0), duplicated,
misplaced, out of order, split brain, elections (0 without a controller), and the
unavailability of each failover (fault to the first acknowledged send after it) p50/p99/max.
Exits 1 when any acknowledged message was lost, doubled, misplaced or reordered.

    PYTHONPATH=src:. .venv/bin/python -m bench.failover_chaos [--schedules 500] [--seed 25]

``--controller`` runs controller mode instead (tests/chaos/controller_run.py: etcd, controller,
name server, two brokers; SIGKILL, SIGSTOP/SIGCONT, master-controller partition) and also
prints the SIGKILL-to-first-acknowledged-send times on the new master.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

from tests.chaos.controller_run import controller_schedules, kill_summary, run_controller_chaos
from tests.chaos.failover_checker import schedules
from tests.chaos.failover_run import run_chaos

MIN_SCHEDULES = 500
"""The issue's long-run size."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schedules", type=int, default=MIN_SCHEDULES)
    parser.add_argument("--seed", type=int, default=25)
    parser.add_argument("--dir", type=Path, default=None, help="work directory (default: temp)")
    parser.add_argument("--controller", action="store_true", help="controller mode")
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bolide-failover-") as temporary:
        root = arguments.dir or Path(temporary)
        if arguments.controller:
            faults = controller_schedules(arguments.seed, arguments.schedules)
            report, kill_to_ack_ms = asyncio.run(
                run_controller_chaos(root / "chaos", faults, print)
            )
            print(kill_summary(kill_to_ack_ms))
        else:
            faults = schedules(arguments.seed, arguments.schedules)
            report = asyncio.run(run_chaos(root / "chaos", faults, print))
    print(
        f"failover chaos (seed {arguments.seed}, {arguments.schedules} schedules): "
        f"{report.summary()}"
    )
    print(f"command: {' '.join(sys.argv)}")
    sys.exit(0 if report.ok and report.read_back == report.acknowledged else 1)


if __name__ == "__main__":
    main()
