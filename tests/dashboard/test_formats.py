"""The dashboard's figures for people: ratios as percentages, Java's uptime text as a
duration."""

from __future__ import annotations

from bolide.dashboard.formats import format_percent, format_uptime


def test_ratios_are_percentages() -> None:
    assert format_percent("0.7090") == "70.9 %"
    assert format_percent(0.05) == "5.0 %"
    assert format_percent(None) == "-"
    assert format_percent("n/a") == "n/a"


def test_java_uptime_is_a_duration() -> None:
    assert format_uptime("[ 0 days, 0 hours, 5 minutes, 3 seconds ]") == "5 min 3 s"
    assert format_uptime("[ 2 days, 4 hours, 0 minutes, 9 seconds ]") == "2 d 4 h"
    assert format_uptime("[ 0 days, 0 hours, 0 minutes, 0 seconds ]") == "0 s"
    assert format_uptime("[ 0 days, 1 hours, 0 minutes, 0 seconds ]") == "1 h"
    assert format_uptime(None) == "-"
    assert format_uptime("soon") == "soon"
