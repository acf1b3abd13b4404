"""examples/orders_pipeline.py end to end: orders in, revenue per closed minute out, on both
sinks (Parquet and a Bolide topic)."""

from __future__ import annotations

import importlib.util
import json
from collections import defaultdict
from pathlib import Path
from types import ModuleType

from pyspark.sql import SparkSession

from tests.spark.conftest import WAIT_S, BackgroundCluster, rows_of

START_MS = 1_800_000_000_000 // 60_000 * 60_000


def _pipeline_module() -> ModuleType:
    path = Path(__file__).resolve().parents[2] / "examples" / "orders_pipeline.py"
    spec = importlib.util.spec_from_file_location("orders_pipeline", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_orders_pipeline_computes_revenue_per_closed_minute(
    spark: SparkSession, cluster: BackgroundCluster, tmp_path: Path
) -> None:
    pipeline = _pipeline_module()
    cluster.create_topic(pipeline.ORDERS_TOPIC, 4)
    orders = pipeline.order_events(300, START_MS, minutes=5)
    pipeline.produce_orders(cluster.namesrv_address, orders)

    revenue = pipeline.revenue_per_minute(spark, cluster.namesrv_address)
    queries = pipeline.start_sinks(revenue, cluster.namesrv_address, tmp_path, available_now=True)
    for query in queries:
        assert query.awaitTermination(WAIT_S), "the pipeline did not finish"
        assert query.exception() is None

    expected: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    for order in orders:
        minute = order["event_time_ms"] // 60_000 * 60_000
        expected[minute][0] += order["amount_cents"]
        expected[minute][1] += 1
    # The watermark trails the newest event by a minute: only windows that end before it are
    # closed, and append mode emits closed windows only.
    watermark_ms = max(order["event_time_ms"] for order in orders) - 60_000
    closed = {
        minute: figures for minute, figures in expected.items() if minute + 60_000 <= watermark_ms
    }
    assert len(closed) >= 3

    parquet = spark.read.parquet(str(tmp_path / "revenue")).collect()
    from_parquet = {
        int(row["minute_start"].timestamp() * 1000): [row["revenue_cents"], row["orders"]]
        for row in parquet
    }
    assert from_parquet == closed

    messages = rows_of(
        spark.read.format("bolide")
        .option("namesrv", cluster.namesrv_address)
        .option("topic", pipeline.REVENUE_TOPIC)
        .load()
    )
    from_bolide = {}
    for message in messages:
        document = json.loads(message["body"])
        assert message["tags"] == "revenue"
        assert message["keys"] == document["minute"][:16]
        from_bolide[document["minute"]] = [document["revenue_cents"], document["orders"]]
    assert sorted(from_bolide.values()) == sorted(closed.values())
