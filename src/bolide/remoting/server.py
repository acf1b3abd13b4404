"""A remoting server: a TCP listener whose connections hand requests to a dispatcher.

The owner (broker, name server) learns about connections through ``on_connection_open`` /
``on_connection_close`` and can send its own requests to a client over
:meth:`Connection.invoke` / :meth:`Connection.invoke_oneway` on the connection the client
opened (NOTIFY_CONSUMER_IDS_CHANGED, reset offset, GET_CONSUMER_RUNNING_INFO...).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import socket

from bolide.base import limits
from bolide.base.errors import ConnectionClosedError, InvariantViolationError, invariant
from bolide.remoting.connection import (
    Connection,
    ConnectionCallback,
    ConnectionSettings,
    close_connections,
)
from bolide.remoting.dispatcher import Dispatcher
from bolide.remoting.tls import PermissiveTlsServer, TlsMode, TlsServerSettings

_log = logging.getLogger("bolide.remoting.server")


class RemotingServer:
    """Listens on ``host:port`` (port 0 = any free port, see :attr:`port` after start).

    ``settings`` bounds every connection; a server always stops reading from a peer whose
    answers it cannot write (``pause_reading_while_write_blocked`` is forced on).
    ``on_connection_close`` runs once per connection, also for connections closed by
    :meth:`stop`; ``connection.close_reason`` says why. ``tls`` (default: none) serves TLS
    as its mode says (:mod:`bolide.remoting.tls`); its files are read at :meth:`start`.
    """

    def __init__(
        self,
        dispatcher: Dispatcher,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        settings: ConnectionSettings | None = None,
        on_connection_open: ConnectionCallback | None = None,
        on_connection_close: ConnectionCallback | None = None,
        tls: TlsServerSettings | None = None,
    ) -> None:
        self._dispatcher = dispatcher
        self._tls = tls
        self._host = host
        self._requested_port = port
        self._settings = dataclasses.replace(
            settings or ConnectionSettings(), pause_reading_while_write_blocked=True
        )
        self._on_connection_open = on_connection_open
        self._on_connection_close = on_connection_close
        self._server: asyncio.Server | PermissiveTlsServer | None = None
        self._port: int | None = None
        self._connections: set[Connection] = set()

    @property
    def port(self) -> int:
        """The port listened on; only valid after :meth:`start`."""
        if self._port is None:
            raise InvariantViolationError("server port read before start()")
        return self._port

    @property
    def address(self) -> str:
        """``"host:port"`` to give to clients; only valid after :meth:`start`."""
        return f"{self._host}:{self.port}"

    @property
    def connections(self) -> frozenset[Connection]:
        """The connections open right now."""
        return frozenset(self._connections)

    @property
    def dispatcher(self) -> Dispatcher:
        return self._dispatcher

    async def start(self) -> None:
        """Bind and listen. Raises OSError when the address cannot be bound, ConfigError when
        the TLS certificate or key cannot be used."""
        invariant(self._server is None, "server started twice")
        loop = asyncio.get_running_loop()
        tls = self._tls
        if tls is not None and tls.mode is TlsMode.PERMISSIVE:
            self._server = await PermissiveTlsServer.start(
                self._new_connection, self._host, self._requested_port, tls.context()
            )
        else:
            enforcing = tls is not None and tls.mode is TlsMode.ENFORCING
            self._server = await loop.create_server(
                self._new_connection,
                self._host,
                self._requested_port,
                reuse_address=True,
                ssl=tls.context() if tls is not None and enforcing else None,
                ssl_handshake_timeout=limits.TLS_HANDSHAKE_TIMEOUT_MS / 1000 if enforcing else None,
            )
        sockets = self._server.sockets
        invariant(len(sockets) > 0, "a started server has a listening socket")
        self._port = int(sockets[0].getsockname()[1])
        _log.info("remoting server listening on %s", self.address)

    async def stop(self, timeout_ms: int = limits.REMOTING_STOP_GRACE_MS) -> None:
        """Stop listening, close every connection and cancel handlers still running.

        Unsent answers get up to ``timeout_ms`` to be flushed, suspended handlers up to
        ``timeout_ms`` to finish; then connections are aborted and handlers cancelled. Our own
        pending invokes on the connections fail with ConnectionClosedError. Idempotent.
        """
        server = self._server
        if server is None:
            return
        server.close()
        reason = ConnectionClosedError(f"server {self.address} stopping")
        await close_connections(list(self._connections), reason, timeout_ms)
        await self._dispatcher.cancel_handlers(timeout_ms)
        await server.wait_closed()
        _log.info("remoting server on %s stopped", self.address)

    def _new_connection(self) -> Connection:
        return Connection(
            self._dispatcher,
            settings=self._settings,
            on_open=self._opened,
            on_close=self._closed,
        )

    def _opened(self, connection: Connection) -> None:
        self._connections.add(connection)
        if self._on_connection_open is not None:
            self._on_connection_open(connection)

    def _closed(self, connection: Connection) -> None:
        self._connections.discard(connection)
        if self._on_connection_close is not None:
            self._on_connection_close(connection)


def listening_socket(host: str, port: int) -> socket.socket:
    """A non-blocking TCP socket bound to ``host:port`` (0: any free port) and listening, for
    servers that are handed a ready socket (the 5.x proxy, the dashboard).

    Raises OSError when the address cannot be bound (the socket is closed then).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(limits.LISTEN_BACKLOG_COUNT)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


class SocketServer:
    """Base of the servers that listen on a socket of their own (see :func:`listening_socket`):
    the 5.x proxy and the dashboard. Subclasses set ``_socket`` when they start listening and
    clear it when they stop.

    :attr:`port` is the bound port while listening (``port`` 0 asks for any free one) and the
    requested port otherwise; :attr:`address` is ``host:port``.
    """

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self._requested_port = port
        self._socket: socket.socket | None = None

    @property
    def port(self) -> int:
        if self._socket is None:
            return self._requested_port
        return int(self._socket.getsockname()[1])

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"
