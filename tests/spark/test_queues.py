"""The source's broker side without Spark: pipelined range pulls, data loss, group offsets."""

from __future__ import annotations

import random

import pytest

from bolide.base.errors import DataLossError
from bolide.client import rpc
from bolide.client.message import Message, SendResult
from bolide.protocol.bodies import MessageQueue
from bolide.spark.client import BlockingClient
from bolide.spark.offsets import QueueRange
from bolide.spark.queues import (
    PullSettings,
    _Pipeline,
    commit_group_offsets,
    fetch_bounds,
    fetch_timestamp_offsets,
    list_queues,
    pull_range,
)
from bolide.spark.records import RowColumns
from tests.spark.conftest import AGED_TOPIC, BROKER_NAME, BackgroundCluster


def _read(
    client: BlockingClient, queue_range: QueueRange, settings: PullSettings
) -> list[dict[str, object]]:
    columns = RowColumns(queue_range.queue)
    for chunk in client.iterate(pull_range(client.instance, queue_range, settings)):
        columns.add(chunk.body, chunk.stop_offset)
    return list(columns.take_batch().to_pylist())


def test_pipelined_pulls_cover_the_range_exactly(cluster: BackgroundCluster) -> None:
    cluster.create_topic("big", 1)
    generator = random.Random(7)
    # Incompressible 100 KiB bodies: a pull stops at the broker's byte cap, not at its count.
    bodies = [generator.randbytes(100 * 1024) for _ in range(12)] + [b"s%d" % n for n in range(60)]
    cluster.produce([Message("big", body) for body in bodies])
    queue = MessageQueue("big", BROKER_NAME, 0)
    client = BlockingClient(cluster.namesrv_address, "test")
    try:
        assert client.run(list_queues(client.instance, ["big", "nothing-here"])) == [queue]
        bounds = client.run(fetch_bounds(client.instance, [queue]))
        assert (bounds[queue].min_offset, bounds[queue].max_offset) == (0, 72)
        settings = PullSettings(group="g", tags="*", batch_size=7, in_flight=3)
        rows = _read(client, QueueRange(queue, 2, 70), settings)
        assert [row["queue_offset"] for row in rows] == list(range(2, 70))
        assert [row["body"] for row in rows] == bodies[2:70]
        assert _read(client, QueueRange(queue, 70, 72), PullSettings("g", "*")) == _read(
            client, QueueRange(queue, 70, 72), PullSettings("g", "*", batch_size=1, in_flight=1)
        )
        future = cluster.broker_clock_now_ms() + 3_600_000
        assert client.run(fetch_timestamp_offsets(client.instance, [queue], future)) == {queue: 72}
    finally:
        client.close()


def test_segments_above_the_broker_cap_shrink_to_it(cluster: BackgroundCluster) -> None:
    """The broker answers 32 messages by default: a pullBatchSize of 100 still reads the range
    exactly, and later segments are cut at 32 (not below, whatever one answer held)."""
    cluster.create_topic("capped", 1)
    bodies = [b"c%d" % n for n in range(230)]
    cluster.produce([Message("capped", body) for body in bodies])
    queue = MessageQueue("capped", BROKER_NAME, 0)
    client = BlockingClient(cluster.namesrv_address, "test")
    try:
        settings = PullSettings(group="g", tags="*", batch_size=100, in_flight=3)
        rows = _read(client, QueueRange(queue, 5, 230), settings)
        assert [row["body"] for row in rows] == bodies[5:230]
        pipeline = _Pipeline(client.instance, QueueRange(queue, 0, 230), settings)
        pipeline.answered(40)
        assert pipeline.segment_size == 40
        pipeline.answered(3)  # a large message ended one answer early: not the cap
        assert pipeline.segment_size == 32
        small = _Pipeline(client.instance, QueueRange(queue, 0, 230), PullSettings("g", "*", 10))
        small.answered(2)
        assert small.segment_size == 10
    finally:
        client.close()


def test_group_offsets_are_recorded(cluster: BackgroundCluster) -> None:
    cluster.create_topic("progress", 2)
    queues = [MessageQueue("progress", BROKER_NAME, queue_id) for queue_id in (0, 1)]
    client = BlockingClient(cluster.namesrv_address, "test")
    try:
        client.run(list_queues(client.instance, ["progress"]))
        recorded = client.run(
            commit_group_offsets(client.instance, "pipeline", {queues[0]: 0, queues[1]: 0})
        )
        assert recorded == 2
        address = client.run(client.instance.queue_broker_address(queues[0]))
        stored = client.run(
            rpc.query_consumer_offset(
                client.instance.pool, address, "pipeline", "progress", 1, 3_000
            )
        )
        assert stored == 0
    finally:
        client.close()


def test_a_range_whose_start_was_deleted(
    aged: tuple[BackgroundCluster, list[SendResult], int],
) -> None:
    cluster, sent, min_offset = aged
    queue = MessageQueue(AGED_TOPIC, BROKER_NAME, 0)
    client = BlockingClient(cluster.namesrv_address, "test")
    try:
        whole = QueueRange(queue, 0, len(sent))
        with pytest.raises(DataLossError, match=f"messages 0..{min_offset - 1} were deleted"):
            _read(client, whole, PullSettings("g", "*", batch_size=4))
        skipped = _read(
            client, whole, PullSettings("g", "*", batch_size=4, fail_on_data_loss=False)
        )
        assert [row["queue_offset"] for row in skipped] == list(range(min_offset, len(sent)))
        past_end = QueueRange(queue, len(sent) - 2, len(sent) + 5)
        with pytest.raises(DataLossError, match="ends at offset"):
            _read(client, past_end, PullSettings("g", "*"))
    finally:
        client.close()
