"""Bounds of controller mode (RocketMQ 5.x, round3-facts.md §1): the controller and its brokers.

Re-exported by bolide.base.limits (import them from there); the unit-suffix test scans them
through it. Each bound has its unit last in its name and the reason for its value.
"""

from __future__ import annotations

CONTROLLER_BROKER_HEARTBEAT_TIMEOUT_MS = 10_000
"""controllerHeartBeatTimeoutMills: a replica silent this long is inactive (Java's default)."""
CONTROLLER_BROKER_HEARTBEAT_INTERVAL_MS = 1_000
"""brokerHeartbeatInterval: a controller-mode broker's 904 period."""
CONTROLLER_SCAN_INTERVAL_MS = 5_000
"""scanNotActiveBrokerInterval: the heartbeat-expiry and inactive-master scan."""
CONTROLLER_STARTUP_GRACE_MS = 10_000
"""A controller that just started has an empty heartbeat table: it re-elects a master its scan
finds dead only after one heartbeat timeout, never on missing data."""
CONTROLLER_LEASE_TTL_S = 3
"""TTL of a controller's etcd lease (leader key, membership): etcd's floor is 2 s; 3 s lets a
standby take over a dead leader's role within ~3.5 s."""
CONTROLLER_LEASE_REFRESH_MS = 1_000
"""Keep-alive period of that lease: a third of the TTL, so two lost refreshes still hold it."""
CONTROLLER_CAMPAIGN_INTERVAL_MS = 500
"""How often a standby controller tries to take a free leader key."""
CONTROLLER_ETCD_TIMEOUT_S = 2
"""Per-request timeout towards etcd (a dead endpoint is left for the next one)."""
CONTROLLER_WRITE_ATTEMPTS = 3
"""Fenced writes retried after a lost compare with the leader key still ours."""
CONTROLLER_NOTIFY_TIMEOUT_MS = 3_000
"""NOTIFY_BROKER_ROLE_CHANGED (1008) oneway send timeout (Java's 3 s)."""
CONTROLLER_REQUEST_TIMEOUT_MS = 3_000
"""A controller-mode broker's requests to the controller."""
CONTROLLER_SYNC_METADATA_PERIOD_MS = 5_000
"""syncBrokerMetadataPeriod: a controller-mode broker's GET_REPLICA_INFO (1004) poll."""
CONTROLLER_CHECK_SYNC_STATE_SET_PERIOD_MS = 5_000
"""checkSyncStateSetPeriod: a controller-mode master's SyncStateSet shrink check."""
CONTROLLER_HEARTBEAT_TABLE_MAX_ENTRIES = 4_096
"""Replicas a controller tracks at once: its heartbeat table is keyed by what 904 claims
(brokerName, brokerId), so without a bound a sender of random ids grows it until the next
expiry scan, and forever with a huge timeout; a heartbeat for a new replica beyond this is
refused (existing replicas keep beating). Thousands of brokers is far above any deployment."""
CONTROLLER_BROKER_HEARTBEAT_TIMEOUT_MAX_MS = 60_000
"""Largest heartbeatTimeoutMills a 904 may ask for (larger is clamped), so every entry of the
heartbeat table expires within a minute of its replica's last heartbeat."""
