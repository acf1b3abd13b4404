"""The orderly consumer's say in the rebalance (RocketMQ's orderly consumption): a queue is taken
only once its
broker lock is held; a queue given up is quiesced first (the batch in flight ends), then its
offset is persisted and its lock released; a queue that cannot be quiesced in time stays,
dropped, and a later rebalance retries (re-creating it when it is ours again)."""

from __future__ import annotations

from dataclasses import dataclass, field

from bolide.base.clock import ManualClock
from bolide.client.config import ConsumeFrom
from bolide.client.consumer.allocate import AllocateAveragely
from bolide.client.consumer.offset_store import RemoteOffsetStore
from bolide.client.consumer.process_queue import ProcessQueue
from bolide.client.consumer.rebalance import Rebalancer
from bolide.protocol.bodies import ConsumeType, MessageModel, MessageQueue, SubscriptionData
from tests.client.consumer_peers import (
    MemoryOffsetBroker,
    MemoryRebalanceClient,
    RecordingOwner,
    queues,
)

TOPIC = "orders"
QUEUES = queues(TOPIC, 4)
ME, OTHER = "10.0.0.1@1#a", "10.0.0.2@1#b"


@dataclass
class ScriptedGate:
    """A gate whose answers the test sets; it records every call in order."""

    refused: set[MessageQueue] = field(default_factory=set)
    busy: set[MessageQueue] = field(default_factory=set)
    calls: list[tuple[str, MessageQueue]] = field(default_factory=list)

    async def admit(self, queue: MessageQueue, process_queue: ProcessQueue) -> bool:
        self.calls.append(("admit", queue))
        process_queue.locked = queue not in self.refused
        return process_queue.locked

    async def quiesce(self, queue: MessageQueue, process_queue: ProcessQueue) -> bool:
        assert process_queue.dropped, "quiesced only once dropped"
        self.calls.append(("quiesce", queue))
        return queue not in self.busy

    async def release(self, queue: MessageQueue, process_queue: ProcessQueue) -> None:
        self.calls.append(("release", queue))


class Setup:
    def __init__(self) -> None:
        self.client = MemoryRebalanceClient(client_id=ME, routes={TOPIC: QUEUES}, members=[ME])
        self.broker = MemoryOffsetBroker(committed=dict.fromkeys(QUEUES, 10))
        self.store = RemoteOffsetStore(self.broker)
        self.owner = RecordingOwner()
        self.gate = ScriptedGate()
        self.rebalancer = Rebalancer(
            "G",
            client=self.client,
            offset_store=self.store,
            strategy=AllocateAveragely(),
            message_model=MessageModel.CLUSTERING,
            consume_type=ConsumeType.CONSUME_PASSIVELY,
            consume_from=ConsumeFrom.FIRST_OFFSET,
            consume_timestamp_ms=0,
            clock=ManualClock(),
            owner=self.owner,
            gate=self.gate,
        )
        self.rebalancer.subscriptions[TOPIC] = SubscriptionData.from_expression(TOPIC, "*", 0)

    @property
    def held(self) -> set[MessageQueue]:
        return set(self.rebalancer.process_queues)


async def test_only_queues_whose_lock_was_granted_are_taken() -> None:
    setup = Setup()
    setup.gate.refused = {QUEUES[1]}
    assert await setup.rebalancer.do_rebalance()
    assert setup.held == {QUEUES[0], QUEUES[2], QUEUES[3]}
    assert [queue for queue, _ in setup.owner.added] == [QUEUES[0], QUEUES[2], QUEUES[3]]
    assert all(process_queue.locked for process_queue in setup.rebalancer.process_queues.values())
    setup.gate.refused.clear()  # the previous owner let it go: the next rebalance takes it
    assert await setup.rebalancer.do_rebalance()
    assert setup.held == set(QUEUES)
    assert setup.owner.added[-1] == (QUEUES[1], 10)


async def test_a_queue_taken_in_vain_is_released() -> None:
    setup = Setup()
    setup.broker.unreachable = True  # the start offset cannot be read
    assert not await setup.rebalancer.do_rebalance()
    assert setup.held == set()
    assert [kind for kind, _ in setup.gate.calls] == ["admit", "release"] * 4


async def test_a_queue_given_up_is_quiesced_persisted_then_released() -> None:
    setup = Setup()
    await setup.rebalancer.do_rebalance()
    process_queue = setup.rebalancer.process_queues[QUEUES[3]]
    setup.store.update_offset(QUEUES[3], 42, increase_only=False)
    setup.gate.calls.clear()
    setup.client.members = [ME, OTHER]  # QUEUES 2 and 3 go to OTHER
    assert await setup.rebalancer.do_rebalance()
    assert setup.held == {QUEUES[0], QUEUES[1]}
    assert setup.gate.calls == [
        ("quiesce", QUEUES[2]),
        ("release", QUEUES[2]),
        ("quiesce", QUEUES[3]),
        ("release", QUEUES[3]),
    ]
    assert process_queue.dropped
    assert (QUEUES[3], 42) in setup.broker.updates, "persisted before the release"
    assert setup.owner.removed == [QUEUES[2], QUEUES[3]]


async def test_a_busy_queue_stays_dropped_until_it_can_be_given_up() -> None:
    setup = Setup()
    await setup.rebalancer.do_rebalance()
    busy = setup.rebalancer.process_queues[QUEUES[3]]
    setup.gate.busy = {QUEUES[3]}
    setup.client.members = [ME, OTHER]
    await setup.rebalancer.do_rebalance()
    assert setup.held == {QUEUES[0], QUEUES[1], QUEUES[3]}, "kept: its batch is still running"
    assert busy.dropped
    assert QUEUES[3] not in setup.owner.removed
    assert ("release", QUEUES[3]) not in setup.gate.calls
    setup.gate.busy.clear()
    await setup.rebalancer.do_rebalance()
    assert setup.held == {QUEUES[0], QUEUES[1]}
    assert setup.gate.calls[-2:] == [("quiesce", QUEUES[3]), ("release", QUEUES[3])]


async def test_a_deferred_queue_that_is_ours_again_is_recreated() -> None:
    setup = Setup()
    await setup.rebalancer.do_rebalance()
    stuck = setup.rebalancer.process_queues[QUEUES[3]]
    setup.gate.busy = {QUEUES[3]}
    setup.client.members = [ME, OTHER]
    await setup.rebalancer.do_rebalance()
    setup.client.members = [ME]  # OTHER left: every queue is ours again
    setup.gate.busy.clear()
    setup.gate.calls.clear()
    await setup.rebalancer.do_rebalance()
    assert setup.held == set(QUEUES)
    fresh = setup.rebalancer.process_queues[QUEUES[3]]
    assert fresh is not stuck and not fresh.dropped
    assert ("quiesce", QUEUES[3]) in setup.gate.calls
    assert setup.gate.calls[-1] == ("admit", QUEUES[3])
