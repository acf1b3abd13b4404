"""Broker statistics bodies: both forms of ConsumeStatsList, BrokerStatsData, time spans and
the consume-directly result round-trip."""

from __future__ import annotations

import orjson
import pytest

from bolide.protocol.bodies import ConsumeStats, MessageQueue, OffsetWrapper
from bolide.protocol.bodies.fastjson import BodyError
from bolide.protocol.bodies.stats import (
    BrokerStatsData,
    BrokerStatsItem,
    CMResult,
    ConsumeMessageDirectlyResult,
    ConsumeStatsList,
    QueryConsumeTimeSpanBody,
    QueueTimeSpan,
)

QUEUE = MessageQueue("T", "broker-a", 1)
LISTING = ConsumeStatsList(
    "127.0.0.1:10911",
    (("G1", ConsumeStats({QUEUE: OffsetWrapper(10, 4, 123)}, 2.5)), ("G2", ConsumeStats())),
    {"G1": 2, "G2": 0},
)


def test_consume_stats_list_both_forms() -> None:
    java = LISTING.to_json()
    assert b'{"brokerName":"broker-a","queueId":1,"topic":"T"}:' in java  # fastjson keys
    assert ConsumeStatsList.from_json(java) == LISTING
    listed = LISTING.to_list_form_json()
    assert orjson.loads(listed)["groups"][0]["queues"] == [["T", "broker-a", 1, 10, 4, 123]]
    assert ConsumeStatsList.from_json(listed) == LISTING
    assert LISTING.total_diff == 6
    with pytest.raises(BodyError):
        ConsumeStatsList.from_json(b'{"groups":[{"group":"G","queues":[["T"]]}]}')


def test_stats_data_span_and_result_round_trip() -> None:
    data = BrokerStatsData(BrokerStatsItem(6, 0.1, 1.0), BrokerStatsItem(6), BrokerStatsItem(9))
    assert BrokerStatsData.from_json(data.to_json()) == data
    span = QueryConsumeTimeSpanBody((QueueTimeSpan(QUEUE, 1, 5, 3, 2),))
    assert QueryConsumeTimeSpanBody.from_json(span.to_json()) == span
    result = ConsumeMessageDirectlyResult(CMResult.CR_LATER, remark="busy", spent_time_ms=3)
    assert ConsumeMessageDirectlyResult.from_json(result.to_json()) == result
    with pytest.raises(BodyError, match="CMResult"):
        ConsumeMessageDirectlyResult.from_json(b'{"consumeResult":"MAYBE"}')
