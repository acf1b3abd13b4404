"""A controller's /metrics families (Bolide's names), served by ``bolide controller
--metrics-port`` through the broker's metrics server:

* ``bolide_controller_is_leader``: 1 while this controller holds the etcd leader key;
* ``bolide_controller_elections_total``: elections this controller wrote since it started;
* ``bolide_controller_heartbeats_refused_total``: 904s of new replicas refused, table full;
* ``bolide_controller_heartbeat_table_entries``: replicas its heartbeat table holds;
* ``bolide_controller_broker_epoch{brokerName,brokerId,brokerAddr}``: the epoch each live
  replica reported in its last heartbeat;
* per broker set, as the leader's last scan read it from etcd (every
  ``scanNotActiveBrokerInterval``; nothing on a standby): ``bolide_controller_master_epoch``,
  ``bolide_controller_master_broker_id`` (-1 without a master),
  ``bolide_controller_sync_state_set_epoch``, ``bolide_controller_sync_state_set_size``;
* per broker set this controller elected for: ``bolide_controller_last_election_timestamp_ms``,
  ``bolide_controller_last_election_epoch``, ``bolide_controller_last_election_broker_id``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from bolide.controller.controller import Controller

__all__ = ["ControllerCollector"]

SET_LABELS = ("cluster", "brokerName")
REPLICA_LABELS = ("cluster", "brokerName", "brokerId", "brokerAddr")


class ControllerCollector(Collector):
    """The families above for one running :class:`Controller`."""

    def __init__(self, controller: Controller) -> None:
        self._controller = controller

    def collect(self) -> Iterator[Metric]:
        controller = self._controller
        yield _gauge("bolide_controller_is_leader", "1 while this controller leads",
                     int(controller.is_leader))  # fmt: skip
        yield _counter("bolide_controller_elections", "elections written", controller.elections)
        yield _counter(
            "bolide_controller_heartbeats_refused",
            "heartbeats of new replicas refused (table full)",
            controller.heartbeats_refused,
        )
        yield _gauge("bolide_controller_heartbeat_table_entries", "replicas tracked",
                     len(controller.heartbeats))  # fmt: skip
        epochs = GaugeMetricFamily(
            "bolide_controller_broker_epoch", "epoch in the replica's last heartbeat",
            labels=REPLICA_LABELS,
        )  # fmt: skip
        for info in controller.heartbeats.entries():
            if controller.heartbeats.is_alive(info.broker_name, info.broker_id):
                labels = (info.cluster_name, info.broker_name, str(info.broker_id),
                          info.broker_address)  # fmt: skip
                epochs.add_metric(labels, info.epoch)
        yield epochs
        yield from _set_families(controller)
        yield from _election_families(controller)


def _set_families(controller: Controller) -> Iterator[Metric]:
    families = {
        name: GaugeMetricFamily(f"bolide_controller_{name}", text, labels=SET_LABELS)
        for name, text in (
            ("master_epoch", "the set's master epoch"),
            ("master_broker_id", "the set's master id, -1 without one"),
            ("sync_state_set_epoch", "the SyncStateSet's epoch"),
            ("sync_state_set_size", "members of the SyncStateSet"),
        )
    }
    for replica_set in controller.broker_sets.values():
        labels = (replica_set.cluster_name, replica_set.broker_name)
        master = replica_set.master_broker_id
        families["master_epoch"].add_metric(labels, replica_set.master_epoch)
        families["master_broker_id"].add_metric(labels, -1 if master is None else master)
        families["sync_state_set_epoch"].add_metric(labels, replica_set.sync_state_set_epoch)
        families["sync_state_set_size"].add_metric(labels, len(replica_set.sync_state_set))
    yield from families.values()


def _election_families(controller: Controller) -> Iterator[Metric]:
    labels = ("brokerName",)
    at = GaugeMetricFamily("bolide_controller_last_election_timestamp_ms",
                           "when this controller last elected for the set (epoch ms)",
                           labels=labels)  # fmt: skip
    epoch = GaugeMetricFamily("bolide_controller_last_election_epoch",
                              "master epoch of that election", labels=labels)  # fmt: skip
    broker = GaugeMetricFamily("bolide_controller_last_election_broker_id",
                               "master it chose, -1 for none", labels=labels)  # fmt: skip
    for name, election in controller.last_elections.items():
        at.add_metric((name,), election.at_ms)
        epoch.add_metric((name,), election.master_epoch)
        chosen = election.master_broker_id
        broker.add_metric((name,), -1 if chosen is None else chosen)
    yield from (at, epoch, broker)


def _gauge(name: str, documentation: str, value: int) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=value)


def _counter(name: str, documentation: str, value: int) -> CounterMetricFamily:
    return CounterMetricFamily(name, documentation, value=value)
