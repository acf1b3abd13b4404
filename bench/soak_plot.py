"""Plots of a soak run (bench/soak.py ``--samples FILE``): the broker's resident memory, open
descriptors and 4.x send p99 over time, one PNG each (issue 30).

Each plot is drawn as SVG here (no plotting library) and rendered to PNG by headless Chromium
through Playwright (Debian's ``/usr/bin/chromium``; ``--svg-only`` skips the rendering and
keeps the ``.svg`` files)::

    .venv/bin/python bench/soak_plot.py SAMPLES.jsonl [--out docs/images] [--svg-only]

writes ``soak-rss.png`` (RssAnon, the heap, solid; RssFile, the mapped store, dashed; MiB),
``soak-fds.png`` and ``soak-p99.png`` (p99 and p50, ms). A sample file is one JSON object a
line with the fields of ``bench.soak.Sample``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass
from html import escape
from pathlib import Path

__all__ = ["PLOTS", "Series", "load_samples", "nice_ticks", "render_png", "svg_plot", "write_plots"]

CHROMIUM = "/usr/bin/chromium"
WIDTH_PX, HEIGHT_PX = 720, 300
MARGIN_LEFT_PX, MARGIN_RIGHT_PX, MARGIN_TOP_PX, MARGIN_BOTTOM_PX = 70, 20, 40, 45
TICK_COUNT = 6
"""About how many ticks an axis gets (nice_ticks picks round steps near it)."""
COLOURS = ("#1f77b4", "#d62728", "#2ca02c")


@dataclass(frozen=True)
class Series:
    label: str
    points: list[tuple[float, float]]
    dashed: bool = False


PLOTS: dict[str, tuple[str, str, tuple[tuple[str, str, float, bool], ...]]] = {
    "rss": (
        "broker resident memory",
        "MiB",
        (("RssAnon (heap)", "rss_kib", 1 / 1024, False),
         ("RssFile (mapped store)", "rss_file_kib", 1 / 1024, True)),
    ),
    "fds": ("broker open file descriptors", "descriptors", (("open fds", "open_fds", 1.0, False),)),
    "p99": (
        "4.x send latency per sample interval",
        "ms",
        (("p99", "p99_ms", 1.0, False), ("p50", "p50_ms", 1.0, True)),
    ),
}  # fmt: skip
"""name → (title, unit, series as (label, sample field, scale, dashed))."""


def load_samples(path: Path) -> list[dict[str, float]]:
    """The samples of ``path`` (JSON lines); raises ValueError naming a bad line."""
    samples = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            samples.append({key: float(value) for key, value in json.loads(line).items()})
        except (ValueError, AttributeError, TypeError) as error:
            raise ValueError(f"{path}:{number}: not a sample: {error}") from error
    return samples


def nice_ticks(low: float, high: float, count: int = TICK_COUNT) -> list[float]:
    """Round tick values (steps of 1, 2 or 5 × 10ⁿ) covering ``[low, high]``."""
    if not math.isfinite(low) or not math.isfinite(high):
        return [0.0, 1.0]
    if high <= low:
        high = low + 1.0
    raw = (high - low) / max(1, count - 1)
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    first = math.floor(low / step) * step
    ticks = []
    value = first
    while value < high + step * 0.999:
        ticks.append(round(value, 10))
        value += step
    return ticks


def _label(value: float) -> str:
    return f"{value:g}" if abs(value) < 1e6 else f"{value:.3g}"


def svg_plot(title: str, unit: str, series: list[Series]) -> str:
    """One line chart as an SVG document: minutes on x, ``unit`` on y, a legend."""
    xs = [x for s in series for x, _ in s.points] or [0.0, 1.0]
    ys = [y for s in series for _, y in s.points if math.isfinite(y)] or [0.0, 1.0]
    x_ticks = nice_ticks(0.0, max(xs))
    y_ticks = nice_ticks(min(0.0, min(ys)), max(ys))
    x_span = (x_ticks[0], x_ticks[-1])
    y_span = (y_ticks[0], y_ticks[-1])
    plot_w = WIDTH_PX - MARGIN_LEFT_PX - MARGIN_RIGHT_PX
    plot_h = HEIGHT_PX - MARGIN_TOP_PX - MARGIN_BOTTOM_PX

    def px(x: float, y: float) -> tuple[float, float]:
        fx = (x - x_span[0]) / ((x_span[1] - x_span[0]) or 1.0)
        fy = (y - y_span[0]) / ((y_span[1] - y_span[0]) or 1.0)
        return MARGIN_LEFT_PX + fx * plot_w, MARGIN_TOP_PX + (1 - fy) * plot_h

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH_PX}" height="{HEIGHT_PX}" '
        f'font-family="DejaVu Sans, sans-serif" font-size="12">',
        f'<rect width="{WIDTH_PX}" height="{HEIGHT_PX}" fill="white"/>',
        f'<text x="{WIDTH_PX / 2}" y="22" text-anchor="middle" font-size="15">'
        f"soak: {escape(title)}</text>",
    ]
    for tick in y_ticks:
        _, y = px(x_span[0], tick)
        parts.append(f'<line x1="{MARGIN_LEFT_PX}" x2="{WIDTH_PX - MARGIN_RIGHT_PX}" '
                     f'y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>')  # fmt: skip
        parts.append(f'<text x="{MARGIN_LEFT_PX - 6}" y="{y + 4:.1f}" '
                     f'text-anchor="end">{_label(tick)}</text>')  # fmt: skip
    for tick in x_ticks:
        x, _ = px(tick, y_span[0])
        bottom = HEIGHT_PX - MARGIN_BOTTOM_PX
        parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{MARGIN_TOP_PX}" y2="{bottom}" '
                     f'stroke="#eee"/>')  # fmt: skip
        parts.append(f'<text x="{x:.1f}" y="{bottom + 16}" text-anchor="middle">'
                     f"{_label(tick)}</text>")  # fmt: skip
    parts.append(
        f'<rect x="{MARGIN_LEFT_PX}" y="{MARGIN_TOP_PX}" width="{plot_w}" height="{plot_h}" '
        f'fill="none" stroke="#333"/>'
        f'<text x="{MARGIN_LEFT_PX + plot_w / 2}" y="{HEIGHT_PX - 8}" text-anchor="middle">'
        f"minutes</text>"
        f'<text transform="translate(16 {MARGIN_TOP_PX + plot_h / 2}) rotate(-90)" '
        f'text-anchor="middle">{escape(unit)}</text>'
    )
    for index, one in enumerate(series):
        colour = COLOURS[index % len(COLOURS)]
        points = " ".join(
            "{:.1f},{:.1f}".format(*px(x, y)) for x, y in one.points if math.isfinite(y)
        )
        dash = ' stroke-dasharray="6 4"' if one.dashed else ""
        parts.append(f'<polyline class="series" fill="none" stroke="{colour}" stroke-width="2"'
                     f'{dash} points="{points}"/>')  # fmt: skip
        legend_y = MARGIN_TOP_PX + 16 + 16 * index
        legend_x = MARGIN_LEFT_PX + 10
        label = escape(one.label)
        parts.append(f'<line x1="{legend_x}" x2="{legend_x + 24}" y1="{legend_y - 4}" '
                     f'y2="{legend_y - 4}" stroke="{colour}" stroke-width="2"{dash}/>'
                     f'<text x="{legend_x + 30}" y="{legend_y}">{label}</text>')  # fmt: skip
    parts.append("</svg>")
    return "\n".join(parts)


def plot_svgs(samples: list[dict[str, float]]) -> dict[str, str]:
    """name → SVG document for every plot of :data:`PLOTS`."""
    documents = {}
    for name, (title, unit, specs) in PLOTS.items():
        shown = samples
        if name == "p99":  # a sample with no send measured (the first) has no latency
            shown = [s for s in samples if s["p99_ms"] or s["p50_ms"]]
        series = [
            Series(label, [(s["minute"], s[field] * scale) for s in shown], dashed)
            for label, field, scale, dashed in specs
        ]
        documents[name] = svg_plot(title, unit, series)
    return documents


def render_png(svgs: dict[Path, str]) -> None:
    """Render each SVG document to the PNG at its path (headless Chromium, Playwright).

    Raises:
        RuntimeError: Chromium is missing at ``CHROMIUM``.
    """
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        raise RuntimeError(f"{CHROMIUM} is missing (Debian's chromium renders the plots)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=["--no-sandbox", "--disable-gpu"]
        )
        try:
            page = browser.new_page(viewport={"width": WIDTH_PX, "height": HEIGHT_PX})
            for path, svg in svgs.items():
                page.set_content(f"<html><body style='margin:0'>{svg}</body></html>")
                page.locator("svg").screenshot(path=str(path))
        finally:
            browser.close()


def write_plots(
    samples: list[dict[str, float]], directory: Path, *, png: bool = True
) -> list[Path]:
    """Write ``soak-<name>.png`` (or ``.svg`` with ``png`` False) under ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    documents = plot_svgs(samples)
    if not png:
        paths = []
        for name, svg in documents.items():
            path = directory / f"soak-{name}.svg"
            path.write_text(svg)
            paths.append(path)
        return paths
    targets = {directory / f"soak-{name}.png": svg for name, svg in documents.items()}
    render_png(targets)
    return list(targets)


def main() -> int:
    parser = argparse.ArgumentParser(description="Plot a soak run's samples (issue 30).")
    parser.add_argument("samples", type=Path, help="JSON lines written by soak.py --samples")
    parser.add_argument("--out", type=Path, default=Path("docs/images"))
    parser.add_argument("--svg-only", action="store_true", help="write SVG, skip Chromium")
    options = parser.parse_args()
    samples = load_samples(options.samples)
    if len(samples) < 2:
        print(f"{options.samples}: {len(samples)} sample(s), at least 2 are needed to plot")
        return 1
    for path in write_plots(samples, options.out, png=not options.svg_only):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
