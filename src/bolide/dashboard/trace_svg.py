"""A message's trace as a picture: an SVG timeline rendered on the server (no script).

One lane for the producer side (puts, transaction ends, the dead letter) and one per consumer
group. Time runs left to right from the first step, with a labelled axis (ms or s). A put is a
dot; a delivery and its result are a bar from the SubBefore to the SubAfter, green when it
succeeded, red when it failed, grey while no result is known; each bar is labelled with its
attempt and duration.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from html import escape

from bolide.client.admin.trace import MessageTrace, TraceStep, format_duration_ms
from bolide.protocol.trace import TraceType

__all__ = ["trace_svg"]

_WIDTH = 960
_LANE_HEIGHT = 44
_LEFT = 170
_RIGHT = 30
_TOP = 30
_AXIS_TICKS = 5
_PRODUCER_LANE = "producer / broker"
_COLOURS = {"success": "#2e7d32", "failed": "#c62828", "open": "#9e9e9e"}


@dataclass(frozen=True, slots=True)
class _Attempt:
    group: str
    begin_ms: int
    end_ms: int | None
    status: str
    label: str


def _attempts(steps: list[TraceStep]) -> list[_Attempt]:
    """SubBefore / SubAfter pairs by request id (as the RocketMQ dashboard pairs them)."""
    afters = {
        step.record.request_id: step.record
        for step in steps
        if step.record.type is TraceType.SUB_AFTER and step.record.request_id
    }
    attempts = []
    for step in steps:
        record = step.record
        if record.type is not TraceType.SUB_BEFORE:
            continue
        after = afters.get(record.request_id)
        status = "open" if after is None else ("success" if after.success else "failed")
        end_ms = None
        if after is not None:
            end_ms = after.timestamp_ms if after.timestamp_ms > 0 else (
                record.timestamp_ms + after.cost_time_ms
            )  # fmt: skip
        duration = "" if end_ms is None else f", {format_duration_ms(end_ms - record.timestamp_ms)}"
        label = f"attempt {record.retry_times + 1}: {status}{duration}"
        attempts.append(_Attempt(record.group, record.timestamp_ms, end_ms, status, label))
    return attempts


def trace_svg(trace: MessageTrace) -> str:
    """The timeline of ``trace`` as one ``<svg>`` element (empty trace: an empty string)."""
    steps = [s for s in trace.steps if s.record.timestamp_ms > 0]
    if not steps:
        return ""
    attempts = _attempts(steps)
    groups = list(dict.fromkeys(a.group or "%UNKNOWN_GROUP%" for a in attempts))
    lanes = [_PRODUCER_LANE, *groups]
    first_ms = min(s.record.timestamp_ms for s in steps)
    last_ms = max([s.record.timestamp_ms for s in steps] + [a.end_ms or 0 for a in attempts])
    span_ms = max(1, last_ms - first_ms)
    plot = _WIDTH - _LEFT - _RIGHT
    height = _TOP + _LANE_HEIGHT * len(lanes) + 40

    def x(ms: int) -> float:
        return _LEFT + (ms - first_ms) * plot / span_ms

    def y(lane: str) -> int:
        return _TOP + _LANE_HEIGHT * lanes.index(lane) + _LANE_HEIGHT // 2

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" id="trace-timeline" width="{_WIDTH}" '
        f'height="{height}" viewBox="0 0 {_WIDTH} {height}" role="img" '
        f'aria-label="timeline of message {escape(trace.msg_id)}" font-family="sans-serif" '
        'font-size="12">'
    ]
    for lane in lanes:
        parts.append(
            f'<text x="{_LEFT - 10}" y="{y(lane) + 4}" text-anchor="end">{escape(lane)}</text>'
            f'<line x1="{_LEFT}" x2="{_WIDTH - _RIGHT}" y1="{y(lane)}" y2="{y(lane)}" '
            'stroke="#e0e0e0"/>'
        )
    parts += _axis(first_ms, span_ms, height, x)
    for step in steps:
        record = step.record
        if record.type in (TraceType.PUB, TraceType.END_TRANSACTION, TraceType.RECALL):
            name = f"{record.type} {record.topic}"
            at = x(record.timestamp_ms)
            parts.append(
                f'<circle class="step-put" cx="{at:.1f}" cy="{y(_PRODUCER_LANE)}" r="6" '
                f'fill="#1565c0"><title>{escape(name)}</title></circle>'
                f'<text x="{at:.1f}" y="{y(_PRODUCER_LANE) - 10}" '
                f'text-anchor="{_anchor(at)}">{escape(name)}</text>'
            )
    for attempt in attempts:
        lane = attempt.group or "%UNKNOWN_GROUP%"
        begin = x(attempt.begin_ms)
        end = x(attempt.end_ms) if attempt.end_ms is not None else begin
        colour = _COLOURS[attempt.status]
        parts.append(
            f'<rect class="step-attempt {attempt.status}" x="{begin:.1f}" y="{y(lane) - 8}" '
            f'width="{max(4.0, end - begin):.1f}" height="16" rx="3" fill="{colour}">'
            f"<title>{escape(attempt.label)}</title></rect>"
            f'<text x="{begin if _anchor(begin) == "start" else end:.1f}" y="{y(lane) + 22}" '
            f'font-size="11" text-anchor="{_anchor(begin)}">{escape(attempt.label)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _axis(first_ms: int, span_ms: int, height: int, x: Callable[[int], float]) -> list[str]:
    """The time axis under the lanes: ticks at fifths of the span, labelled with the time
    since the first step."""
    bottom = height - 30
    parts = [f'<line x1="{_LEFT}" x2="{_WIDTH - _RIGHT}" y1="{bottom}" y2="{bottom}" '
             'stroke="#616161"/>']  # fmt: skip
    for tick in range(_AXIS_TICKS + 1):
        offset_ms = span_ms * tick // _AXIS_TICKS
        position = x(first_ms + offset_ms)
        label = f"+{format_duration_ms(offset_ms)}"
        parts.append(
            f'<line x1="{position:.1f}" x2="{position:.1f}" y1="{bottom}" y2="{bottom + 5}" '
            f'stroke="#616161"/><text class="axis" x="{position:.1f}" y="{bottom + 18}" '
            f'text-anchor="middle">{escape(label)}</text>'
        )
    parts.append(f'<text x="{_LEFT - 14}" y="{bottom + 4}" text-anchor="end" '
                 'fill="#616161">time since the first step</text>')  # fmt: skip
    return parts


def _anchor(position: float) -> str:
    """Labels right of the middle end at their mark, so none runs off the picture."""
    return "start" if position < _LEFT + (_WIDTH - _LEFT - _RIGHT) / 2 else "end"
