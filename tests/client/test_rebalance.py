"""Rebalance decisions (RocketMQ's offset management and rebalancing) on a manual clock: allocation
over sorted inputs,
dropping and adding queues, the consume-from rules, pull-expired detection, resets."""

from __future__ import annotations

import pytest

from bolide.base import limits
from bolide.base.clock import ManualClock
from bolide.client.config import ConsumeFrom
from bolide.client.consumer.allocate import AllocateAveragely
from bolide.client.consumer.offset_store import ReadOffsetType, RemoteOffsetStore
from bolide.client.consumer.process_queue import ProcessQueue
from bolide.client.consumer.rebalance import (
    Rebalancer,
    StartAction,
    StartDecision,
    decide_start_offset,
    plan_topic,
)
from bolide.protocol.bodies import ConsumeType, MessageModel, SubscriptionData
from bolide.protocol.system_topics import retry_topic
from tests.client.consumer_peers import (
    MemoryOffsetBroker,
    MemoryRebalanceClient,
    RecordingOwner,
    queues,
)

TOPIC = "orders"
QUEUES = queues(TOPIC, 8)
MEMBERS = ["10.0.0.3@1#c", "10.0.0.1@1#a", "10.0.0.2@1#b"]  # unsorted on purpose


# ---- pure decisions -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("consume_from", "topic", "stored", "expected"),
    [
        (ConsumeFrom.LAST_OFFSET, TOPIC, 17, StartDecision(StartAction.USE, 17)),
        (ConsumeFrom.FIRST_OFFSET, TOPIC, 17, StartDecision(StartAction.USE, 17)),
        (ConsumeFrom.TIMESTAMP, TOPIC, 0, StartDecision(StartAction.USE, 0)),
        (ConsumeFrom.LAST_OFFSET, TOPIC, -1, StartDecision(StartAction.MAX_OFFSET)),
        (ConsumeFrom.LAST_OFFSET, "%RETRY%G", -1, StartDecision(StartAction.USE, 0)),
        (ConsumeFrom.FIRST_OFFSET, TOPIC, -1, StartDecision(StartAction.USE, 0)),
        (ConsumeFrom.FIRST_OFFSET, "%RETRY%G", -1, StartDecision(StartAction.USE, 0)),
        (ConsumeFrom.TIMESTAMP, TOPIC, -1, StartDecision(StartAction.SEARCH_TIMESTAMP)),
        (ConsumeFrom.TIMESTAMP, "%RETRY%G", -1, StartDecision(StartAction.MAX_OFFSET)),
        (ConsumeFrom.LAST_OFFSET, TOPIC, -2, StartDecision(StartAction.SKIP)),
        (ConsumeFrom.FIRST_OFFSET, TOPIC, -2, StartDecision(StartAction.SKIP)),
    ],
)
def test_start_offset_rules(
    consume_from: ConsumeFrom, topic: str, stored: int, expected: StartDecision
) -> None:
    assert decide_start_offset(consume_from, topic, stored) == expected


def test_plan_drops_what_is_no_longer_ours_and_adds_the_new() -> None:
    held = {queue: ProcessQueue(0) for queue in QUEUES[:4]}
    held[queues("other", 1)[0]] = ProcessQueue(0)  # another topic is not touched
    plan = plan_topic(TOPIC, QUEUES[2:6], held, 1_000, ConsumeType.CONSUME_PASSIVELY)
    assert plan.remove == tuple(QUEUES[:2])
    assert plan.expired == ()
    assert plan.add == tuple(QUEUES[4:6])


def test_plan_restarts_expired_queues_of_push_consumers_only() -> None:
    held = {QUEUES[0]: ProcessQueue(0), QUEUES[1]: ProcessQueue(0)}
    held[QUEUES[1]].last_pull_timestamp_ms = 100_000
    now_ms = limits.PULL_MAX_IDLE_MS + 1
    push = plan_topic(TOPIC, QUEUES[:2], held, now_ms, ConsumeType.CONSUME_PASSIVELY)
    assert push.expired == (QUEUES[0],)
    assert push.add == (QUEUES[0],)
    pull = plan_topic(TOPIC, QUEUES[:2], held, now_ms, ConsumeType.CONSUME_ACTIVELY)
    assert not pull.changed


# ---- the shell on a manual clock --------------------------------------------------------------


class _Setup:
    def __init__(
        self,
        *,
        consume_from: ConsumeFrom = ConsumeFrom.LAST_OFFSET,
        model: MessageModel = MessageModel.CLUSTERING,
        consume_type: ConsumeType = ConsumeType.CONSUME_PASSIVELY,
    ) -> None:
        self.clock = ManualClock()
        self.client = MemoryRebalanceClient(client_id=MEMBERS[1])
        self.client.routes[TOPIC] = list(reversed(QUEUES))
        self.client.members = list(MEMBERS)
        self.broker = MemoryOffsetBroker()
        self.store = RemoteOffsetStore(self.broker)
        self.owner = RecordingOwner()
        self.rebalancer = Rebalancer(
            "G",
            client=self.client,
            offset_store=self.store,
            strategy=AllocateAveragely(),
            message_model=model,
            consume_type=consume_type,
            consume_from=consume_from,
            consume_timestamp_ms=1_699_999_000_000,
            clock=self.clock,
            owner=self.owner,
        )
        self.rebalancer.subscriptions[TOPIC] = SubscriptionData.from_expression(TOPIC, "*", 1)

    @property
    def owned(self) -> list[int]:
        return sorted(queue.queue_id for queue in self.rebalancer.process_queues)


async def test_first_rebalance_takes_the_averagely_share_with_start_offsets() -> None:
    setup = _Setup()
    setup.broker.committed[QUEUES[0]] = 40  # progress exists for queue 0 only
    setup.client.max_offsets = {queue: 100 + queue.queue_id for queue in QUEUES}
    assert await setup.rebalancer.do_rebalance()
    # 8 queues, 3 sorted members: a gets 0-2, b 3-5, c 6-7; this client is "a".
    assert setup.owned == [0, 1, 2]
    assert setup.owner.added == [(QUEUES[0], 40), (QUEUES[1], 101), (QUEUES[2], 102)]
    assert setup.owner.assignments == [(TOPIC, frozenset(QUEUES[:3]))]
    assert not await setup.rebalancer.do_rebalance()  # nothing changes the second time


async def test_member_leaving_and_joining_moves_queues() -> None:
    setup = _Setup(consume_from=ConsumeFrom.FIRST_OFFSET)
    await setup.rebalancer.do_rebalance()
    setup.store.update_offset(QUEUES[2], 7, increase_only=True)
    setup.client.members = [MEMBERS[1], MEMBERS[2]]  # "c" left: "a" takes 0-3, "b" 4-7
    assert await setup.rebalancer.do_rebalance()
    assert setup.owned == [0, 1, 2, 3]
    setup.client.members = ["10.0.0.0@1#0", *MEMBERS]  # a member sorting first joins
    assert await setup.rebalancer.do_rebalance()
    # 8 queues over 4: the new member takes 0-1, "a" takes 2-3.
    assert setup.owned == [2, 3]
    assert sorted(setup.owner.removed) == [QUEUES[0], QUEUES[1]]
    assert setup.broker.updates == []  # nothing consumed on them: nothing to persist
    setup.client.members = [MEMBERS[0]]  # only "c" is listed: "a" owns nothing
    await setup.rebalancer.do_rebalance()
    assert setup.owned == []
    assert (QUEUES[2], 7) in setup.broker.updates  # persisted when dropped ...
    assert await setup.store.read_offset(QUEUES[2], ReadOffsetType.READ_FROM_MEMORY) == -1
    # ... and forgotten locally: the next owner reads it from the broker.


async def test_dropped_queue_is_marked_for_in_flight_consumption() -> None:
    setup = _Setup()
    await setup.rebalancer.do_rebalance()
    kept = setup.rebalancer.process_queues[QUEUES[0]]
    setup.client.members = ["10.0.0.0@1#0", *MEMBERS]
    await setup.rebalancer.do_rebalance()
    assert kept.dropped


async def test_pull_expired_queue_is_restarted() -> None:
    setup = _Setup(consume_from=ConsumeFrom.FIRST_OFFSET)
    await setup.rebalancer.do_rebalance()
    first = dict(setup.rebalancer.process_queues)
    for process_queue in first.values():
        process_queue.last_pull_timestamp_ms = setup.clock.now_ms()
    setup.clock.advance_ms(limits.PULL_MAX_IDLE_MS)
    first[QUEUES[1]].last_pull_timestamp_ms = setup.clock.now_ms()  # only queue 1 pulls
    setup.clock.advance_ms(1)
    assert await setup.rebalancer.do_rebalance()
    restarted = sorted(queue.queue_id for queue, _ in setup.owner.added[3:])
    assert restarted == [0, 2]
    assert first[QUEUES[0]].dropped and not first[QUEUES[1]].dropped
    assert setup.rebalancer.process_queues[QUEUES[1]] is first[QUEUES[1]]


async def test_unreadable_offset_skips_the_queue_until_the_next_rebalance() -> None:
    setup = _Setup()
    setup.broker.unreachable = True
    assert not await setup.rebalancer.do_rebalance()
    assert setup.owned == []
    setup.broker.unreachable = False
    assert await setup.rebalancer.do_rebalance()
    assert setup.owned == [0, 1, 2]


async def test_timestamp_start_searches_the_broker() -> None:
    setup = _Setup(consume_from=ConsumeFrom.TIMESTAMP)
    for queue in QUEUES[:3]:
        setup.client.offsets_by_time[(queue, 1_699_999_000_000)] = 5 + queue.queue_id
    await setup.rebalancer.do_rebalance()
    assert setup.owner.added == [(QUEUES[0], 5), (QUEUES[1], 6), (QUEUES[2], 7)]


async def test_retry_topic_starts_at_zero_and_unknown_group_list_changes_nothing() -> None:
    setup = _Setup()
    retry = retry_topic("G")
    setup.client.routes[retry] = queues(retry, 1)
    setup.rebalancer.subscriptions[retry] = SubscriptionData.from_expression(retry, "*", 1)
    setup.client.members = [MEMBERS[1]]
    await setup.rebalancer.do_rebalance()
    assert (queues(retry, 1)[0], 0) in setup.owner.added
    setup.client.broker_down = True  # no member list: keep what we have
    assert not await setup.rebalancer.do_rebalance()
    assert len(setup.rebalancer.process_queues) == 9  # 8 topic queues + the retry queue


async def test_broadcasting_takes_every_queue_without_asking_for_members() -> None:
    setup = _Setup(model=MessageModel.BROADCASTING, consume_from=ConsumeFrom.FIRST_OFFSET)
    setup.client.members = []  # a member lookup would find nobody; broadcasting needs none
    await setup.rebalancer.do_rebalance()
    assert setup.owned == list(range(8))


async def test_unsubscribed_topic_queues_are_dropped() -> None:
    setup = _Setup()
    await setup.rebalancer.do_rebalance()
    del setup.rebalancer.subscriptions[TOPIC]
    assert await setup.rebalancer.do_rebalance()
    assert setup.owned == []
    assert sorted(setup.owner.removed) == QUEUES[:3]


async def test_reset_moves_offsets_and_restarts_the_queues() -> None:
    setup = _Setup(consume_from=ConsumeFrom.FIRST_OFFSET)
    await setup.rebalancer.do_rebalance()
    old = dict(setup.rebalancer.process_queues)
    setup.store.update_offset(QUEUES[0], 50, increase_only=True)
    await setup.rebalancer.reset_offsets(TOPIC, {QUEUES[0]: 10, QUEUES[1]: 20})
    assert all(process_queue.dropped for process_queue in old.values())
    assert setup.owner.added[-3:] == [(QUEUES[0], 10), (QUEUES[1], 20), (QUEUES[2], 0)]
    assert (QUEUES[0], 10) in setup.broker.updates  # the broker learnt the reset too


async def test_illegal_offset_fix_applies_only_while_the_queue_is_still_ours() -> None:
    setup = _Setup(consume_from=ConsumeFrom.FIRST_OFFSET)
    await setup.rebalancer.do_rebalance()
    process_queue = setup.rebalancer.process_queues[QUEUES[0]]
    stale = ProcessQueue(0)
    await setup.rebalancer.fix_illegal_offset(QUEUES[0], stale, 99)  # not ours: ignored
    assert setup.rebalancer.process_queues[QUEUES[0]] is process_queue
    await setup.rebalancer.fix_illegal_offset(QUEUES[0], process_queue, 99)
    assert QUEUES[0] not in setup.rebalancer.process_queues
    assert setup.broker.updates == [(QUEUES[0], 99)]
    await setup.rebalancer.do_rebalance()
    assert setup.owner.added[-1] == (QUEUES[0], 99)


async def test_closed_rebalancer_does_nothing() -> None:
    setup = _Setup()
    await setup.rebalancer.close()
    assert not await setup.rebalancer.do_rebalance()
    assert setup.owned == []
