"""Streaming reads through Spark (Trigger.AvailableNow): checkpoints, restarts, trigger limits,
new queues and the group's recorded progress."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from bolide.client.message import Message
from tests.spark.conftest import WAIT_S, BackgroundCluster


def _messages(topic: str, start: int, count: int) -> list[Message]:
    return [
        Message(topic, f"m{n}".encode(), keys=f"key-{n % 7}") for n in range(start, start + count)
    ]


def _run_to_files(
    spark: SparkSession,
    cluster: BackgroundCluster,
    topic: str,
    root: Path,
    **options: str,
) -> StreamingQuery:
    stream = (
        spark.readStream.format("bolide")
        .option("namesrv", cluster.namesrv_address)
        .option("topic", topic)
        .option("startingOffsets", "earliest")
        .options(**options)
        .load()
    )
    query = (
        stream.selectExpr("msg_id", "queue_id", "queue_offset", "cast(body as string) AS body")
        .writeStream.format("parquet")
        .option("path", str(root / "out"))
        .option("checkpointLocation", str(root / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(int(WAIT_S)), "the availableNow query did not finish"
    assert query.exception() is None
    return query


def _input_rows(query: StreamingQuery) -> list[int]:
    return [int(progress["numInputRows"]) for progress in query.recentProgress]


def _output(spark: SparkSession, root: Path) -> list[dict[str, Any]]:
    return [row.asDict() for row in spark.read.parquet(str(root / "out")).collect()]


def test_restart_from_checkpoint_reads_every_message_exactly_once(
    spark: SparkSession, cluster: BackgroundCluster, tmp_path: Path
) -> None:
    cluster.create_topic("clicks", 3)
    first = cluster.produce(_messages("clicks", 0, 60), sharding_keys=True)
    query = _run_to_files(spark, cluster, "clicks", tmp_path, maxMessagesPerTrigger="25")
    batches = _input_rows(query)
    assert sum(batches) == 60
    assert max(batches) <= 25, f"maxMessagesPerTrigger exceeded: {batches}"
    assert len([rows for rows in batches if rows]) >= 3
    assert sorted(row["msg_id"] for row in _output(spark, tmp_path)) == sorted(
        result.msg_id for result in first
    )

    second = cluster.produce(_messages("clicks", 60, 45), sharding_keys=True)
    query = _run_to_files(spark, cluster, "clicks", tmp_path, maxMessagesPerTrigger="25")
    assert sum(_input_rows(query)) == 45
    rows = _output(spark, tmp_path)
    counts = Counter(row["msg_id"] for row in rows)
    expected = {result.msg_id for result in first + second}
    assert set(counts) == expected
    assert set(counts.values()) == {1}, "a message appeared twice in the output"
    by_id = {result.msg_id: result for result in first + second}
    for row in rows:
        result = by_id[row["msg_id"]]
        assert (row["queue_id"], row["queue_offset"]) == (
            result.queue.queue_id,
            result.queue_offset,
        )


def test_new_queues_are_read_from_their_start_and_the_group_records_progress(
    spark: SparkSession, cluster: BackgroundCluster, tmp_path: Path
) -> None:
    cluster.create_topic("grow", 2)
    before = cluster.produce(_messages("grow", 0, 20), sharding_keys=True)
    _run_to_files(spark, cluster, "grow", tmp_path, group="grow-pipeline")
    cluster.create_topic("grow", 4)
    after = cluster.produce(_messages("grow", 20, 40), sharding_keys=True)
    assert {result.queue.queue_id for result in after} >= {2, 3}
    _run_to_files(spark, cluster, "grow", tmp_path, group="grow-pipeline")
    rows = _output(spark, tmp_path)
    assert sorted(row["msg_id"] for row in rows) == sorted(r.msg_id for r in before + after)

    # The source's commit runs one batch late: the first run's batches are committed by now.
    committed = cluster.committed_offsets("grow", "grow-pipeline", 4)
    first_ends = Counter(result.queue.queue_id for result in before)
    for queue_id, count in first_ends.items():
        offset = committed[queue_id]
        assert offset is not None and offset >= count
