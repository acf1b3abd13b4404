"""The name server's route tables: pure state, no I/O, time from an injected clock.

Four tables, as a RocketMQ 4.x name server keeps them (docs/protocol.md §2.3):

* cluster table:  cluster name -> broker names in it;
* broker table:   broker name -> (cluster, {broker id: address}); id 0 is the master;
* topic table:    topic -> {broker name: queue data}; filled ONLY from master (id 0)
  registrations, because producers write to masters and a slave mirrors its master;
* live table:     broker address -> (last registration time, topic data version, the key of
  the connection it registered over, its HA address).

A broker disappears when it unregisters, when it stays silent for ``BROKER_EXPIRY_MS``
(:meth:`RouteTables.expire`), or at once when its connection closes
(:meth:`RouteTables.drop_connection`). A broker name left without addresses loses its queue
data, and a cluster left without broker names disappears.

Everything here runs on the event-loop thread; there is no lock because nothing awaits.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field

from bolide.base import limits
from bolide.base.clock import Clock
from bolide.base.errors import BackpressureError
from bolide.base.types import Address, BrokerName, ClusterName, Topic
from bolide.protocol.bodies import (
    MASTER_BROKER_ID,
    PERM_WRITE,
    BrokerData,
    ClusterInfo,
    DataVersion,
    QueueData,
    TopicConfig,
    TopicRouteData,
)

_log = logging.getLogger("bolide.namesrv.routes")

ConnectionKey = Hashable
"""Identifies the connection a broker registered over (the remoting Connection object)."""


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """One REGISTER_BROKER request, decoded.

    ``topic_configs`` is None when the request carried no topic table (an empty body).
    ``data_version`` is the version of the broker's topic table; only equality matters.
    """

    cluster_name: ClusterName
    broker_name: BrokerName
    broker_addr: Address
    broker_id: int
    ha_server_addr: str
    data_version: DataVersion
    topic_configs: Mapping[str, TopicConfig] | None
    connection_key: ConnectionKey | None = None


@dataclass(frozen=True, slots=True)
class RegisterResult:
    """The answer to a registration.

    ``topic_config_changed`` is true when the master's queue data was (re)written: its first
    registration or a new data version. ``master_addr``/``ha_server_addr`` are filled for a
    slave whose master is registered.
    """

    topic_config_changed: bool
    master_addr: Address | None = None
    ha_server_addr: str | None = None


@dataclass(slots=True)
class _BrokerEntry:
    cluster: ClusterName
    addrs: dict[int, Address] = field(default_factory=dict)


@dataclass(slots=True)
class _LiveBroker:
    last_update_ms: int
    data_version: DataVersion
    connection_key: ConnectionKey | None
    ha_server_addr: str


class RouteTables:
    """The route tables of one name server (nothing is shared between instances).

    Times are ``clock.monotonic_ms()`` readings, so expiry is immune to wall-clock jumps.
    ``max_live_brokers`` (default ``limits.NAMESRV_LIVE_BROKERS_MAX_ENTRIES``) bounds the live
    table; a registration beyond it raises :class:`BackpressureError`.
    ``delete_topic_with_broker_registration``: see the attribute of that name.
    """

    def __init__(
        self,
        clock: Clock,
        *,
        expiry_ms: int = limits.BROKER_EXPIRY_MS,
        max_live_brokers: int = limits.NAMESRV_LIVE_BROKERS_MAX_ENTRIES,
        delete_topic_with_broker_registration: bool = False,
    ) -> None:
        self._clock = clock
        self.delete_topic_with_broker_registration = delete_topic_with_broker_registration
        """RocketMQ 5.x's ``deleteTopicWithBrokerRegistration`` (default False): whether a
        master's registration that no longer reports a topic removes the master's queues
        from it. Off, as in Java, a topic leaves the routes only through DELETE_TOPIC_IN_NAMESRV
        or when its last broker goes: a slave promoted before it copied its master's newest
        topics must not make them vanish from the routes."""
        self._expiry_ms = expiry_ms
        self._max_live_brokers = max_live_brokers
        self._clusters: dict[ClusterName, set[BrokerName]] = {}
        self._brokers: dict[BrokerName, _BrokerEntry] = {}
        self._topics: dict[Topic, dict[BrokerName, QueueData]] = {}
        self._live: dict[Address, _LiveBroker] = {}

    @property
    def expiry_ms(self) -> int:
        """Silence, in milliseconds, after which :meth:`expire` drops a broker."""
        return self._expiry_ms

    # --- registration ----------------------------------------------------------------------

    def register_broker(self, registration: BrokerRegistration) -> RegisterResult:
        """Record a broker's (re-)registration and, for a master, its topics.

        Raises :class:`BackpressureError` when the address is new and the live table is full.
        """
        address = registration.broker_addr
        if address not in self._live and len(self._live) >= self._max_live_brokers:
            raise BackpressureError(
                f"name server holds {len(self._live)} broker addresses, the maximum"
            )
        entry = self._join_cluster(registration)
        # One address has one id: a slave promoted to master re-registers under id 0.
        for broker_id in [i for i, a in entry.addrs.items() if a == address]:
            if broker_id != registration.broker_id:
                del entry.addrs[broker_id]
        if self._is_fenced(entry, registration):
            return RegisterResult(topic_config_changed=False)
        first_registration = entry.addrs.get(registration.broker_id) != address
        entry.addrs[registration.broker_id] = address
        previous = self._live.get(address)
        changed = (
            first_registration
            or previous is None
            or previous.data_version != registration.data_version
        )
        topic_written = False
        is_master = registration.broker_id == MASTER_BROKER_ID
        if is_master and registration.topic_configs is not None and changed:
            self._replace_topics(registration.broker_name, registration.topic_configs)
            topic_written = True
        self._live[address] = _LiveBroker(
            last_update_ms=self._clock.monotonic_ms(),
            data_version=registration.data_version,
            connection_key=registration.connection_key,
            ha_server_addr=registration.ha_server_addr,
        )
        if is_master:
            return RegisterResult(topic_config_changed=topic_written)
        return self._slave_result(entry, topic_written)

    def _is_fenced(self, entry: _BrokerEntry, registration: BrokerRegistration) -> bool:
        """Whether another live address holds this broker id under a newer master epoch.

        RocketMQ 5.x's fencing: a deposed master (lower ``stateVersion``) cannot take back
        broker id 0 from its successor. The refused address also leaves the live table.
        """
        holder = entry.addrs.get(registration.broker_id)
        if holder is None or holder == registration.broker_addr:
            return False
        holder_live = self._live.get(holder)
        if holder_live is None:
            return False
        newer = holder_live.data_version.state_version
        if newer <= registration.data_version.state_version:
            return False
        _log.warning(
            "registering broker conflicts with the live one, ignored: %s id %d at %s has "
            "stateVersion %d, %s is live there with %d",
            registration.broker_name,
            registration.broker_id,
            registration.broker_addr,
            registration.data_version.state_version,
            holder,
            newer,
        )
        self._live.pop(registration.broker_addr, None)
        return True

    def _join_cluster(self, registration: BrokerRegistration) -> _BrokerEntry:
        name = registration.broker_name
        cluster = registration.cluster_name
        entry = self._brokers.get(name)
        if entry is None:
            entry = _BrokerEntry(cluster=cluster)
            self._brokers[name] = entry
        elif entry.cluster != cluster:
            # The broker name moved to another cluster: it leaves the old one.
            self._leave_cluster(entry.cluster, name)
            entry.cluster = cluster
        self._clusters.setdefault(cluster, set()).add(name)
        return entry

    def _slave_result(self, entry: _BrokerEntry, topic_written: bool) -> RegisterResult:
        master_addr = entry.addrs.get(MASTER_BROKER_ID)
        master_live = None if master_addr is None else self._live.get(master_addr)
        if master_addr is None or master_live is None:
            return RegisterResult(topic_config_changed=topic_written)
        return RegisterResult(
            topic_config_changed=topic_written,
            master_addr=master_addr,
            ha_server_addr=master_live.ha_server_addr,
        )

    def _replace_topics(
        self, broker_name: BrokerName, topic_configs: Mapping[str, TopicConfig]
    ) -> None:
        for topic, config in topic_configs.items():
            self._topics.setdefault(Topic(topic), {})[broker_name] = QueueData(
                broker_name=broker_name,
                read_queue_count=config.read_queue_count,
                write_queue_count=config.write_queue_count,
                perm=config.perm,
                topic_sys_flag=config.topic_sys_flag,
            )
        if not self.delete_topic_with_broker_registration:
            return
        # A topic the master no longer reports (deleted on the broker) loses this broker.
        gone = [
            topic
            for topic, by_broker in self._topics.items()
            if broker_name in by_broker and topic not in topic_configs
        ]
        for topic in gone:
            self._remove_queue_data(topic, broker_name)

    def unregister_broker(
        self,
        cluster_name: ClusterName,
        broker_name: BrokerName,
        broker_addr: Address,
        broker_id: int,
    ) -> bool:
        """Forget one broker address; returns whether it was known.

        The id is removed only while it still maps to ``broker_addr``, so a late unregister
        from a replaced process cannot remove its successor. A broker name left without
        addresses loses its queue data and leaves ``cluster_name``.
        """
        known = self._live.pop(broker_addr, None) is not None
        entry = self._brokers.get(broker_name)
        if entry is None or entry.addrs.get(broker_id) != broker_addr:
            return known
        del entry.addrs[broker_id]
        if not entry.addrs:
            self._forget_broker_name(broker_name)
        return True

    # --- liveness --------------------------------------------------------------------------

    def expire(self) -> list[tuple[Address, ConnectionKey | None]]:
        """Drop every broker silent for more than the expiry time.

        Returns the dropped addresses with their connection keys, so the caller can close
        those connections.
        """
        now_ms = self._clock.monotonic_ms()
        expired = [
            (address, live.connection_key)
            for address, live in self._live.items()
            if live.last_update_ms + self._expiry_ms < now_ms
        ]
        for address, _ in expired:
            self._drop_address(address)
        return expired

    def drop_connection(self, connection_key: ConnectionKey) -> list[Address]:
        """Drop at once every broker that registered over the closed connection."""
        addresses = [a for a, live in self._live.items() if live.connection_key == connection_key]
        for address in addresses:
            self._drop_address(address)
        return addresses

    def last_update_ms(self, broker_addr: Address) -> int | None:
        """Monotonic time of the broker's last registration, or None if it is not live."""
        live = self._live.get(broker_addr)
        return None if live is None else live.last_update_ms

    def is_live(self, broker_addr: Address) -> bool:
        return broker_addr in self._live

    def data_version_of(self, broker_addr: Address) -> DataVersion | None:
        """The topic data version the broker last registered, or None if it is not live."""
        live = self._live.get(broker_addr)
        return None if live is None else live.data_version

    def touch(self, broker_addr: Address) -> None:
        """Refresh a live broker's timestamp (QUERY_DATA_VERSION counts as a sign of life)."""
        live = self._live.get(broker_addr)
        if live is not None:
            live.last_update_ms = self._clock.monotonic_ms()

    def _drop_address(self, address: Address) -> None:
        self._live.pop(address, None)
        emptied: list[BrokerName] = []
        for name, entry in self._brokers.items():
            for broker_id in [i for i, a in entry.addrs.items() if a == address]:
                del entry.addrs[broker_id]
            if not entry.addrs:
                emptied.append(name)
        for name in emptied:
            self._forget_broker_name(name)

    def _forget_broker_name(self, broker_name: BrokerName) -> None:
        entry = self._brokers.pop(broker_name)
        self._leave_cluster(entry.cluster, broker_name)
        for topic in [t for t, by_broker in self._topics.items() if broker_name in by_broker]:
            self._remove_queue_data(topic, broker_name)

    def _leave_cluster(self, cluster: ClusterName, broker_name: BrokerName) -> None:
        names = self._clusters.get(cluster)
        if names is None:
            return
        names.discard(broker_name)
        if not names:
            del self._clusters[cluster]

    def _remove_queue_data(self, topic: Topic, broker_name: BrokerName) -> None:
        by_broker = self._topics.get(topic)
        if by_broker is None:
            return
        by_broker.pop(broker_name, None)
        if not by_broker:
            del self._topics[topic]

    # --- queries ---------------------------------------------------------------------------

    def route_for_topic(self, topic: Topic) -> TopicRouteData | None:
        """The topic's route, or None (TOPIC_NOT_EXIST) when no live broker holds it.

        Queue data and broker data are sorted by broker name so answers are stable.
        """
        by_broker = self._topics.get(topic)
        if not by_broker:
            return None
        broker_datas = [
            self._broker_data(name) for name in sorted(by_broker) if name in self._brokers
        ]
        if not broker_datas:
            return None
        queue_datas = tuple(by_broker[name] for name in sorted(by_broker))
        return TopicRouteData(queue_datas=queue_datas, broker_datas=tuple(broker_datas))

    def _broker_data(self, broker_name: BrokerName) -> BrokerData:
        entry = self._brokers[broker_name]
        return BrokerData(
            broker_name=broker_name,
            cluster=entry.cluster,
            broker_addrs=dict(sorted(entry.addrs.items())),
        )

    def cluster_info(self) -> ClusterInfo:
        """Every broker name with its addresses, and every cluster with its broker names."""
        return ClusterInfo(
            broker_addr_table={name: self._broker_data(name) for name in sorted(self._brokers)},
            cluster_addr_table={
                cluster: tuple(sorted(names)) for cluster, names in sorted(self._clusters.items())
            },
        )

    def all_topics(self) -> list[Topic]:
        """Every topic some registered master holds, sorted."""
        return sorted(self._topics)

    def topics_by_cluster(self, cluster_name: ClusterName) -> list[Topic]:
        """Topics with queue data on at least one broker name of the cluster, sorted."""
        names = self._clusters.get(cluster_name, set())
        return sorted(t for t, by_broker in self._topics.items() if names & by_broker.keys())

    def broker_names(self) -> list[BrokerName]:
        return sorted(self._brokers)

    def live_addresses(self) -> list[Address]:
        return sorted(self._live)

    # --- administration --------------------------------------------------------------------

    def delete_topic(self, topic: Topic, cluster_name: ClusterName | None = None) -> bool:
        """Remove a topic's route (only the cluster's brokers when ``cluster_name`` is given).

        Returns whether anything was removed. A master that still holds the topic brings it
        back with its next registration that carries a new data version.
        """
        by_broker = self._topics.get(topic)
        if by_broker is None:
            return False
        if cluster_name is None:
            del self._topics[topic]
            return True
        names = [n for n in by_broker if n in self._clusters.get(cluster_name, set())]
        for name in names:
            self._remove_queue_data(topic, name)
        return bool(names)

    def wipe_write_perm(self, broker_name: BrokerName) -> int:
        """Clear the write bit of the broker's queue data; returns how many topics changed."""
        return self._change_perm(broker_name, lambda perm: perm & ~PERM_WRITE)

    def add_write_perm(self, broker_name: BrokerName) -> int:
        """Set the write bit of the broker's queue data; returns how many topics it covers."""
        return self._change_perm(broker_name, lambda perm: perm | PERM_WRITE)

    def _change_perm(self, broker_name: BrokerName, change: Callable[[int], int]) -> int:
        count = 0
        for by_broker in self._topics.values():
            old = by_broker.get(broker_name)
            if old is None:
                continue
            by_broker[broker_name] = dataclasses.replace(old, perm=change(old.perm))
            count += 1
        return count
