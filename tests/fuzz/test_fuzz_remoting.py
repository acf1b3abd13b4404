"""The CI-sized run of bench/fuzz_remoting.py: seeded, a few seconds of mutated traffic against a
real ``bolide standalone``; no crash, no unhandled exception, still serving, nothing left open."""

from __future__ import annotations

import pytest
from bench import fuzz_remoting as fuzzer
from bench.fuzz_support import run_fuzzer

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

SEED = 30
SECONDS = 8.0
"""Fuzzing time; with the server's start and stop the test stays under 20 s when idle."""


def test_the_remoting_listener_survives_seeded_fuzzing() -> None:
    report = run_fuzzer(
        "remoting", fuzzer.attack, fuzzer.liveness, seed=SEED, seconds=SECONDS,
        max_requests=100_000, prepare=fuzzer.prepare, round_exchanges=fuzzer.ROUND_EXCHANGES,
    )  # fmt: skip

    assert report.requests > 0
    assert report.ok, "\n".join(report.lines())
    assert report.crashes == 0 and report.serving and not report.server_errors
