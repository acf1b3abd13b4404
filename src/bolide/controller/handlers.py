"""The controller's request handlers (round3-facts §1.3).

====  ================================  ===========================================
code  request                           served by
====  ================================  ===========================================
904   BROKER_HEARTBEAT (oneway)         every controller (its own heartbeat table)
1005  CONTROLLER_GET_METADATA_INFO      every controller (names the leader)
1009  UPDATE_CONTROLLER_CONFIG          every controller (its own settings)
1010  GET_CONTROLLER_CONFIG             every controller
1001  CONTROLLER_ALTER_SYNC_STATE_SET   the leader; others answer 2007 NOT_LEADER
1002  CONTROLLER_ELECT_MASTER           the leader
1003  CONTROLLER_REGISTER_BROKER        the leader
1004  CONTROLLER_GET_REPLICA_INFO       the leader
1006  CONTROLLER_GET_SYNC_STATE_DATA    the leader
1011  CLEAN_BROKER_DATA                 the leader
1012  CONTROLLER_GET_NEXT_BROKER_ID     the leader
1013  CONTROLLER_APPLY_BROKER_ID        the leader
====  ================================  ===========================================

Every state change is one fenced etcd transaction (:mod:`.etcd_store`): a controller that
lost the leader key mid-request answers 2007 and has written nothing. Unknown codes get the
dispatcher's REQUEST_CODE_NOT_SUPPORTED; a malformed header its SYSTEM_ERROR.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from bolide.base import limits
from bolide.base.clock import Clock, SystemClock
from bolide.base.errors import ConfigError
from bolide.controller.etcd_store import ControllerStore, NotLeaderError, StaleReadError
from bolide.controller.heartbeats import BrokerLiveInfo, HeartbeatTable
from bolide.controller.replicas import (
    CONTROLLER_TRIGGER_BROKER_ID,
    FIRST_BROKER_CONTROLLER_ID,
    BrokerReplica,
    Candidate,
    ElectionOutcome,
    ReplicaSet,
    check_alter_sync_state_set,
    elect_master,
)
from bolide.controller.settings import ControllerSettings, parse_properties
from bolide.protocol.bodies.controller import (
    BrokerMemberGroup,
    BrokerReplicasInfo,
    ElectMasterResponseBody,
    ReplicaIdentity,
    ReplicasInfo,
    SyncStateSet,
    broker_names_from_json,
)
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers.controller import (
    AlterSyncStateSetRequestHeader,
    AlterSyncStateSetResponseHeader,
    ApplyBrokerIdRequestHeader,
    BrokerHeartbeatRequestHeader,
    BrokerIdResponseHeader,
    CleanBrokerDataRequestHeader,
    ElectMasterRequestHeader,
    GetMetadataInfoResponseHeader,
    GetNextBrokerIdRequestHeader,
    GetReplicaInfoRequestHeader,
    MasterInfoHeader,
    RegisterBrokerToControllerRequestHeader,
)
from bolide.remoting import Connection, Dispatcher, Handler

__all__ = ["CONTROLLER_TRIGGER_BROKER_ID", "HANDLER_FAMILY", "ControllerHandlers", "Decision"]

_log = logging.getLogger("bolide.controller")

HANDLER_FAMILY = "controller"
"""Dispatcher family of every controller code."""

INT_MAX = 2**31 - 1
"""brokerElectionPriority's default (Integer.MAX_VALUE): the lowest priority."""


@dataclass(frozen=True, slots=True)
class Decision:
    """What a read-modify-write decided: the answer, and the set to store (``write``)."""

    response: RemotingCommand
    write: bool = False
    new_set: ReplicaSet | None = None


Notify = Callable[[ReplicaSet], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Election:
    """One election this controller wrote: when (epoch ms), the set, the master it chose
    (None when the set was left without one) and the new master epoch."""

    at_ms: int
    broker_name: str
    master_broker_id: int | None
    master_epoch: int


class ControllerHandlers:
    """The handlers of one controller over its ``store``, ``heartbeats`` and ``settings``;
    ``notify(set)`` sends 1008 to the set's live members after an election."""

    def __init__(
        self,
        store: ControllerStore,
        heartbeats: HeartbeatTable,
        settings: ControllerSettings,
        notify: Notify,
        clock: Clock | None = None,
    ) -> None:
        self._store = store
        self._heartbeats = heartbeats
        self._settings = settings
        self._notify = notify
        self._clock = clock or SystemClock()
        self.elections = 0
        """Successful elections this controller wrote (a metric)."""
        self.last_elections: dict[str, Election] = {}
        """The last election this controller wrote, by brokerName (metrics, operations)."""
        self.heartbeats_refused = 0
        """Heartbeats of new replicas refused because the heartbeat table was full (a metric)."""

    def install(self, dispatcher: Dispatcher) -> None:
        """Register every controller code on ``dispatcher``."""
        table: dict[RequestCode, Handler] = {
            RequestCode.BROKER_HEARTBEAT: self.heartbeat,
            RequestCode.CONTROLLER_GET_METADATA_INFO: self.get_metadata_info,
            RequestCode.UPDATE_CONTROLLER_CONFIG: self.update_config,
            RequestCode.GET_CONTROLLER_CONFIG: self.get_config,
            RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET: self._leader(self.alter_sync_state_set),
            RequestCode.CONTROLLER_ELECT_MASTER: self._leader(self.elect),
            RequestCode.CONTROLLER_REGISTER_BROKER: self._leader(self.register_broker),
            RequestCode.CONTROLLER_GET_REPLICA_INFO: self._leader(self.get_replica_info),
            RequestCode.CONTROLLER_GET_SYNC_STATE_DATA: self._leader(self.get_sync_state_data),
            RequestCode.CLEAN_BROKER_DATA: self._leader(self.clean_broker_data),
            RequestCode.CONTROLLER_GET_NEXT_BROKER_ID: self._leader(self.get_next_broker_id),
            RequestCode.CONTROLLER_APPLY_BROKER_ID: self._leader(self.apply_broker_id),
        }
        for code, handler in table.items():
            dispatcher.register(code, handler, family=HANDLER_FAMILY)

    def _leader(self, handler: Handler) -> Handler:
        """``handler`` for the leader only: others, and a leader deposed mid-way, answer 2007."""

        async def leader_only(
            connection: Connection, request: RemotingCommand
        ) -> RemotingCommand | None:
            if not self._store.is_leader:
                return _not_leader(request)
            try:
                return await handler(connection, request)
            except NotLeaderError:
                return _not_leader(request)

        return leader_only

    async def _transact(
        self, broker_name: str, decide: Callable[[ReplicaSet | None], Decision]
    ) -> Decision:
        """Read the set, ``decide``, and write its result in one fenced transaction; a read
        gone stale is retried. Raises :class:`NotLeaderError`."""
        async with self._store.writing():
            for _ in range(limits.CONTROLLER_WRITE_ATTEMPTS):
                replica_set, revision = await self._store.read_set(broker_name)
                decision = decide(replica_set)
                if not decision.write:
                    return decision
                try:
                    await self._store.write_set(broker_name, decision.new_set, revision)
                except StaleReadError:
                    continue
                return decision
        raise NotLeaderError(f"broker set {broker_name} kept changing under this controller")

    # --- every controller --------------------------------------------------------------------

    async def heartbeat(self, connection: Connection, request: RemotingCommand) -> RemotingCommand:
        """BROKER_HEARTBEAT (904): record the replica as alive; no broker id → 2005; a new
        replica while the heartbeat table is full → SYSTEM_BUSY (logged at 1, 2, 4… refusals)."""
        header = BrokerHeartbeatRequestHeader.from_ext_fields(request.ext_fields)
        if header.broker_id is None:
            return request.make_response(
                ResponseCode.CONTROLLER_INVALID_REQUEST, "Heart beat with empty brokerId"
            )
        recorded = self._heartbeats.beat(
            BrokerLiveInfo(
                header.cluster_name,
                header.broker_name,
                header.broker_id,
                header.broker_addr,
                0,
                header.heartbeat_timeout_ms or limits.CONTROLLER_BROKER_HEARTBEAT_TIMEOUT_MS,
                header.epoch or 0,
                header.max_offset or 0,
                header.confirm_offset or 0,
                INT_MAX if header.election_priority is None else header.election_priority,
                connection,
            )
        )
        if not recorded:
            self.heartbeats_refused += 1
            if self.heartbeats_refused & (self.heartbeats_refused - 1) == 0:  # 1, 2, 4, 8…
                _log.warning("heartbeat of %s/%s from %s refused (%d so far): %d replicas tracked",
                             header.broker_name, header.broker_id, header.broker_addr,
                             self.heartbeats_refused,
                             limits.CONTROLLER_HEARTBEAT_TABLE_MAX_ENTRIES)  # fmt: skip
            return request.make_response(
                ResponseCode.SYSTEM_BUSY,
                f"heartbeat table full: {limits.CONTROLLER_HEARTBEAT_TABLE_MAX_ENTRIES} replicas"
                " tracked; a new replica is admitted once an entry expires",
            )
        return request.make_response(ResponseCode.SUCCESS, "Heart beat success")

    async def get_metadata_info(
        self, _connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """CONTROLLER_GET_METADATA_INFO (1005): the leader's id and address, and the peers."""
        leader = await self._store.leader_address()
        members = await self._store.member_addresses()
        header = GetMetadataInfoResponseHeader(
            group="bolide-controller",
            controller_leader_id=leader,
            controller_leader_address=leader,
            is_leader=self._store.is_leader,
            peers=";".join(f"{address}:{address}" for address in members),
        )
        return request.make_response(ResponseCode.SUCCESS, ext_fields=header.to_ext_fields())

    async def update_config(
        self, _connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """UPDATE_CONTROLLER_CONFIG (1009): properties text; refused keys → NO_PERMISSION
        (blacklist) or INVALID_REQUEST (unknown, unparsable), nothing applied."""
        try:
            values = parse_properties(request.body.decode("utf-8", errors="replace"))
            self._settings.update(values)
        except ConfigError as error:
            code = (
                ResponseCode.NO_PERMISSION
                if str(error).startswith("Can not update config in black list")
                else ResponseCode.CONTROLLER_INVALID_REQUEST
            )
            return request.make_response(code, str(error))
        _log.info("controller config updated: %s", values)
        return request.make_response(ResponseCode.SUCCESS)

    async def get_config(
        self, _connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """GET_CONTROLLER_CONFIG (1010): the settings as properties text."""
        return request.make_response(
            ResponseCode.SUCCESS, body=self._settings.to_properties().encode()
        )

    # --- the leader --------------------------------------------------------------------------

    async def alter_sync_state_set(
        self, _connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """CONTROLLER_ALTER_SYNC_STATE_SET (1001): the master's new SyncStateSet."""
        header = AlterSyncStateSetRequestHeader.from_ext_fields(request.ext_fields)
        proposed = SyncStateSet.from_json(request.body)
        name = header.broker_name

        def decide(replica_set: ReplicaSet | None) -> Decision:
            code, remark = check_alter_sync_state_set(
                replica_set,
                header.master_broker_id,
                header.master_epoch,
                proposed.sync_state_set,
                proposed.sync_state_set_epoch,
                lambda broker_id: self._heartbeats.is_alive(name, broker_id),
            )
            if code != ResponseCode.SUCCESS or replica_set is None:
                return Decision(request.make_response(code, remark))
            changed = replica_set.replace(
                sync_state_set=proposed.sync_state_set,
                sync_state_set_epoch=replica_set.sync_state_set_epoch + 1,
            )
            answer = AlterSyncStateSetResponseHeader(changed.sync_state_set_epoch)
            body = changed.sync_state_body()
            return Decision(
                request.make_response(
                    ResponseCode.SUCCESS, ext_fields=answer.to_ext_fields(), body=body.to_json()
                ),
                write=True,
                new_set=changed,
            )

        return (await self._transact(name, decide)).response

    async def elect(self, _connection: Connection, request: RemotingCommand) -> RemotingCommand:
        """CONTROLLER_ELECT_MASTER (1002): the election rule of round3-facts §1.4."""
        header = ElectMasterRequestHeader.from_ext_fields(request.ext_fields)
        return await self.run_election(
            request, header.broker_name, header.broker_id, designate=header.designate_elect
        )

    async def run_election(
        self,
        request: RemotingCommand,
        broker_name: str,
        requester_id: int,
        *,
        designate: bool = False,
    ) -> RemotingCommand:
        """Elect for ``broker_name`` as ``requester_id`` asks; writes and notifies on change.
        Raises :class:`NotLeaderError`."""
        outcome: list[ElectionOutcome] = []

        def decide(replica_set: ReplicaSet | None) -> Decision:
            if replica_set is None:
                return Decision(
                    request.make_response(
                        ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                        f"broker set {broker_name} is not registered",
                    )
                )
            result = elect_master(
                replica_set,
                requester_id,
                lambda broker_id: _candidate(self._heartbeats, broker_name, broker_id),
                designate=designate,
                unclean=self._settings.enable_elect_unclean_master,
            )
            outcome[:] = [result]
            return Decision(
                _election_response(request, result),
                write=result.changed,
                new_set=result.replica_set,
            )

        decision = await self._transact(broker_name, decide)
        if outcome and outcome[0].code == ResponseCode.SUCCESS:
            elected = outcome[0].replica_set
            self.elections += 1
            self.last_elections[broker_name] = Election(
                self._clock.now_ms(), broker_name, elected.master_broker_id, elected.master_epoch
            )
            _log.info(
                "broker set %s: broker %s elected master, epoch %s",
                broker_name, elected.master_broker_id, elected.master_epoch,
            )  # fmt: skip
            if self._settings.notify_broker_role_changed:
                await self._notify(elected)
        return decision.response

    async def register_broker(
        self, _connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """CONTROLLER_REGISTER_BROKER (1003): a known id announces its (maybe new) address;
        the answer names the master only while it is alive."""
        header = RegisterBrokerToControllerRequestHeader.from_ext_fields(request.ext_fields)

        def decide(replica_set: ReplicaSet | None) -> Decision:
            if replica_set is None or header.broker_id not in replica_set.replicas:
                return Decision(
                    request.make_response(
                        ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                        f"broker {header.broker_id} of {header.broker_name} has no id applied",
                    )
                )
            known = replica_set.replicas[header.broker_id]
            updated = replica_set
            if known.address != header.broker_address:
                replicas = dict(replica_set.replicas)
                replicas[header.broker_id] = BrokerReplica(
                    header.broker_address, known.register_check_code
                )
                updated = replica_set.replace(replicas=replicas)
            master = updated.master_broker_id
            alive = master is not None and self._heartbeats.is_alive(header.broker_name, master)
            answer = MasterInfoHeader(
                master if alive else None,
                updated.master_address if alive else None,
                updated.master_epoch if alive else None,
                updated.sync_state_set_epoch if alive else None,
                updated.cluster_name,
                updated.broker_name,
            )
            body = updated.sync_state_body().to_json()
            response = request.make_response(
                ResponseCode.SUCCESS, ext_fields=answer.to_ext_fields(), body=body
            )
            return Decision(response, write=updated is not replica_set, new_set=updated)

        return (await self._transact(header.broker_name, decide)).response

    async def get_replica_info(
        self, _connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """CONTROLLER_GET_REPLICA_INFO (1004): master and SyncStateSet; unknown → 2008."""
        header = GetReplicaInfoRequestHeader.from_ext_fields(request.ext_fields)
        replica_set, _ = await self._store.read_set(header.broker_name)
        if replica_set is None:
            return request.make_response(
                ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST,
                f"broker set {header.broker_name} is not known",
            )
        answer = replica_set.master_info()
        body = replica_set.sync_state_body()
        return request.make_response(
            ResponseCode.SUCCESS, ext_fields=answer.to_ext_fields(), body=body.to_json()
        )

    async def get_sync_state_data(
        self, _connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """CONTROLLER_GET_SYNC_STATE_DATA (1006): BrokerReplicasInfo for the named sets (an
        empty body: every set)."""
        names = broker_names_from_json(request.body) if request.body.strip() else None
        sets = await self._store.read_all_sets()
        table = {
            name: self._replicas_info(replica_set)
            for name, replica_set in sorted(sets.items())
            if names is None or name in names
        }
        return request.make_response(ResponseCode.SUCCESS, body=BrokerReplicasInfo(table).to_json())

    def _replicas_info(self, replica_set: ReplicaSet) -> ReplicasInfo:
        name = replica_set.broker_name
        identities = {
            broker_id: ReplicaIdentity(
                name, broker_id, replica.address, self._heartbeats.is_alive(name, broker_id)
            )
            for broker_id, replica in sorted(replica_set.replicas.items())
        }
        in_sync = tuple(v for k, v in identities.items() if k in replica_set.sync_state_set)
        others = tuple(v for k, v in identities.items() if k not in replica_set.sync_state_set)
        return ReplicasInfo(
            replica_set.master_broker_id,
            replica_set.master_address,
            replica_set.master_epoch,
            replica_set.sync_state_set_epoch,
            in_sync,
            others,
        )

    async def clean_broker_data(
        self, _connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """CLEAN_BROKER_DATA (1011): forget replicas (or the whole set); 2009 when one is
        unknown, or alive without ``isCleanLivingBroker``."""
        header = CleanBrokerDataRequestHeader.from_ext_fields(request.ext_fields)
        name = header.broker_name

        def decide(replica_set: ReplicaSet | None) -> Decision:
            refused = _clean_refusal(replica_set, header, self._heartbeats)
            if refused is not None or replica_set is None:
                return Decision(
                    request.make_response(
                        ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                        refused or f"broker set {name} is not known",
                    )
                )
            ids = _ids_to_clean(header.broker_ids_to_clean, replica_set)
            kept = {k: v for k, v in replica_set.replicas.items() if k not in ids}
            if not kept:
                return Decision(request.make_response(ResponseCode.SUCCESS), write=True)
            master = None if replica_set.master_broker_id in ids else replica_set.master_broker_id
            cleaned = replica_set.replace(
                replicas=kept,
                master_broker_id=master,
                sync_state_set=replica_set.sync_state_set - ids,
            )
            return Decision(
                request.make_response(ResponseCode.SUCCESS), write=True, new_set=cleaned
            )

        return (await self._transact(name, decide)).response

    async def get_next_broker_id(
        self, _connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """CONTROLLER_GET_NEXT_BROKER_ID (1012): 1 for an unknown set."""
        header = GetNextBrokerIdRequestHeader.from_ext_fields(request.ext_fields)
        replica_set, _ = await self._store.read_set(header.broker_name)
        next_id = FIRST_BROKER_CONTROLLER_ID if replica_set is None else replica_set.next_broker_id
        answer = BrokerIdResponseHeader(header.cluster_name, header.broker_name, next_id)
        return request.make_response(ResponseCode.SUCCESS, ext_fields=answer.to_ext_fields())

    async def apply_broker_id(
        self, _connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """CONTROLLER_APPLY_BROKER_ID (1013): take an id. An unknown set accepts only id 1; a
        known set its next id, or an id already held under the same check code (a retry);
        anything else → 2014."""
        header = ApplyBrokerIdRequestHeader.from_ext_fields(request.ext_fields)
        answer = BrokerIdResponseHeader(header.cluster_name, header.broker_name)
        ok = request.make_response(ResponseCode.SUCCESS, ext_fields=answer.to_ext_fields())

        def decide(replica_set: ReplicaSet | None) -> Decision:
            broker_id, code = header.applied_broker_id, header.register_check_code
            address = code.split(";", 1)[0]
            if replica_set is None:
                replica_set = ReplicaSet(header.cluster_name, header.broker_name)
            held = replica_set.replicas.get(broker_id)
            if held is not None and held.register_check_code == code:
                return Decision(ok)
            if held is not None or broker_id != replica_set.next_broker_id:
                return Decision(
                    request.make_response(
                        ResponseCode.CONTROLLER_BROKER_ID_INVALID,
                        f"broker id {broker_id} of {header.broker_name} is taken or not the"
                        f" next id ({replica_set.next_broker_id}); ask 1012 again",
                    )
                )
            replicas = dict(replica_set.replicas)
            replicas[broker_id] = BrokerReplica(address, code)
            grown = replica_set.replace(replicas=replicas, next_broker_id=broker_id + 1)
            return Decision(ok, write=True, new_set=grown)

        return (await self._transact(header.broker_name, decide)).response


def _not_leader(request: RemotingCommand) -> RemotingCommand:
    return request.make_response(
        ResponseCode.CONTROLLER_NOT_LEADER, "the controller is not the leader; ask 1005 who is"
    )


def _candidate(heartbeats: HeartbeatTable, broker_name: str, broker_id: int) -> Candidate | None:
    info = heartbeats.get(broker_name, broker_id)
    return None if info is None else info.candidate()


def _election_response(request: RemotingCommand, outcome: ElectionOutcome) -> RemotingCommand:
    replica_set = outcome.replica_set
    header = replica_set.master_info()
    body = ElectMasterResponseBody(
        BrokerMemberGroup(
            replica_set.cluster_name,
            replica_set.broker_name,
            {k: v.address for k, v in replica_set.replicas.items()},
        ),
        replica_set.sync_state_set,
    )
    return request.make_response(
        outcome.code, outcome.remark, ext_fields=header.to_ext_fields(), body=body.to_json()
    )


def _ids_to_clean(text: str | None, replica_set: ReplicaSet) -> frozenset[int]:
    if text is None:
        return frozenset(replica_set.replicas)
    return frozenset(int(part) for part in text.split(";") if part.strip())


def _clean_refusal(
    replica_set: ReplicaSet | None, header: CleanBrokerDataRequestHeader, heartbeats: HeartbeatTable
) -> str | None:
    if replica_set is None:
        return f"broker set {header.broker_name} is not known"
    try:
        ids = _ids_to_clean(header.broker_ids_to_clean, replica_set)
    except ValueError:
        return (
            f"brokerControllerIdsToClean is not a ';' list of ids: {header.broker_ids_to_clean!r}"
        )
    unknown = sorted(ids - set(replica_set.replicas))
    if unknown:
        return f"broker ids {unknown} are not registered in {header.broker_name}"
    alive = sorted(i for i in ids if heartbeats.is_alive(header.broker_name, i))
    if alive and not header.clean_living_broker:
        return f"broker ids {alive} are alive (set isCleanLivingBroker to clean them)"
    return None
