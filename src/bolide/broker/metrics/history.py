"""The broker's ``broker-stats-history`` step: one snapshot of put totals, lags and get totals
into the stats history ring (:mod:`bolide.broker.stats_history`)."""

from __future__ import annotations

from bolide.broker.context import BrokerContext
from bolide.broker.metrics.figures import group_figures, topic_figures
from bolide.broker.metrics.stats_items import group_stats_key
from bolide.broker.stats_history import HistorySnapshot

__all__ = ["take_history_sample"]


def take_history_sample(context: BrokerContext) -> HistorySnapshot:
    """Snapshot the broker's put totals, lags and get totals now (one walk of the topics'
    queues and the offset table, as a /metrics scrape); kept in ``context.stats.history``."""
    topics = topic_figures(context)
    snapshot = HistorySnapshot(
        context.clock.now_ms(),
        {name: each.put_messages for name, each in topics.items() if each.has_put_stats},
        {
            group_stats_key(each.topic, each.group): (each.lag, each.get_messages)
            for each in group_figures(context, topics)
        },
    )
    context.stats.history.record(snapshot)
    return snapshot
