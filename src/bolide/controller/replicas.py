"""One broker set's controller state, and the rules that change it (sans-IO).

A :class:`ReplicaSet` is what etcd holds per ``brokerName`` (one JSON value, written whole in
one fenced transaction): the registered replicas (controller id → address and
registerCheckCode), the next id to hand out, the master, ``masterEpoch``, the SyncStateSet
and ``syncStateSetEpoch``. Ids start at 1; both epochs start at 0.

:func:`elect_master` is the election rule of round3-facts §1.4; :func:`check_alter_sync_state_set`
the checks of 1001 in Java's order (§1.3).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Self

import orjson

from bolide.protocol.bodies.controller import SyncStateSet
from bolide.protocol.bodies.fastjson import BodyError
from bolide.protocol.codes import ResponseCode
from bolide.protocol.headers.controller import MasterInfoHeader

__all__ = [
    "CONTROLLER_TRIGGER_BROKER_ID",
    "FIRST_BROKER_CONTROLLER_ID",
    "BrokerReplica",
    "Candidate",
    "ElectionOutcome",
    "ReplicaSet",
    "check_alter_sync_state_set",
    "elect_master",
]

FIRST_BROKER_CONTROLLER_ID = 1
"""The first id a broker set hands out (MixAll.FIRST_BROKER_CONTROLLER_ID)."""
CONTROLLER_TRIGGER_BROKER_ID = -1
"""brokerId of an election the controller itself starts (its master became inactive)."""


@dataclass(frozen=True, slots=True)
class BrokerReplica:
    """A registered replica: its address and the check code it applied its id with."""

    address: str
    register_check_code: str


@dataclass(frozen=True, slots=True)
class ReplicaSet:
    """The controller's state for one ``brokerName`` (see the module docstring)."""

    cluster_name: str
    broker_name: str
    replicas: Mapping[int, BrokerReplica] = field(default_factory=dict)
    next_broker_id: int = FIRST_BROKER_CONTROLLER_ID
    master_broker_id: int | None = None
    master_epoch: int = 0
    sync_state_set: frozenset[int] = frozenset()
    sync_state_set_epoch: int = 0

    @property
    def master_address(self) -> str | None:
        """The master's address, None without a master."""
        if self.master_broker_id is None:
            return None
        replica = self.replicas.get(self.master_broker_id)
        return None if replica is None else replica.address

    def master_info(self) -> MasterInfoHeader:
        """The master's id, address and epochs as the controller answers them (no cluster or
        broker name)."""
        return MasterInfoHeader(
            self.master_broker_id,
            self.master_address,
            self.master_epoch,
            self.sync_state_set_epoch,
        )

    def sync_state_body(self) -> SyncStateSet:
        """The SyncStateSet with its epoch, as a body."""
        return SyncStateSet(self.sync_state_set, self.sync_state_set_epoch)

    def replace(self, **changes: Any) -> ReplicaSet:
        """A copy with ``changes`` (field names) applied."""
        return dataclasses.replace(self, **changes)

    def to_json(self) -> bytes:
        """The etcd value."""
        return orjson.dumps(
            {
                "clusterName": self.cluster_name,
                "brokerName": self.broker_name,
                "replicas": {
                    str(broker_id): [replica.address, replica.register_check_code]
                    for broker_id, replica in sorted(self.replicas.items())
                },
                "nextBrokerId": self.next_broker_id,
                "masterBrokerId": self.master_broker_id,
                "masterEpoch": self.master_epoch,
                "syncStateSet": sorted(self.sync_state_set),
                "syncStateSetEpoch": self.sync_state_set_epoch,
            }
        )

    @classmethod
    def from_json(cls, data: bytes) -> Self:
        """Parse an etcd value; raises :class:`BodyError` when it is not one of ours."""
        try:
            obj = orjson.loads(data)
            return cls(
                str(obj["clusterName"]),
                str(obj["brokerName"]),
                {
                    int(key): BrokerReplica(str(value[0]), str(value[1]))
                    for key, value in obj["replicas"].items()
                },
                int(obj["nextBrokerId"]),
                None if obj["masterBrokerId"] is None else int(obj["masterBrokerId"]),
                int(obj["masterEpoch"]),
                frozenset(int(item) for item in obj["syncStateSet"]),
                int(obj["syncStateSetEpoch"]),
            )
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, IndexError) as error:
            raise BodyError(f"controller replica set value is not valid: {error}") from error


@dataclass(frozen=True, slots=True)
class Candidate:
    """What the heartbeat table knows of a live replica, the election's sort keys."""

    broker_id: int
    epoch: int
    max_offset: int
    election_priority: int


@dataclass(frozen=True, slots=True)
class ElectionOutcome:
    """The result of :func:`elect_master`: ``code`` SUCCESS with the new state, or
    MASTER_STILL_EXIST (state unchanged), ELECT_MASTER_FAILED (unchanged) or
    MASTER_NOT_AVAILABLE (master cleared, epoch bumped: the set must be written)."""

    code: ResponseCode
    replica_set: ReplicaSet
    remark: str

    @property
    def changed(self) -> bool:
        return self.code in (ResponseCode.SUCCESS, ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE)


def elect_master(
    replica_set: ReplicaSet,
    requester_id: int,
    live: Callable[[int], Candidate | None],
    *,
    designate: bool = False,
    unclean: bool = False,
) -> ElectionOutcome:
    """Elect a master for ``replica_set`` (round3-facts §1.4).

    ``requester_id`` is the broker asking (itself), the designated broker (``designate``) or
    :data:`CONTROLLER_TRIGGER_BROKER_ID`; ``live(id)`` is a live replica's heartbeat data or
    None. ``unclean`` allows any live replica when no SyncStateSet member is alive.
    """
    if replica_set.master_epoch == 0 and requester_id in replica_set.replicas and not designate:
        return _new_master(replica_set, requester_id)
    candidates = [
        candidate
        for broker_id in sorted(replica_set.sync_state_set)
        if broker_id in replica_set.replicas and (candidate := live(broker_id)) is not None
    ]
    if not candidates and unclean:
        candidates = [c for i in sorted(replica_set.replicas) if (c := live(i)) is not None]
    master = replica_set.master_broker_id
    if master is not None and live(master) is not None and not designate:
        return ElectionOutcome(
            ResponseCode.CONTROLLER_MASTER_STILL_EXIST, replica_set, "the old master still exists"
        )
    if designate:
        candidates = [c for c in candidates if c.broker_id == requester_id]
    if candidates:
        best = min(candidates, key=lambda c: (-c.epoch, -c.max_offset, c.election_priority))
        return _new_master(replica_set, best.broker_id)
    if requester_id == CONTROLLER_TRIGGER_BROKER_ID:
        cleared = replica_set.replace(
            master_broker_id=None, master_epoch=replica_set.master_epoch + 1
        )
        return ElectionOutcome(
            ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE,
            cleared,
            "no live in-sync replica can become master; the broker set has no master now",
        )
    return ElectionOutcome(
        ResponseCode.CONTROLLER_ELECT_MASTER_FAILED,
        replica_set,
        "no live in-sync replica can become master"
        + ("" if unclean else " (enableElectUncleanMaster=false)"),
    )


def _new_master(replica_set: ReplicaSet, broker_id: int) -> ElectionOutcome:
    elected = replica_set.replace(
        master_broker_id=broker_id,
        master_epoch=replica_set.master_epoch + 1,
        sync_state_set=frozenset((broker_id,)),
        sync_state_set_epoch=replica_set.sync_state_set_epoch + 1,
    )
    return ElectionOutcome(ResponseCode.SUCCESS, elected, f"broker {broker_id} elected master")


def check_alter_sync_state_set(
    replica_set: ReplicaSet | None,
    master_broker_id: int,
    master_epoch: int,
    new_set: frozenset[int],
    new_set_epoch: int,
    alive: Callable[[int], bool],
) -> tuple[ResponseCode, str]:
    """1001's checks in Java's order (round3-facts §1.3); SUCCESS means the change is valid."""
    failures: list[tuple[bool, ResponseCode, str]] = []
    if replica_set is None:
        return ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED, "broker set is not registered"
    failures = [
        (new_set == replica_set.sync_state_set, ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
         "the new SyncStateSet equals the current one"),
        (master_broker_id != replica_set.master_broker_id, ResponseCode.CONTROLLER_INVALID_MASTER,
         f"broker {master_broker_id} is not the master ({replica_set.master_broker_id})"),
        (master_epoch != replica_set.master_epoch, ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH,
         f"master epoch {master_epoch} is not the current {replica_set.master_epoch}"),
        (new_set_epoch != replica_set.sync_state_set_epoch,
         ResponseCode.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH,
         f"SyncStateSet epoch {new_set_epoch} is not the current"
         f" {replica_set.sync_state_set_epoch}"),
        (not new_set <= set(replica_set.replicas), ResponseCode.CONTROLLER_INVALID_REPLICAS,
         "a member of the new SyncStateSet is not registered"),
        (not all(alive(member) for member in new_set), ResponseCode.CONTROLLER_BROKER_NOT_ALIVE,
         "a member of the new SyncStateSet is not alive"),
        (master_broker_id not in new_set, ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
         "the new SyncStateSet lacks the master"),
    ]  # fmt: skip
    for failed, code, remark in failures:
        if failed:
            return code, remark
    return ResponseCode.SUCCESS, "SyncStateSet changed"
