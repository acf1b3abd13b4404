"""NameServer: the composition root of one name server (no logic of its own).

It wires route tables, KV config, handlers, a remoting server and the expiry scan together.
Every instance owns all of its state, so several name servers can run side by side in one
process (tests, ``bolide standalone``).
"""

from __future__ import annotations

import logging

from bolide.base import limits
from bolide.base.clock import Clock, SystemClock
from bolide.base.errors import ConnectionClosedError
from bolide.base.service import Service
from bolide.namesrv.handlers import NameServerHandlers
from bolide.namesrv.housekeeping import BrokerHousekeeping
from bolide.namesrv.kv_config import KvConfig
from bolide.namesrv.routes import ConnectionKey, RouteTables
from bolide.remoting import Connection, Dispatcher, RemotingServer

_log = logging.getLogger("bolide.namesrv")


class NameServer:
    """One name server listening on ``host:port`` (port 0 picks a free port).

    ``clock`` (default the system clock) times broker expiry; ``order_message_enable``
    (default False) adds ``orderTopicConf`` to routes from the ORDER_TOPIC_CONFIG KV items.
    Call :meth:`start` before use and :meth:`stop` when done.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        clock: Clock | None = None,
        *,
        order_message_enable: bool = False,
        scan_interval_ms: int = limits.NAMESRV_SCAN_INTERVAL_MS,
    ) -> None:
        self._clock = clock or SystemClock()
        self.routes = RouteTables(self._clock)
        """The route tables (read them for inspection; requests change them)."""
        self.kv_config = KvConfig()
        self._handlers = NameServerHandlers(
            self.routes, self.kv_config, order_message_enable=order_message_enable
        )
        dispatcher = Dispatcher()
        self._handlers.install(dispatcher)
        self._housekeeping = BrokerHousekeeping(
            self.routes,
            self._clock,
            close_connection=_close_expired,
            scan_interval_ms=scan_interval_ms,
            on_crash=self._crashed,
        )
        self._server = RemotingServer(
            dispatcher, host, port, on_connection_close=self._connection_closed
        )
        self.crash: BaseException | None = None
        """Set when the expiry scan died; the name server keeps answering without it."""

    @property
    def address(self) -> str:
        """``"host:port"`` that brokers and clients use; valid after :meth:`start`."""
        return self._server.address

    @property
    def port(self) -> int:
        """The port listened on; valid after :meth:`start`."""
        return self._server.port

    @property
    def connections(self) -> frozenset[Connection]:
        """The connections open right now (brokers, clients and admin tools alike)."""
        return self._server.connections

    @property
    def housekeeping(self) -> BrokerHousekeeping:
        return self._housekeeping

    async def start(self) -> None:
        """Listen, then start the expiry scan. Raises OSError when the port cannot be bound."""
        await self._server.start()
        self._housekeeping.start()
        _log.info("name server listening on %s", self.address)

    async def stop(self, timeout_ms: int = limits.REMOTING_STOP_GRACE_MS) -> None:
        """Stop the scan and the listener, closing every connection. Idempotent."""
        await self._housekeeping.stop(timeout_ms)
        await self._server.stop(timeout_ms)

    def _connection_closed(self, connection: Connection) -> None:
        self._housekeeping.on_connection_close(connection)

    def _crashed(self, service: Service, error: BaseException) -> None:
        self.crash = error
        _log.error(
            "name server %s: %s stopped; brokers no longer expire", self.address, service.name
        )


def _close_expired(connection_key: ConnectionKey) -> None:
    if isinstance(connection_key, Connection):
        connection_key.close(ConnectionClosedError("broker registration expired"))
