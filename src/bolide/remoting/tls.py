"""TLS for remoting: server and client contexts, and the permissive listener.

A server runs in one of RocketMQ's three modes (broker.conf / name server ``tls.server.mode``)::

    disabled     plain TCP only
    permissive   TLS and plain TCP on the same port: the first byte a client sends decides
                 (0x16, a TLS handshake record, starts TLS; anything else is plain remoting)
    enforcing    TLS only: a plain client's bytes fail the handshake and it is disconnected

Remoting clients always speak first, so looking at the first byte (``MSG_PEEK``: it stays in
the socket for whoever reads next) never waits on the server. ``tls.server.need.client.auth``
= none | optional | require asks clients for a certificate signed by
``tls.server.trustCertPath``. Unlike RocketMQ, a server with TLS on and no certificate or key
refuses to start instead of making up a self-signed one.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import socket
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bolide.base import limits
from bolide.base.errors import ConfigError

__all__ = [
    "ClientAuth",
    "PermissiveTlsServer",
    "TlsClientSettings",
    "TlsMode",
    "TlsServerSettings",
]

_log = logging.getLogger("bolide.remoting.tls")

TLS_HANDSHAKE_RECORD_TYPE = 0x16
"""The first byte of every TLS ClientHello (record type "handshake")."""


class TlsMode(enum.Enum):
    """``tls.server.mode``."""

    DISABLED = "disabled"
    PERMISSIVE = "permissive"
    ENFORCING = "enforcing"


class ClientAuth(enum.Enum):
    """``tls.server.need.client.auth``: whether clients must show a certificate."""

    NONE = "none"
    OPTIONAL = "optional"
    REQUIRE = "require"


def _readable_file(path: Path, what: str) -> Path:
    if not path.is_file():
        raise ConfigError(f"{what} {path} is not a readable file")
    return path


@dataclass(frozen=True, slots=True)
class TlsServerSettings:
    """A server's TLS: ``mode``, its certificate chain and key (PEM), and for client
    certificates the CA bundle that signs them."""

    mode: TlsMode = TlsMode.DISABLED
    cert_path: Path | None = None
    key_path: Path | None = None
    trust_cert_path: Path | None = None
    client_auth: ClientAuth = ClientAuth.NONE
    key_password: str | None = None

    @property
    def enabled(self) -> bool:
        return self.mode is not TlsMode.DISABLED

    def context(self) -> ssl.SSLContext:
        """The server context. Raises ConfigError when a file is missing or unusable."""
        if self.cert_path is None or self.key_path is None:
            raise ConfigError(
                f"tls.server.mode={self.mode.value} needs tls.server.certPath and"
                " tls.server.keyPath (PEM files)"
            )
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        try:
            context.load_cert_chain(
                _readable_file(self.cert_path, "tls.server.certPath"),
                _readable_file(self.key_path, "tls.server.keyPath"),
                password=self.key_password,
            )
            if self.client_auth is not ClientAuth.NONE:
                if self.trust_cert_path is None:
                    raise ConfigError(
                        "tls.server.need.client.auth needs tls.server.trustCertPath (the CA"
                        " bundle client certificates are checked against)"
                    )
                context.load_verify_locations(
                    _readable_file(self.trust_cert_path, "tls.server.trustCertPath")
                )
                context.verify_mode = (
                    ssl.CERT_REQUIRED
                    if self.client_auth is ClientAuth.REQUIRE
                    else ssl.CERT_OPTIONAL
                )
        except ssl.SSLError as error:
            raise ConfigError(f"TLS server certificate or key unusable: {error}") from error
        return context


@dataclass(frozen=True, slots=True)
class TlsClientSettings:
    """A client's TLS: the CA bundle that signs the servers' certificates (None: the
    system's), whether to check the server at all (``verify_server=False`` accepts any
    certificate, as RocketMQ clients do by default: not recommended), and a client certificate
    and key for servers that ask for one."""

    trust_cert_path: Path | None = None
    cert_path: Path | None = None
    key_path: Path | None = None
    verify_server: bool = True
    key_password: str | None = None

    def context(self) -> ssl.SSLContext:
        """The client context. Raises ConfigError when a file is missing or unusable."""
        try:
            if self.trust_cert_path is not None:
                context = ssl.create_default_context(
                    cafile=str(_readable_file(self.trust_cert_path, "TLS trust certificate"))
                )
            else:
                context = ssl.create_default_context()
            if not self.verify_server:
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
            if self.cert_path is not None or self.key_path is not None:
                if self.cert_path is None or self.key_path is None:
                    raise ConfigError("a TLS client certificate needs both its cert and key file")
                context.load_cert_chain(
                    _readable_file(self.cert_path, "TLS client certificate"),
                    _readable_file(self.key_path, "TLS client key"),
                    password=self.key_password,
                )
        except ssl.SSLError as error:
            raise ConfigError(f"TLS client certificate or trust file unusable: {error}") from error
        return context


class PermissiveTlsServer:
    """A listener taking TLS and plain connections on one port (see the module docstring).

    Offers what :class:`~bolide.remoting.server.RemotingServer` uses of ``asyncio.Server``:
    :attr:`sockets`, :meth:`close`, :meth:`wait_closed`.
    """

    def __init__(
        self,
        protocol_factory: Callable[[], asyncio.Protocol],
        context: ssl.SSLContext,
        listening: socket.socket,
    ) -> None:
        self._factory = protocol_factory
        self._context = context
        self._socket = listening
        self._tasks: set[asyncio.Task[None]] = set()
        self._accepting: asyncio.Task[None] | None = None
        self.tls_connections = 0
        self.plain_connections = 0

    @classmethod
    async def start(
        cls,
        protocol_factory: Callable[[], asyncio.Protocol],
        host: str,
        port: int,
        context: ssl.SSLContext,
    ) -> PermissiveTlsServer:
        """Bind ``host:port`` and accept. Raises OSError when it cannot be bound."""
        listening = socket.create_server((host, port), backlog=limits.LISTEN_BACKLOG_COUNT)
        listening.setblocking(False)
        server = cls(protocol_factory, context, listening)
        server._accepting = asyncio.get_running_loop().create_task(server._accept_loop())
        return server

    @property
    def sockets(self) -> tuple[socket.socket, ...]:
        return (self._socket,)

    def close(self) -> None:
        if self._accepting is not None:
            self._accepting.cancel()
        for task in self._tasks:
            task.cancel()
        self._socket.close()

    async def wait_closed(self) -> None:
        tasks = [task for task in (self._accepting, *self._tasks) if task is not None]
        if tasks:
            await asyncio.wait(tasks)

    async def _accept_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                peer, _ = await loop.sock_accept(self._socket)
            except OSError as error:
                _log.warning("accept failed: %s", error)
                await asyncio.sleep(limits.ACCEPT_ERROR_BACKOFF_MS / 1000)
                continue
            task = loop.create_task(self._serve(peer))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _serve(self, peer: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        peer.setblocking(False)
        try:
            first = await _peek_first_byte(loop, peer)
            if not first:
                peer.close()
                return
            is_tls = first[0] == TLS_HANDSHAKE_RECORD_TYPE
            await loop.connect_accepted_socket(
                self._factory,
                peer,
                ssl=self._context if is_tls else None,
                ssl_handshake_timeout=limits.TLS_HANDSHAKE_TIMEOUT_MS / 1000 if is_tls else None,
            )
        except (OSError, TimeoutError, ssl.SSLError) as error:
            _log.info("connection dropped before it was set up: %s", error)
            peer.close()
            return
        except asyncio.CancelledError:
            peer.close()
            raise
        if is_tls:
            self.tls_connections += 1
        else:
            self.plain_connections += 1


async def _peek_first_byte(loop: asyncio.AbstractEventLoop, peer: socket.socket) -> bytes:
    """The first byte the peer sent, left in the socket; b"" when it closed first. Raises
    TimeoutError after :data:`~bolide.base.limits.TLS_SNIFF_TIMEOUT_MS` of silence."""
    readable: asyncio.Future[None] = loop.create_future()

    def on_readable() -> None:
        if not readable.done():
            readable.set_result(None)

    descriptor = peer.fileno()
    loop.add_reader(descriptor, on_readable)
    try:
        await asyncio.wait_for(readable, limits.TLS_SNIFF_TIMEOUT_MS / 1000)
    finally:
        loop.remove_reader(descriptor)
    with contextlib.suppress(BlockingIOError):
        return peer.recv(1, socket.MSG_PEEK)
    return await _peek_first_byte(loop, peer)
