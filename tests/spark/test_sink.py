"""The Bolide sink through Spark: a batch round trip, and a replayed micro-batch that sends
its rows again with the same unique keys."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql.types import (
    BinaryType,
    MapType,
    StringType,
    StructField,
    StructType,
)

from bolide.client.message import Message
from tests.spark.conftest import WAIT_S, BackgroundCluster, rows_of

UNIQUE_KEY = re.compile(r"^[0-9A-F]{32}$")


def test_batch_write_round_trip(spark: SparkSession, cluster: BackgroundCluster) -> None:
    cluster.create_topic("out", 4)
    schema = StructType(
        [
            StructField("body", BinaryType()),
            StructField("tags", StringType()),
            StructField("keys", StringType()),
            StructField("properties", MapType(StringType(), StringType())),
            StructField("sharding_key", StringType()),
            StructField("ignored", StringType()),
        ]
    )
    rows = [
        (
            f"row-{n}".encode(),
            "even" if n % 2 == 0 else "odd",
            f"order-{n}",
            {"seq": str(n), "UNIQ_KEY": "not-mine", "WAIT": "false"},
            f"customer-{n % 3}" if n < 30 else None,
            "x",
        )
        for n in range(90)
    ]
    frame = spark.createDataFrame(rows, schema).repartition(3)
    (
        frame.write.format("bolide")
        .option("namesrv", cluster.namesrv_address)
        .option("topic", "out")
        .mode("append")
        .save()
    )
    read = rows_of(
        spark.read.format("bolide")
        .option("namesrv", cluster.namesrv_address)
        .option("topic", "out")
        .load()
    )
    assert sorted(row["body"] for row in read) == sorted(row[0] for row in rows)
    assert len({row["msg_id"] for row in read}) == 90
    for row in read:
        number = int(row["body"].decode().removeprefix("row-"))
        assert row["tags"] == ("even" if number % 2 == 0 else "odd")
        assert row["keys"] == f"order-{number}"
        assert row["properties"]["seq"] == str(number)
        assert row["properties"]["UNIQ_KEY"] == row["msg_id"]
        assert row["properties"].get("WAIT") != "false", "system properties come from Bolide"
        assert UNIQUE_KEY.match(row["msg_id"])
    # Sharded rows: one queue per key, in the order of the rows of each Spark partition.
    queues: dict[int, set[int]] = defaultdict(set)
    for row in read:
        number = int(row["properties"]["seq"])
        if number < 30:
            queues[number % 3].add(row["queue_id"])
    assert all(len(ids) == 1 for ids in queues.values()), queues


def test_replayed_stream_batch_sends_the_same_unique_keys(
    spark: SparkSession, cluster: BackgroundCluster, tmp_path: Path
) -> None:
    cluster.create_topic("in", 2)
    sent = cluster.produce(
        [Message("in", f"event-{n}".encode(), keys=f"k{n}") for n in range(40)],
        sharding_keys=True,
    )
    checkpoint = tmp_path / "checkpoint"

    def run() -> None:
        stream = (
            spark.readStream.format("bolide")
            .option("namesrv", cluster.namesrv_address)
            .option("topic", "in")
            .option("startingOffsets", "earliest")
            .load()
        )
        query = (
            stream.selectExpr("body", "keys", "'copied' AS tags")
            .writeStream.format("bolide")
            .option("namesrv", cluster.namesrv_address)
            .option("topic", "copy")
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(int(WAIT_S))
        assert query.exception() is None

    run()
    # As if the driver died after the sink wrote batch 0 but before Spark recorded it: the
    # restarted query replays batch 0 (same query id, same batch id).
    commits = sorted((checkpoint / "commits").iterdir())
    assert [path.name for path in commits if not path.name.startswith(".")] == ["0"]
    for path in commits:
        path.unlink()
    run()

    copied = rows_of(
        spark.read.format("bolide")
        .option("namesrv", cluster.namesrv_address)
        .option("topic", "copy")
        .load()
    )
    counts = Counter(row["msg_id"] for row in copied)
    assert len(counts) == len(sent), "the replay made new ids"
    assert set(counts.values()) == {2}, "every row was sent twice, with the same id"
    bodies: dict[str, set[bytes]] = defaultdict(set)
    for row in copied:
        bodies[row["msg_id"]].add(row["body"])
        assert row["tags"] == "copied"
    assert all(len(found) == 1 for found in bodies.values())
    assert sorted(b for found in bodies.values() for b in found) == sorted(
        f"event-{n}".encode() for n in range(40)
    )
