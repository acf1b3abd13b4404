"""The broker's side of controller mode (RocketMQ's ReplicasManager, round3-facts §1.5).

Start: find the leader (1005 on each controller), register (1012 → temp identity file →
1013 → identity file → 1003), heartbeat every controller (904, oneway, every second), and
elect itself (1002) when 1003 named no live master. Then poll 1004 every
``syncBrokerMetadataPeriod`` and act on 1008 notices: a newer ``masterEpoch`` makes this
broker master (its own id) or the slave of the named master; a newer epoch without a master
makes it ask for the election. The master keeps the SyncStateSet (1001): a replica that
caught up counts for acknowledgements *before* the 1001 that adds it is sent, and until the
controller's answer settles it (AutoSwitch's synchronizing set, the union of the two), so
the controller never holds a member that lacks an acknowledged message. When it has
not heard the controller for ``controllerHeartBeatTimeoutMills`` less two heartbeats (before
the controller can give its role away), refuses sends with a retriable code.

Role changes go through :class:`RoleSwitch`: ``become_master(master_epoch,
sync_state_set)`` and ``become_slave(master_address, master_epoch, broker_id)``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from bolide.base import limits
from bolide.base.clock import Clock
from bolide.base.errors import BolideError, ConfigError, ProtocolError, TransportError
from bolide.base.service import CrashHandler, Service
from bolide.broker.controller_mode.identity import IdentityFiles, PendingIdentity
from bolide.broker.controller_mode.settings import ControllerModeSettings
from bolide.broker.outbound import broker_heartbeat_request, controller_request
from bolide.protocol.bodies.controller import BrokerReplicasInfo, SyncStateSet, broker_names_to_json
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers.controller import (
    AlterSyncStateSetRequestHeader,
    ApplyBrokerIdRequestHeader,
    BrokerHeartbeatRequestHeader,
    BrokerIdResponseHeader,
    ElectMasterRequestHeader,
    GetMetadataInfoResponseHeader,
    MasterInfoHeader,
    RegisterBrokerToControllerRequestHeader,
)
from bolide.remoting import ClientPool, Connection, Dispatcher

__all__ = ["ReplicaProgress", "ReplicasManager", "RoleSwitch"]

_log = logging.getLogger("bolide.broker.controller_mode")

_ERRORS: tuple[type[BaseException], ...] = (TransportError, ProtocolError, OSError)
CONTROLLER_UNREACHABLE_REFUSAL = (
    "this master has not reached the controller within its heartbeat timeout and may have"
    " been replaced; retry (the route is refreshed)"
)


class RoleSwitch(Protocol):
    """What the broker does when the controller changes its role."""

    async def become_master(self, master_epoch: int, sync_state_set: frozenset[int]) -> None: ...

    async def become_slave(
        self, master_address: str, master_epoch: int, broker_id: int
    ) -> None: ...

    def fence_sends(self, reason: str | None) -> None:
        """Refuse sends with a retriable code (``reason``), or take them again (None)."""

    def sync_state_set_changed(self, sync_state_set: frozenset[int]) -> None:
        """The master's SyncStateSet in force (min/all-ack rules read it)."""

    def max_offset(self) -> int:
        """The commit log's max offset."""

    def last_epoch(self) -> int:
        """The broker's last epoch (0: none)."""


class ReplicaProgress(Protocol):
    """The master's view of its replicas: id → (caught up right now, monotonic ms when it
    was last caught up; None: never, or not connected)."""

    def caught_up(self, replica_ids: list[int]) -> Mapping[int, tuple[bool, int | None]]: ...


class ReplicasManager:
    """Runs controller mode for one broker (see the module docstring)."""

    def __init__(
        self,
        settings: ControllerModeSettings,
        *,
        cluster_name: str,
        broker_name: str,
        broker_address: str,
        store_root: Path,
        roles: RoleSwitch,
        progress: ReplicaProgress,
        clock: Clock,
        on_crash: CrashHandler | None = None,
    ) -> None:
        self._settings = settings
        self._cluster = cluster_name
        self._name = broker_name
        self._address = broker_address
        self._identity = IdentityFiles(store_root, cluster_name, broker_name)
        self._roles = roles
        self._progress = progress
        self._clock = clock
        dispatcher = Dispatcher()
        dispatcher.register(RequestCode.NOTIFY_BROKER_ROLE_CHANGED, self._notified, family="ctl")
        self._pool = ClientPool(dispatcher, clock=clock)
        self.broker_id: int | None = None
        """The controller id once applied."""
        self.leader: str | None = None
        self.master_epoch = 0
        self.master_broker_id: int | None = None
        self.sync_state_set = SyncStateSet()
        """The SyncStateSet the controller confirmed."""
        self.joining: frozenset[int] = frozenset()
        """Replicas proposed to join (1001 sent) that the controller has not settled."""
        self._joining_base_epoch = 0
        self.is_master = False
        self.role_changes = 0
        """Roles taken (master or slave of a new epoch) since start."""
        self.role_changed_at_ms: int | None = None
        """When (epoch ms) this broker took its current role, None before its first."""
        self._registered = False
        self._last_contact_ms = clock.monotonic_ms()
        self._fenced = False
        self._services = [
            Service("controller-mode-heartbeat", self._heartbeat_step,
                    interval_ms=limits.CONTROLLER_BROKER_HEARTBEAT_INTERVAL_MS, clock=clock,
                    on_crash=on_crash, initial_delay_ms=0),
            Service("controller-mode-metadata", self._metadata_step,
                    interval_ms=settings.sync_metadata_period_ms, clock=clock,
                    on_crash=on_crash, initial_delay_ms=0),
            Service("controller-mode-sync-state-set", self._check_sync_state_set,
                    interval_ms=settings.check_sync_state_set_period_ms, clock=clock,
                    on_crash=on_crash),
        ]  # fmt: skip

    @property
    def fenced(self) -> bool:
        """Whether this master refuses sends because the controller went silent."""
        return self._fenced

    def start(self) -> None:
        """Start registering, heartbeating and polling (in the background)."""
        for service in self._services:
            service.start()

    async def stop(self) -> None:
        for service in self._services:
            await service.stop()
        await self._pool.close()

    # --- requests ------------------------------------------------------------------------------

    async def _call(
        self, address: str, code: int, fields: Mapping[str, str] | None = None, body: bytes = b""
    ) -> RemotingCommand:
        request = controller_request(code, fields, body)
        return await self._pool.invoke(address, request, limits.CONTROLLER_REQUEST_TIMEOUT_MS)

    async def _leader_call(
        self, code: int, fields: Mapping[str, str] | None = None, body: bytes = b""
    ) -> RemotingCommand | None:
        """Send to the leader (found first when unknown); None when none answers. A 2007
        answer forgets the leader."""
        leader = self.leader or await self._find_leader()
        if leader is None:
            return None
        try:
            answer = await self._call(leader, code, fields, body)
        except _ERRORS as error:
            _log.info("controller %s: %s", leader, error)
            self.leader = None
            return None
        if answer.code == ResponseCode.CONTROLLER_NOT_LEADER:
            self.leader = None
            return None
        self._last_contact_ms = self._clock.monotonic_ms()
        return answer

    async def _find_leader(self) -> str | None:
        """Ask each controller who leads (1005); the leader's address, or None."""
        for address in self._settings.controller_addresses:
            try:
                answer = await self._call(address, RequestCode.CONTROLLER_GET_METADATA_INFO)
            except _ERRORS:
                continue
            header = GetMetadataInfoResponseHeader.from_ext_fields(answer.ext_fields)
            if header.controller_leader_address:
                self.leader = header.controller_leader_address
                return self.leader
        return None

    # --- registration --------------------------------------------------------------------------

    async def _register(self) -> bool:
        """Apply an id (first time) and register it; True once registered."""
        if self.broker_id is None:
            broker_id = self._identity.applied()
            if broker_id is None:
                broker_id = await self._apply_id()
                if broker_id is None:
                    return False
            self.broker_id = broker_id
        header = RegisterBrokerToControllerRequestHeader(
            self._cluster, self._name, self.broker_id, self._address, self._clock.now_ms()
        )
        answer = await self._leader_call(
            RequestCode.CONTROLLER_REGISTER_BROKER, header.to_ext_fields()
        )
        if answer is None or answer.code != ResponseCode.SUCCESS:
            if answer is not None:
                _log.warning("controller register refused: %s %s", answer.code, answer.remark)
            return False
        self._registered = True
        _log.info("broker %s/%s registered with controller %s as id %s",
                  self._cluster, self._name, self.leader, self.broker_id)  # fmt: skip
        await self._send_heartbeats()
        master = MasterInfoHeader.from_ext_fields(answer.ext_fields)
        if master.master_broker_id is None:
            await self._elect_self()
        else:
            await self._apply(master, SyncStateSet.from_json(answer.body) if answer.body else None)
        return True

    async def _apply_id(self) -> int | None:
        pending = self._identity.pending()
        if pending is None:
            fields = {"clusterName": self._cluster, "brokerName": self._name}
            answer = await self._leader_call(RequestCode.CONTROLLER_GET_NEXT_BROKER_ID, fields)
            if answer is None or answer.code != ResponseCode.SUCCESS:
                return None
            next_id = BrokerIdResponseHeader.from_ext_fields(answer.ext_fields).next_broker_id
            if next_id is None:
                raise ProtocolError("CONTROLLER_GET_NEXT_BROKER_ID answered without nextBrokerId")
            pending = PendingIdentity(next_id, f"{self._address};{self._clock.now_ms()}")
            self._identity.write_pending(pending)
        header = ApplyBrokerIdRequestHeader(
            self._cluster, self._name, pending.broker_id, pending.register_check_code
        )
        answer = await self._leader_call(
            RequestCode.CONTROLLER_APPLY_BROKER_ID, header.to_ext_fields()
        )
        if answer is None:
            return None
        if answer.code != ResponseCode.SUCCESS:
            _log.warning("broker id %s refused (%s %s); asking again",
                         pending.broker_id, answer.code, answer.remark)  # fmt: skip
            self._identity.drop_pending()
            return None
        self._identity.commit(pending.broker_id)
        return pending.broker_id

    # --- loops ---------------------------------------------------------------------------------

    async def _heartbeat_step(self) -> int | None:
        if self._registered:
            await self._send_heartbeats()
        if self.is_master:
            await self._check_contact()
        return None

    async def _send_heartbeats(self) -> None:
        if self.broker_id is None:
            return
        header = BrokerHeartbeatRequestHeader(
            self._cluster, self._address, self._name, self.broker_id,
            epoch=self._roles.last_epoch(), max_offset=self._roles.max_offset(),
            confirm_offset=self._roles.max_offset(),
            heartbeat_timeout_ms=self._settings.heartbeat_timeout_ms,
            election_priority=self._settings.election_priority,
        )  # fmt: skip
        for address in self._settings.controller_addresses:
            request = broker_heartbeat_request(header)
            try:
                await self._pool.invoke_oneway(
                    address, request, limits.CONTROLLER_REQUEST_TIMEOUT_MS
                )
            except _ERRORS:
                continue

    async def _check_contact(self) -> None:
        """A master polls the leader every heartbeat and fences its sends when it has not
        heard it for the heartbeat timeout less two heartbeats."""
        if self.is_master:
            await self._poll_replica_info()
        silent_ms = self._clock.monotonic_ms() - self._last_contact_ms
        margin_ms = 2 * limits.CONTROLLER_BROKER_HEARTBEAT_INTERVAL_MS
        fence = self.is_master and silent_ms > self._settings.heartbeat_timeout_ms - margin_ms
        if fence != self._fenced:
            self._fenced = fence
            self._roles.fence_sends(CONTROLLER_UNREACHABLE_REFUSAL if fence else None)
            _log.warning("sends %s: controller silent for %d ms",
                         "refused" if fence else "taken again", silent_ms)  # fmt: skip

    async def _metadata_step(self) -> int | None:
        try:
            if not self._registered:
                registered = await self._register()
                return None if registered else limits.CONTROLLER_BROKER_HEARTBEAT_INTERVAL_MS
            await self._poll_replica_info()
        except ConfigError:
            raise
        except (BolideError, OSError) as error:
            _log.warning("controller mode: %s", error)
            return limits.CONTROLLER_BROKER_HEARTBEAT_INTERVAL_MS
        return None

    async def _poll_replica_info(self) -> None:
        answer = await self._leader_call(
            RequestCode.CONTROLLER_GET_REPLICA_INFO, {"brokerName": self._name}
        )
        if answer is None:
            return
        if answer.code == ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST:
            self._registered = False
            return
        if answer.code == ResponseCode.SUCCESS:
            sss = SyncStateSet.from_json(answer.body) if answer.body else None
            await self._apply(MasterInfoHeader.from_ext_fields(answer.ext_fields), sss)

    async def _notified(self, _connection: Connection, request: RemotingCommand) -> None:
        """NOTIFY_BROKER_ROLE_CHANGED (1008): act when its epoch is newer than ours."""
        header = MasterInfoHeader.from_ext_fields(request.ext_fields)
        sss = SyncStateSet.from_json(request.body) if request.body else None
        await self._apply(header, sss)

    # --- roles ---------------------------------------------------------------------------------

    async def _apply(self, master: MasterInfoHeader, sss: SyncStateSet | None) -> None:
        """Follow the controller's view when its epoch is newer than ours."""
        epoch = master.master_epoch or 0
        if (
            sss is not None
            and master.master_broker_id == self.broker_id
            and epoch == self.master_epoch
        ):
            if sss.sync_state_set_epoch > self.sync_state_set.sync_state_set_epoch:
                self._adopt(sss)
            return
        if epoch <= self.master_epoch or self.broker_id is None:
            return
        if master.master_broker_id is None:
            await self._elect_self()
            return
        self.master_epoch = epoch
        self.master_broker_id = master.master_broker_id
        self.role_changes += 1
        self.role_changed_at_ms = self._clock.now_ms()
        if master.master_broker_id == self.broker_id:
            self.is_master = True
            self._last_contact_ms = self._clock.monotonic_ms()
            self.joining = frozenset()
            self._adopt(sss or SyncStateSet(frozenset((self.broker_id,)), 0))
            await self._roles.become_master(epoch, self.acking_set)
            _log.warning("this broker is the master of %s, epoch %d", self._name, epoch)
            return
        was_master, self.is_master = self.is_master, False
        if was_master and self._fenced:
            self._fenced = False
        if master.master_address:
            await self._roles.become_slave(master.master_address, epoch, self.broker_id)
            _log.warning("this broker follows %s (id %s), epoch %d",
                         master.master_address, master.master_broker_id, epoch)  # fmt: skip

    @property
    def acking_set(self) -> frozenset[int]:
        """The members a send waits for: the confirmed SyncStateSet and the joining ones."""
        return self.sync_state_set.sync_state_set | self.joining

    def _adopt(self, sss: SyncStateSet) -> None:
        """Take the controller's SyncStateSet; a newer epoch than the one a join was proposed
        on settles the join (the controller's set now says whether it happened)."""
        self.sync_state_set = sss
        if sss.sync_state_set_epoch > self._joining_base_epoch:
            self.joining = frozenset()
        self._roles.sync_state_set_changed(self.acking_set)

    async def _elect_self(self) -> None:
        if self.broker_id is None:
            return
        header = ElectMasterRequestHeader(
            self._cluster, self._name, self.broker_id, False, self._clock.now_ms()
        )
        answer = await self._leader_call(
            RequestCode.CONTROLLER_ELECT_MASTER, header.to_ext_fields()
        )
        if answer is None:
            return
        if answer.code in (ResponseCode.SUCCESS, ResponseCode.CONTROLLER_MASTER_STILL_EXIST):
            master = MasterInfoHeader.from_ext_fields(answer.ext_fields)
            await self._apply(master, None)
        else:
            _log.info("election for %s: %s %s", self._name, answer.code, answer.remark)

    # --- the SyncStateSet (master) -------------------------------------------------------------

    async def _check_sync_state_set(self) -> int | None:
        if not self.is_master or self.broker_id is None:
            return None
        try:
            replica_ids = await self._replica_ids()
            if replica_ids is None:
                return None
            progress = self._progress.caught_up(replica_ids)
            now_ms = self._clock.monotonic_ms()
            limit_ms = self._settings.max_time_slave_not_catchup_ms
            members = self.sync_state_set.sync_state_set
            # a member stays while it was caught up within the limit; another joins once it
            # is caught up right now
            wanted = {self.broker_id} | {
                replica
                for replica, (now_caught_up, at_ms) in progress.items()
                if (replica in members and at_ms is not None and now_ms - at_ms <= limit_ms)
                or (replica not in members and now_caught_up)
            }
            if frozenset(wanted) != members or self.joining - wanted:
                await self._alter(self.broker_id, frozenset(wanted))
        except (BolideError, OSError) as error:
            _log.warning("SyncStateSet check: %s", error)
        return None

    async def _replica_ids(self) -> list[int] | None:
        answer = await self._leader_call(
            RequestCode.CONTROLLER_GET_SYNC_STATE_DATA, body=broker_names_to_json([self._name])
        )
        if answer is None or answer.code != ResponseCode.SUCCESS:
            return None
        info = BrokerReplicasInfo.from_json(answer.body).replicas_info_table.get(self._name)
        if info is None:
            return None
        replicas = info.in_sync_replicas + info.not_in_sync_replicas
        return sorted(r.broker_id for r in replicas if r.broker_id != self.broker_id)

    async def _alter(self, master_id: int, new_set: frozenset[int]) -> None:
        """Propose ``new_set`` (1001). Members it adds count for acknowledgements from now
        until the answer settles them: success adopts the controller's set; no answer keeps
        them (the write may have happened); a refusal settles them as
        :func:`_still_joining` says, and those left wait for the controller's set read back
        (1004)."""
        base_epoch = self.sync_state_set.sync_state_set_epoch
        added = new_set - self.sync_state_set.sync_state_set
        if added - self.joining:
            self.joining |= added
            self._joining_base_epoch = base_epoch
            self._roles.sync_state_set_changed(self.acking_set)  # before the controller has it
        header = AlterSyncStateSetRequestHeader(
            self._name, master_id, self.master_epoch, self._clock.now_ms()
        )
        body = SyncStateSet(new_set, base_epoch).to_json()
        answer = await self._leader_call(
            RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET, header.to_ext_fields(), body
        )
        if answer is None:
            return
        if answer.code == ResponseCode.SUCCESS:
            self._adopt(SyncStateSet.from_json(answer.body))
            _log.info("SyncStateSet of %s is now %s (epoch %d)", self._name,
                      sorted(new_set), self.sync_state_set.sync_state_set_epoch)  # fmt: skip
            return
        _log.info("SyncStateSet change refused: %s %s", answer.code, answer.remark)
        self.joining = _still_joining(self.joining, new_set, answer.code)
        self._roles.sync_state_set_changed(self.acking_set)
        if self.joining:
            await self._poll_replica_info()


def _still_joining(
    joining: frozenset[int], proposed: frozenset[int], refusal: int
) -> frozenset[int]:
    """The joining members a refused 1001 leaves unsettled. The controller applies one
    broker set's writes in order and checks 1001 in Java's order (round3-facts §1.3), so:
    "equals the current set" (2013) means the controller holds exactly ``proposed``; a
    fenced SyncStateSet epoch (2001) means an earlier proposal may have been written; a
    changed master or master epoch (2002, 2000) deposes this master anyway; any later check
    failing means the set is still the one the proposal was based on (nobody joined)."""
    if refusal == ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED:
        return joining & proposed
    if refusal in (
        ResponseCode.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH,
        ResponseCode.CONTROLLER_INVALID_MASTER,
        ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH,
    ):
        return joining
    return frozenset()
