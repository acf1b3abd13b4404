"""AdminClient against a real name server and broker: topics, groups, progress (clustering and
broadcasting, with lag and queue owners), reset offset reaching live and offline Bolide
consumers (RocketMQ's consumption progress), message look-ups, tail, and dead-letter resend."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from bolide.base.clock import ManualClock
from bolide.base.errors import GroupNotFoundError, MessageNotFoundError, TopicNotFoundError
from bolide.client.admin import (
    RESET_TO_EARLIEST,
    RESET_TO_LATEST,
    START_BY_CONSUME_FROM,
    AdminClient,
)
from bolide.client.config import ConsumeFrom
from bolide.client.consumer.listener import ConsumeResult
from bolide.client.consumer.options import ConsumerOptions
from bolide.client.consumer.push_consumer import PushConsumer
from bolide.client.producer.producer import Producer
from bolide.protocol.bodies import MessageModel, MessageQueue, SubscriptionGroupConfig
from bolide.protocol.message import Message, MessageExt, PropertyKey
from bolide.remoting import ClientPool
from bolide.testing.cluster import Cluster
from tests.broker.admin_support import admin_cluster
from tests.integration.wire import BrokerWire, send_request

pytestmark = pytest.mark.timeout(120)

TOPIC = "AdminOrders"
QUEUES = 4
WAIT_S = 60.0
"""Guard on waiting for consumption: fails a hung test, never a measurement."""


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    async with admin_cluster(tmp_path / "cluster") as running:
        yield running


@pytest.fixture
async def admin(cluster: Cluster) -> AsyncIterator[AdminClient]:
    async with AdminClient(cluster.namesrv_address) as client:
        yield client


class Inbox:
    """An async listener recording (queue id, queue offset, body) of what it consumed."""

    def __init__(self, hold: Callable[[MessageExt], bool] | None = None) -> None:
        self.messages: list[MessageExt] = []
        self.arrived = asyncio.Event()
        self.gate = asyncio.Event()
        self._hold = hold

    async def __call__(self, messages: list[MessageExt]) -> ConsumeResult:
        for message in messages:
            if self._hold is not None and self._hold(message):
                await self.gate.wait()
            self.messages.append(message)
        self.arrived.set()
        return ConsumeResult.SUCCESS

    async def wait_for(self, predicate: Callable[[list[MessageExt]], bool]) -> None:
        async with asyncio.timeout(WAIT_S):
            while not predicate(self.messages):
                self.arrived.clear()
                await self.arrived.wait()


async def produce(cluster: Cluster, count_per_queue: int, topic: str = TOPIC) -> None:
    async with Producer("PG_ADMIN_TEST", cluster.namesrv_address) as producer:
        for index in range(count_per_queue):
            for queue_id in range(QUEUES):
                queue = MessageQueue(topic, "broker-a", queue_id)
                message = Message(
                    topic, f"{queue_id}:{index}".encode(), keys=f"k{queue_id}-{index}"
                )
                await producer.send(message, queue=queue)


def consumer(
    cluster: Cluster, group: str, inbox: Inbox, name: str, **options: object
) -> PushConsumer:
    push = PushConsumer(
        group,
        cluster.namesrv_address,
        instance_name=name,
        consume_from=ConsumeFrom.FIRST_OFFSET,
        **options,  # type: ignore[arg-type]
    )
    push.subscribe(TOPIC, "*")
    push.register_listener(inbox)
    return push


# --- topics and groups ----------------------------------------------------------------------------


async def test_topic_lifecycle(cluster: Cluster, admin: AdminClient) -> None:
    assert await admin.create_topic(TOPIC, queue_count=QUEUES) == ["broker-a"]
    assert TOPIC in await admin.topic_list()
    route = await admin.topic_route(TOPIC)
    assert [q.write_queue_count for q in route.queue_datas] == [QUEUES]
    await produce(cluster, 2)
    status = await admin.topic_status(TOPIC)
    assert [(s.queue.queue_id, s.min_offset, s.max_offset) for s in status] == [
        (queue_id, 0, 2) for queue_id in range(QUEUES)
    ]
    assert all(s.last_update_timestamp_ms > 0 for s in status)
    await admin.update_topic(TOPIC, read_queue_count=6, write_queue_count=6, perm=4)
    config = (await admin.topic_configs(TOPIC))["broker-a"]
    assert (config.read_queue_count, config.write_queue_count, config.perm) == (6, 6, 4)
    assert await admin.delete_topic(TOPIC) == ["broker-a"]
    assert TOPIC not in await admin.topic_list()
    with pytest.raises(TopicNotFoundError):
        await admin.topic_status(TOPIC)


async def test_group_lifecycle(admin: AdminClient) -> None:
    config = SubscriptionGroupConfig("G_LIFE", retry_max_times=3, consume_broadcast_enable=False)
    assert await admin.create_group(config) == ["broker-a"]
    [summary] = [g for g in await admin.list_groups() if g.group == "G_LIFE"]
    assert (summary.config.retry_max_times, summary.online_clients) == (3, 0)
    await admin.update_group("G_LIFE", retry_max_times=5)
    [summary] = [g for g in await admin.list_groups() if g.group == "G_LIFE"]
    assert (summary.config.retry_max_times, summary.config.consume_broadcast_enable) == (5, False)
    assert await admin.consumer_connections("G_LIFE") is None
    assert await admin.delete_group("G_LIFE") == ["broker-a"]
    for attempt in (
        admin.group_progress("G_LIFE"),
        admin.delete_group("G_LIFE"),
        admin.ensure_group("G_LIFE"),
    ):
        with pytest.raises(GroupNotFoundError, match="G_LIFE"):
            await attempt


async def test_progress_says_where_a_new_group_starts(cluster: Cluster, admin: AdminClient) -> None:
    """A group with nothing committed: each queue's row says where the group will start, as
    the broker's newGroupStartRule answers (the default: at 0 on a young queue)."""
    await produce(cluster, 2)
    await admin.create_group(SubscriptionGroupConfig("G_NEW"))
    progress = await admin.group_progress("G_NEW", topic=TOPIC)
    assert [(row.consumer_offset, row.start_offset) for row in progress.queues] == [(0, 0)] * 4
    assert any("newGroupStartRule" in note for note in progress.notes)
    assert progress.to_dict()["queues"][0]["startOffset"] == 0


async def test_progress_leaves_the_start_to_consume_from_where_the_broker_says(
    tmp_path: Path,
) -> None:
    settings = {"newGroupStartRule": "CONSUME_FROM"}
    async with admin_cluster(tmp_path / "c", settings=settings) as cluster:
        await produce(cluster, 2)
        async with AdminClient(cluster.namesrv_address) as admin:
            await admin.create_group(SubscriptionGroupConfig("G_NEW"))
            progress = await admin.group_progress("G_NEW", topic=TOPIC)
    assert {row.start_offset for row in progress.queues} == {START_BY_CONSUME_FROM}


# --- reset offset (RocketMQ's consumption progress)
# ----------------------------------------------------------------


async def test_reset_reaches_a_live_consumer_at_once(cluster: Cluster, admin: AdminClient) -> None:
    """The consumer runs on a manual clock that never moves: no rebalance or persistence timer
    can fire, so the re-delivery comes from the broker's RESET_CONSUMER_CLIENT_OFFSET alone."""
    await admin.create_topic(TOPIC, queue_count=QUEUES)
    await produce(cluster, 5)
    inbox = Inbox()
    push = consumer(cluster, "G_LIVE", inbox, "live", clock=ManualClock())
    await push.start()
    try:
        await inbox.wait_for(lambda got: len(got) >= 5 * QUEUES)
        store = cluster.brokers[0].context.store
        reset_ms = store.store_time_at(TOPIC, 0, 3)
        first_new = len(inbox.messages)
        started = time.monotonic()
        result = await admin.reset_offset("G_LIVE", TOPIC, reset_ms)
        assert [client.client_id for client in result.clients] == [push.instance.client_id]
        targets = {q.queue_id: offset for q, offset in result.offsets.items()}
        assert targets[0] == store.offset_for_timestamp(TOPIC, 0, reset_ms) <= 3
        expected = sum(5 - offset for offset in targets.values())
        await inbox.wait_for(lambda got: len(got) >= first_new + expected)
        elapsed_ms = (time.monotonic() - started) * 1000
        print(f"live Bolide consumer re-consumed from the reset point {elapsed_ms:.0f} ms after it")
        again = inbox.messages[first_new:]
        for queue_id, offset in targets.items():
            redelivered = [m.queue_offset for m in again if m.queue_id == queue_id]
            assert min(redelivered, default=offset) == offset  # resumes exactly there
            assert sorted(set(redelivered)) == list(range(offset, 5))
    finally:
        await push.shutdown()


async def test_offline_group_resumes_from_the_reset_point(
    cluster: Cluster, admin: AdminClient
) -> None:
    await admin.create_topic(TOPIC, queue_count=QUEUES)
    await produce(cluster, 3)
    inbox = Inbox()
    push = consumer(cluster, "G_OFFLINE", inbox, "first")
    await push.start()
    await inbox.wait_for(lambda got: len(got) >= 3 * QUEUES)
    await push.shutdown()  # offsets persisted at shutdown
    progress = await admin.group_progress("G_OFFLINE")
    assert not progress.online and progress.total_lag == 0

    result = await admin.reset_offset("G_OFFLINE", TOPIC, RESET_TO_EARLIEST)
    assert not result.online
    progress = await admin.group_progress("G_OFFLINE", topic=TOPIC)
    assert [(row.consumer_offset, row.lag) for row in progress.queues] == [(0, 3)] * QUEUES

    again = Inbox()
    restarted = consumer(cluster, "G_OFFLINE", again, "second")
    await restarted.start()
    try:
        await again.wait_for(lambda got: len(got) >= 3 * QUEUES)
        assert sorted((m.queue_id, m.queue_offset) for m in again.messages) == [
            (queue_id, offset) for queue_id in range(QUEUES) for offset in range(3)
        ]
    finally:
        await restarted.shutdown()
    await admin.reset_offset("G_OFFLINE", TOPIC, RESET_TO_LATEST)
    assert (await admin.group_progress("G_OFFLINE", topic=TOPIC)).total_lag == 0


# --- progress ---------------------------------------------------------------------------------


async def test_progress_of_a_clustering_group_with_lag_and_owners(
    cluster: Cluster, admin: AdminClient
) -> None:
    await admin.create_topic(TOPIC, queue_count=QUEUES)
    await produce(cluster, 6)
    inboxes = [Inbox(hold=lambda m: m.queue_offset >= 2) for _ in range(2)]
    pushes = [consumer(cluster, "G_LAG", inbox, f"c{n}") for n, inbox in enumerate(inboxes)]
    for push in pushes:
        await push.start()
    try:
        offsets = cluster.brokers[0].context.offsets

        async def committed_at_two() -> bool:
            for push in pushes:
                await push.persist_offsets()
            return offsets.queue_offsets("G_LAG", TOPIC) == dict.fromkeys(range(QUEUES), 2)

        async with asyncio.timeout(WAIT_S):
            while not await committed_at_two():  # noqa: ASYNC110 - oneway commits: no event
                await asyncio.sleep(0)
        progress = await admin.group_progress("G_LAG", topic=TOPIC)
        assert progress.message_model == "CLUSTERING"
        assert [(r.broker_offset, r.consumer_offset, r.lag) for r in progress.queues] == [
            (6, 2, 4)
        ] * QUEUES
        owners = {row.queue: row.client_id for row in progress.queues}
        for push in pushes:
            for queue in push.process_queues:
                if queue.topic == TOPIC:
                    assert owners[queue] == push.instance.client_id
        assert set(owners.values()) == {push.instance.client_id for push in pushes}
    finally:
        for inbox in inboxes:
            inbox.gate.set()
        for push in pushes:
            await push.shutdown()


async def test_progress_of_a_broadcasting_group_comes_from_the_clients(
    cluster: Cluster, admin: AdminClient, tmp_path: Path
) -> None:
    await admin.create_topic(TOPIC, queue_count=QUEUES)
    await produce(cluster, 5)
    slow, fast = Inbox(hold=lambda m: m.queue_offset >= 1), Inbox()
    pushes = [
        consumer(cluster, "G_BCAST", inbox, name, message_model=MessageModel.BROADCASTING,
                 options=ConsumerOptions(offset_base_directory=tmp_path / name))
        for inbox, name in ((slow, "slow"), (fast, "fast"))
    ]  # fmt: skip
    for push in pushes:
        await push.start()
    try:
        await fast.wait_for(lambda got: len(got) >= 5 * QUEUES)
        await slow.wait_for(lambda got: len(got) >= QUEUES)
        slow_id, fast_id = (push.instance.client_id for push in pushes)

        async def reported() -> dict[tuple[str | None, int], tuple[int, int]]:
            progress = await admin.group_progress("G_BCAST", topic=TOPIC)
            assert progress.message_model == "BROADCASTING"
            return {
                (row.client_id, row.queue.queue_id): (row.consumer_offset, row.lag)
                for row in progress.queues
            }

        expected = {(slow_id, q): (1, 4) for q in range(QUEUES)} | {
            (fast_id, q): (5, 0) for q in range(QUEUES)
        }
        async with asyncio.timeout(WAIT_S):
            while await reported() != expected:  # noqa: ASYNC110 - asks the clients each time
                await asyncio.sleep(0)
    finally:
        slow.gate.set()
        for push in pushes:
            await push.shutdown()


# --- messages ---------------------------------------------------------------------------------


async def test_message_lookups_and_tail(cluster: Cluster, admin: AdminClient) -> None:
    await admin.create_topic(TOPIC, queue_count=QUEUES)
    begin_ms = time.time_ns() // 1_000_000 - 1
    sent = await admin.send_message(Message(TOPIC, b"find me", tags="t", keys="key-1 key-2"))
    await produce(cluster, 2)
    [by_id] = await admin.get_message(sent.msg_id, topic=TOPIC)
    [by_offset_id] = await admin.get_message(sent.offset_msg_id)
    assert by_id.body == by_offset_id.body == b"find me"
    [by_key] = await admin.query_by_key(TOPIC, "key-2")
    assert by_key.msg_id == sent.msg_id
    with pytest.raises(MessageNotFoundError, match="--topic"):
        await admin.get_message(sent.msg_id)
    with pytest.raises(MessageNotFoundError):
        await admin.get_message("0" * 31 + "X")

    in_range = await admin.query_by_time(TOPIC, begin_ms, time.time_ns() // 1_000_000 + 1)
    assert len(in_range) == 1 + 2 * QUEUES
    done: list[tuple[int, int]] = []
    await admin.query_by_time(
        TOPIC, begin_ms, begin_ms + 10**9, on_progress=lambda d, t: done.append((d, t))
    )
    assert done[-1] == (QUEUES, QUEUES)

    tailed: list[bytes] = []
    everything = admin.tail(TOPIC, start_ms=RESET_TO_EARLIEST)
    async for message in everything:
        tailed.append(message.body)
        if len(tailed) == len(in_range):
            break
    await everything.aclose()
    assert sorted(tailed) == sorted(m.body for m in in_range)

    # From a time on: what is stored after it, whenever the tail's pulls start.
    live = admin.tail(TOPIC, start_ms=time.time_ns() // 1_000_000, expression="wanted")
    waiting = asyncio.ensure_future(anext(live))
    await admin.send_message(Message(TOPIC, b"skipped", tags="other"))
    await admin.send_message(Message(TOPIC, b"new", tags="wanted"))
    assert (await asyncio.wait_for(waiting, WAIT_S)).body == b"new"
    await live.aclose()


async def test_dead_letters_go_back_to_their_group(cluster: Cluster, admin: AdminClient) -> None:
    await admin.create_topic(TOPIC, queue_count=QUEUES)
    inbox = Inbox()
    push = consumer(cluster, "G_DLQ", inbox, "dlq")
    await push.start()  # creates %RETRY%G_DLQ
    pool = ClientPool()
    try:
        wire = BrokerWire(pool, cluster.brokers[0].address)
        for body in (b"dead-1", b"dead-2"):
            response = await wire.invoke(
                send_request("%RETRY%G_DLQ", body, properties={PropertyKey.RETRY_TOPIC: TOPIC},
                             reconsume_times=16, max_reconsume_times=16)
            )  # fmt: skip
            assert response.code == 0, response.remark
        first = await admin.resend_dead_letters("G_DLQ", begin_ms=0)
        assert sorted(o.error or "" for o in first) == ["", ""]
        assert {o.original_topic for o in first} == {TOPIC}
        await inbox.wait_for(lambda got: len(got) >= 2)
        assert sorted(m.body for m in inbox.messages) == [b"dead-1", b"dead-2"]
        assert {m.topic for m in inbox.messages} == {TOPIC}
        assert {m.reconsume_times for m in inbox.messages} == {0}
        one = await admin.resend_dead_letters("G_DLQ", msg_ids=[first[0].msg_id])
        assert [o.error for o in one] == [None]
        await inbox.wait_for(lambda got: len(got) >= 3)
        missing = await admin.resend_dead_letters("G_DLQ", msg_ids=["NOPE"])
        assert missing[0].error is not None
    finally:
        await pool.close()
        await push.shutdown()


async def test_blocking_facade(cluster: Cluster) -> None:
    """``bolide.AdminClient`` runs the same core on its own loop thread (called from a worker
    thread here: this test's loop serves the broker)."""
    from bolide.client.blocking.admin import AdminClient as BlockingAdminClient

    def session() -> tuple[list[str], list[str], list[bytes]]:
        with BlockingAdminClient(cluster.namesrv_address) as admin:
            brokers = admin.create_topic(TOPIC, queue_count=QUEUES)
            admin.send_message(Message(TOPIC, b"blocking"))
            tailed = admin.tail(TOPIC, start_ms=RESET_TO_EARLIEST)
            first = next(tailed)
            tailed.close()
            return brokers, admin.topic_list(), [first.body]

    brokers, topics, bodies = await asyncio.to_thread(session)
    assert brokers == ["broker-a"] and TOPIC in topics and bodies == [b"blocking"]


async def test_two_brokers(tmp_path: Path) -> None:
    """Creation, status, progress and reset span every broker of the cluster."""
    async with (
        admin_cluster(tmp_path / "two", broker_names=("broker-a", "broker-b")) as two,
        AdminClient(two.namesrv_address) as admin,
    ):
        assert await admin.create_topic(TOPIC, queue_count=2) == ["broker-a", "broker-b"]
        async with Producer("PG_TWO", two.namesrv_address) as producer:
            for broker in ("broker-a", "broker-b"):
                for queue_id in range(2):
                    queue = MessageQueue(TOPIC, broker, queue_id)
                    await producer.send(Message(TOPIC, b"x"), queue=queue)
        status = await admin.topic_status(TOPIC)
        assert {(s.queue.broker_name, s.max_offset) for s in status} == {
            ("broker-a", 1),
            ("broker-b", 1),
        }
        await admin.create_group(SubscriptionGroupConfig("G_TWO"))
        result = await admin.reset_offset("G_TWO", TOPIC, RESET_TO_EARLIEST)
        assert sorted((q.broker_name, q.queue_id) for q in result.offsets) == [
            ("broker-a", 0),
            ("broker-a", 1),
            ("broker-b", 0),
            ("broker-b", 1),
        ]
        progress = await admin.group_progress("G_TWO")
        assert progress.total_lag == 4
        assert {row.queue.broker_name for row in progress.queues} == {"broker-a", "broker-b"}
        [summary] = [g for g in await admin.list_groups() if g.group == "G_TWO"]
        assert summary.brokers == ("broker-a", "broker-b")
