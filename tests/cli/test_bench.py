"""``bolide bench``: tiny runs through the real binary, their JSON result lines parsed.

These prove that each workload runs end to end against a real broker (its own ``bolide
standalone`` child, or an existing cluster with ``--namesrv``) and reports what the contract
with bench/compare.sh asks (bench/peers/README.md). They assert counts and the shape of the
result, never a speed.
"""

from __future__ import annotations

import json
import os
import re
import selectors
import signal
import subprocess
from pathlib import Path
from typing import IO, Any

import pytest

from bolide.bench.runtime import STAMP_BYTES, LatencyRecorder, StampedBodies, read_stamp_ns
from tests.cli.conftest import BOLIDE, PROCESS_GUARD_S, Standalone

TINY = [
    "--json", "--message-bytes", "256", "--messages", "300", "--producers", "2",
    "--in-flight", "4", "--consumers", "1", "--pull-batch", "16", "--queues", "2",
    "--rate-per-s", "200", "--e2e-seconds", "0.5", "--max-seconds", "30", "--no-warm-up",
]  # fmt: skip
CONTRACT_FIELDS = {
    "schema", "system", "system_version", "workload", "flush", "durability", "message_bytes",
    "messages", "expected_messages", "errors", "producers", "in_flight", "consumers",
    "pull_batch", "rate_per_s", "elapsed_s", "msgs_per_s", "mib_per_s", "latency_us",
    "server_cpu_s", "client_cpu_s", "complete",
}  # fmt: skip


def bench(*arguments: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    ignored = ("BOLIDE_NAMESRV", "BOLIDE_BENCH_MODE")  # only what the test passes counts
    environment = {key: value for key, value in os.environ.items() if key not in ignored}
    return subprocess.run(
        [BOLIDE, "bench", *arguments],
        capture_output=True,
        text=True,
        timeout=PROCESS_GUARD_S * 2,
        env=environment,
        cwd=cwd,
        check=False,
    )


def result_line(finished: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert finished.returncode == 0, finished.stderr
    lines = [line for line in finished.stdout.splitlines() if line.startswith("{")]
    assert lines, finished.stdout
    value = json.loads(lines[-1])
    assert isinstance(value, dict)
    return value


def check_common(result: dict[str, Any], workload: str, mode: str) -> None:
    assert result.keys() >= CONTRACT_FIELDS
    assert result["schema"] == "bolide-bench/1"
    assert result["system"] == "bolide"
    assert (result["workload"], result["mode"]) == (workload, mode)
    assert result["errors"] == 0
    assert result["complete"] is True
    assert result["messages"] == result["expected_messages"]
    assert result["elapsed_s"] > 0
    assert result["msgs_per_s"] == pytest.approx(result["messages"] / result["elapsed_s"])
    assert result["mib_per_s"] == pytest.approx(result["msgs_per_s"] * 256 / 2**20)


@pytest.mark.parametrize("mode", ["client", "raw"])
def test_produce_reports_every_acknowledged_send(mode: str, tmp_path: Path) -> None:
    result = result_line(bench("produce", *TINY, "--mode", mode, "--flush", "sync", cwd=tmp_path))

    check_common(result, "produce", mode)
    assert result["messages"] == 300
    assert result["flush"] == "sync"
    assert "fsync" in result["durability"]
    assert result["latency_us"]["samples"] == 300
    assert 0 < result["latency_us"]["p50"] <= result["latency_us"]["p99"]
    assert result["latency_us"]["p99"] <= result["latency_us"]["max"]
    assert result["server_cpu_s"] is not None  # its own broker: the CPU is read from /proc
    assert result["rate_per_s"] is None


@pytest.mark.parametrize("mode", ["client", "raw"])
def test_consume_reads_the_whole_backlog(mode: str, tmp_path: Path) -> None:
    result = result_line(bench("consume", *TINY, "--mode", mode, cwd=tmp_path))

    check_common(result, "consume", mode)
    assert result["messages"] == 300
    assert result["latency_us"] is None


def test_e2e_measures_every_message_at_the_rate(tmp_path: Path) -> None:
    result = result_line(bench("e2e", *TINY, "--batch-size", "2", cwd=tmp_path))

    check_common(result, "e2e", "client")
    assert result["expected_messages"] == 100  # 200 msg/s for 0.5 s
    assert result["latency_us"]["samples"] == 100
    assert result["rate_per_s"] == 200
    assert result["batch_size"] == 2


def test_an_existing_cluster_is_benched_without_starting_a_broker(
    standalone: Standalone, tmp_path: Path
) -> None:
    finished = bench("produce", *TINY, "--namesrv", standalone.namesrv, cwd=tmp_path)
    result = result_line(finished)

    check_common(result, "produce", "client")
    assert result["server_cpu_s"] is None  # no --broker-pid: unknown
    assert "configured on the broker" in result["durability"]


def test_a_bad_option_is_a_usage_error(tmp_path: Path) -> None:
    finished = bench("produce", "--json", "--message-bytes", "4", cwd=tmp_path)

    assert finished.returncode == 2
    assert "--message-bytes" in finished.stderr
    assert json.loads(finished.stdout)["exitCode"] == 2


def test_an_unreachable_cluster_fails_with_a_clear_message(tmp_path: Path) -> None:
    finished = bench(
        "produce", *TINY, "--namesrv", "127.0.0.1:1", "--max-seconds", "2", cwd=tmp_path
    )

    assert finished.returncode == 4, finished.stderr
    assert "cannot reach" in finished.stderr


class LineReader:
    """Lines of a pipe, read with a bounded wait (no buffering hides a line from select)."""

    def __init__(self, pipe: IO[bytes]) -> None:
        self._fd = pipe.fileno()
        self._pending = b""

    def until(self, pattern: str) -> re.Match[str]:
        """Read lines until one matches ``pattern``; fails after PROCESS_GUARD_S of silence."""
        with selectors.DefaultSelector() as selector:
            selector.register(self._fd, selectors.EVENT_READ)
            while True:
                while b"\n" in self._pending:
                    line, self._pending = self._pending.split(b"\n", 1)
                    match = re.search(pattern, line.decode())
                    if match is not None:
                        return match
                assert selector.select(PROCESS_GUARD_S), f"no line matching {pattern!r}"
                chunk = os.read(self._fd, 65536)
                assert chunk, f"the pipe closed before a line matching {pattern!r}"
                self._pending += chunk


def test_sigterm_stops_the_run_and_its_broker(tmp_path: Path) -> None:
    """compare.sh bounds each run with timeout(1): SIGTERM must stop the broker too."""
    ignored = ("BOLIDE_NAMESRV", "BOLIDE_BENCH_MODE")
    environment = {key: value for key, value in os.environ.items() if key not in ignored}
    process = subprocess.Popen(
        [BOLIDE, "bench", "produce", *TINY, "--messages", "0", "--max-seconds", "120"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=environment,
        cwd=tmp_path,
    )
    assert process.stderr is not None
    stderr_lines = LineReader(process.stderr)
    try:
        broker_pid = int(stderr_lines.until(r"broker pid (\d+)").group(1))
        stderr_lines.until(r"produce on topic")
        process.send_signal(signal.SIGTERM)
        stdout_bytes, stderr_bytes = process.communicate(timeout=PROCESS_GUARD_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()

    stdout, stderr = stdout_bytes.decode(), stderr_bytes.decode()
    assert process.returncode == 143, stderr
    assert "stopped by SIGTERM" in stderr
    assert not [line for line in stdout.splitlines() if line.startswith("{")]
    with pytest.raises(ProcessLookupError):  # stopped and reaped by the bench
        os.kill(broker_pid, 0)


def test_latency_percentiles_are_nearest_rank() -> None:
    recorder = LatencyRecorder()
    for latency_ns in range(1_000, 1_001_000, 1_000):  # 1 µs .. 1000 µs
        recorder.record(latency_ns)
    recorder.record_many(2_000_000, 0)

    summary = recorder.summary()

    assert summary is not None
    assert (summary.p50, summary.p99, summary.p999, summary.max) == (500.0, 990.0, 999.0, 1000.0)
    assert summary.samples == 1000
    assert LatencyRecorder().summary() is None


def test_bodies_carry_their_stamp() -> None:
    bodies = StampedBodies(64)

    first, second = bodies.stamped(), bodies.stamped()

    assert len(first) == 64
    assert first[STAMP_BYTES:] == second[STAMP_BYTES:]
    assert read_stamp_ns(first) <= read_stamp_ns(second)
    with pytest.raises(ValueError, match="no stamp"):
        read_stamp_ns(b"short")
