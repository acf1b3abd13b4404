"""Which group a retry copy's failed SubAfter belongs to, for every retry topic name a broker
writes: 4.x send-backs, POP retries under Java's V1 name and under enableRetryTopicV2's; and
the order a step writes deliveries and results in when they share a millisecond."""

from __future__ import annotations

import pytest

from bolide.broker.trace.records import arrival_records, in_life_order, sub_after
from bolide.protocol.headers.pop import FIRST_POP_TIME_PROPERTY
from bolide.protocol.message import MessageExt, PropertyKey
from bolide.protocol.system_topics import pop_retry_topic, retry_topic
from bolide.protocol.trace import TraceRecord, TraceType

DELIVERED = "DELIVERED_FROM_TEST"


def _copy(topic: str, origin: str | None = None) -> MessageExt:
    properties = {} if origin is None else {
        PropertyKey.RETRY_TOPIC: origin, FIRST_POP_TIME_PROPERTY: "1700000000000"
    }  # fmt: skip
    return MessageExt(topic=topic, body=b"x", properties=properties)


@pytest.mark.parametrize(
    ("message", "group"),
    [
        (_copy(retry_topic("orders_group")), "orders_group"),
        (_copy(pop_retry_topic("pop_group", "Orders_1"), "Orders_1"), "pop_group"),
        (_copy(pop_retry_topic("pop_group", "Orders_1", v2=True), "Orders_1"), "pop_group"),
        (_copy(pop_retry_topic("a_b", "c_d", v2=True)), "a_b"),  # V2 parses without RETRY_TOPIC
    ],
)
def test_a_retry_copy_names_its_group(message: MessageExt, group: str) -> None:
    failed_group, records = arrival_records(message, "DefaultRegion", DELIVERED)
    assert (failed_group, records) == (group, [])


def _delivery(request_id: str, now_ms: int) -> TraceRecord:
    return TraceRecord(TraceType.SUB_BEFORE, timestamp_ms=now_ms, group="g", request_id=request_id,
                       msg_id="M")  # fmt: skip


def _failure(request_id: str, now_ms: int) -> TraceRecord:
    return sub_after("M", "", "g", request_id, success=False, cost_time_ms=0, now_ms=now_ms)


def _pub(now_ms: int) -> TraceRecord:
    return TraceRecord(TraceType.PUB, timestamp_ms=now_ms, topic="%DLQ%g", msg_id="M")


def test_a_failure_goes_before_the_delivery_of_the_copy_it_made_in_its_millisecond() -> None:
    """A POP consumer woken by the revive's retry copy can pop it in the millisecond the copy
    was stored: the delivery it ended (r2) must read before the copy's delivery (r3)."""
    second, third = _delivery("r2", 1_000), _delivery("r3", 2_000)
    ended = _failure("r2", 2_000)
    assert in_life_order([second, third], [ended]) == [second, ended, third]


def test_a_result_of_a_delivery_in_its_own_millisecond_goes_after_it() -> None:
    delivered = _delivery("r1", 5)
    sent_back, dead_letter = _failure("r1", 5), _pub(5)
    later = _delivery("r2", 5)  # another message of another pull, in the same millisecond
    assert in_life_order([delivered, later], [sent_back, dead_letter]) == [
        delivered,
        later,
        sent_back,
        dead_letter,
    ]


def test_a_dead_letter_keeps_its_pub_after_its_failure_and_time_orders_the_rest() -> None:
    first = _delivery("r1", 10)
    dead, pub = _failure("r1", 30), _pub(30)
    acked_earlier = sub_after("N", "", "g", "r0", success=True, cost_time_ms=1, now_ms=20)
    assert in_life_order([first], [dead, pub, acked_earlier]) == [first, acked_earlier, dead, pub]
