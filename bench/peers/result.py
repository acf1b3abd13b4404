"""The common result format (one JSON object per run) and the recorders that fill it.

The format is the contract between ``bolide bench`` and compare.sh; README.md beside this file
describes it field by field. :func:`parse_result` is the one reader compare.sh uses, for
Bolide's output and the peers' alike.
"""

from __future__ import annotations

import json
from typing import Any

from bolide.base import limits

# The recorder, the latency summary and the schema are Bolide's own (``bolide bench``): one
# definition, so the two sides of a comparison cannot drift apart.
from bolide.bench.runtime import (
    MIB,
    RESULT_SCHEMA,
    LatencyRecorder,
    LatencySummary,
    RunResult,
    process_tree_cpu_s,
)

__all__ = [
    "LATENCY_SAMPLES_MAX",
    "MIB",
    "RESULT_SCHEMA",
    "LatencyRecorder",
    "LatencySummary",
    "RunResult",
    "parse_result",
    "process_tree_cpu_s",
    "throughput",
]

LATENCY_SAMPLES_MAX = limits.BENCH_LATENCY_SAMPLES_MAX_COUNT
"""Samples a recorder keeps; later ones are counted in ``dropped`` (one bound with ``bolide
bench``, which writes the same result lines)."""


def throughput(messages: int, message_bytes: int, elapsed_s: float) -> tuple[float, float]:
    """(msgs/s, MiB/s) of ``messages`` bodies of ``message_bytes`` in ``elapsed_s`` seconds."""
    if elapsed_s <= 0:
        return 0.0, 0.0
    return messages / elapsed_s, messages * message_bytes / MIB / elapsed_s


def parse_result(line: str) -> dict[str, Any]:
    """The result object in one line of a bench's output.

    Raises:
        ValueError: the line is not a JSON object of schema ``RESULT_SCHEMA`` with the fields
            the table needs.
    """
    try:
        value = json.loads(line)
    except json.JSONDecodeError as error:
        raise ValueError(f"not JSON: {line[:80]!r}") from error
    if not isinstance(value, dict) or value.get("schema") != RESULT_SCHEMA:
        raise ValueError(f"not a {RESULT_SCHEMA} object: {line[:80]!r}")
    for field in ("system", "workload", "flush", "msgs_per_s", "mib_per_s"):
        if field not in value:
            raise ValueError(f"result has no {field!r}: {line[:80]!r}")
    return value
