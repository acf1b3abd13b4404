"""Example pipeline: order events on a Bolide topic -> revenue per minute, on Spark.

Order events (JSON) are produced to the topic ``orders``. A streaming job reads them with the
Bolide source, sums the revenue of each one-minute event-time window (a watermark of one minute
lets late orders in and closes windows for good), and writes every closed window twice: back to
Bolide, as JSON messages on ``revenue-per-minute``, and to Parquet files.

Run it against ``bolide standalone`` (see docs/spark.md, "Example pipeline")::

    bolide standalone --data-dir ./data            # bolide ready namesrv=127.0.0.1:9876 ...
    python examples/orders_pipeline.py produce --namesrv 127.0.0.1:9876 --orders 5000
    python examples/orders_pipeline.py run --namesrv 127.0.0.1:9876 --work-dir ./pipeline \\
        --available-now                             # then read ./pipeline/revenue with Spark

Without ``--available-now`` the job runs until interrupted, a micro-batch every 10 s.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ORDERS_TOPIC = "orders"
REVENUE_TOPIC = "revenue-per-minute"
ORDER_SCHEMA = "order_id string, customer string, amount_cents long, event_time_ms long"
"""The JSON of one order event: the amount in cents keeps the sums exact."""
MINUTE_MS = 60_000


def order_events(
    count: int, start_ms: int, *, minutes: int = 5, seed: int = 17
) -> list[dict[str, Any]]:
    """``count`` made-up orders spread over ``minutes`` minutes from ``start_ms`` (ms since the
    epoch), in a shuffled arrival order (events arrive out of order, as they do)."""
    generator = random.Random(seed)
    orders = [
        {
            "order_id": f"order-{number}",
            "customer": f"customer-{generator.randrange(50)}",
            "amount_cents": generator.randrange(100, 20_000),
            "event_time_ms": start_ms + generator.randrange(minutes * MINUTE_MS),
        }
        for number in range(count)
    ]
    generator.shuffle(orders)
    return orders


def produce_orders(
    namesrv: str, orders: Sequence[dict[str, Any]], topic: str = ORDERS_TOPIC
) -> None:
    """Send ``orders`` to ``topic``, each customer's orders to one queue (orderly by customer)."""
    import bolide

    with bolide.Producer("orders-producer", namesrv=namesrv) as producer:
        for order in orders:
            message = bolide.Message(
                topic, json.dumps(order).encode(), tags="order", keys=order["order_id"]
            )
            producer.send_orderly(message, order["customer"])


def revenue_per_minute(spark: Any, namesrv: str, topic: str = ORDERS_TOPIC) -> Any:
    """The streaming DataFrame of closed one-minute windows: minute_start, minute_end,
    revenue_cents, orders."""
    from pyspark.sql import functions as sf

    orders = (
        spark.readStream.format("bolide")
        .option("namesrv", namesrv)
        .option("topic", topic)
        .option("startingOffsets", "earliest")
        .option("group", "revenue-pipeline")
        .load()
        .select(sf.from_json(sf.col("body").cast("string"), ORDER_SCHEMA).alias("order"))
        .select("order.*")
        .withColumn("event_time", sf.timestamp_millis(sf.col("event_time_ms")))
    )
    return (
        orders.withWatermark("event_time", "1 minute")
        .groupBy(sf.window("event_time", "1 minute"))
        .agg(sf.sum("amount_cents").alias("revenue_cents"), sf.count("*").alias("orders"))
        .select(
            sf.col("window.start").alias("minute_start"),
            sf.col("window.end").alias("minute_end"),
            "revenue_cents",
            "orders",
        )
    )


def start_sinks(
    revenue: Any, namesrv: str, work_dir: Path, *, available_now: bool, topic: str = REVENUE_TOPIC
) -> list[Any]:
    """Start the two sinks of ``revenue``: the Bolide topic ``topic`` and Parquet files under
    ``work_dir/revenue``; checkpoints go under ``work_dir/checkpoints``."""
    from pyspark.sql import functions as sf

    def triggered(writer: Any) -> Any:
        if available_now:
            return writer.trigger(availableNow=True)
        return writer.trigger(processingTime="10 seconds")

    as_messages = revenue.select(
        sf.to_json(
            sf.struct(
                sf.date_format("minute_start", "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("minute"),
                "revenue_cents",
                "orders",
            )
        ).alias("body"),
        sf.date_format("minute_start", "yyyy-MM-dd'T'HH:mm").alias("keys"),
        sf.lit("revenue").alias("tags"),
    )
    to_bolide = triggered(
        as_messages.writeStream.format("bolide")
        .outputMode("append")
        .option("namesrv", namesrv)
        .option("topic", topic)
        .option("checkpointLocation", str(work_dir / "checkpoints" / "bolide"))
    ).start()
    to_parquet = triggered(
        revenue.writeStream.format("parquet")
        .outputMode("append")
        .option("path", str(work_dir / "revenue"))
        .option("checkpointLocation", str(work_dir / "checkpoints" / "parquet"))
    ).start()
    return [to_bolide, to_parquet]


def spark_session() -> Any:
    """A local session with the Bolide source registered (workers use this interpreter)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    from bolide.spark import BolideDataSource

    spark = (
        SparkSession.builder.master("local[*]")
        .appName("orders-pipeline")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "4")
        .getOrCreate()
    )
    spark.dataSource.register(BolideDataSource)
    return spark


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    produce = commands.add_parser("produce", help="send made-up order events")
    produce.add_argument("--namesrv", default="127.0.0.1:9876")
    produce.add_argument("--orders", type=int, default=1_000)
    run = commands.add_parser("run", help="run the revenue-per-minute job")
    run.add_argument("--namesrv", default="127.0.0.1:9876")
    run.add_argument("--work-dir", type=Path, default=Path("pipeline"))
    run.add_argument("--available-now", action="store_true", help="process what is there, stop")
    arguments = parser.parse_args(argv)
    if arguments.command == "produce":
        import time

        start_ms = (int(time.time() * 1000) // MINUTE_MS - 5) * MINUTE_MS
        produce_orders(arguments.namesrv, order_events(arguments.orders, start_ms))
        print(f"sent {arguments.orders} orders to {ORDERS_TOPIC}")
        return 0
    spark = spark_session()
    revenue = revenue_per_minute(spark, arguments.namesrv)
    queries = start_sinks(
        revenue, arguments.namesrv, arguments.work_dir, available_now=arguments.available_now
    )
    for query in queries:
        query.awaitTermination()
    print(f"revenue per minute in {arguments.work_dir / 'revenue'} and on {REVENUE_TOPIC}")
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
