"""bench/compare.sh's goal lines (bench/peers/table.py): issue 27's targets, each a ratio to
the best peer of the same run."""

from __future__ import annotations

from typing import Any

from bench.peers.table import goal_lines


def _result(
    system: str,
    workload: str,
    flush: str,
    msgs_per_s: float,
    p99_us: float | None = None,
    server_cpu_s: float | None = None,
) -> dict[str, Any]:
    return {
        "system": system,
        "workload": workload,
        "flush": flush,
        "msgs_per_s": msgs_per_s,
        "messages": 100_000,
        "latency_us": None if p99_us is None else {"p50": 1.0, "p99": p99_us, "p999": p99_us},
        "server_cpu_s": server_cpu_s,
        "rate_per_s": 2000 if workload == "e2e" else None,
    }


def test_every_goal_of_the_issue_gets_a_line_with_its_ratio_to_the_best_peer() -> None:
    results = [
        _result("bolide", "produce", "async", 200_000, p99_us=2_000, server_cpu_s=0.4),
        _result("redis", "produce", "async", 100_000, p99_us=4_000, server_cpu_s=0.9),
        _result("nats", "produce", "async", 90_000, p99_us=1_000),
        _result("bolide", "produce", "sync", 140_000, p99_us=3_000),
        _result("redis", "produce", "sync", 100_000, p99_us=3_000),
        _result("bolide", "consume", "async", 240_000),
        _result("redis", "consume", "async", 100_000),
        _result("bolide", "e2e", "sync", 2_000, p99_us=500),
        _result("redis", "e2e", "sync", 2_000, p99_us=600),
    ]
    lines = goal_lines(results)
    assert lines == [
        "produce async: Bolide 200,000 msgs/s = 2.00x the best peer (redis 100,000);"
        " goal >= 2x: met",
        "produce async p99: Bolide 2.00 ms = 2.00x the best peer's (nats 1.00 ms);"
        " goal <= 1x: NOT met",
        "produce async server CPU: Bolide 4.0 us/msg = 0.44x redis's (9.0 us/msg);"
        " goal <= 0.5x: met",
        "produce sync: Bolide 140,000 msgs/s = 1.40x the best peer (redis 100,000);"
        " goal >= 1.5x: NOT met",
        "produce sync p99: Bolide 3.00 ms = 1.00x the best peer's (redis 3.00 ms); goal <= 1x: met",
        "consume async: Bolide 240,000 msgs/s = 2.40x the best peer (redis 100,000);"
        " goal >= 2.5x: NOT met",
        "e2e sync p99: Bolide 0.50 ms at 2000 msg/s = 0.83x the best peer's (redis 0.60 ms);"
        " goal <= 1x: met",
    ]


def test_missing_figures_are_said_not_guessed() -> None:
    lines = goal_lines(
        [
            _result("bolide", "produce", "async", 1_000),
            _result("nats", "produce", "async", 1_000, p99_us=1_000),
            _result("bolide", "consume", "sync", 1_000),
        ]
    )
    assert lines == [
        "produce async: Bolide 1,000 msgs/s = 1.00x the best peer (nats 1,000); goal >= 2x:"
        " NOT met",
        "produce async p99: no latency to compare",
        "produce async server CPU: no redis CPU figure",
        "consume sync: no peer result",
    ]
