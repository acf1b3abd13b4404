"""The last hour as pictures: line charts of the brokers' per-minute stats history (Bolide's
GET_STATS_HISTORY), rendered on the server as SVG (no script, no Prometheus).

The group page draws lag (messages) and consume TPS (messages/s), the topic page put TPS.
Every broker's points are added up per minute (a topic or group spread over brokers is one
line). A chart has a value axis from 0 with its unit, a time axis over the whole last hour
with local clock times (HH:MM, every 10 minutes), and one dot per minute whose
``data-time-ms`` / ``data-value`` carry the exact figure (the tests read them; people read
the ``<title>`` tooltip).
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from html import escape

from bolide.base import limits
from bolide.base.errors import BolideError
from bolide.client.admin.trace import format_duration_ms
from bolide.protocol.bodies.stats_history import StatsHistory, StatsHistoryPoint

__all__ = ["HistoryCharts", "history_chart_svg", "merge_points"]

_WIDTH = 720
_HEIGHT = 220
_LEFT = 70
_RIGHT = 20
_TOP = 30
_BOTTOM = 40
_VALUE_TICKS = 4
_TIME_TICKS = 6
_MINUTE_MS = 60_000
_WINDOW_MS = limits.STATS_HISTORY_POINTS_COUNT * limits.STATS_HISTORY_INTERVAL_MS
"""The time axis spans the broker's whole history (one hour), ticks every 10 minutes."""


@dataclass(frozen=True, slots=True)
class HistoryCharts:
    """The merged points of every broker that answered, and the errors of those that did
    not (a page shows them under the charts)."""

    points: list[StatsHistoryPoint]
    errors: list[str]


def merge_points(answers: Iterable[StatsHistory | BolideError]) -> HistoryCharts:
    """Sum the brokers' points minute by minute (each timestamp floored to its minute):
    messages, TPS and lag add up; errors are kept as text."""
    merged: dict[int, StatsHistoryPoint] = {}
    errors = []
    for answer in answers:
        if isinstance(answer, BolideError):
            errors.append(str(answer))
            continue
        for point in answer.points:
            minute_ms = point.timestamp_ms - point.timestamp_ms % _MINUTE_MS
            before = merged.get(minute_ms, StatsHistoryPoint(minute_ms, 0, 0.0, 0))
            merged[minute_ms] = StatsHistoryPoint(
                minute_ms,
                before.messages + point.messages,
                before.tps + point.tps,
                before.lag + point.lag,
            )
    return HistoryCharts([merged[key] for key in sorted(merged)], errors)


def _clock_text(timestamp_ms: int) -> str:
    return datetime.datetime.fromtimestamp(timestamp_ms / 1000).strftime("%H:%M")


def _value_text(value: float, unit: str) -> str:
    shown = f"{value:,.0f}" if value >= 100 or float(value).is_integer() else f"{value:,.2f}"
    return f"{shown} {unit}"


def history_chart_svg(
    chart_id: str,
    title: str,
    unit: str,
    points: Sequence[tuple[int, float]],
) -> str:
    """One line chart ``<svg id=chart_id>`` of ``points`` ((epoch ms, value), oldest first)
    in ``unit``; with no point, a chart saying so. Every text inside is escaped."""
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" id="{escape(chart_id)}" class="history-chart" '
        f'width="{_WIDTH}" height="{_HEIGHT}" viewBox="0 0 {_WIDTH} {_HEIGHT}" role="img" '
        f'aria-label="{escape(title)}" font-family="sans-serif" font-size="11">'
        f'<text x="{_LEFT}" y="16" font-size="13" font-weight="bold">{escape(title)}</text>'
    )
    if not points:
        return (
            f'{head}<text class="empty" x="{_LEFT}" y="{_HEIGHT // 2}">No history yet: the '
            "broker takes one point a minute.</text></svg>"
        )
    last_ms = points[-1][0]
    span_ms = _WINDOW_MS  # always the whole hour, ending at the newest point
    first_ms = last_ms - span_ms
    top_value = _nice_top(max(value for _, value in points))
    plot_width, plot_height = _WIDTH - _LEFT - _RIGHT, _HEIGHT - _TOP - _BOTTOM

    def x(timestamp_ms: int) -> float:
        return _LEFT + (timestamp_ms - first_ms) * plot_width / span_ms

    def y(value: float) -> float:
        return _TOP + plot_height - value * plot_height / top_value

    parts = [head, *_value_axis(top_value, unit, y), *_time_axis(first_ms, span_ms, x)]
    line = " ".join(f"{x(at):.1f},{y(value):.1f}" for at, value in points)
    parts.append(f'<polyline fill="none" stroke="#1565c0" stroke-width="2" points="{line}"/>')
    for at, value in points:
        tip = f"{_clock_text(at)}: {_value_text(value, unit)}"
        parts.append(
            f'<circle class="point" cx="{x(at):.1f}" cy="{y(value):.1f}" r="3" fill="#1565c0" '
            f'data-time-ms="{at}" data-value="{value:g}"><title>{escape(tip)}</title></circle>'
        )
    covered = format_duration_ms(last_ms - points[0][0]) if len(points) > 1 else "one minute"
    parts.append(
        f'<text x="{_WIDTH - _RIGHT}" y="16" text-anchor="end" fill="#616161">'
        f"{len(points)} points over {escape(covered)}</text></svg>"
    )
    return "".join(parts)


def _nice_top(largest: float) -> float:
    """The value axis's top: the largest value rounded up to 1, 2 or 5 times a power of ten
    (at least 1, so an all-zero line sits on the axis)."""
    if largest <= 1:
        return 1.0
    magnitude = 10 ** (len(str(int(largest))) - 1)
    for step in (1, 2, 5, 10):
        if largest <= step * magnitude:
            return float(step * magnitude)
    return float(10 * magnitude)


def _value_axis(top_value: float, unit: str, y: Callable[[float], float]) -> list[str]:
    parts = []
    for tick in range(_VALUE_TICKS + 1):
        value = top_value * tick / _VALUE_TICKS
        at = y(value)
        parts.append(
            f'<line x1="{_LEFT}" x2="{_WIDTH - _RIGHT}" y1="{at:.1f}" y2="{at:.1f}" '
            f'stroke="#e0e0e0"/><text class="value-tick" x="{_LEFT - 6}" y="{at + 4:.1f}" '
            f'text-anchor="end">{escape(_value_text(value, unit))}</text>'
        )
    return parts


def _time_axis(first_ms: int, span_ms: int, x: Callable[[int], float]) -> list[str]:
    bottom = _HEIGHT - _BOTTOM
    parts = [
        f'<line x1="{_LEFT}" x2="{_WIDTH - _RIGHT}" y1="{bottom}" y2="{bottom}" stroke="#616161"/>'
    ]
    for tick in range(_TIME_TICKS + 1):
        at_ms = first_ms + span_ms * tick // _TIME_TICKS
        position = x(at_ms)
        parts.append(
            f'<line x1="{position:.1f}" x2="{position:.1f}" y1="{bottom}" y2="{bottom + 5}" '
            f'stroke="#616161"/><text class="time-tick" x="{position:.1f}" y="{bottom + 18}" '
            f'text-anchor="middle">{escape(_clock_text(at_ms))}</text>'
        )
    parts.append(
        f'<text x="{_LEFT + (_WIDTH - _LEFT - _RIGHT) / 2:.0f}" y="{_HEIGHT - 6}" '
        'text-anchor="middle" fill="#616161">local time (one point a minute)</text>'
    )
    return parts
