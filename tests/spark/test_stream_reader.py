"""The stream reader's decisions, called the way Spark's planner calls them (no JVM here):
trigger limits, minMessagesPerTrigger with maxTriggerDelay, AvailableNow caps, reads of the
planned partitions, recorded group progress."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows

from bolide.base.clock import ManualClock
from bolide.client.message import Message
from bolide.spark.options import parse_read_options
from bolide.spark.reader import BolidePartition, BolideStreamReader
from tests.spark.conftest import BROKER_NAME, BackgroundCluster

TOPIC = "planned"


def _reader(cluster: BackgroundCluster, clock: ManualClock, **options: str) -> BolideStreamReader:
    raw = {"namesrv": cluster.namesrv_address, "topic": TOPIC, **options}
    return BolideStreamReader(parse_read_options(raw, streaming=True), clock)


def _total(start: dict[str, Any], end: dict[str, Any]) -> int:
    before = start.get(TOPIC, {}).get(BROKER_NAME, {})
    after = end[TOPIC][BROKER_NAME]
    return sum(offset - before.get(queue, offset) for queue, offset in after.items())


def _send(cluster: BackgroundCluster, start: int, count: int) -> None:
    cluster.produce(
        [Message(TOPIC, b"n%d" % n, keys=f"k{n}") for n in range(start, start + count)],
        sharding_keys=True,
    )


def test_limits_delays_caps_and_reads(cluster: BackgroundCluster) -> None:
    cluster.create_topic(TOPIC, 3)
    clock = ManualClock()
    reader = _reader(
        cluster,
        clock,
        startingOffsets="earliest",
        minMessagesPerTrigger="10",
        maxTriggerDelay="1m",
        group="planner-test",
    )
    try:
        start = reader.initialOffset()
        assert start == {TOPIC: {BROKER_NAME: {"0": 0, "1": 0, "2": 0}}}
        assert reader.getDefaultReadLimit() == ReadMinRows(10)
        _send(cluster, 0, 6)
        assert reader.latestOffset(start, ReadMinRows(10)) == start, "fewer than the minimum"
        assert _total(start, reader.latestOffset(start, ReadAllAvailable())) == 6
        clock.advance_ms(60_000)
        end = reader.latestOffset(start, ReadMinRows(10))
        assert _total(start, end) == 6, "maxTriggerDelay passed: what there is"
        assert reader.reportLatestOffset() == end

        _send(cluster, 6, 30)
        capped = reader.latestOffset(end, ReadMaxRows(7))
        assert _total(end, capped) == 7
        rows = []
        for partition in reader.partitions(end, capped):
            assert isinstance(partition, BolidePartition)
            for batch in reader.read(partition):
                rows.extend(batch.to_pylist())
        assert len(rows) == 7
        for row in rows:
            queue_start = end[TOPIC][BROKER_NAME][str(row["queue_id"])]
            assert (
                queue_start
                <= row["queue_offset"]
                < capped[TOPIC][BROKER_NAME][str(row["queue_id"])]
            )

        reader.prepareForTriggerAvailableNow()
        _send(cluster, 36, 5)
        final = reader.latestOffset(capped, ReadAllAvailable())
        assert _total(start, final) == 36, "AvailableNow stops at the offsets it started with"
        assert reader.latestOffset(final, ReadAllAvailable()) == final

        reader.commit(final)
        assert cluster.committed_offsets(TOPIC, "planner-test", 3) == {
            int(queue): offset for queue, offset in final[TOPIC][BROKER_NAME].items()
        }
    finally:
        reader.stop()


def test_rows_of_an_empty_plan_and_the_placeholder_partition(cluster: BackgroundCluster) -> None:
    cluster.create_topic(TOPIC, 1)
    reader = _reader(cluster, ManualClock())
    try:
        start = reader.initialOffset()
        assert reader.partitions(start, start) == []
        from pyspark.sql.datasource import InputPartition

        assert list(reader.read(InputPartition(None))) == []
    finally:
        reader.stop()


def test_starting_timestamp_resolves_per_queue(tmp_path: Path) -> None:
    clock = ManualClock(start_ms=1_900_000_000_000)
    cluster = BackgroundCluster(tmp_path, broker_clock=clock)
    cluster.start()
    try:
        cluster.create_topic(TOPIC, 2)
        _send(cluster, 0, 10)
        cluster.advance_broker_clock(5_000)
        later = cluster.produce([Message(TOPIC, b"late", keys="k3")], sharding_keys=True)
        reader = _reader(cluster, ManualClock(), startingTimestamp=str(1_900_000_002_000))
        try:
            start = reader.initialOffset()
            # Each queue starts at its first message stored at or after the timestamp: the
            # late message's offset in its queue, the queue's end in the other.
            (result,) = later
            queues = start[TOPIC][BROKER_NAME]
            assert queues[str(result.queue.queue_id)] == result.queue_offset
            end = reader.latestOffset(start, ReadAllAvailable())
            assert _total(start, end) == 1
        finally:
            reader.stop()
    finally:
        cluster.stop()
