"""5.x controller-mode headers (round3-facts §1.3): broker heartbeat (904), the controller's
requests 1001–1013 and the role-change notice (1008).

Wire names are Java's. Java marks only some fields ``@CFNotNull``; those are required here,
the rest optional (``None`` when absent). ``invokeTime`` is the sender's wall clock in ms.
"""

from __future__ import annotations

from bolide.protocol.headers.fields import WireHeader, wire, wire_header

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


@wire_header
class BrokerHeartbeatRequestHeader(WireHeader):
    """BROKER_HEARTBEAT (904, oneway). ``epoch`` is the broker's last epoch, ``max_offset``
    its commit-log end, ``heartbeat_timeout_ms`` the expiry the controller applies (wire name
    ``heartbeatTimeoutMills``); ``broker_id`` None is refused (2005)."""

    cluster_name: str = wire("clusterName")
    broker_addr: str = wire("brokerAddr")
    broker_name: str = wire("brokerName")
    broker_id: int | None = wire("brokerId", default=None)
    epoch: int | None = wire("epoch", default=None)
    max_offset: int | None = wire("maxOffset", default=None)
    confirm_offset: int | None = wire("confirmOffset", default=None)
    heartbeat_timeout_ms: int | None = wire("heartbeatTimeoutMills", default=None)
    election_priority: int | None = wire("electionPriority", default=None)


@wire_header
class AlterSyncStateSetRequestHeader(WireHeader):
    """CONTROLLER_ALTER_SYNC_STATE_SET (1001): the master's view it writes against; the body is
    the proposed :class:`~bolide.protocol.bodies.controller.SyncStateSet`."""

    broker_name: str = wire("brokerName")
    master_broker_id: int = wire("masterBrokerId")
    master_epoch: int = wire("masterEpoch")
    invoke_time_ms: int = wire("invokeTime", default=0)


@wire_header
class AlterSyncStateSetResponseHeader(WireHeader):
    """1001 answer: the SyncStateSet epoch now in force."""

    new_sync_state_set_epoch: int = wire("newSyncStateSetEpoch")


@wire_header
class ElectMasterRequestHeader(WireHeader):
    """CONTROLLER_ELECT_MASTER (1002). ``broker_id`` −1 with ``designate_elect`` False is the
    controller's own trigger; a broker names itself; an admin designates (True)."""

    cluster_name: str = wire("clusterName")
    broker_name: str = wire("brokerName")
    broker_id: int = wire("brokerId")
    designate_elect: bool = wire("designateElect")
    invoke_time_ms: int = wire("invokeTime", default=0)


@wire_header
class MasterInfoHeader(WireHeader):
    """The master of a broker set as the controller answers it: 1002's response, 1004's
    (no ``syncStateSetEpoch`` there in Java, sent anyway), 1003's (with the names, and the
    master fields only when it is alive) and 1008's request. ``master_broker_id`` None: no
    master. No field is required."""

    master_broker_id: int | None = wire("masterBrokerId", default=None)
    master_address: str | None = wire("masterAddress", default=None)
    master_epoch: int | None = wire("masterEpoch", default=None)
    sync_state_set_epoch: int | None = wire("syncStateSetEpoch", default=None)
    cluster_name: str | None = wire("clusterName", default=None)
    broker_name: str | None = wire("brokerName", default=None)


@wire_header
class RegisterBrokerToControllerRequestHeader(WireHeader):
    """CONTROLLER_REGISTER_BROKER (1003): a broker with its controller id and address."""

    cluster_name: str = wire("clusterName")
    broker_name: str = wire("brokerName")
    broker_id: int = wire("brokerId")
    broker_address: str = wire("brokerAddress")
    invoke_time_ms: int = wire("invokeTime", default=0)


@wire_header
class GetReplicaInfoRequestHeader(WireHeader):
    """CONTROLLER_GET_REPLICA_INFO (1004)."""

    broker_name: str = wire("brokerName")


@wire_header
class GetMetadataInfoResponseHeader(WireHeader):
    """CONTROLLER_GET_METADATA_INFO (1005) answer: who leads. ``peers`` is ``id:addr;…``. No
    field is required."""

    group: str = wire("group", default="")
    controller_leader_id: str | None = wire("controllerLeaderId", default=None)
    controller_leader_address: str | None = wire("controllerLeaderAddress", default=None)
    is_leader: bool = wire("isLeader", default=False)
    peers: str = wire("peers", default="")


@wire_header
class CleanBrokerDataRequestHeader(WireHeader):
    """CLEAN_BROKER_DATA (1011). ``broker_ids_to_clean`` is ``"1;2"`` (None: the whole set)."""

    broker_name: str = wire("brokerName")
    cluster_name: str | None = wire("clusterName", default=None)
    broker_ids_to_clean: str | None = wire("brokerControllerIdsToClean", default=None)
    clean_living_broker: bool = wire("isCleanLivingBroker", default=False)
    invoke_time_ms: int = wire("invokeTime", default=0)


@wire_header
class GetNextBrokerIdRequestHeader(WireHeader):
    """CONTROLLER_GET_NEXT_BROKER_ID (1012)."""

    cluster_name: str = wire("clusterName")
    broker_name: str = wire("brokerName")


@wire_header
class BrokerIdResponseHeader(WireHeader):
    """1012's answer (``next_broker_id`` set) and 1013's (None). The names read as ``""`` when
    missing."""

    cluster_name: str = wire("clusterName", default="")
    broker_name: str = wire("brokerName", default="")
    next_broker_id: int | None = wire("nextBrokerId", default=None)


@wire_header
class ApplyBrokerIdRequestHeader(WireHeader):
    """CONTROLLER_APPLY_BROKER_ID (1013). ``register_check_code`` is ``"<addr>;<millis>"``."""

    cluster_name: str = wire("clusterName")
    broker_name: str = wire("brokerName")
    applied_broker_id: int = wire("appliedBrokerId")
    register_check_code: str = wire("registerCheckCode")
