"""GET_STATS_HISTORY's header and body (Bolide's code 90028) in and out of the wire form."""

from __future__ import annotations

import orjson
import pytest

from bolide.protocol.bodies.fastjson import BodyError
from bolide.protocol.bodies.stats_history import (
    GetStatsHistoryRequestHeader,
    StatsHistory,
    StatsHistoryPoint,
)
from bolide.protocol.codes import RequestCode
from bolide.protocol.headers import HeaderError


def test_header_round_trip_and_a_missing_topic_refused() -> None:
    header = GetStatsHistoryRequestHeader("orders", "billing")
    assert header.to_ext_fields() == {"topic": "orders", "group": "billing"}
    assert GetStatsHistoryRequestHeader.from_ext_fields(header.to_ext_fields()) == header
    assert GetStatsHistoryRequestHeader("orders").to_ext_fields() == {"topic": "orders"}
    with pytest.raises(HeaderError, match="topic"):
        GetStatsHistoryRequestHeader.from_ext_fields({"group": "billing"})
    assert RequestCode.BOLIDE_GET_STATS_HISTORY == 90_028


def test_body_round_trip_with_java_style_names() -> None:
    body = StatsHistory(
        "broker-a", "orders", "billing", 60_000, [StatsHistoryPoint(1_700_000_060_000, 30, 0.5, 20)]
    )
    obj = orjson.loads(body.to_json())
    assert obj["points"] == [
        {"timestampMs": 1_700_000_060_000, "messages": 30, "tps": 0.5, "lag": 20}
    ]
    assert obj["brokerName"] == "broker-a" and obj["intervalMs"] == 60_000
    assert StatsHistory.from_json(body.to_json()) == body
    with pytest.raises(BodyError, match="intervalMs"):
        StatsHistory.from_json(b'{"topic": "orders", "points": []}')
