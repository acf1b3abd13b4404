"""broker.conf keys of controller mode (round3-facts §1.2), read from the keys the broker
config keeps verbatim (:attr:`~bolide.broker.config.BrokerConfig.extra_properties`).

============================== =========================================== ===============
key                            meaning                                     default
============================== =========================================== ===============
enableControllerMode           the switch                                  false
controllerAddr                 ``;``-separated controller addresses        "" (required)
allAckInSyncStateSet           ack a send once every SSS member has it     false
minInSyncReplicas              fewer SSS members → sends refused           1
brokerElectionPriority         lower wins an election tie                  2^31 - 1
controllerHeartBeatTimeoutMills the expiry the controller applies to us    10000
syncBrokerMetadataPeriod       GET_REPLICA_INFO (1004) poll                5000
checkSyncStateSetPeriod        the master's SyncStateSet check             5000
haMaxTimeSlaveNotCatchup       a replica behind this long leaves the SSS   15000
============================== =========================================== ===============

With the switch on, ``brokerId`` and ``brokerRole`` are ignored (RocketMQ's quick start sets
-1 and SLAVE): the broker starts as a replica that takes no writes until the controller names
it master.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from bolide.base import limits
from bolide.base.errors import ConfigError

__all__ = [
    "CONTROLLER_MODE_KEYS",
    "IN_SYNC_REPLICAS_NOT_ENOUGH",
    "ControllerModeSettings",
    "controller_mode_enabled",
]

IN_SYNC_REPLICAS_NOT_ENOUGH = "in-sync replicas not enough"
"""A master's refusal while its SyncStateSet is smaller than minInSyncReplicas: Java's remark,
answered with SYSTEM_ERROR (1) as Java's SendMessageProcessor does."""

CONTROLLER_MODE_KEYS = frozenset(
    (
        "enableControllerMode", "controllerAddr", "allAckInSyncStateSet", "minInSyncReplicas",
        "brokerElectionPriority", "controllerHeartBeatTimeoutMills", "syncBrokerMetadataPeriod",
        "checkSyncStateSetPeriod", "haMaxTimeSlaveNotCatchup",
    )
)  # fmt: skip
"""The keys this module reads (never reported as unknown)."""

_INT_MAX = 2**31 - 1


def controller_mode_enabled(properties: Mapping[str, str]) -> bool:
    """Whether ``enableControllerMode`` is true in ``properties``."""
    return properties.get("enableControllerMode", "false").strip().lower() == "true"


@dataclass(frozen=True, slots=True)
class ControllerModeSettings:
    """The parsed keys (see the module docstring)."""

    enabled: bool = False
    controller_addresses: tuple[str, ...] = ()
    all_ack_in_sync_state_set: bool = False
    min_in_sync_replicas: int = 1
    election_priority: int = _INT_MAX
    heartbeat_timeout_ms: int = limits.CONTROLLER_BROKER_HEARTBEAT_TIMEOUT_MS
    sync_metadata_period_ms: int = limits.CONTROLLER_SYNC_METADATA_PERIOD_MS
    check_sync_state_set_period_ms: int = limits.CONTROLLER_CHECK_SYNC_STATE_SET_PERIOD_MS
    max_time_slave_not_catchup_ms: int = limits.HA_MAX_TIME_SLAVE_NOT_CATCHUP_MS

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> ControllerModeSettings:
        """Parse; raises :class:`ConfigError` naming a bad key (or a missing controllerAddr
        with the switch on)."""
        enabled = controller_mode_enabled(properties)
        addresses = tuple(
            part.strip() for part in properties.get("controllerAddr", "").split(";") if part.strip()
        )
        if enabled and not addresses:
            raise ConfigError("enableControllerMode=true needs controllerAddr (host:port;...)")
        for address in addresses:
            host, _, port = address.rpartition(":")
            if not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ConfigError(f"controllerAddr: {address!r} is not host:port")
        return cls(
            enabled,
            addresses,
            _bool(properties, "allAckInSyncStateSet", False),
            _int(properties, "minInSyncReplicas", 1, 1),
            _int(properties, "brokerElectionPriority", _INT_MAX, 0),
            _int(properties, "controllerHeartBeatTimeoutMills",
                 limits.CONTROLLER_BROKER_HEARTBEAT_TIMEOUT_MS, 1),
            _int(properties, "syncBrokerMetadataPeriod",
                 limits.CONTROLLER_SYNC_METADATA_PERIOD_MS, 1),
            _int(properties, "checkSyncStateSetPeriod",
                 limits.CONTROLLER_CHECK_SYNC_STATE_SET_PERIOD_MS, 1),
            _int(properties, "haMaxTimeSlaveNotCatchup",
                 limits.HA_MAX_TIME_SLAVE_NOT_CATCHUP_MS, 1),
        )  # fmt: skip


def _bool(properties: Mapping[str, str], key: str, default: bool) -> bool:
    text = properties.get(key)
    if text is None:
        return default
    if text.strip().lower() not in ("true", "false"):
        raise ConfigError(f"broker config {key}={text!r}: must be true or false")
    return text.strip().lower() == "true"


def _int(properties: Mapping[str, str], key: str, default: int, low: int) -> int:
    text = properties.get(key)
    if text is None:
        return default
    try:
        value = int(text.strip())
    except ValueError as error:
        raise ConfigError(f"broker config {key}={text!r}: must be an integer") from error
    if not low <= value <= _INT_MAX:
        raise ConfigError(f"broker config {key}={value}: must be between {low} and {_INT_MAX}")
    return value
