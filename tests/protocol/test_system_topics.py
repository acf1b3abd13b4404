"""The topic kinds the admin tools list (protocol/system_topics.topic_kind)."""

from __future__ import annotations

import pytest

from bolide.protocol.system_topics import SCHEDULE_TOPIC, TRANS_HALF_TOPIC, topic_kind


@pytest.mark.parametrize(
    ("topic", "kind"),
    [
        ("orders", "normal"),
        ("%RETRY%billing", "retry"),
        ("%DLQ%billing", "dlq"),
        (SCHEDULE_TOPIC, "system"),
        (TRANS_HALF_TOPIC, "system"),
        ("rmq_sys_anything", "system"),
    ],
)
def test_a_topic_is_listed_by_its_kind(topic: str, kind: str) -> None:
    assert topic_kind(topic) == kind


def test_cluster_and_broker_names_are_system_topics_when_named() -> None:
    assert topic_kind("DefaultCluster") == "normal"
    assert topic_kind("DefaultCluster", {"DefaultCluster", "broker-a"}) == "system"
    assert topic_kind("%RETRY%DefaultCluster", {"DefaultCluster"}) == "retry"
