"""Serving the dashboard: uvicorn on the caller's event loop, with a socket we bind (port 0
works and :attr:`DashboardServer.port` tells the real one). ``bolide standalone`` runs it
beside the name server and broker; ``bolide dashboard`` runs it alone."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Iterator
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from bolide.client.admin import AdminClient
from bolide.dashboard.app import DashboardSettings, create_app
from bolide.remoting import SocketServer, listening_socket

__all__ = ["DashboardServer"]


class _EmbeddedServer(uvicorn.Server):
    """uvicorn sharing a loop: the process's signals stay with its owner (standalone stops
    the dashboard itself), and :attr:`ready` is set once the socket accepts requests."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = asyncio.Event()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        self.ready.set()


_log = logging.getLogger("bolide.dashboard")


class _ClosingH11Protocol(H11Protocol):
    """uvicorn's h11 protocol, deaf once the client said its request is the last.

    A client that sent ``Connection: close`` (or spoke HTTP/1.0) may send nothing more; bytes
    that still arrive while its request is answered made uvicorn 0.54 / h11 0.16 answer 400 in
    place of the response in progress (or fail half-way through it, "Too much data for
    declared Content-Length") and log a fatal transport error. They are dropped here instead:
    the request in progress is answered and the connection then closes, as the client asked.
    """

    def data_received(self, data: bytes) -> None:
        if self.conn.their_state is h11.MUST_CLOSE:
            _log.debug("dashboard: %d bytes after Connection: close dropped", len(data))
            return
        super().data_received(data)


class DashboardServer(SocketServer):
    """The dashboard on ``host:port`` over the name servers of ``settings``."""

    def __init__(self, settings: DashboardSettings, host: str, port: int) -> None:
        super().__init__(host, port)
        self._settings = settings
        self._server: _EmbeddedServer | None = None
        self._task: asyncio.Task[None] | None = None
        self._admin: AdminClient | None = None
        self._app: Any = None

    async def start(self) -> None:
        """Bind, start the admin client and serve; raises OSError when the port is taken."""
        self._socket = sock = listening_socket(self.host, self._requested_port)
        admin = AdminClient(self._settings.namesrv, tls=self._settings.tls)
        await admin.start()
        self._admin = admin
        config = uvicorn.Config(
            create_app(admin, self._settings),
            log_level="warning",
            access_log=False,
            lifespan="off",
            proxy_headers=False,
            server_header=False,
            http=_ClosingH11Protocol,
        )
        self._app = config.app
        self._server = server = _EmbeddedServer(config)
        self._task = task = asyncio.ensure_future(server.serve(sockets=[sock]))
        ready = asyncio.ensure_future(server.ready.wait())
        await asyncio.wait((task, ready), return_when=asyncio.FIRST_COMPLETED)
        ready.cancel()
        if task.done():
            address = self.address
            cause = None if task.cancelled() else task.exception()
            await self.stop()
            raise OSError(f"the dashboard on {address} did not start: {cause!r}") from cause
        _log.info("dashboard on http://%s/", self.address)

    async def stop(self) -> None:
        server, task = self._server, self._task
        self._server = self._task = None
        if server is not None:
            server.should_exit = True
        if task is not None:
            try:
                await task
            except Exception as error:  # the server's own failure: stopping goes on, logged
                _log.warning("dashboard server ended with %r", error, exc_info=error)
        app, self._app = self._app, None
        if app is not None:
            await app.state.dashboard.close()
        admin, self._admin = self._admin, None
        if admin is not None:
            await admin.close()
        sock, self._socket = self._socket, None
        if sock is not None:
            sock.close()
