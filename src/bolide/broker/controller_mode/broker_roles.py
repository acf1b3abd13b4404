"""How a broker's parts follow controller mode: the :class:`~.replicas_manager.RoleSwitch`
and :class:`~.replicas_manager.ReplicaProgress` over the broker's replication, store and
name-server registration.

* master: the HA master service; brokerId 0 on the name servers; sends acknowledged as the
  SyncStateSet requires (SYNC_MASTER waiting for the replica's ack under
  ``allAckInSyncStateSet=true`` with a SyncStateSet larger than the master, else at once);
  a SyncStateSet smaller than ``minInSyncReplicas`` refuses sends;
* slave: the HA client towards the master the controller named (its HA address learned from
  the name server's REGISTER_BROKER answer, ``host:port+1`` until then), registered under its
  controller id; the store refuses puts.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable, Mapping

from bolide.base.clock import Clock
from bolide.broker.config import BrokerRole
from bolide.broker.controller_mode.settings import (
    IN_SYNC_REPLICAS_NOT_ENOUGH,
    ControllerModeSettings,
)
from bolide.broker.ha.replication import Replication
from bolide.broker.registration import NameServerRegistration
from bolide.store.file_store import FileMessageStore

__all__ = ["BrokerRoles", "RoleParts"]

_log = logging.getLogger("bolide.broker.controller_mode")


@dataclasses.dataclass(frozen=True)
class RoleParts:
    """The parts of a broker that its role changes move."""

    replication: Replication
    store: FileMessageStore
    registration: Callable[[], NameServerRegistration]
    """The broker's name-server registration (built after the roles, hence a callable)."""
    start_registration: Callable[[], Awaitable[object]]
    """Start registering periodically; called at the first role (once)."""
    start_master_services: Callable[[], Awaitable[None]]
    """Start delayed delivery and transaction checks on becoming master."""
    broker_ip: str
    ha_port: Callable[[], int]
    """The HA listener's port (known once it listens)."""
    clock: Clock


class BrokerRoles:
    """Role changes and replica progress for one broker (see the module docstring)."""

    def __init__(self, settings: ControllerModeSettings, parts: RoleParts) -> None:
        self._settings = settings
        self._replication = parts.replication
        self._store = parts.store
        self._registration = parts.registration
        self._start_registration = parts.start_registration
        self._start_master_services = parts.start_master_services
        self._broker_ip = parts.broker_ip
        self._ha_port = parts.ha_port
        self._clock = parts.clock
        self._registration_started = False
        self._sync_state_set: frozenset[int] = frozenset()
        self._fence: str | None = None
        self._caught_up_at_ms: int | None = None
        self.epoch = 0
        """The master epoch this broker last followed or led."""

    # --- RoleSwitch ----------------------------------------------------------------------------

    async def become_master(self, master_epoch: int, sync_state_set: frozenset[int]) -> None:
        """Lead ``master_epoch``: take puts, serve replicas, start delayed delivery and
        transaction checks, register as brokerId 0."""
        self.epoch = master_epoch
        self._sync_state_set = sync_state_set
        await self._replication.become_master(self._ack_role())
        self._refresh_refusal()
        await self._start_master_services()
        await self._announce(0)

    async def become_slave(self, master_address: str, master_epoch: int, broker_id: int) -> None:
        """Follow ``master_address`` in ``master_epoch`` under controller id ``broker_id``."""
        self.epoch = master_epoch
        replication = self._replication
        host, _, port = master_address.rpartition(":")
        derived_ha = f"{host}:{int(port) + 1}"
        if replication.role.is_master:  # a deposed master: serve no replica, copy instead
            await replication.stop()
            replication.role = BrokerRole.SLAVE
            replication.master_address = master_address
            replication.master_ha_address = derived_ha
            await replication.start()
        else:
            replication.master_address = None
            replication.master_ha_address = derived_ha
            replication.master_learned(master_address, derived_ha)
        await self._announce(broker_id)

    def fence_sends(self, reason: str | None) -> None:
        self._fence = reason
        self._refresh_refusal()

    def sync_state_set_changed(self, sync_state_set: frozenset[int]) -> None:
        self._sync_state_set = sync_state_set
        if self._replication.role.is_master:
            self._replication.role = self._ack_role()
        self._refresh_refusal()

    def max_offset(self) -> int:
        return self._store.commit_log_max_offset

    def last_epoch(self) -> int:
        return self.epoch

    # --- ReplicaProgress -----------------------------------------------------------------------

    def caught_up(self, replica_ids: list[int]) -> Mapping[int, tuple[bool, int | None]]:
        """The 4.x HA stream does not say which replica a connection is: with one replica
        (the usual pair) the link is it; with more, the caught-up links are matched to the
        ids in order (exact per-replica progress comes with the AutoSwitch handshake, which
        carries the replica's id)."""
        master = self._replication.master
        if master is None or not replica_ids:
            return {}
        now_ms = self._clock.monotonic_ms()
        end = self._store.commit_log_max_offset
        links = master.links
        caught = sum(1 for link in links if link.ack_offset >= end)
        if caught:
            self._caught_up_at_ms = now_ms
        progress: dict[int, tuple[bool, int | None]] = {}
        for index, replica in enumerate(replica_ids):
            connected = index < len(links)
            now_caught_up = index < caught
            last = now_ms if now_caught_up else (self._caught_up_at_ms if connected else None)
            progress[replica] = (now_caught_up, last)
        return progress

    # --- inside --------------------------------------------------------------------------------

    def _ack_role(self) -> BrokerRole:
        waits = self._settings.all_ack_in_sync_state_set and len(self._sync_state_set) > 1
        return BrokerRole.SYNC_MASTER if waits else BrokerRole.ASYNC_MASTER

    def _refresh_refusal(self) -> None:
        if not self._replication.role.is_master:
            return
        refusal = self._fence
        if refusal is None and len(self._sync_state_set) < self._settings.min_in_sync_replicas:
            refusal = IN_SYNC_REPLICAS_NOT_ENOUGH
        self._store.refuse_puts = refusal

    async def _announce(self, broker_id: int) -> None:
        """Register with the name servers under ``broker_id`` (0: master) at once."""
        registration = self._registration()
        registration.identity = dataclasses.replace(
            registration.identity,
            broker_id=broker_id,
            ha_server_addr=f"{self._broker_ip}:{self._ha_port()}",
        )
        if not self._registration_started:
            self._registration_started = True
            await self._start_registration()
        else:
            await registration.register_once()
        _log.info("registered with the name servers as brokerId %d (epoch %d)", broker_id,
                  self.epoch)  # fmt: skip
