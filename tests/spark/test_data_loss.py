"""failOnDataLoss, both ways: retention deleted the messages where reading was to start."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.errors import PySparkException, StreamingQueryException
from pyspark.sql import SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from bolide.client.message import SendResult
from tests.spark.conftest import AGED_TOPIC as TOPIC
from tests.spark.conftest import BROKER_NAME, WAIT_S, BackgroundCluster

FROM_ZERO = json.dumps({TOPIC: {BROKER_NAME: {"0": 0}}})


def _stream(
    spark: SparkSession, cluster: BackgroundCluster, root: Path, fail: str
) -> StreamingQuery:
    stream = (
        spark.readStream.format("bolide")
        .option("namesrv", cluster.namesrv_address)
        .option("topic", TOPIC)
        .option("startingOffsets", FROM_ZERO)
        .option("failOnDataLoss", fail)
        .load()
    )
    return (
        stream.select("msg_id", "queue_offset")
        .writeStream.format("parquet")
        .option("path", str(root / "out"))
        .option("checkpointLocation", str(root / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )


def test_streaming_fails_when_retention_deleted_the_start(
    spark: SparkSession, aged: tuple[BackgroundCluster, list[SendResult], int], tmp_path: Path
) -> None:
    cluster, _, min_offset = aged
    query = _stream(spark, cluster, tmp_path, "true")
    with pytest.raises(StreamingQueryException, match="deleted \\(retention\\)") as caught:
        query.awaitTermination(int(WAIT_S))
    assert f"0..{min_offset - 1}" in str(caught.value)
    assert "failOnDataLoss=false" in str(caught.value)


def test_streaming_skips_lost_messages_when_told_to(
    spark: SparkSession, aged: tuple[BackgroundCluster, list[SendResult], int], tmp_path: Path
) -> None:
    cluster, sent, min_offset = aged
    query = _stream(spark, cluster, tmp_path, "false")
    assert query.awaitTermination(int(WAIT_S))
    rows = spark.read.parquet(str(tmp_path / "out")).collect()
    assert sorted(row["queue_offset"] for row in rows) == list(range(min_offset, len(sent)))
    assert {row["msg_id"] for row in rows} == {r.msg_id for r in sent[min_offset:]}


def test_batch_read_both_ways(
    spark: SparkSession, aged: tuple[BackgroundCluster, list[SendResult], int]
) -> None:
    cluster, sent, min_offset = aged
    reader = (
        spark.read.format("bolide")
        .option("namesrv", cluster.namesrv_address)
        .option("topic", TOPIC)
        .option("startingOffsets", FROM_ZERO)
    )
    with pytest.raises(PySparkException, match="deleted \\(retention\\)"):
        reader.load().collect()
    rows = reader.option("failOnDataLoss", "false").load().collect()
    assert sorted(row["queue_offset"] for row in rows) == list(range(min_offset, len(sent)))
