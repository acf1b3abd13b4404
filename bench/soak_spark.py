"""The soak's Spark streaming query: the ``bolide`` data source reading one soak topic for the
whole run into a memory sink, its progress sampled with the soak's other figures.

Spark's calls block (they talk to the JVM), so the soak calls these from a worker thread.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LOOPBACK = "127.0.0.1"
QUERY_NAME = "soak_spark"
TRIGGER_INTERVAL = "5 seconds"
"""Micro-batch period: a few batches per minute sample, light on a shared machine."""
STOP_TIMEOUT_S = 120
"""Bound on waiting for the query to end after stop() (a hang fails the soak, not the host)."""


@dataclass
class SparkProgress:
    rows: int
    """Rows the query processed since it started (sum of numInputRows over its batches)."""
    batches: int
    last_batch_ms: float
    """Duration of the latest micro-batch (triggerExecution), 0 before the first."""
    max_batch_ms: float
    """Longest micro-batch in Spark's retained progress window (the last 100 batches)."""
    error: str
    """Why the query died, empty while it runs."""

    def __str__(self) -> str:
        state = f" error={self.error}" if self.error else ""
        return (
            f"spark rows={self.rows} batches={self.batches} "
            f"last_batch_ms={self.last_batch_ms:.0f} max_batch_ms={self.max_batch_ms:.0f}{state}"
        )


class SparkStream:
    """A local[1] SparkSession and one streaming query on ``topic`` (from its earliest offset).

    Raises ImportError when pyspark is not installed; Spark's own errors when Java is missing.
    """

    def __init__(self, namesrv: str, topic: str, checkpoint: Path) -> None:
        self.namesrv = namesrv
        self.topic = topic
        self.checkpoint = checkpoint
        self.session: Any = None
        self.query: Any = None
        self.rows = 0
        self.batches = 0
        self.seen_batch_ids: set[int] = set()

    def start(self) -> None:
        from pyspark.sql import SparkSession

        from bolide.spark import BolideDataSource

        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("SPARK_LOCAL_IP", LOOPBACK)
        self.session = (
            SparkSession.builder.master("local[1]")
            .appName("bolide-soak")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.driver.host", LOOPBACK)
            .config("spark.driver.bindAddress", LOOPBACK)
            .config("spark.sql.shuffle.partitions", "1")
            .getOrCreate()
        )
        self.session.sparkContext.setLogLevel("ERROR")
        self.session.dataSource.register(BolideDataSource)
        stream = (
            self.session.readStream.format("bolide")
            .option("namesrv", self.namesrv)
            .option("topic", self.topic)
            .option("startingOffsets", "earliest")
            .load()
        )
        self.query = (
            stream.select("msg_id", "queue_offset")
            .writeStream.format("memory")
            .queryName(QUERY_NAME)
            .option("checkpointLocation", str(self.checkpoint))
            .trigger(processingTime=TRIGGER_INTERVAL)
            .start()
        )

    def progress(self) -> SparkProgress:
        """Fold the batches Spark reported since the last call into the running totals."""
        recent = list(self.query.recentProgress)
        for report in recent:
            batch_id = int(report["batchId"])
            if batch_id not in self.seen_batch_ids:
                self.seen_batch_ids.add(batch_id)
                self.rows += int(report.get("numInputRows", 0))
                self.batches += 1
        durations = [float(r.get("durationMs", {}).get("triggerExecution", 0)) for r in recent]
        error = self.query.exception()
        return SparkProgress(
            rows=self.rows,
            batches=self.batches,
            last_batch_ms=durations[-1] if durations else 0.0,
            max_batch_ms=max(durations, default=0.0),
            error="" if error is None else str(error).splitlines()[0],
        )

    def distinct_rows(self) -> int:
        """Distinct message ids the memory sink holds (duplicates would be a replay defect)."""
        return int(self.session.sql(f"SELECT COUNT(DISTINCT msg_id) FROM {QUERY_NAME}").first()[0])

    def stop(self) -> tuple[SparkProgress, int]:
        """Stop the query (bounded), then the session; the final progress and distinct ids."""
        final = self.progress()
        distinct = 0
        try:
            self.query.stop()
            self.query.awaitTermination(STOP_TIMEOUT_S)
            final = self.progress()
            distinct = self.distinct_rows()
        finally:
            self.session.stop()
        return final, distinct
