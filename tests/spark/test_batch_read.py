"""Batch reads through Spark: exact offset ranges, tags, timestamps, schema."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from bolide.base.clock import ManualClock
from bolide.client.message import Message
from tests.spark.conftest import BROKER_NAME, BackgroundCluster, rows_of


def _messages(topic: str, count: int, *, tags: str = "T", start: int = 0) -> list[Message]:
    return [
        Message(
            topic,
            f"body-{start + i}".encode(),
            properties={"n": str(start + i)},
            tags=tags,
            keys=f"k{(start + i) % 4}",
        )
        for i in range(count)
    ]


def test_batch_read_of_an_exact_offset_range(
    spark: SparkSession, cluster: BackgroundCluster
) -> None:
    cluster.create_topic("orders", 2)
    sent = cluster.produce(_messages("orders", 40), sharding_keys=True)
    by_queue: dict[int, list[int]] = {}
    for result in sent:
        by_queue.setdefault(result.queue.queue_id, []).append(result.queue_offset)
    assert set(by_queue) == {0, 1}, "the keys spread over both queues"
    starting = {"orders": {BROKER_NAME: {"0": 2, "1": -2}}}
    ending = {"orders": {BROKER_NAME: {"0": 5, "1": -1}}}
    frame = (
        spark.read.format("bolide")
        .option("namesrv", cluster.namesrv_address)
        .option("topic", "orders")
        .option("startingOffsets", json.dumps(starting))
        .option("endingOffsets", json.dumps(ending))
        .load()
    )
    rows = rows_of(frame)
    expected = [(0, offset) for offset in (2, 3, 4)] + [(1, o) for o in sorted(by_queue[1])]
    assert [(row["queue_id"], row["queue_offset"]) for row in rows] == expected
    by_id = {result.msg_id: result for result in sent}
    for row in rows:
        result = by_id[row["msg_id"]]
        assert (row["queue_id"], row["queue_offset"]) == (
            result.queue.queue_id,
            result.queue_offset,
        )
        number = int(row["body"].decode().removeprefix("body-"))
        assert row["properties"]["n"] == str(number)
        assert row["keys"] == f"k{number % 4}"
        assert row["tags"] == "T"
        assert row["topic"] == "orders" and row["broker_name"] == BROKER_NAME
        assert row["reconsume_times"] == 0
        assert row["born_timestamp"] <= row["store_timestamp"]


def test_tags_filter_and_an_empty_range(spark: SparkSession, cluster: BackgroundCluster) -> None:
    cluster.create_topic("mixed", 1)
    cluster.produce(_messages("mixed", 6, tags="A") + _messages("mixed", 6, tags="B", start=6))
    base = (
        spark.read.format("bolide")
        .option("namesrv", cluster.namesrv_address)
        .option("topic", "mixed")
    )
    tagged = rows_of(base.option("tags", "B").load())
    assert [row["queue_offset"] for row in tagged] == list(range(6, 12))
    assert {row["tags"] for row in tagged} == {"B"}
    assert base.option("startingOffsets", "latest").load().count() == 0


def test_a_missing_option_is_a_clear_error(spark: SparkSession) -> None:
    with pytest.raises(PySparkException, match="namesrv is required"):
        spark.read.format("bolide").option("topic", "t").load().collect()


def test_starting_timestamp_reads_what_was_stored_from_then_on(
    spark: SparkSession, tmp_path: Path
) -> None:
    clock = ManualClock(start_ms=1_800_000_000_000)
    cluster = BackgroundCluster(tmp_path, broker_clock=clock)
    cluster.start()
    try:
        cluster.create_topic("events", 2)
        cluster.produce(_messages("events", 10))
        cluster.advance_broker_clock(60_000)
        later = cluster.produce(_messages("events", 10, start=10))
        frame = (
            spark.read.format("bolide")
            .option("namesrv", cluster.namesrv_address)
            .option("topic", "events")
            .option("startingTimestamp", str(1_800_000_000_000 + 30_000))
            .load()
        )
        rows = rows_of(frame)
        assert sorted(row["msg_id"] for row in rows) == sorted(r.msg_id for r in later)
    finally:
        cluster.stop()
