"""The sink's task side, called in this process the way an executor calls it (no JVM): row to
message mapping, sharded order, delayed rows, failures, and reproducible unique keys."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pytest
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
)

from bolide.base.errors import ConfigError, InvalidMessageError
from bolide.spark.options import parse_write_options
from bolide.spark.source import BolideDataSource
from bolide.spark.writer import (
    BolideBatchWriter,
    BolideStreamWriter,
    WriteReport,
    unique_key,
    unique_key_prefix,
)
from tests.spark.conftest import BackgroundCluster, rows_of_topic

SCHEMA = StructType(
    [
        StructField("body", StringType()),
        StructField("topic", StringType()),
        StructField("keys", StringType()),
        StructField("properties", MapType(StringType(), StringType())),
        StructField("sharding_key", StringType()),
        StructField("delay_level", IntegerType()),
        StructField("deliver_at_ms", LongType()),
    ]
)
ARROW = pa.schema(
    [
        ("body", pa.string()),
        ("topic", pa.string()),
        ("keys", pa.string()),
        ("properties", pa.map_(pa.string(), pa.string())),
        ("sharding_key", pa.string()),
        ("delay_level", pa.int32()),
        ("deliver_at_ms", pa.int64()),
    ]
)


def _batch(rows: list[dict[str, object]]) -> pa.RecordBatch:
    full = [{name: row.get(name) for name in ARROW.names} for row in rows]
    return pa.RecordBatch.from_pylist(full, schema=ARROW)


def _writer(cluster: BackgroundCluster, topic: str | None = "sunk") -> BolideBatchWriter:
    options = {"namesrv": cluster.namesrv_address} | ({"topic": topic} if topic else {})
    return BolideBatchWriter(parse_write_options(options), SCHEMA)


def test_schema_checks() -> None:
    options = parse_write_options({"namesrv": "h:1", "topic": "t"})
    with pytest.raises(ConfigError, match="body column"):
        BolideBatchWriter(options, StructType([StructField("value", BinaryType())]))
    with pytest.raises(ConfigError, match="column tags must be string"):
        BolideStreamWriter(
            options,
            StructType([StructField("body", BinaryType()), StructField("tags", IntegerType())]),
        )
    with pytest.raises(ConfigError, match="topic option or a topic column"):
        BolideBatchWriter(
            parse_write_options({"namesrv": "h:1"}),
            StructType([StructField("body", BinaryType())]),
        )


def test_unique_keys_look_like_rocketmq_ids_and_repeat_for_the_same_task() -> None:
    prefix = unique_key_prefix("query-1", 7, 3)
    assert prefix == unique_key_prefix("query-1", 7, 3)
    assert prefix != unique_key_prefix("query-1", 8, 3) != unique_key_prefix("query-1", 7, 4)
    assert unique_key(prefix, 255) == prefix + "0000000000FF"
    assert len(unique_key(prefix, 0)) == 32


def test_rows_become_messages(cluster: BackgroundCluster) -> None:
    cluster.create_topic("sunk", 4)
    cluster.create_topic("elsewhere", 1)
    writer = _writer(cluster)
    rows: list[dict[str, object]] = [
        {"body": f"ordered-{n}", "sharding_key": "customer-9", "keys": f"o{n}"} for n in range(20)
    ]
    rows += [
        {"body": "routed", "topic": "elsewhere", "properties": {"a": "1", "KEYS": "dropped"}},
        {"body": "later", "delay_level": 18},
        {"body": "much later", "deliver_at_ms": cluster.broker_clock_now_ms() + 86_400_000},
    ]
    report = writer.write(iter([_batch(rows[:10]), _batch(rows[10:])]))
    assert isinstance(report, WriteReport)
    assert report.rows == 23
    writer.commit([report, None])
    assert writer.last_report == (1, 23, report.requests)

    sunk = rows_of_topic(cluster, "sunk")
    # A 4.x broker keeps deliver_at_ms as a property; what it does with it is the broker's.
    timed = [row for row in sunk if row["body"] == b"much later"]
    for row in timed:
        assert int(dict(row["properties"])["TIMER_DELIVER_MS"]) > cluster.broker_clock_now_ms()
    sunk = [row for row in sunk if row["body"] != b"much later"]
    assert b"later" not in [row["body"] for row in sunk], "delay level 18 is two hours away"
    assert [row["body"] for row in sunk] == [f"ordered-{n}".encode() for n in range(20)]
    assert len({row["queue_id"] for row in sunk}) == 1, "one sharding key, one queue"
    assert [row["keys"] for row in sunk] == [f"o{n}" for n in range(20)]
    (routed,) = rows_of_topic(cluster, "elsewhere")
    assert routed["body"] == b"routed" and routed["keys"] is None
    assert dict(routed["properties"])["a"] == "1"
    prefix = unique_key_prefix(writer.job_id, 0, 0)
    assert sorted(row["msg_id"] for row in [*sunk, routed]) == sorted(
        unique_key(prefix, n) for n in range(21)
    )
    assert all(row["msg_id"] == unique_key(prefix, 22) for row in timed)


def test_a_failing_row_fails_the_task_after_the_earlier_rows_landed(
    cluster: BackgroundCluster,
) -> None:
    cluster.create_topic("sunk", 2)
    writer = _writer(cluster)
    # 130 plain rows go out in one batch request (the fast path sends each record batch's
    # rows); of the next batch, "fine" waits in its lane when row 131 fails.
    good = _batch([{"body": f"b{n}"} for n in range(130)])
    bad = _batch([{"body": "fine"}, {"body": None}])
    with pytest.raises(InvalidMessageError, match="row 131: the body is null"):
        writer.write(iter([good, bad]))
    assert len(rows_of_topic(cluster, "sunk")) == 130, "sends in flight landed before failing"
    # A retry of the task (same writer, same partition) sends the same ids again.
    writer.write(iter([good, _batch([{"body": "fine"}])]))
    counts = Counter(row["msg_id"] for row in rows_of_topic(cluster, "sunk"))
    assert len(counts) == 131
    assert Counter(counts.values()) == {2: 130, 1: 1}


def test_rows_without_a_topic_are_refused(cluster: BackgroundCluster) -> None:
    writer = _writer(cluster, topic=None)
    with pytest.raises(InvalidMessageError, match="no topic"):
        writer.write(iter([_batch([{"body": "x"}])]))


def test_overwrite_is_refused_and_streams_append() -> None:
    source = BolideDataSource({"namesrv": "h:1", "topic": "t"})
    with pytest.raises(ConfigError, match="appended"):
        source.writer(SCHEMA, True)
    assert isinstance(source.writer(SCHEMA, False), BolideBatchWriter)
    assert isinstance(source.streamWriter(SCHEMA, True), BolideStreamWriter)
