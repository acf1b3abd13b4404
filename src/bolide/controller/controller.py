"""Controller: the composition root of one controller (no protocol logic of its own).

It wires the etcd store, the heartbeat table, the handlers and a remoting server, and runs
two background loops: leadership (keep the etcd lease alive; campaign for the leader key
while not leading) and the liveness scan (expire silent replicas; re-elect a broker set whose
master is inactive). A master whose connection closes is re-elected at once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

from bolide.base import limits
from bolide.base.clock import Clock, SystemClock
from bolide.base.errors import BolideError
from bolide.base.service import Service
from bolide.controller.etcd_store import (
    ControllerStore,
    NotLeaderError,
    parse_etcd_endpoints,
)
from bolide.controller.handlers import (
    CONTROLLER_TRIGGER_BROKER_ID,
    ControllerHandlers,
    Election,
)
from bolide.controller.heartbeats import HeartbeatTable
from bolide.controller.replicas import ReplicaSet
from bolide.controller.settings import DEFAULT_CONTROLLER_PORT, ControllerSettings
from bolide.protocol.codes import RequestCode
from bolide.protocol.command import RemotingCommand
from bolide.remoting import Connection, Dispatcher, RemotingServer

__all__ = ["Controller"]

_log = logging.getLogger("bolide.controller")

_LOOP_ERRORS: tuple[type[BaseException], ...] = (BolideError, OSError, asyncio.TimeoutError)


class Controller:
    """One controller on ``host:port`` (port 0 picks one) keeping its state in the etcd
    cluster at ``etcd_endpoints`` (``"H:P[,H:P…]"``). ``settings`` defaults to RocketMQ's.

    :meth:`start` raises :class:`~bolide.controller.etcd_store.EtcdUnreachableError` (a
    :class:`~bolide.base.errors.ConfigError`) naming the endpoints when etcd does not answer,
    :class:`~bolide.base.errors.ConfigError` for a malformed endpoint list, OSError when the
    port cannot be bound. Call :meth:`stop` when done.
    """

    def __init__(
        self,
        etcd_endpoints: str,
        host: str = "127.0.0.1",
        port: int = DEFAULT_CONTROLLER_PORT,
        *,
        clock: Clock | None = None,
        settings: ControllerSettings | None = None,
        advertised_host: str | None = None,
    ) -> None:
        self._endpoints = parse_etcd_endpoints(etcd_endpoints)
        self._advertised_host = advertised_host
        self._clock = clock or SystemClock()
        self.settings = settings or ControllerSettings()
        self.heartbeats = HeartbeatTable(self._clock)
        self._dispatcher = Dispatcher()
        self._server = RemotingServer(
            self._dispatcher, host, port, on_connection_close=self._connection_closed
        )
        self._store: ControllerStore | None = None
        self._handlers: ControllerHandlers | None = None
        self._services: list[Service] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._last_renewal_ms = 0
        self._leading_since_ms: int | None = None
        self.broker_sets: dict[str, ReplicaSet] = {}
        """Every broker set as this controller's scan last read it from etcd (leader only;
        empty on a standby): what its metrics show."""

    @property
    def address(self) -> str:
        """``"host:port"`` brokers and other controllers reach it at (``advertised_host``
        when given, for a wildcard bind); valid after :meth:`start`."""
        if self._advertised_host:
            return f"{self._advertised_host}:{self._server.port}"
        return self._server.address

    @property
    def is_leader(self) -> bool:
        return self._store is not None and self._store.is_leader

    @property
    def store(self) -> ControllerStore:
        """The etcd store (after :meth:`start`)."""
        if self._store is None:
            raise BolideError("controller not started")
        return self._store

    @property
    def elections(self) -> int:
        """Elections this controller wrote since it started."""
        return 0 if self._handlers is None else self._handlers.elections

    @property
    def last_elections(self) -> dict[str, Election]:
        """The last election this controller wrote, by brokerName."""
        return {} if self._handlers is None else dict(self._handlers.last_elections)

    @property
    def heartbeats_refused(self) -> int:
        """Heartbeats of new replicas refused because the heartbeat table was full."""
        return 0 if self._handlers is None else self._handlers.heartbeats_refused

    async def start(self) -> None:
        """Listen, reach etcd, then start the leadership and liveness loops."""
        await self._server.start()
        store = ControllerStore(self._endpoints, self.address)
        try:
            await store.connect()
        except BaseException:
            await store.close()
            await self._server.stop()
            raise
        self._store = store
        self._handlers = ControllerHandlers(
            store, self.heartbeats, self.settings, self._notify, clock=self._clock
        )
        self._handlers.install(self._dispatcher)
        self._last_renewal_ms = self._clock.monotonic_ms()
        self._services = [
            Service("controller-leadership", self._leadership_step,
                    interval_ms=limits.CONTROLLER_LEASE_REFRESH_MS, clock=self._clock,
                    on_crash=self._crashed, initial_delay_ms=0),
            Service("controller-scan", self._scan_step,
                    interval_ms=self.settings.scan_not_active_broker_interval_ms,
                    clock=self._clock, on_crash=self._crashed),
        ]  # fmt: skip
        for service in self._services:
            service.start()
        _log.info("controller listening on %s (etcd %s)", self.address, store.endpoints_text)

    async def stop(self, timeout_ms: int = limits.REMOTING_STOP_GRACE_MS) -> None:
        """Stop the loops, give up leadership, close the listener. Idempotent."""
        for service in self._services:
            await service.stop(timeout_ms)
        self._services = []
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=timeout_ms / 1000)
        store, self._store = self._store, None
        if store is not None:
            await store.close()
        await self._server.stop(timeout_ms)

    # --- leadership ----------------------------------------------------------------------------

    async def _leadership_step(self) -> int | None:
        store = self.store
        now_ms = self._clock.monotonic_ms()
        try:
            if await store.keep_alive():
                self._last_renewal_ms = now_ms
            if not store.is_leader and await store.campaign():
                self._leading_since_ms = self._clock.monotonic_ms()
        except _LOOP_ERRORS as error:
            _log.warning("controller %s: etcd: %s", self.address, error)
        if now_ms - self._last_renewal_ms > limits.CONTROLLER_LEASE_TTL_S * 1000:
            store.drop_leadership("the etcd lease could not be renewed within its TTL")
        if not store.is_leader:
            self._leading_since_ms = None
            return limits.CONTROLLER_CAMPAIGN_INTERVAL_MS
        return None

    # --- liveness ----------------------------------------------------------------------------

    async def _scan_step(self) -> int | None:
        for info in self.heartbeats.expire():
            _log.info("broker %s/%s (%s) inactive: heartbeat timed out",
                      info.broker_name, info.broker_id, info.broker_address)  # fmt: skip
            await self._replica_inactive(info.broker_name, info.broker_id)
        if not self.is_leader:
            self.broker_sets = {}
            return self.settings.scan_not_active_broker_interval_ms
        try:
            sets = await self.store.read_all_sets()
        except _LOOP_ERRORS as error:
            _log.warning("controller %s: scan: %s", self.address, error)
            sets = {}
        else:
            self.broker_sets = dict(sets)
        if self._grace_passed():
            for replica_set in sets.values():
                master = replica_set.master_broker_id
                if master is not None and not self.heartbeats.is_alive(
                    replica_set.broker_name, master
                ):
                    await self._replica_inactive(replica_set.broker_name, master)
        return self.settings.scan_not_active_broker_interval_ms

    def _grace_passed(self) -> bool:
        since = self._leading_since_ms
        return (
            since is not None
            and self._clock.monotonic_ms() - since >= limits.CONTROLLER_STARTUP_GRACE_MS
        )

    def _connection_closed(self, connection: Connection) -> None:
        for info in self.heartbeats.connection_closed(connection):
            _log.info("broker %s/%s (%s) inactive: its connection closed",
                      info.broker_name, info.broker_id, info.broker_address)  # fmt: skip
            self._spawn(self._replica_inactive(info.broker_name, info.broker_id))

    async def _replica_inactive(self, broker_name: str, broker_id: int) -> None:
        """Re-elect ``broker_name`` when the inactive replica was its master (leader only)."""
        if not self.is_leader or self._handlers is None:
            return
        try:
            replica_set, _ = await self.store.read_set(broker_name)
            if replica_set is None or replica_set.master_broker_id != broker_id:
                return
            trigger = RemotingCommand.request(RequestCode.CONTROLLER_ELECT_MASTER)
            answer = await self._handlers.run_election(
                trigger, broker_name, CONTROLLER_TRIGGER_BROKER_ID
            )
            _log.info("broker set %s: master %s inactive; election answered %s %s",
                      broker_name, broker_id, answer.code, answer.remark)  # fmt: skip
        except NotLeaderError:
            return
        except _LOOP_ERRORS as error:
            _log.warning("broker set %s: re-election failed: %s", broker_name, error)

    async def _notify(self, replica_set: ReplicaSet) -> None:
        """NOTIFY_BROKER_ROLE_CHANGED (1008, oneway) to every live member of the set."""
        header = replica_set.master_info()
        body = replica_set.sync_state_body()
        for info in self.heartbeats.alive_in(replica_set.broker_name):
            if info.connection is None or info.connection.is_closed:
                continue
            request = RemotingCommand.request(
                RequestCode.NOTIFY_BROKER_ROLE_CHANGED, header.to_ext_fields(), body.to_json()
            )
            try:
                await info.connection.invoke_oneway(request, limits.CONTROLLER_NOTIFY_TIMEOUT_MS)
            except _LOOP_ERRORS as error:
                _log.warning("1008 to %s not sent: %s", info.broker_address, error)

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _crashed(self, service: Service, error: BaseException) -> None:
        _log.error("controller %s: %s stopped: %s", self.address, service.name, error)
