"""Queue selection: round robin, latency-based broker avoidance, stable sharding keys."""

from __future__ import annotations

import pytest

from bolide.base import limits
from bolide.base.errors import NoRouteError
from bolide.client.producer.selection import (
    LatencyFaultTable,
    QueueSelector,
    not_available_duration_ms,
    select_by_sharding_key,
)
from bolide.protocol.bodies import MessageQueue

QUEUES = [MessageQueue("T", broker, i) for broker in ("a", "b") for i in range(2)]


def test_not_available_durations_follow_the_latency_levels() -> None:
    assert not_available_duration_ms(0) == 0
    assert not_available_duration_ms(549) == 0
    assert not_available_duration_ms(550) == 30_000
    assert not_available_duration_ms(2_999) == 120_000
    assert not_available_duration_ms(limits.SEND_FAILURE_LATENCY_MS) == 600_000


def test_round_robin_over_every_queue() -> None:
    selector = QueueSelector()
    picks = [selector.select(QUEUES, now_ms=0) for _ in range(8)]
    assert picks == QUEUES + QUEUES


def test_a_failed_broker_is_avoided_until_its_penalty_ends() -> None:
    selector = QueueSelector()
    selector.record("a", latency_ms=5, now_ms=1_000, failed=True)
    picks = {selector.select(QUEUES, now_ms=1_000).broker_name for _ in range(10)}
    assert picks == {"b"}
    later_ms = 1_000 + not_available_duration_ms(limits.SEND_FAILURE_LATENCY_MS)
    picks = {selector.select(QUEUES, now_ms=later_ms).broker_name for _ in range(10)}
    assert picks == {"a", "b"}


def test_a_slow_broker_is_avoided_a_fast_one_is_not() -> None:
    selector = QueueSelector()
    selector.record("a", latency_ms=600, now_ms=0, failed=False)
    selector.record("b", latency_ms=20, now_ms=0, failed=False)
    assert {selector.select(QUEUES, now_ms=10).broker_name for _ in range(6)} == {"b"}


def test_retry_skips_the_broker_that_just_failed() -> None:
    selector = QueueSelector()
    for _ in range(6):
        assert selector.select(QUEUES, now_ms=0, last_broker_name="a").broker_name == "b"


def test_when_every_broker_is_avoided_the_least_bad_one_is_used() -> None:
    selector = QueueSelector()
    selector.record("a", latency_ms=0, now_ms=0, failed=True)  # avoided 600 s
    selector.record("b", latency_ms=700, now_ms=0, failed=False)  # avoided 30 s
    assert selector.select(QUEUES, now_ms=1).broker_name == "b"


def test_without_latency_avoidance_only_the_last_broker_is_skipped() -> None:
    selector = QueueSelector(latency_avoidance=False)
    selector.record("a", latency_ms=0, now_ms=0, failed=True)
    assert {selector.select(QUEUES, now_ms=0).broker_name for _ in range(4)} == {"a", "b"}
    assert selector.select(QUEUES, now_ms=0, last_broker_name="b").broker_name == "a"


def test_one_broker_only_is_used_even_right_after_it_failed() -> None:
    single = [MessageQueue("T", "a", i) for i in range(3)]
    selector = QueueSelector()
    selector.record("a", latency_ms=0, now_ms=0, failed=True)
    assert selector.select(single, now_ms=0, last_broker_name="a").broker_name == "a"


def test_no_queue_is_a_no_route_error() -> None:
    with pytest.raises(NoRouteError):
        QueueSelector().select([], now_ms=0)
    with pytest.raises(NoRouteError):
        select_by_sharding_key([], "k")


def test_least_bad_prefers_unpenalised_brokers() -> None:
    table = LatencyFaultTable()
    table.record("a", 0, now_ms=0, failed=True)
    assert table.least_bad(["a", "b"], now_ms=0) == "b"
    assert table.least_bad([], now_ms=0) is None


def test_same_sharding_key_same_queue_and_keys_spread() -> None:
    queues = [MessageQueue("T", "a", i) for i in range(8)]
    keys = [f"order-{n}" for n in range(200)]
    first = [select_by_sharding_key(queues, key) for key in keys]
    assert first == [select_by_sharding_key(queues, key) for key in keys]
    assert len(set(first)) == 8


def test_sharding_matches_java_hash_modulo() -> None:
    queues = [MessageQueue("T", "a", i) for i in range(4)]
    # "TagA".hashCode() = 2598919 -> 2598919 % 4 = 3
    assert select_by_sharding_key(queues, "TagA").queue_id == 3
    # a negative hash: "polygenelubricants".hashCode() = -2147483648 (Integer.MIN_VALUE)
    # Java: MIN_VALUE % 4 = 0 -> queue 0
    assert select_by_sharding_key(queues, "polygenelubricants").queue_id == 0
    # "zzzzzz".hashCode() = -685785664; Java's % 7 gives -4 -> abs -> 4 (Python's % gives 3)
    queues7 = [MessageQueue("T", "a", i) for i in range(7)]
    assert select_by_sharding_key(queues7, "zzzzzz").queue_id == 4
