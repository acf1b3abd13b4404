"""Role changes of controller mode joined to the epochs (round3-facts §1, docs/replication.md).

:class:`EpochBrokerRoles` is :class:`~.broker_roles.BrokerRoles` plus what the epochs need:

* becoming master appends ``<masterEpoch, maxPhyOffset>`` to the epoch file before any put
  (the HA listener then speaks AutoSwitch's stream) and the frames carry the SyncStateSet's
  confirmOffset (:class:`~.epochs.ConfirmOffset`); consumers of the master read only up to
  it (RocketMQ's readUnCommitted=false), so none reads a record a failover can remove;
* becoming a slave (a deposed master included) restarts the HA client towards the new master
  under this broker's controller id, so the AutoSwitch handshake truncates what the new
  master never had;
* every role change enters the master epoch in the config tables, so name-server
  registrations carry it as ``stateVersion`` (the name servers fence a stale master by it);
* under ``allAckInSyncStateSet=true`` a send waits for every SyncStateSet member (each HA
  connection matched to a member by the broker id its AutoSwitch handshake names), and the
  master's view of each replica's progress is per id the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from bolide.broker.controller_mode.broker_roles import BrokerRoles, RoleParts
from bolide.broker.controller_mode.epochs import ConfirmOffset
from bolide.broker.controller_mode.settings import ControllerModeSettings

__all__ = ["EpochBrokerRoles"]


class EpochBrokerRoles(BrokerRoles):
    """See the module docstring. ``enter_epoch`` moves the registrations' stateVersion;
    ``own_id`` is this broker's controller id (None until the controller gave one)."""

    def __init__(
        self,
        settings: ControllerModeSettings,
        parts: RoleParts,
        *,
        enter_epoch: Callable[[int], None],
        own_id: Callable[[], int | None],
    ) -> None:
        super().__init__(settings, parts)
        self._enter_epoch = enter_epoch
        self._own_id = own_id
        self._followed: tuple[str, int] | None = None
        self._caught_up_at_ms_by_id: dict[int, int] = {}
        self.confirm = ConfirmOffset(
            parts.replication, parts.store, lambda: self._sync_state_set, own_id
        )
        parts.replication.confirm_offset = self.confirm
        parts.store.confirm_offset = self.confirm  # readUnCommitted=false: reads stop at it
        parts.replication.required_acks = self._required_acks

    async def become_master(self, master_epoch: int, sync_state_set: frozenset[int]) -> None:
        """Append the epoch (raises EpochOrderError when it is not newer than the file's
        last), then lead as :class:`BrokerRoles` does."""
        self._sync_state_set = sync_state_set
        self._followed = None
        await self._replication.become_master(self._ack_role(), master_epoch=master_epoch)
        self._enter_epoch(master_epoch)
        await super().become_master(master_epoch, sync_state_set)

    async def become_slave(self, master_address: str, master_epoch: int, broker_id: int) -> None:
        """Follow ``master_address``; a new master (or id) restarts the AutoSwitch client."""
        self._enter_epoch(master_epoch)
        replication = self._replication
        followed = (master_address, broker_id)
        if followed == self._followed and not replication.role.is_master:
            await super().become_slave(master_address, master_epoch, broker_id)
            return
        self._followed = followed
        self.epoch = master_epoch
        host, _, port = master_address.rpartition(":")
        await replication.become_slave(
            master_address, f"{host}:{int(port) + 1}", broker_id=broker_id
        )
        await self._announce(broker_id)

    def sync_state_set_changed(self, sync_state_set: frozenset[int]) -> None:
        """The set a send waits for changed: a smaller one releases what the rest hold."""
        super().sync_state_set_changed(sync_state_set)
        master = self._replication.master
        if master is not None:
            master.requirements_changed()

    def caught_up(self, replica_ids: list[int]) -> Mapping[int, tuple[bool, int | None]]:
        """Each replica's progress from the HA connection whose handshake named its id:
        caught up right now (its ack reached the log's end), and when it last was (None:
        not connected)."""
        master = self._replication.master
        if master is None:
            return {}
        now_ms = self._clock.monotonic_ms()
        end = self._store.commit_log_max_offset
        progress: dict[int, tuple[bool, int | None]] = {}
        for replica in replica_ids:
            ack = master.ack_offset_of(replica)
            if ack < 0:  # no connection: it leaves the SyncStateSet (Java's shrink rule)
                progress[replica] = (False, None)
                continue
            if ack >= end:
                self._caught_up_at_ms_by_id[replica] = now_ms
            progress[replica] = (ack >= end, self._caught_up_at_ms_by_id.get(replica))
        return progress

    def _required_acks(self) -> frozenset[int] | None:
        """The replica ids a SYNC_MASTER send waits for: every other SyncStateSet member
        under allAckInSyncStateSet, else None (one replica's ack)."""
        if not self._settings.all_ack_in_sync_state_set:
            return None
        own = self._own_id()
        return self._sync_state_set if own is None else self._sync_state_set - {own}
