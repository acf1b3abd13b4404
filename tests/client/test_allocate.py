"""Allocation strategies: every queue to exactly one consumer, order-independent, Java's
averagely results, and how many queues move when a consumer joins or leaves."""

from __future__ import annotations

import random

import pytest

from bolide.client.consumer.allocate import (
    AllocateAveragely,
    AllocateAveragelyByCircle,
    AllocateByConfig,
    AllocateConsistentHash,
    AllocateSticky,
    AllocateStrategy,
    allocate_all,
)
from bolide.protocol.bodies import MessageQueue

GROUP = "g"
QUEUES_8 = [MessageQueue("T", "broker-a", i) for i in range(8)]
IDS_3 = ["10.0.0.1@1#a", "10.0.0.1@1#b", "10.0.0.1@1#c"]

SHARING_STRATEGIES: list[AllocateStrategy] = [
    AllocateAveragely(),
    AllocateAveragelyByCircle(),
    AllocateConsistentHash(),
    AllocateSticky(),
]


def queues(count: int, brokers: int = 2) -> list[MessageQueue]:
    return [MessageQueue("T", f"broker-{i % brokers}", i // brokers) for i in range(count)]


def client_ids(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [f"10.0.{rng.randint(0, 255)}.{rng.randint(1, 254)}@{rng.randint(1, 99999)}#w{i}"
            for i in range(count)]  # fmt: skip


def owners(
    strategy: AllocateStrategy, qs: list[MessageQueue], ids: list[str]
) -> dict[MessageQueue, str]:
    result: dict[MessageQueue, str] = {}
    for client_id, share in allocate_all(strategy, GROUP, qs, ids).items():
        for queue in share:
            assert queue not in result, f"{queue} given to {result[queue]} and {client_id}"
            result[queue] = client_id
    return result


@pytest.mark.parametrize("strategy", SHARING_STRATEGIES, ids=lambda s: s.name)
@pytest.mark.parametrize(("queue_count", "id_count"), [(8, 3), (1, 4), (5, 5), (16, 6), (3, 1)])
def test_every_queue_goes_to_exactly_one_consumer(
    strategy: AllocateStrategy, queue_count: int, id_count: int
) -> None:
    qs, ids = queues(queue_count), client_ids(id_count, seed=queue_count * 31 + id_count)
    assert set(owners(strategy, qs, ids)) == set(qs)


@pytest.mark.parametrize("strategy", SHARING_STRATEGIES, ids=lambda s: s.name)
def test_result_does_not_depend_on_input_order(strategy: AllocateStrategy) -> None:
    qs, ids = queues(13), client_ids(4, seed=1)
    expected = allocate_all(strategy, GROUP, qs, ids)
    rng = random.Random(5)
    for _ in range(5):
        shuffled_queues, shuffled_ids = qs[:], ids[:]
        rng.shuffle(shuffled_queues)
        rng.shuffle(shuffled_ids)
        assert allocate_all(strategy, GROUP, shuffled_queues, shuffled_ids) == expected


@pytest.mark.parametrize("strategy", SHARING_STRATEGIES, ids=lambda s: s.name)
def test_a_consumer_missing_from_the_list_gets_nothing(strategy: AllocateStrategy) -> None:
    assert strategy.allocate(GROUP, "not-listed", QUEUES_8, IDS_3) == []
    assert strategy.allocate(GROUP, IDS_3[0], [], IDS_3) == []


def test_averagely_matches_java_for_8_queues_and_3_consumers() -> None:
    shares = allocate_all(AllocateAveragely(), GROUP, QUEUES_8, IDS_3)
    assert [[q.queue_id for q in shares[c]] for c in IDS_3] == [[0, 1, 2], [3, 4, 5], [6, 7]]


@pytest.mark.parametrize(
    ("queue_count", "id_count", "expected"),
    [
        (2, 3, [[0], [1], []]),  # fewer queues than consumers: one each, the last get none
        (7, 2, [[0, 1, 2, 3], [4, 5, 6]]),
        (6, 3, [[0, 1], [2, 3], [4, 5]]),
    ],
)
def test_averagely_ranges(queue_count: int, id_count: int, expected: list[list[int]]) -> None:
    qs = [MessageQueue("T", "broker-a", i) for i in range(queue_count)]
    ids = IDS_3[:id_count] if id_count <= 3 else client_ids(id_count, 0)
    shares = allocate_all(AllocateAveragely(), GROUP, qs, ids)
    assert [[q.queue_id for q in shares[c]] for c in sorted(ids)] == expected


def test_averagely_by_circle_deals_round_robin() -> None:
    shares = allocate_all(AllocateAveragelyByCircle(), GROUP, QUEUES_8, IDS_3)
    assert [[q.queue_id for q in shares[c]] for c in IDS_3] == [[0, 3, 6], [1, 4, 7], [2, 5]]


def test_queues_sort_by_topic_then_broker_then_id() -> None:
    mixed = [MessageQueue("T", "b", 0), MessageQueue("T", "a", 1), MessageQueue("T", "a", 0)]
    share = AllocateAveragely().allocate(GROUP, "only", mixed, ["only"])
    assert share == [
        MessageQueue("T", "a", 0),
        MessageQueue("T", "a", 1),
        MessageQueue("T", "b", 0),
    ]


def test_config_strategy_returns_the_configured_queues_the_topic_has() -> None:
    strategy = AllocateByConfig([QUEUES_8[5], QUEUES_8[1], MessageQueue("T", "gone", 0)])
    assert strategy.allocate(GROUP, "anyone", QUEUES_8, ["someone-else"]) == [
        QUEUES_8[1],
        QUEUES_8[5],
    ]


def test_configured_disjoint_lists_cover_each_queue_once() -> None:
    configs = {c: AllocateByConfig(QUEUES_8[i::3]) for i, c in enumerate(IDS_3)}
    seen = [q for c, s in configs.items() for q in s.allocate(GROUP, c, QUEUES_8, IDS_3)]
    assert sorted(seen) == QUEUES_8


def moved(before: dict[MessageQueue, str], after: dict[MessageQueue, str]) -> int:
    return sum(1 for queue, owner in after.items() if before.get(queue) != owner)


def fewest_moves(before: dict[MessageQueue, str], after_ids: list[str]) -> int:
    """The fewest queues any balanced assignment over ``after_ids`` must move from ``before``:
    every consumer keeps what it holds up to its quota (the larger quotas going to those
    holding most)."""
    count = len(before)
    base, extra = divmod(count, len(after_ids))
    held = sorted((sum(1 for o in before.values() if o == c) for c in after_ids), reverse=True)
    kept = sum(min(h, base + 1 if i < extra else base) for i, h in enumerate(held))
    return count - kept


def join_and_leave_cases(
    seed: int, cases: int
) -> list[tuple[list[MessageQueue], list[str], list[str]]]:
    rng = random.Random(seed)
    result = []
    for _ in range(cases):
        qs = queues(rng.randint(2, 32))
        ids = client_ids(rng.randint(2, 8), seed=rng.randint(0, 10**9))
        result.append((qs, ids[:-1], ids))  # the last one joins
        leaver = rng.choice(ids)
        result.append((qs, ids, [c for c in ids if c != leaver]))  # one leaves
    return result


def test_sticky_is_balanced() -> None:
    for qs, _, ids in join_and_leave_cases(seed=11, cases=100):
        sizes = [len(s) for s in allocate_all(AllocateSticky(), GROUP, qs, ids).values()]
        assert max(sizes) - min(sizes) <= 1


def test_sticky_moves_far_fewer_queues_than_averagely_and_stays_near_the_minimum() -> None:
    sticky_moves = averagely_moves = minimum = exactly_minimal = 0
    cases = join_and_leave_cases(seed=3, cases=150)
    for qs, before_ids, after_ids in cases:
        before = owners(AllocateSticky(), qs, before_ids)
        step = moved(before, owners(AllocateSticky(), qs, after_ids))
        least = fewest_moves(before, after_ids)
        assert step >= least
        sticky_moves += step
        minimum += least
        exactly_minimal += step == least
        averagely_moves += moved(
            owners(AllocateAveragely(), qs, before_ids), owners(AllocateAveragely(), qs, after_ids)
        )
    # Measured with these seeds: sticky ~1.3x the minimum, averagely ~1.8x.
    assert sticky_moves < 0.8 * averagely_moves
    assert sticky_moves < 1.4 * minimum
    assert exactly_minimal > len(cases) // 4


def test_consistent_hash_moves_only_the_queues_of_the_consumer_that_leaves() -> None:
    for qs, ids, after_ids in join_and_leave_cases(seed=9, cases=50)[1::2]:
        before = owners(AllocateConsistentHash(), qs, ids)
        after = owners(AllocateConsistentHash(), qs, after_ids)
        for queue, owner in before.items():
            if owner in after_ids:
                assert after[queue] == owner
