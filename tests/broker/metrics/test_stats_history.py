"""The broker's per-minute stats history (issue 28): a real broker on a manual clock, real
sends and pulls, GET_STATS_HISTORY through the AdminClient, and the ring's bound."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bolide.base import limits
from bolide.base.clock import ManualClock
from bolide.base.errors import RemoteError
from bolide.broker.broker import Broker
from bolide.broker.metrics.history import history_path
from bolide.broker.stats_history import HistoryFileError, HistorySnapshot, StatsHistoryRing
from bolide.client.admin import AdminClient
from bolide.client.producer.producer import Producer
from bolide.client.rpc.offsets import update_consumer_offset
from bolide.client.rpc.pull import pull_message
from bolide.protocol.bodies import MessageQueue
from bolide.protocol.bodies.stats_history import StatsHistoryPoint
from bolide.protocol.codes import ResponseCode
from bolide.protocol.headers import PullMessageRequestHeader, PullSysFlag
from bolide.protocol.message import Message
from bolide.testing.cluster import Cluster
from bolide.testing.waiting import until

pytestmark = pytest.mark.timeout(120)

TOPIC = "HistoryOrders"
GROUP = "HistoryBilling"
MINUTE_MS = limits.STATS_HISTORY_INTERVAL_MS


async def _next_minute(broker: Broker, clock: ManualClock, steps: int) -> None:
    """Move the clock one history interval and wait for the history service's step
    ``steps``, then for it to park again (its sleep starts one loop turn after the step)."""
    clock.advance_ms(MINUTE_MS)
    service = broker._stats_history  # the test waits on the step it caused
    assert service is not None
    await until(lambda: service.step_count == steps)
    for _ in range(3):
        await asyncio.sleep(0)


async def _send(producer: Producer, count: int) -> None:
    for index in range(count):
        await producer.send(
            Message(TOPIC, f"m{index}".encode()), queue=MessageQueue(TOPIC, "broker-a", 0)
        )


async def test_history_of_puts_gets_and_lag_minute_by_minute(tmp_path: Path) -> None:
    clock = ManualClock()
    async with Cluster(tmp_path, clock=clock) as cluster:
        broker = cluster.broker("broker-a")
        address = broker.address
        start_ms = broker.context.stats.boot_timestamp_ms
        async with (
            AdminClient(cluster.namesrv_address) as admin,
            Producer("HistoryProducers", cluster.namesrv_address) as producer,
        ):
            await admin.create_topic(TOPIC, queue_count=1)
            await _send(producer, 30)
            header = PullMessageRequestHeader(
                GROUP, TOPIC, 0, 0, 10, PullSysFlag.SUBSCRIPTION, 0, 0, 0, "*"
            )
            pulled = await pull_message(producer.instance.pool, address, header, 5_000)
            assert len(pulled.messages) == 10
            pool = producer.instance.pool
            await update_consumer_offset(pool, address, GROUP, TOPIC, 0, 10, 5_000)
            await _next_minute(broker, clock, 1)

            # minute 2: 6 more messages, the group catches up on all 36 by its offset
            await _send(producer, 6)
            await update_consumer_offset(pool, address, GROUP, TOPIC, 0, 36, 5_000)
            await _next_minute(broker, clock, 2)

            topic = await admin.stats_history(address, TOPIC)
            group = await admin.stats_history(address, TOPIC, group=GROUP)
            with pytest.raises(RemoteError) as missing:
                await admin.stats_history(address, "NoSuchHistoryTopic")
    first_ms, second_ms = start_ms + MINUTE_MS, start_ms + 2 * MINUTE_MS
    assert topic.broker_name == "broker-a" and topic.interval_ms == MINUTE_MS
    assert topic.points == [
        StatsHistoryPoint(first_ms, 30, 0.5, 0),
        StatsHistoryPoint(second_ms, 6, 0.1, 0),
    ]
    assert group.group == GROUP
    assert group.points == [
        StatsHistoryPoint(first_ms, 10, 10 / 60, 20),
        StatsHistoryPoint(second_ms, 0, 0.0, 0),
    ]
    assert missing.value.code == ResponseCode.TOPIC_NOT_EXIST


def test_the_ring_keeps_one_hour_of_minutes() -> None:
    ring = StatsHistoryRing(0)
    for minute in range(1, limits.STATS_HISTORY_POINTS_COUNT + 6):
        ring.record(HistorySnapshot(minute * MINUTE_MS, {"t": minute * 60}, {"t@g": (minute, 0)}))
    points = ring.topic_points("t")
    assert len(points) == limits.STATS_HISTORY_POINTS_COUNT
    assert points[0].timestamp_ms == 6 * MINUTE_MS  # minutes 1-5 fell out of the hour
    assert all(point.messages == 60 and point.tps == 1.0 for point in points)
    assert ring.group_points("t", "g")[-1].lag == limits.STATS_HISTORY_POINTS_COUNT + 5
    assert ring.topic_points("other") == [
        StatsHistoryPoint(point.timestamp_ms, 0, 0.0) for point in points
    ]


async def test_the_history_survives_a_broker_restart(tmp_path: Path) -> None:
    clock = ManualClock()
    async with Cluster(tmp_path, clock=clock) as cluster:
        broker = cluster.broker("broker-a")
        start_ms = broker.context.stats.boot_timestamp_ms
        async with (
            AdminClient(cluster.namesrv_address) as admin,
            Producer("HistoryProducers", cluster.namesrv_address) as producer,
        ):
            await admin.create_topic(TOPIC, queue_count=1)
            await _send(producer, 12)
            await _next_minute(broker, clock, 1)
        saved = history_path(broker.context.config)
        await until(lambda: saved.exists())
        store_root = broker.context.config.store_path_root_dir
    clock.advance_ms(MINUTE_MS // 2)  # down for half a minute
    async with Cluster(tmp_path, clock=clock) as cluster:
        broker = cluster.broker("broker-a")
        assert broker.context.config.store_path_root_dir == store_root
        restart_ms = broker.context.stats.boot_timestamp_ms
        async with (
            AdminClient(cluster.namesrv_address) as admin,
            Producer("HistoryProducers", cluster.namesrv_address) as producer,
        ):
            await _send(producer, 3)
            await _next_minute(broker, clock, 1)
            topic = await admin.stats_history(broker.address, TOPIC)
    assert [(p.timestamp_ms, p.messages) for p in topic.points] == [
        (start_ms + MINUTE_MS, 12),  # before the restart, read back from the store dir
        (restart_ms, 0),  # across the restart: nothing counted
        (restart_ms + MINUTE_MS, 3),
    ]


def test_the_history_file_is_bounded_and_checked() -> None:
    ring = StatsHistoryRing(0)
    for minute in range(1, 11):
        ring.record(HistorySnapshot(minute * MINUTE_MS, {f"t{minute}": minute}, {}))
    whole = ring.to_json()
    small = ring.to_json(max_bytes=len(whole) // 2)
    assert len(small) <= len(whole) // 2
    later = StatsHistoryRing(11 * MINUTE_MS)
    assert later.restore(small, 11 * MINUTE_MS) < 10  # the oldest were left out
    points = later.topic_points("t10")
    assert [p.messages for p in points[-2:]] == [10, 0]  # minute 10, then the restart
    assert StatsHistoryRing(0).restore(whole, 200 * MINUTE_MS) == 0  # older than an hour
    with pytest.raises(HistoryFileError):
        StatsHistoryRing(0).restore(b'{"version": 7}', 0)
    with pytest.raises(HistoryFileError):
        StatsHistoryRing(0).restore(b"not json", 0)
