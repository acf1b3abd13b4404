"""The controller's in-memory heartbeat table (round3-facts §1.4): the only state a
controller keeps outside etcd, which is why brokers heartbeat every controller.

A broker is alive while its last BROKER_HEARTBEAT (904) is younger than the
``heartbeatTimeoutMills`` it sent, and until the connection that carried it closes (a killed
broker is seen at once). :meth:`HeartbeatTable.expire` and :meth:`HeartbeatTable.connection_closed`
return the brokers that just became inactive, so the controller can re-elect.

As Java's DefaultBrokerHeartbeatManager, every entry expires: the controller's scan drops those
older than their timeout every ``scanNotActiveBrokerInterval``. Unlike Java the table is bounded,
since its keys are whatever a 904 claims: at most
:data:`~bolide.base.limits.CONTROLLER_HEARTBEAT_TABLE_MAX_ENTRIES` replicas, each timeout clamped
to :data:`~bolide.base.limits.CONTROLLER_BROKER_HEARTBEAT_TIMEOUT_MAX_MS`.
"""

from __future__ import annotations

from dataclasses import dataclass

from bolide.base import limits
from bolide.base.clock import Clock
from bolide.controller.replicas import Candidate
from bolide.remoting import Connection

__all__ = ["BrokerLiveInfo", "HeartbeatTable"]


@dataclass(slots=True)
class BrokerLiveInfo:
    """What the last heartbeat of one replica said, and when (monotonic ms)."""

    cluster_name: str
    broker_name: str
    broker_id: int
    broker_address: str
    last_update_ms: int
    heartbeat_timeout_ms: int
    epoch: int
    max_offset: int
    confirm_offset: int
    election_priority: int
    connection: Connection | None

    def candidate(self) -> Candidate:
        """The election's view of this replica."""
        return Candidate(self.broker_id, self.epoch, self.max_offset, self.election_priority)


class HeartbeatTable:
    """Live replicas by (brokerName, controller id), timed by ``clock``'s monotonic ms."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._table: dict[tuple[str, int], BrokerLiveInfo] = {}

    def __len__(self) -> int:
        """Entries held, expired ones included until the next :meth:`expire`."""
        return len(self._table)

    def beat(self, info: BrokerLiveInfo) -> bool:
        """Record a heartbeat (``info.last_update_ms`` is overwritten with now; a timeout <= 0
        becomes the default, one above the maximum the maximum). False, and nothing recorded,
        when ``info`` is a replica the table does not hold and the table is full."""
        key = (info.broker_name, info.broker_id)
        if (
            key not in self._table
            and len(self._table) >= limits.CONTROLLER_HEARTBEAT_TABLE_MAX_ENTRIES
        ):
            return False
        info.last_update_ms = self._clock.monotonic_ms()
        if info.heartbeat_timeout_ms <= 0:
            info.heartbeat_timeout_ms = limits.CONTROLLER_BROKER_HEARTBEAT_TIMEOUT_MS
        info.heartbeat_timeout_ms = min(
            info.heartbeat_timeout_ms, limits.CONTROLLER_BROKER_HEARTBEAT_TIMEOUT_MAX_MS
        )
        self._table[key] = info
        return True

    def get(self, broker_name: str, broker_id: int) -> BrokerLiveInfo | None:
        """The replica's live info, None when unknown or expired."""
        info = self._table.get((broker_name, broker_id))
        if info is None or self._expired(info, self._clock.monotonic_ms()):
            return None
        return info

    def is_alive(self, broker_name: str, broker_id: int) -> bool:
        return self.get(broker_name, broker_id) is not None

    def alive_in(self, broker_name: str) -> list[BrokerLiveInfo]:
        """Every live replica of ``broker_name``."""
        now_ms = self._clock.monotonic_ms()
        return [
            info
            for (name, _), info in self._table.items()
            if name == broker_name and not self._expired(info, now_ms)
        ]

    def entries(self) -> list[BrokerLiveInfo]:
        """Every entry held, expired ones included until the next :meth:`expire`."""
        return list(self._table.values())

    def remove(self, broker_name: str, broker_id: int) -> None:
        self._table.pop((broker_name, broker_id), None)

    def expire(self) -> list[BrokerLiveInfo]:
        """Drop and return the replicas whose heartbeat timed out."""
        now_ms = self._clock.monotonic_ms()
        gone = [info for info in self._table.values() if self._expired(info, now_ms)]
        for info in gone:
            del self._table[(info.broker_name, info.broker_id)]
        return gone

    def connection_closed(self, connection: Connection) -> list[BrokerLiveInfo]:
        """Drop and return the replicas whose heartbeats came over ``connection``."""
        gone = [info for info in self._table.values() if info.connection is connection]
        for info in gone:
            del self._table[(info.broker_name, info.broker_id)]
        return gone

    @staticmethod
    def _expired(info: BrokerLiveInfo, now_ms: int) -> bool:
        return now_ms - info.last_update_ms > info.heartbeat_timeout_ms
