"""The last-hour charts' pieces without a browser: adding brokers' points up per minute, the
chart with no point yet, and the axes' words."""

from __future__ import annotations

from bolide.base.errors import RemoteError
from bolide.dashboard.history_svg import history_chart_svg, merge_points
from bolide.protocol.bodies.stats_history import StatsHistory, StatsHistoryPoint
from bolide.protocol.codes import ResponseCode

MINUTE_MS = 60_000
T0_MS = 1_700_000_040_000  # a whole minute


def test_brokers_are_added_up_per_minute_and_failures_kept() -> None:
    points_a = [
        StatsHistoryPoint(T0_MS + 10, 60, 1.0, 5),
        StatsHistoryPoint(T0_MS + MINUTE_MS, 0, 0.0, 5),
    ]
    broker_a = StatsHistory("broker-a", "t", "g", MINUTE_MS, points_a)
    broker_b = StatsHistory(
        "broker-b", "t", "g", MINUTE_MS, [StatsHistoryPoint(T0_MS + 999, 30, 0.5, 2)]
    )
    refused = RemoteError(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, "broker-c is too old")
    charts = merge_points([broker_a, refused, broker_b])
    assert charts.points == [
        StatsHistoryPoint(T0_MS, 90, 1.5, 7),
        StatsHistoryPoint(T0_MS + MINUTE_MS, 0, 0.0, 5),
    ]
    assert len(charts.errors) == 1 and "broker-c is too old" in charts.errors[0]


def test_a_chart_has_units_times_and_escaped_words() -> None:
    svg = history_chart_svg(
        "lag-history", "Lag <of> g", "msgs", [(T0_MS, 20.0), (T0_MS + MINUTE_MS, 0.0)]
    )
    assert 'aria-label="Lag &lt;of&gt; g"' in svg and "<of>" not in svg
    assert svg.count('class="point"') == 2 and 'data-value="20"' in svg
    assert ">20 msgs<" in svg and ">0 msgs<" in svg
    assert svg.count('class="time-tick"') == 7
    assert "2 points over 1 min 0 s" in svg


def test_a_chart_without_points_says_so() -> None:
    svg = history_chart_svg("put-tps-history", "Put TPS", "msg/s", [])
    assert 'class="point"' not in svg and "No history yet" in svg
