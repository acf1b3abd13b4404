"""Failover chaos in controller mode, CI-sized: 50 seeded schedules of SIGKILL (the killed
master restarted on its data rejoins as a slave), SIGSTOP/SIGCONT, a master-controller
partition and SIGKILL of etcd's Raft leader (a three-member etcd) against etcd + controller +
name server + two brokers, all processes; then no acknowledged message may be lost, doubled,
misplaced, reordered or written by two brokers in one epoch. Totals and the SIGKILL-to-first-
ack times are printed."""

from __future__ import annotations

from pathlib import Path

import pytest

from bolide.testing.etcd import etcd_binary
from tests.chaos.controller_run import (
    CONTROLLER_FAULT_KINDS,
    controller_schedules,
    kill_summary,
    run_controller_chaos,
)

SEED = 25
SCHEDULES = 50


def test_controller_schedules_are_seeded_and_use_every_kind() -> None:
    assert controller_schedules(SEED, SCHEDULES) == controller_schedules(SEED, SCHEDULES)
    assert {fault.kind for fault in controller_schedules(SEED, SCHEDULES)} == set(
        CONTROLLER_FAULT_KINDS
    )
    assert controller_schedules(SEED + 1, SCHEDULES) != controller_schedules(SEED, SCHEDULES)


@pytest.mark.slow
@pytest.mark.timeout(900)
async def test_fifty_controller_mode_schedules_lose_nothing_acknowledged(tmp_path: Path) -> None:
    if etcd_binary() is None:
        pytest.skip("etcd is not installed: `make test` installs Debian's etcd-server")
    faults = controller_schedules(SEED, SCHEDULES)
    report, kill_to_ack_ms = await run_controller_chaos(tmp_path / "chaos", faults, print)
    print(f"controller-mode chaos (seed {SEED}, {SCHEDULES} schedules): {report.summary()}")
    print(kill_summary(kill_to_ack_ms))
    kills = sum(fault.kind == "sigkill" for fault in faults)
    assert report.acknowledged > SCHEDULES
    assert report.read_back == report.acknowledged
    assert report.ok, report.summary()
    assert report.elections >= kills  # every SIGKILL of the master elected the other broker
    assert len(kill_to_ack_ms) == kills
