"""The CI-sized run of bench/fuzz_controller.py: seeded, a few seconds of mutated controller
requests (904, 1001–1013), garbage and slow writes against a real ``bolide controller`` on a
real etcd; no crash, no unhandled exception, still leading and serving, nothing left open."""

from __future__ import annotations

import pytest
from bench import fuzz_controller as fuzzer
from bench.fuzz_support import run_fuzzer

from bolide.testing.etcd import etcd_binary

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

SEED = 30
SECONDS = 8.0
"""Fuzzing time; with etcd's and the controller's start and stop the test stays under 20 s
when idle."""


def test_the_controller_listener_survives_seeded_fuzzing() -> None:
    if etcd_binary() is None:
        pytest.skip("etcd is not installed: `make test` installs Debian's etcd-server")
    report = run_fuzzer(
        "controller", fuzzer.attack, fuzzer.liveness, seed=SEED, seconds=SECONDS,
        max_requests=100_000, prepare=fuzzer.prepare, server_factory=fuzzer.ControllerUnderTest,
    )  # fmt: skip

    assert report.requests > 0
    assert report.ok, "\n".join(report.lines())
    assert report.crashes == 0 and report.serving and not report.server_errors
