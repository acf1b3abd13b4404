"""Fuzz the Prometheus /metrics HTTP listener (issue 30; the requests: bench/fuzz_http.py).

The exposition path and its neighbours, mutated (methods, long and invalid URLs, query
strings such as ``name[]=``, headers, bodies), raw garbage and slow or cut writes. The
liveness check is ``GET /metrics`` answered 200 with rocketmq_ series in it.

    .venv/bin/python bench/fuzz_metrics.py [--seconds 60] [--seed 1] [--requests N]
"""

from __future__ import annotations

import random
import sys

from bench.fuzz_http import HttpTarget, http_attack, http_get, status_of
from bench.fuzz_support import Fuzzer, ServerUnderTest, main

__all__ = ["FUZZER", "attack", "liveness"]

_target = HttpTarget(
    "metrics", ("/metrics", "/", "/metrics?name[]=rocketmq_brokeruptime", "/favicon.ico"),
    ("name[]",),
)  # fmt: skip


async def attack(server: ServerUnderTest, rng: random.Random, budget: int) -> int:
    return await http_attack(_target, server, rng, budget)


async def liveness(server: ServerUnderTest) -> bool:
    answer = await http_get(server, "metrics", "/metrics")
    return status_of(answer) == 200 and b"rocketmq_" in answer


FUZZER = Fuzzer("metrics", attack, liveness)
"""What ``python bench/fuzz_metrics.py`` and tests/fuzz/ run."""

if __name__ == "__main__":
    sys.exit(main(FUZZER))
