"""5.x controller-mode headers (round3-facts §1.3): broker heartbeat (904), the controller's
requests 1001–1013 and the role-change notice (1008).

Wire names are Java's. Java marks only some fields ``@CFNotNull``; those are required here,
the rest optional (``None`` when absent). ``invokeTime`` is the sender's wall clock in ms.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Self

from bolide.protocol.headers.fields import (
    format_bool,
    optional_int,
    optional_str,
    parse_bool,
    put_optional,
    required_int,
    required_str,
)

__all__ = [
    "AlterSyncStateSetRequestHeader",
    "AlterSyncStateSetResponseHeader",
    "ApplyBrokerIdRequestHeader",
    "BrokerHeartbeatRequestHeader",
    "BrokerIdResponseHeader",
    "CleanBrokerDataRequestHeader",
    "ElectMasterRequestHeader",
    "GetMetadataInfoResponseHeader",
    "GetNextBrokerIdRequestHeader",
    "GetReplicaInfoRequestHeader",
    "MasterInfoHeader",
    "RegisterBrokerToControllerRequestHeader",
]


@dataclass(frozen=True, slots=True)
class BrokerHeartbeatRequestHeader:
    """BROKER_HEARTBEAT (904, oneway). ``epoch`` is the broker's last epoch, ``max_offset``
    its commit-log end, ``heartbeat_timeout_ms`` the expiry the controller applies (wire name
    ``heartbeatTimeoutMills``); ``broker_id`` None is refused (2005)."""

    cluster_name: str
    broker_addr: str
    broker_name: str
    broker_id: int | None = None
    epoch: int | None = None
    max_offset: int | None = None
    confirm_offset: int | None = None
    heartbeat_timeout_ms: int | None = None
    election_priority: int | None = None

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> Self:
        """Decode; raises :class:`HeaderError`."""
        return cls(
            required_str(fields, "clusterName"),
            required_str(fields, "brokerAddr"),
            required_str(fields, "brokerName"),
            optional_int(fields, "brokerId"),
            optional_int(fields, "epoch"),
            optional_int(fields, "maxOffset"),
            optional_int(fields, "confirmOffset"),
            optional_int(fields, "heartbeatTimeoutMills"),
            optional_int(fields, "electionPriority"),
        )

    def to_ext_fields(self) -> dict[str, str]:
        fields = {
            "clusterName": self.cluster_name,
            "brokerAddr": self.broker_addr,
            "brokerName": self.broker_name,
        }
        put_optional(fields, "brokerId", self.broker_id)
        put_optional(fields, "epoch", self.epoch)
        put_optional(fields, "maxOffset", self.max_offset)
        put_optional(fields, "confirmOffset", self.confirm_offset)
        put_optional(fields, "heartbeatTimeoutMills", self.heartbeat_timeout_ms)
        put_optional(fields, "electionPriority", self.election_priority)
        return fields


@dataclass(frozen=True, slots=True)
class AlterSyncStateSetRequestHeader:
    """CONTROLLER_ALTER_SYNC_STATE_SET (1001): the master's view it writes against; the body is
    the proposed :class:`~bolide.protocol.bodies.controller.SyncStateSet`."""

    broker_name: str
    master_broker_id: int
    master_epoch: int
    invoke_time_ms: int = 0

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> Self:
        """Decode; raises :class:`HeaderError`."""
        return cls(
            required_str(fields, "brokerName"),
            required_int(fields, "masterBrokerId"),
            required_int(fields, "masterEpoch"),
            optional_int(fields, "invokeTime") or 0,
        )

    def to_ext_fields(self) -> dict[str, str]:
        return {
            "brokerName": self.broker_name,
            "masterBrokerId": str(self.master_broker_id),
            "masterEpoch": str(self.master_epoch),
            "invokeTime": str(self.invoke_time_ms),
        }


@dataclass(frozen=True, slots=True)
class AlterSyncStateSetResponseHeader:
    """1001 answer: the SyncStateSet epoch now in force."""

    new_sync_state_set_epoch: int

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> Self:
        """Decode; raises :class:`HeaderError`."""
        return cls(required_int(fields, "newSyncStateSetEpoch"))

    def to_ext_fields(self) -> dict[str, str]:
        return {"newSyncStateSetEpoch": str(self.new_sync_state_set_epoch)}


@dataclass(frozen=True, slots=True)
class ElectMasterRequestHeader:
    """CONTROLLER_ELECT_MASTER (1002). ``broker_id`` −1 with ``designate_elect`` False is the
    controller's own trigger; a broker names itself; an admin designates (True)."""

    cluster_name: str
    broker_name: str
    broker_id: int
    designate_elect: bool = False
    invoke_time_ms: int = 0

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> Self:
        """Decode; raises :class:`HeaderError`."""
        required_str(fields, "designateElect")
        return cls(
            required_str(fields, "clusterName"),
            required_str(fields, "brokerName"),
            required_int(fields, "brokerId"),
            parse_bool(fields, "designateElect"),
            optional_int(fields, "invokeTime") or 0,
        )

    def to_ext_fields(self) -> dict[str, str]:
        return {
            "clusterName": self.cluster_name,
            "brokerName": self.broker_name,
            "brokerId": str(self.broker_id),
            "designateElect": format_bool(self.designate_elect),
            "invokeTime": str(self.invoke_time_ms),
        }


@dataclass(frozen=True, slots=True)
class MasterInfoHeader:
    """The master of a broker set as the controller answers it: 1002's response, 1004's
    (no ``syncStateSetEpoch`` there in Java, sent anyway), 1003's (with the names, and the
    master fields only when it is alive) and 1008's request. ``master_broker_id`` None: no
    master."""

    master_broker_id: int | None = None
    master_address: str | None = None
    master_epoch: int | None = None
    sync_state_set_epoch: int | None = None
    cluster_name: str | None = None
    broker_name: str | None = None

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> Self:
        """Decode (no field is required); raises :class:`HeaderError` for a bad number."""
        return cls(
            optional_int(fields, "masterBrokerId"),
            optional_str(fields, "masterAddress"),
            optional_int(fields, "masterEpoch"),
            optional_int(fields, "syncStateSetEpoch"),
            optional_str(fields, "clusterName"),
            optional_str(fields, "brokerName"),
        )

    def to_ext_fields(self) -> dict[str, str]:
        fields: dict[str, str] = {}
        put_optional(fields, "masterBrokerId", self.master_broker_id)
        put_optional(fields, "masterAddress", self.master_address)
        put_optional(fields, "masterEpoch", self.master_epoch)
        put_optional(fields, "syncStateSetEpoch", self.sync_state_set_epoch)
        put_optional(fields, "clusterName", self.cluster_name)
        put_optional(fields, "brokerName", self.broker_name)
        return fields


@dataclass(frozen=True, slots=True)
class RegisterBrokerToControllerRequestHeader:
    """CONTROLLER_REGISTER_BROKER (1003): a broker with its controller id and address."""

    cluster_name: str
    broker_name: str
    broker_id: int
    broker_address: str
    invoke_time_ms: int = 0

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> Self:
        """Decode; raises :class:`HeaderError`."""
        return cls(
            required_str(fields, "clusterName"),
            required_str(fields, "brokerName"),
            required_int(fields, "brokerId"),
            required_str(fields, "brokerAddress"),
            optional_int(fields, "invokeTime") or 0,
        )

    def to_ext_fields(self) -> dict[str, str]:
        return {
            "clusterName": self.cluster_name,
            "brokerName": self.broker_name,
            "brokerId": str(self.broker_id),
            "brokerAddress": self.broker_address,
            "invokeTime": str(self.invoke_time_ms),
        }


@dataclass(frozen=True, slots=True)
class GetReplicaInfoRequestHeader:
    """CONTROLLER_GET_REPLICA_INFO (1004)."""

    broker_name: str

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> Self:
        """Decode; raises :class:`HeaderError`."""
        return cls(required_str(fields, "brokerName"))

    def to_ext_fields(self) -> dict[str, str]:
        return {"brokerName": self.broker_name}


@dataclass(frozen=True, slots=True)
class GetMetadataInfoResponseHeader:
    """CONTROLLER_GET_METADATA_INFO (1005) answer: who leads. ``peers`` is ``id:addr;…``."""

    group: str = ""
    controller_leader_id: str | None = None
    controller_leader_address: str | None = None
    is_leader: bool = False
    peers: str = ""

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> Self:
        """Decode (no field is required)."""
        return cls(
            fields.get("group", ""),
            optional_str(fields, "controllerLeaderId"),
            optional_str(fields, "controllerLeaderAddress"),
            parse_bool(fields, "isLeader"),
            fields.get("peers", ""),
        )

    def to_ext_fields(self) -> dict[str, str]:
        fields = {"group": self.group, "isLeader": format_bool(self.is_leader), "peers": self.peers}
        put_optional(fields, "controllerLeaderId", self.controller_leader_id)
        put_optional(fields, "controllerLeaderAddress", self.controller_leader_address)
        return fields


@dataclass(frozen=True, slots=True)
class CleanBrokerDataRequestHeader:
    """CLEAN_BROKER_DATA (1011). ``broker_ids_to_clean`` is ``"1;2"`` (None: the whole set)."""

    broker_name: str
    cluster_name: str | None = None
    broker_ids_to_clean: str | None = None
    clean_living_broker: bool = False
    invoke_time_ms: int = 0

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> Self:
        """Decode; raises :class:`HeaderError`."""
        return cls(
            required_str(fields, "brokerName"),
            optional_str(fields, "clusterName"),
            optional_str(fields, "brokerControllerIdsToClean"),
            parse_bool(fields, "isCleanLivingBroker"),
            optional_int(fields, "invokeTime") or 0,
        )

    def to_ext_fields(self) -> dict[str, str]:
        fields = {
            "brokerName": self.broker_name,
            "isCleanLivingBroker": format_bool(self.clean_living_broker),
            "invokeTime": str(self.invoke_time_ms),
        }
        put_optional(fields, "clusterName", self.cluster_name)
        put_optional(fields, "brokerControllerIdsToClean", self.broker_ids_to_clean)
        return fields


@dataclass(frozen=True, slots=True)
class GetNextBrokerIdRequestHeader:
    """CONTROLLER_GET_NEXT_BROKER_ID (1012)."""

    cluster_name: str
    broker_name: str

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> Self:
        """Decode; raises :class:`HeaderError`."""
        return cls(required_str(fields, "clusterName"), required_str(fields, "brokerName"))

    def to_ext_fields(self) -> dict[str, str]:
        return {"clusterName": self.cluster_name, "brokerName": self.broker_name}


@dataclass(frozen=True, slots=True)
class BrokerIdResponseHeader:
    """1012's answer (``next_broker_id`` set) and 1013's (None)."""

    cluster_name: str
    broker_name: str
    next_broker_id: int | None = None

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> Self:
        """Decode; raises :class:`HeaderError`."""
        return cls(
            fields.get("clusterName", ""),
            fields.get("brokerName", ""),
            optional_int(fields, "nextBrokerId"),
        )

    def to_ext_fields(self) -> dict[str, str]:
        fields = {"clusterName": self.cluster_name, "brokerName": self.broker_name}
        put_optional(fields, "nextBrokerId", self.next_broker_id)
        return fields


@dataclass(frozen=True, slots=True)
class ApplyBrokerIdRequestHeader:
    """CONTROLLER_APPLY_BROKER_ID (1013). ``register_check_code`` is ``"<addr>;<millis>"``."""

    cluster_name: str
    broker_name: str
    applied_broker_id: int
    register_check_code: str

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> Self:
        """Decode; raises :class:`HeaderError`."""
        return cls(
            required_str(fields, "clusterName"),
            required_str(fields, "brokerName"),
            required_int(fields, "appliedBrokerId"),
            required_str(fields, "registerCheckCode"),
        )

    def to_ext_fields(self) -> dict[str, str]:
        return {
            "clusterName": self.cluster_name,
            "brokerName": self.broker_name,
            "appliedBrokerId": str(self.applied_broker_id),
            "registerCheckCode": self.register_check_code,
        }
