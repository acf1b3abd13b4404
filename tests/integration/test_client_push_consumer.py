"""The push consumer against an in-process Bolide cluster: delivery with tags, keys and
properties, client-side re-filter, committed offsets across restarts, broadcasting with its
local offset file, send-back of failures, broker-pushed reset and running info, clean
shutdown."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bolide.base import limits
from bolide.base.clock import ManualClock
from bolide.client.config import ClientConfig, ConsumeFrom
from bolide.client.consumer.listener import ConsumeResult
from bolide.client.consumer.offset_store import local_offsets_path
from bolide.client.consumer.options import ConsumerOptions
from bolide.client.consumer.push_consumer import PushConsumer
from bolide.client.instance import ClientInstance
from bolide.client.message import Message
from bolide.client.producer.producer import Producer
from bolide.protocol.bodies import (
    ConsumerRunningInfo,
    MessageModel,
    MessageQueue,
    ResetOffsetBody,
)
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import GetConsumerRunningInfoRequestHeader, ResetOffsetRequestHeader
from bolide.protocol.message import MessageExt, PropertyKey, java_string_hash
from bolide.protocol.record import decode_records
from bolide.testing.cluster import Cluster
from tests.integration.client_support import (
    WAIT_S,
    Collector,
    consumer_connection,
    create_topic,
    eventually,
)

TOPIC = "orders"


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    async with Cluster(tmp_path / "cluster") as running:
        await create_topic(running, TOPIC, 4)
        yield running


@pytest.fixture
async def producer(cluster: Cluster) -> AsyncIterator[Producer]:
    async with Producer("test-producers", namesrv=cluster.namesrv_address) as running:
        yield running


def consumer(cluster: Cluster, group: str, listener: Collector, **options: object) -> PushConsumer:
    push = PushConsumer(group, namesrv=cluster.namesrv_address, **options)  # type: ignore[arg-type]
    push.register_listener(listener.bind())
    return push


def committed(cluster: Cluster, group: str, topic: str = TOPIC) -> dict[int, int]:
    offsets = cluster.brokers[0].context.offsets
    return {queue_id: offsets.query_offset(group, topic, queue_id) for queue_id in range(4)}


async def test_delivery_keeps_tags_keys_properties_and_refilters_tags(
    cluster: Cluster, producer: Producer
) -> None:
    assert java_string_hash("Aa") == java_string_hash("BB")  # the broker cannot tell them apart
    for index in range(6):
        message = Message(TOPIC, f"body-{index}".encode(), tags=("Aa", "BB", "Cc")[index % 3])
        message.keys = [f"key-{index}", "shared"]
        message.properties["colour"] = "blue"
        await producer.send(message)
    collector = Collector()
    push = consumer(cluster, "g-tags", collector, consume_from=ConsumeFrom.FIRST_OFFSET)
    push.subscribe(TOPIC, "Aa || Cc")
    async with push:
        await collector.wait_count(4)
        assert sorted(m.keys or "" for m in collector.messages) == [
            "key-0 shared",
            "key-2 shared",
            "key-3 shared",
            "key-5 shared",
        ]
        first = next(m for m in collector.messages if m.keys == "key-0 shared")
        assert (first.topic, first.tags, first.body) == (TOPIC, "Aa", b"body-0")
        assert first.key_list == ["key-0", "shared"]
        assert first.properties["colour"] == "blue"
        assert first.msg_id == first.properties[PropertyKey.UNIQ_KEY]
        assert first.store_timestamp_ms > 0 and first.reconsume_times == 0
    # Progress passed every consumed message (a trailing filtered one may be re-read later).
    progress = committed(cluster, "g-tags")
    assert all(progress[m.queue_id] > m.queue_offset for m in collector.messages)


async def test_restart_resumes_from_the_committed_offsets(
    cluster: Cluster, producer: Producer
) -> None:
    for index in range(10):
        await producer.send(Message(TOPIC, b"x", keys=f"first-{index}"))
    collector = Collector()
    push = consumer(cluster, "g-resume", collector, consume_from=ConsumeFrom.FIRST_OFFSET)
    push.subscribe(TOPIC)
    async with push:
        await collector.wait_count(10)
    assert sum(committed(cluster, "g-resume").values()) == 10  # persisted at shutdown
    assert cluster.brokers[0].context.consumers.client_ids("g-resume") == []  # unregistered
    for index in range(5):
        await producer.send(Message(TOPIC, b"y", keys=f"second-{index}"))
    again = Collector()
    second = consumer(cluster, "g-resume", again)
    second.subscribe(TOPIC)
    async with second:
        await again.wait_count(5)
        assert sorted(again.keys) == [f"second-{index}" for index in range(5)]
    assert sum(committed(cluster, "g-resume").values()) == 15


async def test_broadcasting_gives_every_consumer_everything_and_keeps_offsets_locally(
    cluster: Cluster, producer: Producer, tmp_path: Path
) -> None:
    for index in range(8):
        await producer.send(Message(TOPIC, b"b", keys=f"k{index}"))
    happy, grumpy = Collector(), Collector(lambda messages: ConsumeResult.RECONSUME_LATER)
    options = {
        "message_model": MessageModel.BROADCASTING,
        "consume_from": ConsumeFrom.FIRST_OFFSET,
        "options": ConsumerOptions(offset_base_directory=tmp_path / "home"),
    }
    first = consumer(cluster, "g-broadcast", happy, instance_name="one", **options)
    second = consumer(cluster, "g-broadcast", grumpy, instance_name="two", **options)
    for push in (first, second):
        push.subscribe(TOPIC)
    async with first, second:
        await happy.wait_count(8)
        await grumpy.wait_count(8)  # failures are dropped, not retried
        client_id = second.instance.client_id
    assert sorted(happy.keys) == sorted(grumpy.keys) == [f"k{index}" for index in range(8)]
    path = local_offsets_path(tmp_path / "home", client_id, "g-broadcast")
    table = json.loads(path.read_text())["offsetTable"]
    assert sum(entry["offset"] for entry in table) == 8
    assert committed(cluster, "g-broadcast") == {0: -1, 1: -1, 2: -1, 3: -1}


async def test_failed_message_goes_back_through_the_retry_topic(
    cluster: Cluster, producer: Producer
) -> None:
    await producer.send(Message(TOPIC, b"fail me", tags="t", keys="unlucky"))
    collector = Collector(lambda messages: ConsumeResult.RECONSUME_LATER)
    push = consumer(cluster, "g-retry", collector, consume_from=ConsumeFrom.FIRST_OFFSET)
    push.subscribe(TOPIC)
    async with push:
        await collector.wait_count(1)
        await eventually(lambda: push.consume_service.stats.sent_back == 1)
        assert set(push.subscribed_topics()) == {TOPIC, "%RETRY%g-retry"}
    # Sent back with delay level 3: it waits in SCHEDULE_TOPIC_XXXX queue 2 for %RETRY%g-retry.
    store = cluster.brokers[0].context.store
    found = store.get_message("SCHEDULE_TOPIC_XXXX", 2, 0, 32, 1 << 20)
    (retry,) = decode_records(b"".join(bytes(view) for view in found.buffers))
    assert retry.properties[PropertyKey.REAL_TOPIC] == "%RETRY%g-retry"
    assert retry.properties[PropertyKey.RETRY_TOPIC] == TOPIC
    assert retry.body == b"fail me" and retry.keys == "unlucky"
    assert sum(committed(cluster, "g-retry").values()) == 1  # progress passed it


async def test_broker_pushed_reset_and_running_info(cluster: Cluster, producer: Producer) -> None:
    for index in range(4):
        await producer.send(
            Message(TOPIC, b"r", keys=f"r{index}"), queue=MessageQueue(TOPIC, "broker-a", 0)
        )
    collector = Collector()
    push = consumer(cluster, "g-reset", collector, consume_from=ConsumeFrom.FIRST_OFFSET)
    push.subscribe(TOPIC, "*")
    async with push:
        await collector.wait_count(4)
        await eventually(lambda: sum(q.topic == TOPIC for q in push.process_queues) == 4)
        connection = consumer_connection(cluster, "g-reset", push.instance.client_id)
        header = GetConsumerRunningInfoRequestHeader("g-reset", push.instance.client_id, False)
        request = RemotingCommand.request(
            RequestCode.GET_CONSUMER_RUNNING_INFO, header.to_ext_fields()
        )
        response = await connection.invoke(request, 10_000)
        assert response.code == ResponseCode.SUCCESS
        info = ConsumerRunningInfo.from_json(response.body)
        assert info.properties["PROP_CONSUME_TYPE"] == "CONSUME_PASSIVELY"
        assert {queue for queue in info.mq_table if queue.topic == TOPIC} == {
            MessageQueue(TOPIC, "broker-a", queue_id) for queue_id in range(4)
        }
        assert {s.topic for s in info.subscription_set} == {TOPIC, "%RETRY%g-reset"}
        # The broker moves queue 0 back to offset 1: messages 1..3 come again.
        queue = MessageQueue(TOPIC, "broker-a", 0)
        reset = RemotingCommand.request(
            RequestCode.RESET_CONSUMER_CLIENT_OFFSET,
            ResetOffsetRequestHeader(TOPIC, "g-reset", 0, True).to_ext_fields(),
            ResetOffsetBody({queue: 1}).to_json(),
            oneway=True,
        )
        await connection.invoke_oneway(reset, 10_000)
        await collector.wait_count(7)
        assert sorted(m.keys or "" for m in collector.messages[4:]) == ["r1", "r2", "r3"]
    assert committed(cluster, "g-reset")[0] == 4


async def test_start_refuses_a_second_consumer_of_the_group_on_one_instance(
    cluster: Cluster,
) -> None:
    first = consumer(cluster, "g-twice", Collector())
    first.subscribe(TOPIC)
    async with first:
        second = PushConsumer("g-twice", instance=first.instance)
        second.subscribe(TOPIC)
        second.register_listener(Collector())
        with pytest.raises(Exception, match="already runs"):
            await second.start()


async def test_illegal_offset_is_corrected_after_10_s_of_client_time(
    cluster: Cluster, producer: Producer
) -> None:
    queue = MessageQueue(TOPIC, "broker-a", 0)
    for index in range(3):
        await producer.send(Message(TOPIC, b"old", keys=f"old-{index}"), queue=queue)
    # Progress beyond the queue's end (e.g. the broker lost data): the pull says OFFSET_MOVED.
    cluster.brokers[0].context.offsets.commit_offset("test", "g-illegal", TOPIC, 0, 50)
    clock = ManualClock()
    config = ClientConfig((cluster.namesrv_address,), "127.0.0.1", 1, "illegal")
    collector = Collector()
    push = PushConsumer("g-illegal", instance=ClientInstance(config, clock=clock))
    push.subscribe(TOPIC)
    push.register_listener(collector.bind())
    async with push:
        await eventually(lambda: queue in push.process_queues)
        dropped = push.process_queues[queue]
        await eventually(lambda: dropped.dropped)  # OFFSET_ILLEGAL: the queue is dropped ...
        assert queue in push.process_queues  # ... but kept for 10 s
        advanced_ms = 0
        async with asyncio.timeout(WAIT_S):
            while push.process_queues.get(queue, dropped) is dropped:
                clock.advance_ms(100)  # client time only: the broker keeps real time
                advanced_ms += 100
                await asyncio.sleep(0)
        assert advanced_ms >= limits.PULL_OFFSET_ILLEGAL_FIX_DELAY_MS
        await producer.send(Message(TOPIC, b"new", keys="new"), queue=queue)
        await collector.wait_for(lambda: "new" in collector.keys)
    assert "old-0" not in collector.keys  # Java's reaction: continue from the queue's end
    assert committed(cluster, "g-illegal")[0] == 4


async def test_shutdown_finishes_the_listener_call_in_progress(
    cluster: Cluster, producer: Producer
) -> None:
    queue = MessageQueue(TOPIC, "broker-a", 2)
    await producer.send(Message(TOPIC, b"slow", keys="slow"), queue=queue)
    entered, release = asyncio.Event(), asyncio.Event()

    async def slow(messages: list[MessageExt]) -> ConsumeResult:
        entered.set()
        await release.wait()
        return ConsumeResult.SUCCESS

    push = PushConsumer(
        "g-slow", namesrv=cluster.namesrv_address, consume_from=ConsumeFrom.FIRST_OFFSET
    )
    push.subscribe(TOPIC)
    push.register_listener(slow)
    await push.start()
    await asyncio.wait_for(entered.wait(), WAIT_S)
    stopping = asyncio.ensure_future(push.shutdown())
    for _ in range(100):
        await asyncio.sleep(0)
    assert not stopping.done()  # waiting for the listener
    release.set()
    await asyncio.wait_for(stopping, WAIT_S)
    # Had shutdown not waited, persisting would have come first and left the offset at 0.
    assert committed(cluster, "g-slow")[2] == 1
    assert cluster.brokers[0].context.consumers.client_ids("g-slow") == []


async def test_reconsume_later_comes_back_with_its_original_topic(tmp_path: Path) -> None:
    # Delay levels of 1 s (level 3, the first send-back's, is clamped to the last one).
    settings = {"messageDelayLevel": "1s 1s"}
    async with Cluster(tmp_path / "delays", settings=settings) as delays:
        await create_topic(delays, TOPIC, 4)
        async with Producer("retry-producers", namesrv=delays.namesrv_address) as producer:
            await producer.send(Message(TOPIC, b"again", tags="paid", keys="again"))
        attempts: list[tuple[str, int, str | None]] = []

        def fail_once(messages: list[MessageExt]) -> ConsumeResult:
            attempts.extend((m.topic, m.reconsume_times, m.tags) for m in messages)
            return ConsumeResult.RECONSUME_LATER if len(attempts) == 1 else ConsumeResult.SUCCESS

        collector = Collector(fail_once)
        push = consumer(delays, "g-again", collector, consume_from=ConsumeFrom.FIRST_OFFSET)
        push.subscribe(TOPIC, "paid")
        async with push:
            await collector.wait_count(2)
        assert attempts == [(TOPIC, 0, "paid"), (TOPIC, 1, "paid")]
        retried = collector.messages[1]
        assert retried.properties[PropertyKey.RETRY_TOPIC] == TOPIC
        assert retried.keys == "again" and retried.body == b"again"
        assert retried.queue_id == 0  # the retry topic's only queue
