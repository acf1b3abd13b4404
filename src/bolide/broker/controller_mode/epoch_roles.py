"""Role changes of controller mode joined to the epochs (round3-facts §1, docs/replication.md).

:class:`EpochBrokerRoles` is :class:`~.broker_roles.BrokerRoles` plus what the epochs need:

* becoming master appends ``<masterEpoch, maxPhyOffset>`` to the epoch file before any put
  (the HA listener then speaks AutoSwitch's stream) and the frames carry the SyncStateSet's
  confirmOffset (:class:`~.epochs.ConfirmOffset`);
* becoming a slave (a deposed master included) restarts the HA client towards the new master
  under this broker's controller id, so the AutoSwitch handshake truncates what the new
  master never had;
* every role change enters the master epoch in the config tables, so name-server
  registrations carry it as ``stateVersion`` (the name servers fence a stale master by it).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from bolide.base.clock import Clock
from bolide.broker.controller_mode.broker_roles import BrokerRoles
from bolide.broker.controller_mode.epochs import ConfirmOffset
from bolide.broker.controller_mode.settings import ControllerModeSettings
from bolide.broker.ha.replication import Replication
from bolide.broker.registration import NameServerRegistration
from bolide.store.file_store import FileMessageStore

__all__ = ["EpochBrokerRoles"]


class EpochBrokerRoles(BrokerRoles):
    """See the module docstring. ``enter_epoch`` moves the registrations' stateVersion;
    ``own_id`` is this broker's controller id (None until the controller gave one)."""

    def __init__(
        self,
        settings: ControllerModeSettings,
        *,
        replication: Replication,
        store: FileMessageStore,
        registration: Callable[[], NameServerRegistration],
        start_registration: Callable[[], Awaitable[object]],
        start_master_services: Callable[[], Awaitable[None]],
        broker_ip: str,
        ha_port: Callable[[], int],
        clock: Clock,
        enter_epoch: Callable[[int], None],
        own_id: Callable[[], int | None],
    ) -> None:
        super().__init__(
            settings,
            replication=replication,
            store=store,
            registration=registration,
            start_registration=start_registration,
            start_master_services=start_master_services,
            broker_ip=broker_ip,
            ha_port=ha_port,
            clock=clock,
        )
        self._enter_epoch = enter_epoch
        self._followed: tuple[str, int] | None = None
        self.confirm = ConfirmOffset(replication, store, lambda: self._sync_state_set, own_id)
        replication.confirm_offset = self.confirm

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
