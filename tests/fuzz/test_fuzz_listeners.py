"""The CI-sized run of every listener's fuzzer (bench/fuzz_<listener>.py): seeded, a few seconds
of mutated traffic against a real ``bolide standalone`` (the controller's: a real ``bolide
controller`` on a real etcd); no crash, no unhandled exception, still serving, nothing left
open."""

from __future__ import annotations

import pytest
from bench import fuzz_controller, fuzz_dashboard, fuzz_grpc, fuzz_ha, fuzz_metrics, fuzz_remoting
from bench.fuzz_support import Fuzzer

from bolide.testing.etcd import etcd_binary

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

SEED = 30
SECONDS = 8.0
"""Fuzzing time; with the servers' start and stop a run stays under 20 s when idle."""
FUZZERS = [
    module.FUZZER
    for module in (fuzz_remoting, fuzz_ha, fuzz_grpc, fuzz_metrics, fuzz_dashboard, fuzz_controller)
]


@pytest.mark.parametrize("fuzzer", FUZZERS, ids=lambda fuzzer: fuzzer.listener)
def test_the_listener_survives_seeded_fuzzing(fuzzer: Fuzzer) -> None:
    if fuzzer.listener == "controller" and etcd_binary() is None:
        pytest.skip("etcd is not installed: `make test` installs Debian's etcd-server")

    report = fuzzer.run(seed=SEED, seconds=SECONDS, max_requests=100_000)

    assert report.requests > 0
    assert report.ok, "\n".join(report.lines())
    assert report.crashes == 0 and report.serving and not report.server_errors
