"""The one rule of which sends the fast forms may take (single and batch alike), and the queue
a send that left the choice to the broker goes to (broker/handlers/send_rules.py)."""

from __future__ import annotations

import random

import pytest

from bolide.broker.handlers.send_rules import any_writable_queue, takes_fast_form
from bolide.protocol.bodies.topic import TopicConfig
from bolide.protocol.message import MessageSysFlag

READ_WRITE = 6
READ_ONLY = 4
TOPIC = TopicConfig("orders", read_queue_count=4, write_queue_count=2)


def test_a_common_send_takes_the_fast_form() -> None:
    assert takes_fast_form(TOPIC, READ_WRITE, "orders", 3, 0)
    assert takes_fast_form(TOPIC, READ_WRITE, "orders", -1, int(MessageSysFlag.COMPRESSED))


@pytest.mark.parametrize(
    ("config", "permission", "topic", "queue_id", "sys_flag"),
    [
        (None, READ_WRITE, "orders", 0, 0),  # unknown topic: auto-creation awaits
        (TopicConfig("orders", order=True), READ_ONLY, "orders", 0, 0),  # ordered, not writable
        (TOPIC, READ_WRITE, "SCHEDULE_TOPIC_XXXX", 0, 0),  # producers may not send there
        (TOPIC, READ_WRITE, "%RETRY%group", 0, 0),  # a retry topic
        (TOPIC, READ_WRITE, "orders", 0, int(MessageSysFlag.TRANSACTION_PREPARED)),  # a half
        (TOPIC, READ_WRITE, "orders", 4, 0),  # queue id at the queue count
    ],
)
def test_anything_else_takes_the_general_path(
    config: TopicConfig | None, permission: int, topic: str, queue_id: int, sys_flag: int
) -> None:
    assert not takes_fast_form(config, permission, topic, queue_id, sys_flag)


def test_an_ordered_topic_on_a_writable_broker_takes_the_fast_form() -> None:
    assert takes_fast_form(TopicConfig("orders", order=True), READ_WRITE, "orders", 0, 0)


def test_the_broker_picks_a_writable_queue() -> None:
    rng = random.Random(7)
    assert {any_writable_queue(TOPIC, rng) for _ in range(200)} == {0, 1}
    assert any_writable_queue(TopicConfig("empty", write_queue_count=0), rng) == 0
