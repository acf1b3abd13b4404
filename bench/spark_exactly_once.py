"""The exactly-once sink under driver kills, ten seeded times (CI runs two).

Runs ``tests/spark/test_exactly_once.py`` with ``BOLIDE_SPARK_EO_SEEDS`` seeds: each starts a
Spark driver (its own process) copying a topic with ``exactlyOnce=true``, SIGKILLs it after
a seeded number of recorded batches, restarts it from its checkpoint and checks that the
target topic holds every input row exactly once. Each seed costs two JVM starts (≈ 1-2 min
on a loaded 2-core machine).

    .venv/bin/python bench/spark_exactly_once.py [--seeds 10]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    arguments = parser.parse_args()
    environment = {**os.environ, "BOLIDE_SPARK_EO_SEEDS": str(arguments.seeds),
                   "PYTHONPATH": f"{ROOT / 'src'}:{ROOT}"}  # fmt: skip
    command = [sys.executable, "-m", "pytest", "-q", "tests/spark/test_exactly_once.py"]
    return subprocess.call(command, cwd=ROOT, env=environment)


if __name__ == "__main__":
    sys.exit(main())
