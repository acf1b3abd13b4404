"""A Spark driver for the POP sharing test and bench, run as its own process (so it can be
SIGKILLed mid-batch): reads ``--topic`` with ``consumeMode=pop`` in ``--group`` and writes
every row's body and msg_id as JSON files under ``--output`` (a file sink: what it committed
survives the kill), from the checkpoint ``--checkpoint``, until killed.

    python -m tests.spark.pop_driver --namesrv H:P --topic T --group G --output DIR \\
        --checkpoint DIR [--per-trigger N] [--invisible-time 5s]
"""

from __future__ import annotations

import argparse
import sys

from tests.spark.drivers import local_session


def main() -> int:
    parser = argparse.ArgumentParser()
    for name in ("--namesrv", "--topic", "--group", "--output", "--checkpoint"):
        parser.add_argument(name, required=True)
    parser.add_argument("--per-trigger", default="100")
    parser.add_argument("--invisible-time", default="5s")
    args = parser.parse_args()
    spark = local_session("bolide-pop-share", cores=1)
    query = (
        spark.readStream.format("bolide")
        .option("namesrv", args.namesrv)
        .option("topic", args.topic)
        .option("consumeMode", "pop")
        .option("group", args.group)
        .option("maxMessagesPerTrigger", args.per_trigger)
        .option("invisibleTime", args.invisible_time)
        .load()
        .selectExpr("cast(body AS string) AS body", "msg_id", "reconsume_times")
        .writeStream.format("json")
        .option("path", args.output)
        .option("checkpointLocation", args.checkpoint)
        .start()
    )
    print("pop query started", flush=True)
    query.awaitTermination()
    return 0


if __name__ == "__main__":
    sys.exit(main())
