"""A broker-pushed offset reset holds in every mode: every queue of the topic is marked dropped
before anything awaits, quiesced, then the offsets are written and persisted. Before, the
offsets were written first and the queues dropped one by one with a persist each: a queue not
yet dropped moved its offset back meanwhile (a pull answering NO_NEW_MSG, an orderly batch
finishing) and its drop persisted the old offset."""

from __future__ import annotations

import asyncio
from pathlib import Path

from bolide.base import limits
from bolide.base.clock import ManualClock
from bolide.client.config import ConsumeFrom
from bolide.client.consumer.allocate import AllocateAveragely
from bolide.client.consumer.offset_store import (
    LocalFileOffsetStore,
    OffsetStore,
    ReadOffsetType,
    RemoteOffsetStore,
)
from bolide.client.consumer.rebalance import QueueGate, Rebalancer
from bolide.protocol.bodies import ConsumeType, MessageModel, MessageQueue, SubscriptionData
from bolide.testing.waiting import until
from tests.client.consumer_peers import MemoryOffsetBroker, MemoryRebalanceClient, RecordingOwner
from tests.client.test_consume_orderly import Harness, Recorder

TOPIC = "T"
ME = "10.0.0.1@1#a"


def _rebalancer(
    store: OffsetStore,
    queues: list[MessageQueue],
    model: MessageModel,
    gate: QueueGate | None = None,
) -> Rebalancer:
    client = MemoryRebalanceClient(client_id=ME, routes={TOPIC: queues}, members=[ME])
    rebalancer = Rebalancer(
        "G",
        client=client,
        offset_store=store,
        strategy=AllocateAveragely(),
        message_model=model,
        consume_type=ConsumeType.CONSUME_PASSIVELY,
        consume_from=ConsumeFrom.FIRST_OFFSET,
        consume_timestamp_ms=0,
        clock=ManualClock(),
        owner=RecordingOwner(),
        gate=gate,
    )
    rebalancer.subscriptions[TOPIC] = SubscriptionData.from_expression(TOPIC, "*", 0)
    return rebalancer


class SocketLikeBroker(MemoryOffsetBroker):
    """A broker whose offset update yields to the loop, as a send on a socket does."""

    async def update_consumer_offset_oneway(self, queue: MessageQueue, offset: int) -> None:
        await asyncio.sleep(0)
        await super().update_consumer_offset_oneway(queue, offset)


def _pull_answers_while_reset_runs(
    rebalancer: Rebalancer, store: OffsetStore, queue: MessageQueue, next_offset: int
) -> asyncio.Future[None]:
    """What the pull loop does when a long poll of ``queue`` is released with NO_NEW_MSG
    while the reset is under way: commit the skipped range unless the queue is dropped."""
    process_queue = rebalancer.process_queues[queue]
    first = next(iter(rebalancer.process_queues.values()))

    async def answer() -> None:
        await until(lambda: first.dropped)  # the reset has begun
        if not process_queue.dropped:
            store.update_offset(queue, next_offset, increase_only=True)

    return asyncio.ensure_future(answer())


async def test_broadcasting_reset_of_two_queues_holds(tmp_path: Path) -> None:
    queues = [MessageQueue(TOPIC, "broker-a", queue_id) for queue_id in range(2)]
    store = LocalFileOffsetStore(tmp_path / "offsets.json")
    rebalancer = _rebalancer(store, queues, MessageModel.BROADCASTING)
    await rebalancer.do_rebalance()
    for queue in queues:
        store.update_offset(queue, 40, increase_only=True)
    answer = _pull_answers_while_reset_runs(rebalancer, store, queues[1], 50)
    await rebalancer.reset_offsets(TOPIC, dict.fromkeys(queues, 0))
    await answer
    reread = LocalFileOffsetStore(tmp_path / "offsets.json")
    await reread.load()
    assert [await reread.read_offset(q, ReadOffsetType.READ_FROM_MEMORY) for q in queues] == [0, 0]


async def test_clustering_reset_of_two_queues_holds() -> None:
    queues = [MessageQueue(TOPIC, "broker-a", queue_id) for queue_id in range(2)]
    broker = SocketLikeBroker(committed=dict.fromkeys(queues, 40))
    store = RemoteOffsetStore(broker)
    rebalancer = _rebalancer(store, queues, MessageModel.CLUSTERING)
    await rebalancer.do_rebalance()
    answer = _pull_answers_while_reset_runs(rebalancer, store, queues[1], 50)
    await rebalancer.reset_offsets(TOPIC, dict.fromkeys(queues, 0))
    await answer
    assert [broker.committed[queue] for queue in queues] == [0, 0]


async def _orderly_reset(*, batch_outlives_the_wait: bool) -> tuple[int, int]:
    """Two orderly queues, a batch (offset 100) in the listener of the first when a reset to
    5 arrives; returns the committed offsets of both after the reset."""
    recorder = Recorder()
    recorder.gate = asyncio.Event()
    harness = Harness(recorder)
    queues = [MessageQueue("T", "broker-a", queue_id) for queue_id in range(2)]
    rebalancer = _rebalancer(harness.store, queues, MessageModel.CLUSTERING, harness.service)
    harness.process_queues = rebalancer.process_queues
    await rebalancer.do_rebalance()
    harness.service.start()
    harness.feed(queues[0], range(100, 101))
    await until(lambda: recorder.running == 1)
    reset = asyncio.ensure_future(rebalancer.reset_offsets(TOPIC, dict.fromkeys(queues, 5)))
    await until(lambda: harness.clock.sleeper_count == 2)  # lock renewal; quiesce's wait
    if batch_outlives_the_wait:
        harness.clock.advance_ms(limits.ORDERLY_DROP_WAIT_MS)  # the reset's wait runs out
        await until(lambda: harness.clock.sleeper_count == 2)  # the rebalance's retry waits
    recorder.gate.set()  # the batch ends (after the reset wrote its offsets, in case 2)
    await reset
    committed = (await harness.committed(queues[0]), await harness.committed(queues[1]))
    await harness.service.shutdown()
    return committed


async def test_orderly_reset_with_a_batch_in_flight_holds() -> None:
    """The batch ends within the quiesce wait, or after it (the queue then stays dropped and
    its late commit is skipped); either way the committed offsets are the reset ones. A
    normal hand-over still commits its finished batch (test_consume_orderly)."""
    assert await _orderly_reset(batch_outlives_the_wait=False) == (5, 5)
    assert await _orderly_reset(batch_outlives_the_wait=True) == (5, 5)
