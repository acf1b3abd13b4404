"""consumeMode=pop at size: two streaming queries and a 5.x SDK consumer share 30,000
messages of one group; one query (a driver process of its own) is SIGKILLed mid-batch and its
unacknowledged messages come back to the others (the scenario of ``tests/spark/pop_share.py``,
which ``tests/spark/test_pop_share.py`` runs with 1,500).

Prints who took how many, the messages lost (must be 0), delivered twice (at-least-once:
only ones the killed query had), delivered again after the kill, the seconds from the first
query's start to the last message, and the load average.

    .venv/bin/python bench/spark_pop.py [--messages 30000] [--per-trigger 1000]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=30_000)
    parser.add_argument("--per-trigger", type=int, default=1_000)
    parser.add_argument("--invisible-s", type=int, default=60)
    parser.add_argument("--wait-s", type=float, default=1_800.0)
    arguments = parser.parse_args()
    sys.path[:0] = [str(ROOT / "src"), str(ROOT)]
    os.environ["PYTHONPATH"] = f"{ROOT / 'src'}:{ROOT}"
    from tests.spark.drivers import local_session
    from tests.spark.pop_share import share

    spark = local_session("bolide-pop-bench", cores=1)
    load_before = os.getloadavg()[0]
    try:
        with tempfile.TemporaryDirectory() as directory:
            shared = share(spark, Path(directory), arguments.messages,
                           per_trigger=arguments.per_trigger, invisible_s=arguments.invisible_s,
                           wait_s=arguments.wait_s)  # fmt: skip
    finally:
        spark.stop()
    everyone = shared.everyone
    lost = arguments.messages - len(everyone)
    twice = {body for body, count in everyone.items() if count > 1}
    not_killed = len(twice - set(shared.killed_query))
    print(
        f"messages {arguments.messages}: killed query {shared.killed_query.total()}, live "
        f"query {shared.live_query.total()}, SDK consumer {shared.sdk.total()}"
    )
    print(
        f"lost {lost}; delivered twice {len(twice)} (of which not the killed query's: "
        f"{not_killed}); delivered again after the kill {shared.came_back}"
    )
    print(f"{shared.seconds:.0f} s from the first query's start to the last message; load "
          f"average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after")  # fmt: skip
    return 0 if lost == 0 and not_killed == 0 and shared.came_back > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
