"""A Spark driver for the exactly-once tests, run as its own process (so a test can SIGKILL
it mid-batch): copies topic ``--source`` to ``--target`` with the exactly-once sink, under
Trigger.AvailableNow, from the checkpoint ``--checkpoint``.

    python -m tests.spark.exactly_once_driver --namesrv H:P --source in --target out \\
        --checkpoint DIR [--per-trigger N]
"""

from __future__ import annotations

import argparse
import sys

from tests.spark.drivers import local_session


def main() -> int:
    parser = argparse.ArgumentParser()
    for name in ("--namesrv", "--source", "--target", "--checkpoint"):
        parser.add_argument(name, required=True)
    parser.add_argument("--per-trigger", default="40")
    args = parser.parse_args()
    spark = local_session("bolide-exactly-once", cores=2)
    stream = (
        spark.readStream.format("bolide")
        .option("namesrv", args.namesrv)
        .option("topic", args.source)
        .option("startingOffsets", "earliest")
        .option("maxMessagesPerTrigger", args.per_trigger)
        .load()
    )
    query = (
        stream.select("body", "keys")
        .writeStream.format("bolide")
        .option("namesrv", args.namesrv)
        .option("topic", args.target)
        .option("exactlyOnce", "true")
        .option("checkpointLocation", args.checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    spark.stop()
    print("exactly-once copy finished", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
