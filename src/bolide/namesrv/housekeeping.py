"""Broker liveness: expire silent brokers on a timer, drop closed connections' brokers at once.

A broker re-registers every ``BROKER_REGISTER_INTERVAL_MS`` (30 s). The scan runs every
``NAMESRV_SCAN_INTERVAL_MS`` (10 s) and forgets brokers silent for more than
``BROKER_EXPIRY_MS`` (120 s), closing the connection they registered over. When a
connection closes for any reason, the brokers registered over it are dropped without waiting
for the scan, so clients stop being routed to a broker that went away.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from bolide.base import limits
from bolide.base.clock import Clock
from bolide.base.service import CrashHandler, Service
from bolide.namesrv.routes import ConnectionKey, RouteTables

_log = logging.getLogger("bolide.namesrv.housekeeping")

CloseConnection = Callable[[ConnectionKey], None]
"""Closes the connection an expired broker registered over (its key is the Connection)."""


class BrokerHousekeeping:
    """Owns the expiry scan of one name server's route tables.

    ``close_connection`` (optional) is called for each expired broker that registered over a
    connection; closing it makes the broker reconnect and register afresh.
    """

    def __init__(
        self,
        routes: RouteTables,
        clock: Clock,
        *,
        close_connection: CloseConnection | None = None,
        scan_interval_ms: int = limits.NAMESRV_SCAN_INTERVAL_MS,
        on_crash: CrashHandler | None = None,
    ) -> None:
        self._routes = routes
        self._close_connection = close_connection
        self._service = Service(
            "namesrv-broker-expiry",
            self._scan_step,
            interval_ms=scan_interval_ms,
            clock=clock,
            on_crash=on_crash,
        )

    @property
    def service(self) -> Service:
        """The background scan (exposed so owners and tests can wake it or read its state)."""
        return self._service

    def start(self) -> None:
        self._service.start()

    async def stop(self, timeout_ms: int = 5_000) -> None:
        await self._service.stop(timeout_ms)

    def scan(self) -> int:
        """Expire silent brokers now; returns how many addresses were dropped."""
        expired = self._routes.expire()
        for address, connection_key in expired:
            _log.warning(
                "broker %s silent for over %d ms, removed", address, self._routes.expiry_ms
            )
            if connection_key is not None and self._close_connection is not None:
                self._close_connection(connection_key)
        return len(expired)

    async def _scan_step(self) -> None:
        self.scan()

    def on_connection_close(self, connection_key: ConnectionKey) -> None:
        """Drop, at once, the brokers registered over a connection that just closed."""
        for address in self._routes.drop_connection(connection_key):
            _log.info("broker %s connection closed, removed", address)
