"""bench/soak_plot.py: the soak's samples drawn as SVG, then PNG through headless Chromium
(issue 30)."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
from bench.soak import Sample, record_sample
from bench.soak_plot import CHROMIUM, load_samples, nice_ticks, plot_svgs, write_plots

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _write_samples(path: Path, count: int) -> None:
    for minute in range(count):
        sample = Sample(
            minute=float(minute), rss_kib=60_000.0 + minute, rss_file_kib=20_000.0 * (minute + 1),
            open_fds=100.0 + minute % 3, asyncio_tasks=110.0, long_polls=30.0,
            pop_in_flight=0.0, p50_ms=0.0 if minute == 0 else 1.0,
            p99_ms=0.0 if minute == 0 else 5.0 + minute,
        )  # fmt: skip
        record_sample(sample, str(path))


def test_samples_round_trip_through_the_json_lines_file(tmp_path: Path) -> None:
    path = tmp_path / "samples.jsonl"
    _write_samples(path, 5)

    samples = load_samples(path)

    assert len(samples) == 5
    assert samples[3]["rss_file_kib"] == 80_000.0
    assert set(samples[0]) == {f.name for f in dataclasses.fields(Sample)}


def test_a_bad_line_is_named(tmp_path: Path) -> None:
    path = tmp_path / "samples.jsonl"
    path.write_text(json.dumps({"minute": 0}) + "\n[1, 2]\n")
    with pytest.raises(ValueError, match=r"samples.jsonl:2"):
        load_samples(path)


def test_each_plot_has_one_line_per_series_with_every_sample(tmp_path: Path) -> None:
    path = tmp_path / "samples.jsonl"
    _write_samples(path, 7)

    documents = plot_svgs(load_samples(path))

    assert sorted(documents) == ["fds", "p99", "rss"]
    series = re.compile(r'class="series"[^>]*points="([^"]*)"')
    point_counts = {
        name: [len(points.split()) for points in series.findall(svg)]
        for name, svg in documents.items()
    }
    assert point_counts["rss"] == [7, 7]  # RssAnon and RssFile
    assert point_counts["fds"] == [7]
    assert point_counts["p99"] == [6, 6]  # the first sample measured no send
    assert "RssAnon (heap)" in documents["rss"] and "MiB" in documents["rss"]


def test_ticks_are_round_and_cover_the_range() -> None:
    assert nice_ticks(0.0, 60.0) == [0.0, 20.0, 40.0, 60.0]
    assert nice_ticks(0.0, 20.0) == [0.0, 5.0, 10.0, 15.0, 20.0]
    ticks = nice_ticks(0.0, 97.3)
    assert ticks[0] <= 0.0 and ticks[-1] >= 97.3 and ticks == sorted(ticks)


@pytest.mark.timeout(120)
def test_the_plots_render_as_png(tmp_path: Path) -> None:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: `make test` installs Debian's chromium")
    path = tmp_path / "samples.jsonl"
    _write_samples(path, 4)

    written = write_plots(load_samples(path), tmp_path / "images")

    assert sorted(p.name for p in written) == ["soak-fds.png", "soak-p99.png", "soak-rss.png"]
    for png in written:
        assert png.read_bytes().startswith(PNG_SIGNATURE)
        assert png.stat().st_size > 2_000
