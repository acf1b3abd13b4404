"""One broker's replication role and the parts it runs (the broker's only entry to broker/ha).

=============== ==============================================================================
role            parts
=============== ==============================================================================
ASYNC_MASTER    HaMaster on haListenPort: streams to slaves; sends answer at once
SYNC_MASTER     HaMaster, and every stored send waits for a slave's ack (FLUSH_SLAVE_TIMEOUT
                after 3 s, SLAVE_NOT_AVAILABLE when no slave is in sync)
SLAVE           the store refuses puts; HaSlave copies the master's commit log;
                SlaveSynchronize copies its tables every 10 s
=============== ==============================================================================

The master's addresses come from ``haMasterAddress`` or the name server's answer to
REGISTER_BROKER (:meth:`Replication.master_learned`). A later controller can promote a slave
with :meth:`Replication.become_master`: it stops copying, lets the store take puts and opens
the HA listener; the broker then re-registers as id 0 under the same name.

Controller mode passes ``epoch_file``: the HA stream is then AutoSwitch's (epochs exchanged,
a rejoining replica truncated to what it shares with the master), :meth:`become_master`
appends ``<masterEpoch, maxPhyOffset>`` and :meth:`become_slave` follows a new master.
Without it (the default) the 4.x stream is unchanged.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from bolide.base.clock import Clock
from bolide.base.service import CrashHandler
from bolide.broker.config import BrokerConfig, BrokerRole
from bolide.broker.context import BrokerContext
from bolide.broker.ha.master import HaMaster, ReplicationLag
from bolide.broker.ha.metadata_sync import SlaveSynchronize
from bolide.broker.ha.slave import HaSlave
from bolide.remoting import ClientPool
from bolide.store.api import PutResult
from bolide.store.epoch_file import EpochEntry, EpochFile
from bolide.store.file_store import FileMessageStore

__all__ = ["SLAVE_PUT_REFUSAL", "Replication", "ReplicationLag"]

_log = logging.getLogger("bolide.broker.ha")

SLAVE_PUT_REFUSAL = (
    "service not available now. It may be caused by one of the following reasons: the broker's "
    "disk is full, messages are put to the slave, message store has been shut down, etc. "
    "(this broker is a SLAVE)"
)
"""Java's SERVICE_NOT_AVAILABLE remark for a send to a slave."""


class Replication:
    """The HA parts of one broker, chosen by ``config.broker_role``."""

    def __init__(
        self,
        config: BrokerConfig,
        store: FileMessageStore,
        context: BrokerContext,
        pool: ClientPool,
        *,
        host: str,
        clock: Clock,
        ha_listen_port: int | None = None,
        on_crash: CrashHandler | None = None,
        epoch_file: EpochFile | None = None,
    ) -> None:
        self.role = config.broker_role
        self.epoch_file = epoch_file
        self.controller_runtime_info: Callable[[], dict[str, str]] | None = None
        """Controller mode's part of the runtime info (set by the broker in that mode)."""
        """Controller mode's epoch list (None: the 4.x HA stream)."""
        self.confirm_offset: Callable[[], int] | None = None
        """Controller mode: the frames' confirmOffset (None: the commit log's end)."""
        self.on_released: Callable[[], object] | None = None
        """Controller mode: called when replica acks acknowledge more (parked pulls re-read)."""
        self.required_acks: Callable[[], frozenset[int] | None] | None = None
        """Controller mode: the replica ids every SYNC_MASTER send waits for (None, or a
        callable answering None: any one slave's ack)."""
        self._broker_id = config.broker_id
        self._ha_listen_port = (
            config.effective_ha_listen_port if ha_listen_port is None else ha_listen_port
        )
        self._config = config
        self._store = store
        self._context = context
        self._pool = pool
        self._host = host
        self._clock = clock
        self._on_crash = on_crash
        self.master: HaMaster | None = None
        self.slave: HaSlave | None = None
        self.sync: SlaveSynchronize | None = None
        self.master_address: str | None = None
        """The master's remoting address (slaves; from the name server)."""
        self.master_ha_address: str | None = config.ha_master_address or None
        """The master's HA address (slaves; haMasterAddress, else from the name server)."""

    # --- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        """Open the role's parts. Raises OSError when haListenPort cannot be bound."""
        if self.role.is_master:
            await self._start_master()
            return
        self._start_slave()

    def _start_slave(self) -> SlaveSynchronize:
        """Refuse puts, start copying from the master and syncing its metadata; returns the
        metadata sync."""
        self._store.refuse_puts = SLAVE_PUT_REFUSAL
        self.slave = HaSlave(
            self._store,
            lambda: self.master_ha_address,
            clock=self._clock,
            epochs=self.epoch_file,
            broker_id=self._broker_id,
        )
        self.slave.start()
        self.sync = SlaveSynchronize(
            self._context,
            self._pool,
            lambda: self.master_address,
            clock=self._clock,
            on_crash=self._on_crash,
        )
        self.sync.start()
        return self.sync

    async def _start_master(self) -> None:
        self.master = HaMaster(
            self._store,
            host=self._host,
            port=self._ha_listen_port,
            clock=self._clock,
            epochs=self.epoch_file,
            confirm_offset=self.confirm_offset,
            required_acks=self.required_acks,
            on_released=self.on_released,
        )
        await self.master.start()

    async def stop(self) -> None:
        for part in (self.sync, self.slave, self.master):
            if part is not None:
                await part.stop()
        self.sync = self.slave = self.master = None

    async def become_master(
        self, role: BrokerRole = BrokerRole.ASYNC_MASTER, *, master_epoch: int | None = None
    ) -> None:
        """Promote this slave (a controller's hook): stop copying, take puts, serve slaves.

        In controller mode ``master_epoch`` is appended to the epoch file as
        ``<master_epoch, maxPhyOffset>`` before any put (raises EpochOrderError when it is
        not newer than the last epoch).
        """
        if self.role.is_master and master_epoch is None:
            return
        for part in (self.sync, self.slave):
            if part is not None:
                await part.stop()
        self.sync = self.slave = None
        if self.master is not None and self.master.auto_switch != (self.epoch_file is not None):
            await self.master.stop()  # the epoch file came after it started: reopen
            self.master = None
        if self.epoch_file is not None and master_epoch is not None:
            self.epoch_file.append(EpochEntry(master_epoch, self._store.commit_log_max_offset))
        self._store.refuse_puts = None
        self.role = role
        if self.master is None:
            await self._start_master()
        _log.warning("this broker is now the %s (epoch %s)", role.value, master_epoch)

    async def become_slave(
        self, master_address: str, master_ha_address: str, *, broker_id: int | None = None
    ) -> None:
        """Follow a new master (a controller's hook): stop serving slaves, refuse puts, copy
        from ``master_ha_address`` (truncating first in controller mode). ``broker_id`` is
        the id the AutoSwitch handshake names (controller mode's id; default: brokerId)."""
        if broker_id is not None:
            self._broker_id = broker_id
        if self.master is not None:
            await self.master.stop()
            self.master = None
        for part in (self.sync, self.slave):
            if part is not None:
                await part.stop()
        self.sync = self.slave = None
        self.role = BrokerRole.SLAVE
        self.master_address = master_address
        self.master_ha_address = master_ha_address
        self._start_slave().sync_soon()

    # --- what the broker asks -------------------------------------------------------------

    @property
    def ha_port(self) -> int | None:
        """The port the HA service listens on (masters, once started)."""
        return self.master.port if self.master is not None else None

    def master_learned(self, master_address: str | None, ha_address: str | None) -> None:
        """The name server's REGISTER_BROKER answer named the master (slaves only)."""
        if self.role.is_master:
            return
        changed = master_address is not None and master_address != self.master_address
        if master_address is not None:
            self.master_address = master_address
        if not self._config.ha_master_address and ha_address:
            self.master_ha_address = ha_address
        if changed and self.sync is not None:
            self.sync.sync_soon()

    @property
    def waits_for_replicas(self) -> bool:
        """Whether a stored send now waits for a replica's ack (this role is SYNC_MASTER).
        In controller mode the role follows the SyncStateSet, never brokerRole's setting."""
        return self.role is BrokerRole.SYNC_MASTER

    async def wait_replicated(self, result: PutResult) -> None:
        """Under SYNC_MASTER, hold a stored put until a slave has it (see HaMaster)."""
        if self.role is BrokerRole.SYNC_MASTER and self.master is not None:
            await self.master.wait_replicated(result)

    def lag(self) -> ReplicationLag:
        """How far the replica is behind (a master: its best slave; a slave: itself). The
        metrics exporter reads this (``rocketmq_broker_commitlog_diff``)."""
        if self.master is not None:
            return self.master.lag()
        if self.slave is not None:
            return self.slave.lag()
        return ReplicationLag(0, 0)

    def runtime_info(self) -> dict[str, str]:
        """Replication's part of GET_BROKER_RUNTIME_INFO (Bolide's keys, strings)."""
        info = {"brokerRole": self.role.value}
        lag = self.lag()
        if self.master is not None:
            info["haListenPort"] = str(self.master.port)
            info["haConnectionCount"] = str(len(self.master.links))
            info["haPush2SlaveMaxOffset"] = str(self.master.acked_offset)
            info["haSlaveInSync"] = str(self.master.slave_ok()).lower()
            if self.master.last_refusal:
                info["haLastRefusal"] = self.master.last_refusal
        if self.slave is not None:
            info["masterAddr"] = self.master_address or ""
            info["haMasterAddress"] = self.master_ha_address or ""
            info["haMasterConnected"] = str(self.slave.connected_to is not None).lower()
        if self.epoch_file is not None:
            info["haMasterEpoch"] = str(self.epoch_file.last_epoch)
            info["haEpochEntries"] = ",".join(
                f"{entry.epoch}-{entry.start_offset}" for entry in self.epoch_file.entries
            )
        if self.slave is not None and self.epoch_file is not None:
            info["haConfirmOffset"] = str(self.slave.confirm_offset)
            info["haTruncatedBytes"] = str(sum(t.bytes_cut for t in self.slave.truncations))
        info["haReplicaLagBytes"] = str(lag.bytes_behind)
        info["haReplicaLagMs"] = str(lag.time_behind_ms)
        if self.controller_runtime_info is not None:
            info.update(self.controller_runtime_info())
        return info
