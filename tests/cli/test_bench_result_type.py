"""One result type for ``bolide bench`` and the peers' runner (bench/peers/README.md)."""

from __future__ import annotations

import dataclasses

from bench.peers.result import RunResult, parse_result

from bolide.bench.runtime import BenchResult


def _contract_fields() -> dict[str, object]:
    return {
        "system_version": "1",
        "workload": "produce",
        "flush": "async",
        "durability": "page-cache",
        "message_bytes": 1024,
        "messages": 10,
        "expected_messages": 10,
        "errors": 0,
        "producers": 1,
        "in_flight": 1,
        "consumers": 0,
        "pull_batch": 32,
        "rate_per_s": None,
        "elapsed_s": 1.5,
        "msgs_per_s": 6.7,
        "mib_per_s": 0.01,
        "latency_us": None,
        "server_cpu_s": 0.1,
        "client_cpu_s": 0.2,
        "complete": True,
    }


def test_bench_result_is_the_peers_result_with_extras() -> None:
    assert issubclass(BenchResult, RunResult)
    contract = {field.name for field in dataclasses.fields(RunResult)}
    extras = {field.name for field in dataclasses.fields(BenchResult)} - contract
    assert extras == {"mode", "batch_size", "queues", "latency_dropped", "load_average"}


def test_both_sides_write_lines_the_one_reader_parses() -> None:
    peer = RunResult(system="nats", **_contract_fields())  # type: ignore[arg-type]
    bench = BenchResult(
        mode="async",
        batch_size=1,
        queues=8,
        latency_dropped=0,
        load_average=(0.5, 0.25, 0.125),
        **_contract_fields(),  # type: ignore[arg-type]
    )
    peer_line, bench_line = parse_result(peer.to_json()), parse_result(bench.to_json())
    assert peer_line["system"] == "nats" and bench_line["system"] == "bolide"
    assert bench_line["queues"] == 8 and "queues" not in peer_line
    assert {key: bench_line[key] for key in peer_line if key != "system"} == {
        key: value for key, value in peer_line.items() if key != "system"
    }
