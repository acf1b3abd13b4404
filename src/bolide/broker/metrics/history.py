"""The broker's ``broker-stats-history`` step: one snapshot of put totals, lags and get totals
into the stats history ring (:mod:`bolide.broker.stats_history`), then the ring written to
``<storePathRootDir>/stats/statsHistory.json`` (atomically: a temporary file, fsynced, then
renamed), which the next start reads back, so the charts keep the last hour across restarts.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from bolide.base.fileio import atomic_write
from bolide.broker.config import BrokerConfig
from bolide.broker.context import BrokerContext
from bolide.broker.metrics.figures import group_figures, topic_figures
from bolide.broker.metrics.stats_items import group_stats_key
from bolide.broker.stats_history import HistoryFileError, HistorySnapshot

__all__ = ["history_path", "restore_history", "save_history", "take_history_sample"]

_log = logging.getLogger("bolide.broker.stats")

HISTORY_FILE_NAME = "stats/statsHistory.json"
"""Where the stats history is kept, under the store root."""


def history_path(config: BrokerConfig) -> Path:
    """The stats history file of the broker configured by ``config``."""
    return config.store_path_root_dir / HISTORY_FILE_NAME


def restore_history(context: BrokerContext) -> int:
    """Read the history file back into ``context.stats.history`` (at start, before the
    first snapshot); the number of snapshots put back. A file that cannot be read or
    parsed is named in a warning and the history starts empty."""
    path = history_path(context.config)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return 0
    except OSError as error:
        _log.warning("stats history %s not read, it starts empty: %s", path, error)
        return 0
    try:
        return context.stats.history.restore(data, context.clock.now_ms())
    except HistoryFileError as error:
        _log.warning("stats history %s ignored, it starts empty: %s", path, error)
        return 0


async def save_history(context: BrokerContext) -> None:
    """Write ``context.stats.history`` to its file (in a worker thread). Raises OSError."""
    data = context.stats.history.to_json()
    await asyncio.to_thread(atomic_write, history_path(context.config), data)


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
