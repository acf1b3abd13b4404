"""The stock admin tools' statistics requests against a real broker and a real push
consumer: VIEW_BROKER_STATS_DATA (315), GET/UPDATE_BROKER_CONFIG (26/25),
QUERY_CONSUME_TIME_SPAN (303), QUERY_CONSUME_QUEUE (321), CONSUME_MESSAGE_DIRECTLY (309) and
the measured consume TPS/RT in GET_CONSUMER_RUNNING_INFO (307)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bolide.base import limits
from bolide.base.clock import ManualClock
from bolide.base.errors import RemoteError
from bolide.client import admin_stats
from bolide.client.admin import AdminClient
from bolide.client.config import ConsumeFrom
from bolide.client.consumer.listener import ConsumeResult, OrderlyResult
from bolide.client.consumer.push_consumer import PushConsumer
from bolide.client.producer.producer import Producer
from bolide.protocol.bodies import MessageQueue
from bolide.protocol.bodies.stats import CMResult
from bolide.protocol.codes import ResponseCode
from bolide.protocol.message import Message, MessageExt
from bolide.testing.cluster import Cluster
from bolide.testing.waiting import until

pytestmark = pytest.mark.timeout(120)

TOPIC = "StatsOrders"
GROUP = "StatsBilling"
WAIT_S = 20.0


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    async with Cluster(tmp_path) as running:
        yield running


SEND_STEP_MS = 100
"""The manual clock moves this much before each send of the time-span test."""
ASK_AFTER_MS = 1_500
"""... and this much after the last send, before the questions."""


async def test_stats_config_time_span_and_queue(tmp_path: Path) -> None:
    clock = ManualClock()
    async with Cluster(tmp_path, clock=clock) as cluster:
        await _stats_config_time_span_and_queue(cluster, clock)


async def _stats_config_time_span_and_queue(cluster: Cluster, clock: ManualClock) -> None:
    address = cluster.broker("broker-a").address
    async with AdminClient(cluster.namesrv_address) as admin:
        await admin.create_topic(TOPIC, queue_count=2)
        stored_ms: list[int] = []
        async with Producer("StatsProducers", cluster.namesrv_address) as producer:
            for index in range(6):
                clock.advance_ms(SEND_STEP_MS)
                stored_ms.append(clock.now_ms())
                queue = MessageQueue(TOPIC, "broker-a", index % 2)
                await producer.send(Message(TOPIC, b"body", tags="T"), queue=queue)
        clock.advance_ms(ASK_AFTER_MS)
        now_ms = clock.now_ms()
        stats = await admin_stats.view_broker_stats(admin, address, "TOPIC_PUT_NUMS", TOPIC)
        assert stats.stats_minute.sum == 6 and stats.stats_hour.sum == 6
        floor_ms = limits.STATS_MINUTE_SAMPLE_INTERVAL_MS  # a fresh key counts a full sample
        assert stats.stats_minute.tps == pytest.approx(
            6 * 1000 / max(now_ms - stored_ms[0], floor_ms)
        )
        broker_stats = await admin_stats.view_broker_stats(
            admin, address, "BROKER_PUT_NUMS", "DefaultCluster"
        )
        assert broker_stats.stats_minute.sum >= 6
        with pytest.raises(RemoteError, match="The stats <TOPIC_PUT_NUMS> <Nope> not exist"):
            await admin_stats.view_broker_stats(admin, address, "TOPIC_PUT_NUMS", "Nope")

        config = await admin_stats.broker_config(admin, address)
        assert config["brokerName"] == "broker-a" and config["longPollingEnable"] == "true"
        await admin_stats.update_broker_config(admin, address, {"longPollingEnable": "false"})
        assert (await admin_stats.broker_config(admin, address))["longPollingEnable"] == "false"
        with pytest.raises(RemoteError, match="brokerName cannot change") as refused:
            await admin_stats.update_broker_config(admin, address, {"brokerName": "other"})
        assert refused.value.code == ResponseCode.SYSTEM_ERROR
        with pytest.raises(RemoteError, match="brokerPermission"):
            await admin_stats.update_broker_config(admin, address, {"brokerPermission": "99"})
        assert (await admin_stats.broker_config(admin, address))["brokerName"] == "broker-a"

        spans = await admin_stats.consume_time_span(admin, address, TOPIC, GROUP)
        assert [span.message_queue.queue_id for span in spans.spans] == [0, 1]
        for queue_id, span in enumerate(spans.spans):
            # queue q holds the sends q, q + 2, q + 4; the group consumed nothing, so its next
            # message is the queue's first and the delay runs from its store time to now
            assert span.min_timestamp_ms == stored_ms[queue_id]
            assert span.max_timestamp_ms == stored_ms[queue_id + 4]
            assert span.consume_timestamp_ms == stored_ms[queue_id]
            assert span.delay_time_ms == now_ms - stored_ms[queue_id]
        with pytest.raises(RemoteError) as missing:
            await admin_stats.consume_time_span(admin, address, "NoSuchTopic", GROUP)
        assert missing.value.code == ResponseCode.TOPIC_NOT_EXIST

        listing = await admin_stats.broker_consume_stats(admin, address)
        assert listing.broker_address == address
        assert GROUP not in dict(listing.entries)  # it consumed nothing yet: unknown here

        entries = await admin_stats.consume_queue(admin, address, TOPIC, 0, 0, 10)
        assert len(entries.queue_data) == 3 and entries.max_queue_index == 3
        assert all(entry.physic_size > 0 for entry in entries.queue_data)


LISTENER_MS = 40
"""Each listener call of the running-info tests moves the consumer's manual clock this much."""


async def test_consume_directly_and_measured_running_info(cluster: Cluster) -> None:
    seen: list[bytes] = []
    arrived = asyncio.Event()
    clock = ManualClock()

    async def listener(messages: list[MessageExt]) -> ConsumeResult:
        seen.extend(m.body for m in messages)
        clock.advance_ms(LISTENER_MS)
        arrived.set()
        return ConsumeResult.SUCCESS

    async with AdminClient(cluster.namesrv_address) as admin:
        await admin.create_topic(TOPIC, queue_count=1)
        async with Producer("StatsProducers", cluster.namesrv_address) as producer:
            result = await producer.send(Message(TOPIC, b"first"))
        consumer = PushConsumer(
            GROUP, cluster.namesrv_address, consume_from=ConsumeFrom.FIRST_OFFSET, clock=clock
        )
        consumer.subscribe(TOPIC)
        consumer.register_listener(listener)
        await consumer.start()
        try:
            async with asyncio.timeout(WAIT_S):
                await arrived.wait()
            pulled_ms = clock.now_ms() - LISTENER_MS  # the one answered pull ended then
            client_id = consumer.instance.client_id
            verdict = await admin_stats.consume_message_directly(
                admin,
                GROUP,
                client_id,
                result.offset_msg_id,
                cluster.broker("broker-a").address,
            )
            assert verdict.consume_result is CMResult.CR_SUCCESS
            assert seen == [b"first", b"first"]  # once in the flow, once directly
            info = await admin.consumer_running_info(GROUP, client_id)
            status = info.status_table[TOPIC]
            # the flow's call and the direct one each took LISTENER_MS of the consumer's clock;
            # the one pull answered (the next is parked: nothing new) took no clock time
            now_ms = clock.now_ms()
            assert now_ms - pulled_ms == 2 * LISTENER_MS
            assert status["consumeRT"] == LISTENER_MS
            # the window opens at the flow's call's end; the direct call is not a flow's OK
            assert status["consumeOKTPS"] == pytest.approx(1000 / LISTENER_MS)
            assert status["pullTPS"] == pytest.approx(1000 / (now_ms - pulled_ms))
            assert status["pullRT"] == 0
            listing = await admin_stats.broker_consume_stats(
                admin, cluster.broker("broker-a").address
            )
            stats = dict(listing.entries)[GROUP]
            assert sum(w.broker_offset for w in stats.offset_table.values()) == 1
            assert listing.online_client_counts[GROUP] == 1
            assert listing.total_diff == 0 or listing.total_diff == 1
        finally:
            await consumer.shutdown()


async def test_orderly_consumer_reports_measured_consume_and_pull_rates(cluster: Cluster) -> None:
    arrived = asyncio.Event()
    clock = ManualClock()
    asked_after_ms = 60

    async def listener(messages: list[MessageExt]) -> OrderlyResult:
        clock.advance_ms(LISTENER_MS)
        arrived.set()
        return OrderlyResult.SUCCESS

    async with AdminClient(cluster.namesrv_address) as admin:
        await admin.create_topic(TOPIC, queue_count=1)
        async with Producer("StatsProducers", cluster.namesrv_address) as producer:
            await producer.send(Message(TOPIC, b"in order"))
        consumer = PushConsumer(
            GROUP,
            cluster.namesrv_address,
            consume_from=ConsumeFrom.FIRST_OFFSET,
            orderly=True,
            clock=clock,
        )
        consumer.subscribe(TOPIC)
        consumer.register_listener(listener)
        await consumer.start()
        try:
            async with asyncio.timeout(WAIT_S):
                await arrived.wait()
            client_id = consumer.instance.client_id

            rates = consumer.orderly_service.rates
            await until(lambda: rates.status(TOPIC, clock.now_ms())[2] > 0)  # after the call
            clock.advance_ms(asked_after_ms)
            info = await admin.consumer_running_info(GROUP, client_id)
            figures = {key: float(value) for key, value in info.status_table[TOPIC].items()}
            # one call of LISTENER_MS, its window opening at its end; one pull answered at
            # once (no clock time), its window opening before the call
            assert figures["consumeOKTPS"] == pytest.approx(1000 / asked_after_ms)
            assert figures["consumeFailedTPS"] == 0
            assert figures["consumeRT"] == LISTENER_MS
            assert figures["pullTPS"] == pytest.approx(1000 / (LISTENER_MS + asked_after_ms))
            assert figures["pullRT"] == 0
        finally:
            await consumer.shutdown()
