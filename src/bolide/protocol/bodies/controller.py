"""5.x controller-mode bodies (round3-facts §1.3), fastjson JSON as Java writes them::

    SyncStateSet            {"syncStateSet":[1,2],"syncStateSetEpoch":3}
    ElectMasterResponseBody {"brokerMemberGroup":{"brokerAddrs":{"1":"h:p"},
                             "brokerName":"b","cluster":"c"},"syncStateSet":[1]}
    BrokerReplicasInfo      {"replicasInfoTable":{"b":{"inSyncReplicas":[{"alive":true,
                             "brokerAddress":"h:p","brokerId":1,"brokerName":"b"}],
                             "masterAddress":"h:p","masterBrokerId":1,"masterEpoch":2,
                             "notInSyncReplicas":[],"syncStateSetEpoch":3}}}

The request body of 1006 is a JSON array of broker names (:func:`broker_names_from_json`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Self

from bolide.protocol.bodies.fastjson import BodyError, dumps, loads
from bolide.protocol.bodies.values import (
    as_object,
    get_bool,
    get_int,
    get_list,
    get_object,
    get_optional_str,
    get_str,
    int_key,
    parse_object,
    to_int,
    to_text,
)

__all__ = [
    "BrokerMemberGroup",
    "BrokerReplicasInfo",
    "ElectMasterResponseBody",
    "ReplicaIdentity",
    "ReplicasInfo",
    "SyncStateSet",
    "broker_names_from_json",
    "broker_names_to_json",
]


@dataclass(frozen=True, slots=True)
class SyncStateSet:
    """The in-sync replica ids of one broker set and the epoch of that set."""

    sync_state_set: frozenset[int] = frozenset()
    sync_state_set_epoch: int = 0

    def to_object(self) -> dict[str, Any]:
        """The JSON object (ids sorted)."""
        return {
            "syncStateSet": sorted(self.sync_state_set),
            "syncStateSetEpoch": self.sync_state_set_epoch,
        }

    def to_json(self) -> bytes:
        """The JSON body."""
        return dumps(self.to_object())

    @classmethod
    def from_json(cls, data: bytes | bytearray | memoryview | str) -> Self:
        """Parse; raises :class:`BodyError`."""
        obj = parse_object(data, "sync state set")
        return cls(
            frozenset(to_int(item, "syncStateSet") for item in get_list(obj, "syncStateSet")),
            get_int(obj, "syncStateSetEpoch", 0),
        )


@dataclass(frozen=True, slots=True)
class BrokerMemberGroup:
    """The registered replicas of one broker set: controller id → address."""

    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)

    def to_object(self) -> dict[str, Any]:
        """The JSON object."""
        return {
            "brokerAddrs": dict(sorted(self.broker_addrs.items())),
            "brokerName": self.broker_name,
            "cluster": self.cluster,
        }

    @classmethod
    def from_object(cls, value: Any) -> Self:
        """From the JSON object; raises :class:`BodyError`."""
        obj = as_object(value, "broker member group")
        addrs = {
            int_key(key, "brokerAddrs"): to_text(address, "brokerAddrs")
            for key, address in get_object(obj, "brokerAddrs").items()
        }
        return cls(get_str(obj, "cluster", ""), get_str(obj, "brokerName", ""), addrs)


@dataclass(frozen=True, slots=True)
class ElectMasterResponseBody:
    """CONTROLLER_ELECT_MASTER answer body: the set's members and its new SyncStateSet."""

    broker_member_group: BrokerMemberGroup
    sync_state_set: frozenset[int] = frozenset()

    def to_json(self) -> bytes:
        """The JSON body."""
        return dumps(
            {
                "brokerMemberGroup": self.broker_member_group.to_object(),
                "syncStateSet": sorted(self.sync_state_set),
            }
        )

    @classmethod
    def from_json(cls, data: bytes | bytearray | memoryview | str) -> Self:
        """Parse; raises :class:`BodyError`."""
        obj = parse_object(data, "elect master response")
        return cls(
            BrokerMemberGroup.from_object(get_object(obj, "brokerMemberGroup")),
            frozenset(to_int(item, "syncStateSet") for item in get_list(obj, "syncStateSet")),
        )


@dataclass(frozen=True, slots=True)
class ReplicaIdentity:
    """One replica in :class:`ReplicasInfo` with whether the controller sees it alive."""

    broker_name: str
    broker_id: int
    broker_address: str
    alive: bool

    def to_object(self) -> dict[str, Any]:
        """The JSON object."""
        return {
            "alive": self.alive,
            "brokerAddress": self.broker_address,
            "brokerId": self.broker_id,
            "brokerName": self.broker_name,
        }

    @classmethod
    def from_object(cls, value: Any) -> Self:
        """From the JSON object; raises :class:`BodyError`."""
        obj = as_object(value, "replica identity")
        return cls(
            get_str(obj, "brokerName", ""),
            get_int(obj, "brokerId"),
            get_str(obj, "brokerAddress", ""),
            get_bool(obj, "alive"),
        )


@dataclass(frozen=True, slots=True)
class ReplicasInfo:
    """One broker set in :class:`BrokerReplicasInfo` (master fields None: no master)."""

    master_broker_id: int | None
    master_address: str | None
    master_epoch: int
    sync_state_set_epoch: int
    in_sync_replicas: tuple[ReplicaIdentity, ...] = ()
    not_in_sync_replicas: tuple[ReplicaIdentity, ...] = ()

    def to_object(self) -> dict[str, Any]:
        """The JSON object (null master fields left out, as fastjson does)."""
        obj: dict[str, Any] = {
            "inSyncReplicas": [item.to_object() for item in self.in_sync_replicas],
        }
        if self.master_address is not None:
            obj["masterAddress"] = self.master_address
        if self.master_broker_id is not None:
            obj["masterBrokerId"] = self.master_broker_id
        obj["masterEpoch"] = self.master_epoch
        obj["notInSyncReplicas"] = [item.to_object() for item in self.not_in_sync_replicas]
        obj["syncStateSetEpoch"] = self.sync_state_set_epoch
        return obj

    @classmethod
    def from_object(cls, value: Any) -> Self:
        """From the JSON object; raises :class:`BodyError`."""
        obj = as_object(value, "replicas info")
        master_id = obj.get("masterBrokerId")
        return cls(
            None if master_id is None else to_int(master_id, "masterBrokerId"),
            get_optional_str(obj, "masterAddress"),
            get_int(obj, "masterEpoch", 0),
            get_int(obj, "syncStateSetEpoch", 0),
            tuple(ReplicaIdentity.from_object(item) for item in get_list(obj, "inSyncReplicas")),
            tuple(ReplicaIdentity.from_object(item) for item in get_list(obj, "notInSyncReplicas")),
        )


@dataclass(frozen=True, slots=True)
class BrokerReplicasInfo:
    """CONTROLLER_GET_SYNC_STATE_DATA (1006) answer: replica sets by broker name."""

    replicas_info_table: dict[str, ReplicasInfo] = field(default_factory=dict)

    def to_json(self) -> bytes:
        """The JSON body."""
        table = {name: info.to_object() for name, info in self.replicas_info_table.items()}
        return dumps({"replicasInfoTable": table})

    @classmethod
    def from_json(cls, data: bytes | bytearray | memoryview | str) -> Self:
        """Parse; raises :class:`BodyError`."""
        table = get_object(parse_object(data, "broker replicas info"), "replicasInfoTable")
        return cls({str(name): ReplicasInfo.from_object(value) for name, value in table.items()})


def broker_names_to_json(broker_names: list[str]) -> bytes:
    """1006's request body: the broker names asked about."""
    return dumps(list(broker_names))


def broker_names_from_json(data: bytes | bytearray | memoryview | str) -> tuple[str, ...]:
    """Parse 1006's request body; raises :class:`BodyError` when it is not a list of texts."""
    value = loads(data)
    if not isinstance(value, list):
        raise BodyError("broker name list is not a JSON array")
    return tuple(to_text(item, "brokerNames") for item in value)
