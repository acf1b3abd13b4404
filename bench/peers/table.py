"""Join result lines (Bolide's and the peers') into one table with the ratios Bolide / peer.

    .venv/bin/python -m bench.peers.table RESULTS.jsonl [--markdown]

RESULTS.jsonl holds result objects (README.md) one per line; lines starting with ``#`` are
notes (a system that could not run) printed under the table, and so is any other line, as
unreadable.

Ratios: ``B/peer rate`` is Bolide's msgs/s over the peer's (above 1: Bolide moves more);
``B/peer p99`` is Bolide's p99 latency over the peer's (below 1: Bolide is faster). The goal
lines check issue 27's targets, each a ratio to the best peer measured in the same run: produce
msgs/s at least 2x (ASYNC) / 1.5x (SYNC) the best peer's, consume at least 2.5x, produce and
e2e p99 at most 1x the best (lowest) peer p99, and the broker's CPU per message on ASYNC
produce at most 0.5x Redis's server CPU per message.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bench.peers.result import parse_result

BOLIDE = "bolide"
SYSTEM_ORDER = (BOLIDE, "redis", "nats", "rabbitmq")
WORKLOAD_ORDER = ("produce", "consume", "e2e")
FLUSH_ORDER = ("async", "sync")
THROUGHPUT_GOAL_RATIOS = {
    ("produce", "async"): 2.0,
    ("produce", "sync"): 1.5,
    ("consume", "async"): 2.5,
    ("consume", "sync"): 2.5,
}
"""Issue 27: Bolide's msgs/s over the best peer's, at least this much."""
P99_GOAL_RATIO = 1.0
"""Issue 27: Bolide's p99 over the best (lowest) peer p99, produce and e2e, at most this."""
SERVER_CPU_GOAL_RATIO = 0.5
"""Issue 27: Bolide's broker CPU per message on ASYNC produce over Redis's, at most this."""
SERVER_CPU_PEER = "redis"
COLUMNS = (
    "workload",
    "flush",
    "system",
    "version",
    "msgs/s",
    "MiB/s",
    "p50 ms",
    "p99 ms",
    "p999 ms",
    "server CPU s",
    "server us/msg",
    "client us/msg",
    "complete",
    "B/peer rate",
    "B/peer p99",
)

Result = dict[str, Any]


def read_results(paths: Iterable[Path]) -> tuple[list[Result], list[str]]:
    """Results and notes from the given files (an unreadable line becomes a note)."""
    results: list[Result] = []
    notes: list[str] = []
    for path in paths:
        for line in path.read_text().splitlines():
            if not line.strip():
                continue
            if line.startswith("#"):
                notes.append(line.lstrip("# ").rstrip())
                continue
            try:
                results.append(parse_result(line))
            except ValueError as error:
                notes.append(f"{path.name}: {error}")
    return results, notes


def _p99_ms(result: Result) -> float | None:
    latency = result.get("latency_us")
    return None if not latency else float(latency["p99"]) / 1000


def _ms(latency: dict[str, float] | None, key: str) -> str:
    return "-" if not latency else f"{latency[key] / 1000:.2f}"


def _ratio(numerator: float | None, denominator: float | None) -> str:
    if numerator is None or not denominator:
        return "-"
    return f"{numerator / denominator:.2f}x"


def _per_message_us(cpu_s: float | None, messages: int) -> str:
    return "-" if cpu_s is None or not messages else f"{cpu_s / messages * 1e6:.0f}"


def _row(result: Result, bolide: Result | None) -> list[str]:
    messages = int(result.get("messages") or 0)
    server_cpu_s = result.get("server_cpu_s")
    is_peer = result["system"] != BOLIDE and bolide is not None
    return [
        result["workload"],
        result["flush"],
        result["system"],
        str(result.get("system_version", "?")),
        f"{result['msgs_per_s']:,.0f}",
        f"{result['mib_per_s']:.1f}",
        _ms(result.get("latency_us"), "p50"),
        _ms(result.get("latency_us"), "p99"),
        _ms(result.get("latency_us"), "p999"),
        "-" if server_cpu_s is None else f"{server_cpu_s:.2f}",
        _per_message_us(server_cpu_s, messages),
        _per_message_us(result.get("client_cpu_s"), messages),
        "yes" if result.get("complete", True) else "no",
        _ratio(bolide["msgs_per_s"], result["msgs_per_s"]) if is_peer and bolide else "-",
        _ratio(_p99_ms(bolide), _p99_ms(result)) if is_peer and bolide else "-",
    ]


def _sort_key(result: Result) -> tuple[int, int, int, str]:
    def rank(order: tuple[str, ...], value: str) -> int:
        return order.index(value) if value in order else len(order)

    return (
        rank(WORKLOAD_ORDER, result["workload"]),
        rank(FLUSH_ORDER, result["flush"]),
        rank(SYSTEM_ORDER, result["system"]),
        result["system"],
    )


def build_rows(results: list[Result]) -> list[list[str]]:
    """One row per result, grouped by workload and flush mode, Bolide first in each group."""
    bolide = {
        (result["workload"], result["flush"]): result
        for result in results
        if result["system"] == BOLIDE
    }
    return [
        _row(result, bolide.get((result["workload"], result["flush"])))
        for result in sorted(results, key=_sort_key)
    ]


def _verdict(met: bool) -> str:
    return "met" if met else "NOT met"


def _server_us_per_message(result: Result) -> float | None:
    cpu_s, messages = result.get("server_cpu_s"), int(result.get("messages") or 0)
    return None if cpu_s is None or not messages else float(cpu_s) / messages * 1e6


def _rate_line(workload: str, flush: str, ours: Result, peers: list[Result]) -> str:
    goal = THROUGHPUT_GOAL_RATIOS.get((workload, flush))
    best = max(peers, key=lambda r: float(r["msgs_per_s"]))
    ratio = float(ours["msgs_per_s"]) / max(float(best["msgs_per_s"]), 1e-9)
    verdict = "no goal" if goal is None else f"goal >= {goal:g}x: {_verdict(ratio >= goal)}"
    return (
        f"{workload} {flush}: Bolide {ours['msgs_per_s']:,.0f} msgs/s = {ratio:.2f}x the best"
        f" peer ({best['system']} {best['msgs_per_s']:,.0f}); {verdict}"
    )


def _p99_line(workload: str, flush: str, ours: Result, peers: list[Result]) -> str | None:
    p99 = _p99_ms(ours)
    timed = [(peer, peer_p99) for peer in peers if (peer_p99 := _p99_ms(peer))]
    if p99 is None or not timed:
        return None
    best, best_p99 = min(timed, key=lambda pair: pair[1])
    ratio = p99 / best_p99
    at = f" at {ours.get('rate_per_s')} msg/s" if workload == "e2e" else ""
    return (
        f"{workload} {flush} p99: Bolide {p99:.2f} ms{at} = {ratio:.2f}x the best peer's"
        f" ({best['system']} {best_p99:.2f} ms); goal <= {P99_GOAL_RATIO:g}x:"
        f" {_verdict(ratio <= P99_GOAL_RATIO)}"
    )


def _server_cpu_line(ours: Result, peers: list[Result]) -> str | None:
    peer = next((r for r in peers if r["system"] == SERVER_CPU_PEER), None)
    ours_us = _server_us_per_message(ours)
    peer_us = None if peer is None else _server_us_per_message(peer)
    if ours_us is None or not peer_us:
        return None
    ratio = ours_us / peer_us
    return (
        f"produce async server CPU: Bolide {ours_us:.1f} us/msg = {ratio:.2f}x"
        f" {SERVER_CPU_PEER}'s ({peer_us:.1f} us/msg); goal <= {SERVER_CPU_GOAL_RATIO:g}x:"
        f" {_verdict(ratio <= SERVER_CPU_GOAL_RATIO)}"
    )


def goal_lines(results: list[Result]) -> list[str]:
    """Bolide against issue 27's goals, per (workload, flush): the rate ratio (produce,
    consume), the p99 ratio (produce, e2e) and the broker CPU ratio (ASYNC produce), each to
    the best peer of the same run."""
    lines: list[str] = []
    groups = sorted(
        {(r["workload"], r["flush"]) for r in results},
        key=lambda g: (WORKLOAD_ORDER.index(g[0]) if g[0] in WORKLOAD_ORDER else 9, g[1]),
    )
    for workload, flush in groups:
        group = [r for r in results if (r["workload"], r["flush"]) == (workload, flush)]
        ours = next((r for r in group if r["system"] == BOLIDE), None)
        peers = [r for r in group if r["system"] != BOLIDE]
        if ours is None:
            lines.append(f"{workload} {flush}: no Bolide result")
            continue
        if not peers:
            lines.append(f"{workload} {flush}: no peer result")
            continue
        if workload != "e2e":
            lines.append(_rate_line(workload, flush, ours, peers))
        if workload in ("produce", "e2e"):
            line = _p99_line(workload, flush, ours, peers)
            lines.append(line or f"{workload} {flush} p99: no latency to compare")
        if (workload, flush) == ("produce", "async"):
            line = _server_cpu_line(ours, peers)
            lines.append(line or f"produce async server CPU: no {SERVER_CPU_PEER} CPU figure")
    return lines


def render(rows: list[list[str]], markdown: bool) -> str:
    """The rows under COLUMNS, as aligned text or as a Markdown table."""
    if markdown:
        lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        return "\n".join(lines)
    widths = [max(len(cell) for cell in column) for column in zip(COLUMNS, *rows, strict=False)]
    text_rows = [list(COLUMNS), *rows]
    return "\n".join(
        "  ".join(
            cell.ljust(width) if index < 4 else cell.rjust(width)
            for index, (cell, width) in enumerate(zip(row, widths, strict=True))
        )
        for row in text_rows
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("results", nargs="+", type=Path)
    parser.add_argument("--markdown", action="store_true")
    arguments = parser.parse_args()
    results, notes = read_results(arguments.results)
    print(render(build_rows(results), arguments.markdown))
    prefix = "* " if arguments.markdown else ""
    if results:
        print()
        for line in goal_lines(results):
            print(f"{prefix}goal {line}")
    for note in notes:
        print(f"{prefix}note: {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
