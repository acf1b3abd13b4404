"""The Kafka source's options over real Spark and a real broker: minPartitions and
maxRecordsPerPartition (tasks per queue range), startingOffsetsByTimestamp /
endingOffsetsByTimestamp (per queue), subscribePattern (new matching topics picked up by a
running pipeline), and bad values refused when the read is defined."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.functions import spark_partition_id

from bolide.base.clock import ManualClock
from bolide.client.message import Message
from tests.spark.conftest import BROKER_NAME, WAIT_S, BackgroundCluster, rows_of

START_MS = 1_800_000_000_000


def _messages(topic: str, count: int, start: int = 0) -> list[Message]:
    return [
        Message(topic, f"{topic}-{n}".encode(), keys=f"k{n}") for n in range(start, start + count)
    ]


def _rows_per_task(frame: DataFrame) -> list[int]:
    counts = frame.groupBy(spark_partition_id().alias("task")).count().collect()
    return sorted(row["count"] for row in counts)


def test_min_partitions_and_max_records_split_a_queue_across_tasks(
    spark: SparkSession, cluster: BackgroundCluster
) -> None:
    cluster.create_topic("wide", 2)
    sent = cluster.produce(_messages("wide", 90), sharding_keys=False)
    per_queue = Counter(result.queue.queue_id for result in sent)
    base = (
        spark.read.format("bolide")
        .option("namesrv", cluster.namesrv_address)
        .option("topic", "wide")
    )
    assert _rows_per_task(base.load()) == sorted(per_queue.values())

    split = base.option("minPartitions", "6").load()
    tasks = _rows_per_task(split)
    assert len(tasks) == 6 and sum(tasks) == 90
    rows = rows_of(split)
    assert sorted(row["msg_id"] for row in rows) == sorted(result.msg_id for result in sent)

    capped = base.option("maxRecordsPerPartition", "10").load()
    tasks = _rows_per_task(capped)
    assert max(tasks) <= 10 and sum(tasks) == 90
    assert len(tasks) == sum(-(-count // 10) for count in per_queue.values())

    for option, value, message in (
        ("minPartitions", "0", "option minPartitions must be at least 1"),
        ("startingOffsetsByTimestamp", '{"wide": {"b": {"0": -5}}}', "ms since the epoch"),
    ):
        with pytest.raises(PySparkException, match=message):
            base.option(option, value).load()


def test_offsets_by_timestamp_per_queue(spark: SparkSession, tmp_path: Path) -> None:
    cluster = BackgroundCluster(tmp_path, broker_clock=ManualClock(start_ms=START_MS))
    cluster.start()
    try:
        cluster.create_topic("timed", 2)
        early = cluster.produce(_messages("timed", 20))
        cluster.advance_broker_clock(60_000)
        middle = cluster.produce(_messages("timed", 20, start=20))
        cluster.advance_broker_clock(60_000)
        late = cluster.produce(_messages("timed", 20, start=40))
        # Queue 0 from the middle minute to its end; queue 1 (not named in the starting
        # times) from startingOffsets, up to the middle minute's start.
        frame = (
            spark.read.format("bolide")
            .option("namesrv", cluster.namesrv_address)
            .option("topic", "timed")
            .option("startingOffsets", "earliest")
            .option(
                "startingOffsetsByTimestamp",
                f'{{"timed": {{"{BROKER_NAME}": {{"0": {START_MS + 30_000}}}}}}}',
            )
            .option(
                "endingOffsetsByTimestamp",
                f'{{"timed": {{"{BROKER_NAME}": {{"1": {START_MS + 30_000}}}}}}}',
            )
            .load()
        )
        got = sorted(row["msg_id"] for row in rows_of(frame))
        expected = [r.msg_id for r in middle + late if r.queue.queue_id == 0]
        expected += [r.msg_id for r in early if r.queue.queue_id == 1]
        assert got == sorted(expected)
    finally:
        cluster.stop()


def _pattern_run(
    spark: SparkSession, cluster: BackgroundCluster, root: Path
) -> list[dict[str, Any]]:
    stream = (
        spark.readStream.format("bolide")
        .option("namesrv", cluster.namesrv_address)
        .option("subscribePattern", "clicks-.*")
        .option("startingOffsets", "earliest")
        .option("maxMessagesPerTrigger", "15")
        .load()
    )
    query = (
        stream.selectExpr("topic", "msg_id")
        .writeStream.format("parquet")
        .option("path", str(root / "out"))
        .option("checkpointLocation", str(root / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(int(WAIT_S)), "the availableNow query did not finish"
    assert query.exception() is None
    assert max(int(p["numInputRows"]) for p in query.recentProgress) <= 15
    return [row.asDict() for row in spark.read.parquet(str(root / "out")).collect()]


def test_subscribe_pattern_picks_up_new_matching_topics(
    spark: SparkSession, cluster: BackgroundCluster, tmp_path: Path
) -> None:
    cluster.create_topic("clicks-eu", 2)
    cluster.create_topic("views-eu", 1)
    first = cluster.produce(_messages("clicks-eu", 25))
    cluster.produce(_messages("views-eu", 5))
    rows = _pattern_run(spark, cluster, tmp_path)
    assert sorted(row["msg_id"] for row in rows) == sorted(r.msg_id for r in first)

    cluster.create_topic("clicks-us", 2)
    second = cluster.produce(_messages("clicks-us", 20) + _messages("clicks-eu", 5, start=25))
    rows = _pattern_run(spark, cluster, tmp_path)
    counts = Counter(row["msg_id"] for row in rows)
    assert set(counts) == {r.msg_id for r in first + second}
    assert set(counts.values()) == {1}
    assert {row["topic"] for row in rows} == {"clicks-eu", "clicks-us"}
