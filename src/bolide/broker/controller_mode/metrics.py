"""Controller mode's /metrics families (Bolide's names; the broker's labels):

* ``bolide_controller_mode_master_epoch``: the master epoch this broker leads or follows;
* ``bolide_controller_mode_is_master``: 1 while the controller has made it master;
* ``bolide_controller_mode_sync_state_set_size``: the SyncStateSet's size (master only, else 0);
* ``bolide_controller_mode_sends_fenced``: 1 while it refuses sends (controller silent);
* ``bolide_controller_mode_role_changes_total``: role changes it went through (elections seen).
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from bolide.broker.controller_mode.replicas_manager import ReplicasManager

__all__ = ["ControllerModeCollector"]

LABELS = ("cluster", "broker", "brokerIP")


class ControllerModeCollector(Collector):
    """The families above for one broker's :class:`ReplicasManager`."""

    def __init__(self, manager: ReplicasManager, labels: tuple[str, str, str]) -> None:
        self._manager = manager
        self._labels = labels

    def collect(self) -> Iterator[Metric]:
        manager = self._manager
        sss = len(manager.sync_state_set.sync_state_set) if manager.is_master else 0
        for name, documentation, value in (
            ("bolide_controller_mode_master_epoch", "master epoch led or followed",
             manager.master_epoch),
            ("bolide_controller_mode_is_master", "1 while this broker is master",
             int(manager.is_master)),
            ("bolide_controller_mode_sync_state_set_size", "in-sync replicas (master)", sss),
            ("bolide_controller_mode_sends_fenced", "1 while sends are refused",
             int(manager.fenced)),
        ):  # fmt: skip
            family = GaugeMetricFamily(name, documentation, labels=LABELS)
            family.add_metric(self._labels, value)
            yield family
        changes = CounterMetricFamily(
            "bolide_controller_mode_role_changes", "role changes (elections seen)", labels=LABELS
        )
        changes.add_metric(self._labels, manager.role_changes)
        yield changes
