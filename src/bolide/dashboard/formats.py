"""How the dashboard writes figures for people: ratios as percentages, uptimes as durations."""

from __future__ import annotations

import re

__all__ = ["format_percent", "format_uptime"]

_JAVA_RUNTIME = re.compile(r"\[\s*(\d+) days,\s*(\d+) hours,\s*(\d+) minutes,\s*(\d+) seconds\s*\]")


def format_percent(ratio: object) -> str:
    """A 0..1 ratio (number or numeric text, as runtime info carries it) as ``70.9 %``; what
    is not a number is shown as it is (``-`` when missing)."""
    try:
        value = float(str(ratio))
    except ValueError:
        return str(ratio) if ratio not in (None, "") else "-"
    return f"{value * 100:.1f} %"


def format_uptime(runtime: object) -> str:
    """Java's runtime text ``[ 0 days, 1 hours, 2 minutes, 3 seconds ]`` as ``1 h 2 min``
    (the two largest units that are not zero; seconds only under a minute)."""
    text = str(runtime) if runtime is not None else ""
    match = _JAVA_RUNTIME.fullmatch(text.strip())
    if match is None:
        return text or "-"
    days, hours, minutes, seconds = (int(part) for part in match.groups())
    units = [(days, "d"), (hours, "h"), (minutes, "min"), (seconds, "s")]
    shown = [f"{count} {unit}" for count, unit in units if count][:2]
    return " ".join(shown) if shown else "0 s"
