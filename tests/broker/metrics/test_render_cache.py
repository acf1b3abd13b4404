"""The scrape's shortcuts give prometheus_client's exact text: reused label dicts
(:class:`LabelSets`) and the per-family render cache (:class:`RenderCache`)."""

from __future__ import annotations

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import generate_latest

from bolide.broker.metrics.label_sets import LabelSets
from bolide.broker.metrics.server import RenderCache, _Snapshot

NAMES = ("cluster", "topic")


def _families(sets: LabelSets, lags: dict[str, int]) -> list[Metric]:
    sets.next_scrape()
    lag = GaugeMetricFamily("demo_lag", "Lag.", labels=NAMES)
    puts = CounterMetricFamily("demo_puts", "Puts.", labels=NAMES)
    for topic, value in lags.items():
        sets.add(lag, ("c", topic), value)
        sets.add(puts, ("c", topic), value * 2)
    return [lag, puts, GaugeMetricFamily("demo_escape", 'a "quoted"\nhelp', value=1.5)]


def test_label_sets_match_add_metric_and_reuse_dicts_for_one_scrape() -> None:
    sets = LabelSets(NAMES)
    first = _families(sets, {"A": 1, 'B"\\': 2})
    reference = GaugeMetricFamily("demo_lag", "Lag.", labels=NAMES)
    reference.add_metric(("c", "A"), 1)
    reference.add_metric(("c", 'B"\\'), 2)
    assert first[0].samples == reference.samples
    counter = CounterMetricFamily("demo_puts", "Puts.", labels=NAMES)
    counter.add_metric(("c", "A"), 2)
    counter.add_metric(("c", 'B"\\'), 4)
    assert first[1].samples == counter.samples
    second = _families(sets, {"A": 1})
    assert second[0].samples[0].labels is first[0].samples[0].labels  # reused
    _families(sets, {"A": 1})
    third = _families(sets, {"A": 1, 'B"\\': 5})
    assert third[0].samples[1].labels is not first[0].samples[1].labels  # forgotten, rebuilt
    assert third[0].samples[1].labels == {"cluster": "c", "topic": 'B"\\'}


def test_render_cache_gives_generate_latest_bytes_as_families_change() -> None:
    sets, cache = LabelSets(NAMES), RenderCache()
    for lags in ({"A": 1, "B": 2}, {"A": 1, "B": 2}, {"A": 1, "B": 3}, {"A": 1}, {}):
        families = _families(sets, lags)
        assert cache.render(families) == generate_latest(_Snapshot(families))
    assert cache.rendered_count == 3 + 0 + 2 + 2 + 2  # unchanged families are not rendered
