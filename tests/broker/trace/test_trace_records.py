"""Which group a retry copy's failed SubAfter belongs to, for every retry topic name a broker
writes: 4.x send-backs, POP retries under Java's V1 name and under enableRetryTopicV2's."""

from __future__ import annotations

import pytest

from bolide.broker.trace.records import arrival_records
from bolide.protocol.headers.pop import FIRST_POP_TIME_PROPERTY
from bolide.protocol.message import MessageExt, PropertyKey
from bolide.protocol.system_topics import pop_retry_topic, retry_topic

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
