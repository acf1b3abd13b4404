"""Where an e2e message waits: ``bolide bench e2e`` with a timestamp at every stage.

Runs ``bolide standalone`` in a child process and ``bolide bench e2e`` against it in this one,
both with timestamp hooks (CLOCK_MONOTONIC, shared by the two processes) patched in:

* broker: a message's arrival in the long-poll table (the put that stored it) and the build of
  the pull answer that carries it;
* client: ``PullLoop._found`` (the pull task got the answer) and the listener call;

joined by (queue, offset) with the producer's stamp in the body, and prints each stage's
p50 / p90 / p99 / max, which stage dominates the messages at or past the p99, and the
collector's passes inside the run. The hooks cost a few µs a message; the bench's own
summary (its stderr) is printed as well. Diagnostic only: the figures to compare with peers
are ``bolide bench e2e``'s / ``bench/compare.sh``'s.

    .venv/bin/python -m bench.e2e_stages [--flush async|sync] [--seconds 4]
        [--rate-per-s 2000]
"""

from __future__ import annotations

import argparse
import atexit
import collections
import gc
import itertools
import os
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

STAGES = (
    "send -> stored (producer, wire, put)",
    "stored -> pull answer built",
    "answer -> client pull task",
    "pull task -> listener",
)
_BROKER_HOOKS = "BOLIDE_E2E_STAGES_BROKER_FILE"
_STAMP = struct.Struct("<q")  # bolide.bench.runtime's body stamp
Key = tuple[int, int]


def _gc_hook(rows: list[tuple[Any, ...]]) -> None:
    started = [0]

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started[0] = time.monotonic_ns()
        else:
            rows.append(("G", info["generation"], started[0], time.monotonic_ns() - started[0]))

    gc.callbacks.append(on_gc)


def _dump_at_exit(rows: list[tuple[Any, ...]], path: Path) -> None:
    def dump() -> None:
        path.write_text("".join(" ".join(map(str, row)) + "\n" for row in rows))

    atexit.register(dump)


def _install_broker_hooks(rows: list[tuple[Any, ...]]) -> None:
    from bolide.broker.handlers import pull
    from bolide.broker.long_polling import LongPollingService

    notify = LongPollingService.notify_message_arriving
    respond = pull.PullHandlers._response

    def timed_notify(
        self: LongPollingService,
        topic: str,
        queue_id: int,
        max_offset: int,
        code: int | None = None,
    ) -> int:
        if topic.startswith("bench-e2e"):
            rows.append(("A", queue_id, max_offset - 1, time.monotonic_ns()))
        return notify(self, topic, queue_id, max_offset, code)

    def timed_response(self: pull.PullHandlers, *args: Any) -> Any:
        answer = respond(self, *args)
        header, result = args[3], args[2]
        if header.topic.startswith("bench-e2e"):
            rows.append(
                (
                    "R",
                    header.queue_id,
                    header.queue_offset,
                    result.message_count,
                    time.monotonic_ns(),
                )
            )
        return answer

    LongPollingService.notify_message_arriving = timed_notify  # type: ignore[method-assign, assignment]
    pull.PullHandlers._response = timed_response  # type: ignore[method-assign, assignment]


def _install_client_hooks(rows: list[tuple[Any, ...]]) -> None:
    from bolide.bench import workloads as bench_workloads
    from bolide.client.consumer import pull_loop

    found = pull_loop.PullLoop._found
    listener = bench_workloads._ClientReceiver._listener

    def timed_found(self: pull_loop.PullLoop, queue: Any, *args: Any) -> int:
        result = args[-1]
        if queue.topic.startswith("bench-e2e") and result.messages:
            first = result.messages[0].queue_offset
            rows.append(("F", queue.queue_id, first, len(result.messages), time.monotonic_ns()))
        return found(self, queue, *args)

    async def timed_listener(self: Any, messages: list[Any]) -> Any:
        now_ns = time.monotonic_ns()
        if self._topic.startswith("bench-e2e"):
            for message in messages:
                stamp_ns = _STAMP.unpack_from(message.body)[0]
                rows.append(("L", message.queue_id, message.queue_offset, stamp_ns, now_ns))
        return await listener(self, messages)

    pull_loop.PullLoop._found = timed_found  # type: ignore[method-assign, assignment]
    bench_workloads._ClientReceiver._listener = timed_listener  # type: ignore[method-assign]


def _run_cli(argv: Sequence[str]) -> None:
    from bolide.cli.app import main

    sys.argv = ["bolide", *argv]
    try:
        main()
    except SystemExit as done:
        if done.code not in (0, None):
            raise


def _serve_broker(argv: Sequence[str]) -> None:
    """Child process: the hooked broker (``bolide standalone ARGV``)."""
    rows: list[tuple[Any, ...]] = []
    _gc_hook(rows)
    _install_broker_hooks(rows)
    _dump_at_exit(rows, Path(os.environ[_BROKER_HOOKS]))
    _run_cli(argv)


def _read_rows(path: Path) -> list[list[int | str]]:
    rows: list[list[int | str]] = []
    for line in path.read_text().splitlines():
        kind, *numbers = line.split()
        rows.append([kind, *map(int, numbers)])
    return rows


def _spread(rows: list[list[int | str]], kind: str) -> dict[Key, int]:
    """Offsets of a batch row (queue, first offset, count, time) -> time, for each message."""
    times: dict[Key, int] = {}
    for row in rows:
        if row[0] == kind:
            queue_id, first, count, at_ns = (int(value) for value in row[1:])
            for offset in range(first, first + count):
                times.setdefault((queue_id, offset), at_ns)
    return times


def _percentile_us(values: list[int], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))] / 1000


def _report(broker_rows: list[list[int | str]], client_rows: list[list[int | str]]) -> None:
    arrivals: dict[int, list[tuple[int, int]]] = collections.defaultdict(list)
    for row in broker_rows:
        if row[0] == "A":  # once per put: a batch put names only its last offset
            arrivals[int(row[1])].append((int(row[2]), int(row[3])))
    arrived: dict[Key, int] = {}
    for queue_id, puts in arrivals.items():
        puts.sort()
        first = 0
        for last, at_ns in puts:
            for offset in range(first, last + 1):
                arrived.setdefault((queue_id, offset), at_ns)
            first = last + 1
    answered, found = _spread(broker_rows, "R"), _spread(client_rows, "F")
    splits: list[tuple[int, list[int], int]] = []
    for row in client_rows:
        if row[0] != "L":
            continue
        key, stamp_ns, heard_ns = (int(row[1]), int(row[2])), int(row[3]), int(row[4])
        if key in arrived and key in answered and key in found:
            times = [stamp_ns, arrived[key], answered[key], found[key], heard_ns]
            stages = [later - earlier for earlier, later in itertools.pairwise(times)]
            splits.append((heard_ns - stamp_ns, stages, stamp_ns))
    if not splits:
        print("no message could be followed through every stage")
        return
    totals = [split[0] for split in splits]
    print(f"messages followed: {len(splits)}")
    print(f"{'whole':40s} p50 {_percentile_us(totals, 0.5):8.0f} p90 "
          f"{_percentile_us(totals, 0.9):8.0f} p99 {_percentile_us(totals, 0.99):8.0f} "
          f"max {max(totals) / 1000:8.0f} µs")  # fmt: skip
    for index, name in enumerate(STAGES):
        values = [split[1][index] for split in splits]
        print(f"{name:40s} p50 {_percentile_us(values, 0.5):8.0f} p90 "
              f"{_percentile_us(values, 0.9):8.0f} p99 {_percentile_us(values, 0.99):8.0f} "
              f"max {max(values) / 1000:8.0f} µs")  # fmt: skip
    threshold_ns = _percentile_us(totals, 0.99) * 1000
    tail = [split for split in splits if split[0] >= threshold_ns]
    dominant = collections.Counter(
        STAGES[max(range(4), key=split[1].__getitem__)] for split in tail
    )
    print(f"the {len(tail)} messages at or past p99 spent most in: {dict(dominant)}")
    first_ns, last_ns = min(s[2] for s in splits), max(s[2] for s in splits)
    for who, rows in (("broker", broker_rows), ("client", client_rows)):
        passes = [r for r in rows if r[0] == "G" and first_ns <= int(r[2]) <= last_ns]
        for generation in (0, 1, 2):
            durations = [int(r[3]) for r in passes if r[1] == generation]
            if durations:
                print(f"{who} gc generation {generation}: {len(durations)} passes in the run, "
                      f"longest {max(durations) / 1e6:.2f} ms")  # fmt: skip


def _start_broker(work: Path, flush: str) -> tuple[subprocess.Popen[bytes], str]:
    environment = dict(os.environ, **{_BROKER_HOOKS: str(work / "broker.rows")})
    command = [
        sys.executable, "-m", "bench.e2e_stages", "--serve-broker", "standalone",
        "--host", "127.0.0.1", "--namesrv-port", "0", "--broker-port", "0",
        "--proxy-port", "0", "--no-metrics", "--no-dashboard",
        "--data-dir", str(work / "data"), "--flush", flush,
    ]  # fmt: skip
    broker = subprocess.Popen(command, env=environment, stdout=subprocess.PIPE)
    assert broker.stdout is not None
    line = broker.stdout.readline().decode()
    fields = dict(part.split("=", 1) for part in line.split()[2:] if "=" in part)
    if "namesrv" not in fields:
        broker.kill()
        broker.wait()
        raise SystemExit(f"the broker did not start: {line!r}")
    return broker, fields["namesrv"]


def main(argv: Sequence[str] | None = None) -> None:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["--serve-broker"]:
        _serve_broker(arguments[1:])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--flush", choices=("async", "sync"), default="async")
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--rate-per-s", type=int, default=2000)
    options = parser.parse_args(arguments)
    print(f"+ python -m bench.e2e_stages {' '.join(arguments)}  (load {os.getloadavg()[0]:.2f})")
    with tempfile.TemporaryDirectory(prefix="bolide-e2e-stages-") as directory:
        work = Path(directory)
        broker, namesrv = _start_broker(work, options.flush)
        client_rows: list[tuple[Any, ...]] = []
        try:
            _gc_hook(client_rows)
            _install_client_hooks(client_rows)
            _run_cli([
                "bench", "e2e", "--namesrv", namesrv, "--broker-pid", str(broker.pid),
                "--rate-per-s", str(options.rate_per_s), "--e2e-seconds", str(options.seconds),
                "--max-seconds", str(options.seconds + 5),
            ])  # fmt: skip
        finally:
            broker.terminate()
            broker.wait(timeout=30)
        (work / "client.rows").write_text(
            "".join(" ".join(map(str, row)) + "\n" for row in client_rows)
        )
        _report(_read_rows(work / "broker.rows"), _read_rows(work / "client.rows"))


if __name__ == "__main__":
    main()
