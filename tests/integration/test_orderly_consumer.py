"""The orderly push consumer and the broker's lock table over real sockets (issue 7).

* LOCK_BATCH_MQ / UNLOCK_BATCH_MQ on the broker: queues held by a live client are refused to
  another, unlock by a non-owner is ignored, a malformed body is an error;
* ``send(..., sharding_key=...)``: one key, one queue, in send order;
* an orderly consumer takes only queues it could lock, consumes each in order, commits after
  each batch, and unlocks everything at shutdown; a second member gets queues only once the
  first gave them up;
* a message that keeps failing blocks its queue, the blocked time and retry count show in
  GET_CONSUMER_RUNNING_INFO, and after ``max_reconsume_times`` it goes to ``%DLQ%<group>``
  while the queue moves on.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bolide.base.errors import ConfigError
from bolide.client import rpc
from bolide.client.config import ConsumeFrom
from bolide.client.consumer.consume_orderly import (
    INFO_BLOCKED_MS,
    INFO_DEAD_LETTERED,
    INFO_RETRY_TIMES,
    OrderlyContext,
)
from bolide.client.consumer.listener import OrderlyResult
from bolide.client.consumer.options import ConsumerOptions
from bolide.client.consumer.push_consumer import PushConsumer
from bolide.client.message import Message
from bolide.client.producer.producer import Producer
from bolide.protocol.bodies import (
    ConsumerRunningInfo,
    LockBatchRequestBody,
    LockBatchResponseBody,
    MessageQueue,
)
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import (
    GetConsumerRunningInfoRequestHeader,
    PullMessageRequestHeader,
    PullSysFlag,
)
from bolide.protocol.message import MessageExt
from bolide.protocol.record import decode_records
from bolide.remoting import ClientPool
from bolide.testing.cluster import Cluster
from tests.integration.client_support import consumer_connection, create_topic, eventually

TOPIC = "orderly-orders"
QUEUES = [MessageQueue(TOPIC, "broker-a", queue_id) for queue_id in range(4)]


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    async with Cluster(tmp_path / "cluster") as running:
        await create_topic(running, TOPIC, 4)
        yield running


@pytest.fixture
async def producer(cluster: Cluster) -> AsyncIterator[Producer]:
    async with Producer("orderly-producers", namesrv=cluster.namesrv_address) as running:
        yield running


class Orderly:
    """An orderly listener recording (queue id, offset, body); ``fail`` bodies are suspended."""

    def __init__(self, fail: frozenset[bytes] = frozenset()) -> None:
        self.seen: list[tuple[int, int, bytes]] = []
        self.fail = fail

    async def __call__(self, messages: list[MessageExt], context: OrderlyContext) -> OrderlyResult:
        self.seen.extend((m.queue_id, m.queue_offset, m.body) for m in messages)
        if any(m.body in self.fail for m in messages):
            context.suspend_time_ms = 10
            return OrderlyResult.SUSPEND_CURRENT_QUEUE_A_MOMENT
        return OrderlyResult.SUCCESS

    def bodies(self, queue_id: int) -> list[bytes]:
        return [body for q, _, body in self.seen if q == queue_id]


def orderly(cluster: Cluster, group: str, listener: Orderly, **options: object) -> PushConsumer:
    push = PushConsumer(
        group,
        namesrv=cluster.namesrv_address,
        consume_from=ConsumeFrom.FIRST_OFFSET,
        orderly=True,
        **options,  # type: ignore[arg-type]
    )
    push.subscribe(TOPIC)
    push.register_listener(listener)
    return push


async def lock_request(
    pool: ClientPool, address: str, code: int, client_id: str, queues: list[MessageQueue]
) -> RemotingCommand:
    body = LockBatchRequestBody("g-wire", client_id, frozenset(queues))
    return await pool.invoke(address, RemotingCommand.request(code, body=body.to_json()), 5_000)


async def test_lock_and_unlock_batch_over_the_wire(cluster: Cluster) -> None:
    broker = cluster.brokers[0]
    pool = ClientPool()
    try:
        first = await lock_request(pool, broker.address, RequestCode.LOCK_BATCH_MQ, "a", QUEUES[:2])
        assert first.code == ResponseCode.SUCCESS
        assert LockBatchResponseBody.from_json(first.body).lock_ok_mq_set == set(QUEUES[:2])
        second = await lock_request(pool, broker.address, RequestCode.LOCK_BATCH_MQ, "b", QUEUES)
        assert LockBatchResponseBody.from_json(second.body).lock_ok_mq_set == set(QUEUES[2:])
        ignored = await lock_request(
            pool, broker.address, RequestCode.UNLOCK_BATCH_MQ, "b", QUEUES[:2]
        )
        assert ignored.code == ResponseCode.SUCCESS
        assert broker.context.locks.locked_queues("g-wire") == {
            QUEUES[0]: "a",
            QUEUES[1]: "a",
            QUEUES[2]: "b",
            QUEUES[3]: "b",
        }
        released = await lock_request(
            pool, broker.address, RequestCode.UNLOCK_BATCH_MQ, "a", QUEUES
        )
        assert released.code == ResponseCode.SUCCESS
        assert set(broker.context.locks.locked_queues("g-wire")) == set(QUEUES[2:])
        bad = await pool.invoke(
            broker.address,
            RemotingCommand.request(RequestCode.LOCK_BATCH_MQ, body=b"{not json"),
            5_000,
        )
        assert bad.code == ResponseCode.SYSTEM_ERROR
    finally:
        await pool.close()


async def test_send_with_a_sharding_key_keeps_each_key_on_one_queue(
    cluster: Cluster, producer: Producer
) -> None:
    queues_of: dict[str, set[int]] = {}
    for seq in range(5):
        for key in ("alpha", "beta", "gamma", "delta", "epsilon"):
            result = await producer.send(Message(TOPIC, f"{key}:{seq}".encode()), sharding_key=key)
            queues_of.setdefault(key, set()).add(result.queue.queue_id)
    assert all(len(queue_ids) == 1 for queue_ids in queues_of.values())
    with pytest.raises(ConfigError):
        await producer.send(Message(TOPIC, b"x"), sharding_key="k", queue=QUEUES[0])
    broker = cluster.brokers[0]
    address = broker.address
    for key, (queue_id,) in queues_of.items():
        header_queue = MessageQueue(TOPIC, "broker-a", queue_id)
        seen = [
            body
            for body in await read_queue(producer, address, header_queue)
            if body.startswith(key.encode() + b":")
        ]
        assert seen == [f"{key}:{seq}".encode() for seq in range(5)]


async def read_queue(producer: Producer, address: str, queue: MessageQueue) -> list[bytes]:
    header = PullMessageRequestHeader(
        "reader", queue.topic, queue.queue_id, 0, 32, PullSysFlag.SUBSCRIPTION, 0, 0, 0, "*"
    )
    result = await rpc.pull_message(producer.instance.pool, address, header, 5_000)
    return [m.body for m in result.messages]


async def test_an_orderly_consumer_locks_consumes_in_order_and_unlocks_at_shutdown(
    cluster: Cluster, producer: Producer
) -> None:
    keys = [f"key-{index}" for index in range(8)]
    for seq in range(6):
        for key in keys:
            await producer.send(Message(TOPIC, f"{key}:{seq}".encode()), sharding_key=key)
    locks = cluster.brokers[0].context.locks
    listener = Orderly()
    push = orderly(cluster, "g-orderly", listener)
    async with push:
        await eventually(lambda: len(listener.seen) == 48)
        client_id = push.instance.client_id
        held = locks.locked_queues("g-orderly")
        assert {queue for queue, owner in held.items() if owner == client_id} >= set(QUEUES)
        for key in keys:
            seqs = [
                int(body.split(b":")[1])
                for _, _, body in listener.seen
                if body.split(b":")[0] == key.encode()
            ]
            assert seqs == list(range(6)), key
        for queue_id in range(4):
            offsets = [offset for q, offset, _ in listener.seen if q == queue_id]
            assert offsets == sorted(offsets) == list(range(len(offsets)))
        await eventually(lambda: sum(push.offset_store.clone_offset_table(TOPIC).values()) == 48)
    assert locks.locked_queues("g-orderly") == {}, "shutdown unlocked every queue"
    assert sum(committed(cluster, "g-orderly", q) for q in QUEUES) == 48


def committed(cluster: Cluster, group: str, queue: MessageQueue) -> int:
    return cluster.brokers[0].context.offsets.query_offset(group, queue.topic, queue.queue_id)


async def test_a_second_member_gets_queues_only_after_the_first_gave_them_up(
    cluster: Cluster, producer: Producer
) -> None:
    locks = cluster.brokers[0].context.locks
    first_listener, second_listener = Orderly(), Orderly()
    first = orderly(cluster, "g-two", first_listener, instance_name="first")
    second = orderly(cluster, "g-two", second_listener, instance_name="second")
    async with first:
        await eventually(lambda: len([q for q in first.process_queues if q.topic == TOPIC]) == 4)
        async with second:
            await eventually(
                lambda: (
                    len([q for q in second.process_queues if q.topic == TOPIC]) == 2
                    and len([q for q in first.process_queues if q.topic == TOPIC]) == 2
                )
            )
            held = locks.locked_queues("g-two")
            for member in (first, second):
                mine = {q for q in member.process_queues if q.topic == TOPIC}
                assert all(held[q] == member.instance.client_id for q in mine)
            for index in range(40):
                await producer.send(
                    Message(TOPIC, f"k{index}:0".encode()), sharding_key=f"k{index}"
                )
            await eventually(lambda: len(first_listener.seen) + len(second_listener.seen) == 40)
            first_ids = {q for q, _, _ in first_listener.seen}
            second_ids = {q for q, _, _ in second_listener.seen}
            assert not first_ids & second_ids
        await eventually(lambda: len([q for q in first.process_queues if q.topic == TOPIC]) == 4)


async def test_a_failing_message_blocks_its_queue_then_goes_to_the_dlq(
    cluster: Cluster, producer: Producer
) -> None:
    queue = QUEUES[1]
    for body in (b"before", b"poison", b"after-1", b"after-2"):
        await producer.send(Message(TOPIC, body), queue=queue)
    listener = Orderly(fail=frozenset({b"poison"}))
    push = orderly(cluster, "g-dlq", listener, options=ConsumerOptions(max_reconsume_times=3))
    async with push:
        await eventually(lambda: b"after-2" in listener.bodies(1))
        assert listener.bodies(1) == [b"before"] + [b"poison"] * 4 + [b"after-1", b"after-2"]
        info = await running_info(cluster, push)
        entry = info.mq_table[queue]
        assert entry[INFO_DEAD_LETTERED] == 1 and entry[INFO_RETRY_TIMES] == 0
        assert info.properties["PROP_CONSUMEORDERLY"] == "true"
        await eventually(lambda: push.offset_store.clone_offset_table(TOPIC).get(queue) == 4)
    assert committed(cluster, "g-dlq", queue) == 4, "persisted at shutdown"
    store = cluster.brokers[0].context.store
    found = store.get_message("%DLQ%g-dlq", 0, 0, 32, 1 << 20)
    (dead,) = decode_records(b"".join(bytes(view) for view in found.buffers))
    assert dead.body == b"poison"


async def test_running_info_shows_a_blocked_queue(cluster: Cluster, producer: Producer) -> None:
    queue = QUEUES[2]
    await producer.send(Message(TOPIC, b"poison"), queue=queue)
    listener = Orderly(fail=frozenset({b"poison"}))
    push = orderly(cluster, "g-blocked", listener)  # unlimited retries, as RocketMQ
    async with push:
        await eventually(lambda: len(listener.bodies(2)) >= 3)
        info = await running_info(cluster, push)
        entry = info.mq_table[queue]
        assert entry[INFO_RETRY_TIMES] >= 2
        assert entry[INFO_BLOCKED_MS] > 0
        assert entry["locked"] is True
    assert committed(cluster, "g-blocked", queue) <= 0, "never passed the failing message"


async def running_info(cluster: Cluster, push: PushConsumer) -> ConsumerRunningInfo:
    connection = consumer_connection(cluster, push.group, push.instance.client_id)
    header = GetConsumerRunningInfoRequestHeader(push.group, push.instance.client_id, False)
    request = RemotingCommand.request(RequestCode.GET_CONSUMER_RUNNING_INFO, header.to_ext_fields())
    response = await connection.invoke(request, 10_000)
    assert response.code == ResponseCode.SUCCESS
    return ConsumerRunningInfo.from_json(response.body)
