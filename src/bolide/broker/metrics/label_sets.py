"""Label dicts reused from one scrape to the next.

prometheus_client's ``add_metric`` builds a fresh ``{label name: value}`` dict for every series
at every scrape; with 10,000 queues that is tens of thousands of dicts per scrape (and the
garbage collections they bring). :class:`LabelSets` keeps the dict of each label-value tuple
seen in the previous scrape and hands the same object out again, so a series whose labels did
not change costs one lookup, and the render cache (:mod:`.server`) compares it by identity.
Series that disappear are forgotten one scrape later. The dicts are never mutated.
"""

from __future__ import annotations

from prometheus_client.metrics_core import Metric
from prometheus_client.samples import Sample

__all__ = ["LabelSets"]


class LabelSets:
    """The label dicts of one label-name schema (``names``), by label values."""

    def __init__(self, names: tuple[str, ...]) -> None:
        self.names = names
        self._before: dict[tuple[str, ...], dict[str, str]] = {}
        self._now: dict[tuple[str, ...], dict[str, str]] = {}

    def next_scrape(self) -> None:
        """Start a scrape: what the previous one used is kept, anything older is dropped."""
        if self._now:
            self._before, self._now = self._now, {}

    def of(self, values: tuple[str, ...]) -> dict[str, str]:
        labels = self._now.get(values)
        if labels is None:
            labels = self._before.get(values)
            if labels is None:
                labels = dict(zip(self.names, values, strict=True))
            self._now[values] = labels
        return labels

    def add(self, family: Metric, values: tuple[str, ...], value: float) -> None:
        """``family.add_metric(values, value)`` for a gauge or counter family, with the
        reused label dict."""
        name = family.name + "_total" if family.type == "counter" else family.name
        family.samples.append(Sample(name, self.of(values), value, None))
