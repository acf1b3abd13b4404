"""The 5.x gRPC proxy: a grpclib server on the running event loop (uvloop in the servers) in
front of the name servers and brokers, which it reaches through remoting only.

``ProxyServer(["127.0.0.1:9876"], host="127.0.0.1", port=8081)``; port 0 picks a free port
(:attr:`port` after :meth:`start`). A background loop heartbeats the brokers for the
producer groups of connected 5.x producers (transaction checks) and forgets silent clients.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import ssl
import weakref
from asyncio import BaseTransport
from dataclasses import dataclass
from typing import Any

from grpclib.protocol import H2Protocol
from grpclib.server import Server
from h2.errors import ErrorCodes
from h2.events import ConnectionTerminated
from h2.utilities import SizeLimitDict
from hyperframe.frame import GoAwayFrame

from bolide.base import limits
from bolide.base.clock import Clock, SystemClock
from bolide.base.errors import BolideError, invariant
from bolide.base.service import CrashHandler, Service
from bolide.client.rpc.client import heartbeat
from bolide.protocol.bodies import HeartbeatData, ProducerData
from bolide.protocol.codes import RequestCode
from bolide.proxy.authorization import Authorizer
from bolide.proxy.brokers import BrokerDirectory
from bolide.proxy.clients import ClientRegistry
from bolide.proxy.consuming import Consuming
from bolide.proxy.producing import Producing
from bolide.proxy.service import Authenticator, MessagingService
from bolide.remoting import ClientPool, Dispatcher, SocketServer, listening_socket
from bolide.remoting.client_pool import RequestHook
from bolide.remoting.tls import PermissiveTlsServer, TlsClientSettings, TlsMode, TlsServerSettings

__all__ = ["ProxyConfig", "ProxyServer"]

_log = logging.getLogger("bolide.proxy")


@dataclass(frozen=True, slots=True)
class ProxyConfig:
    """``min_invisible_time_ms``: the shortest invisible time a receive may ask for (Apache's
    minInvisibleTimeMillsForRecv, 10 s; tests lower it)."""

    min_invisible_time_ms: int = limits.PROXY_MIN_INVISIBLE_TIME_FOR_RECEIVE_MS
    max_body_bytes: int = limits.PROXY_MESSAGE_BODY_MAX_BYTES
    auto_renew_invisible_time_ms: int = limits.PROXY_DEFAULT_INVISIBLE_TIME_MS
    """Invisible time of an ``auto_renew`` receive, renewed until the message is acked."""
    renew_ahead_ms: int = limits.PROXY_AUTO_RENEW_AHEAD_MS
    closed_streams_max_count: int = limits.PROXY_HTTP2_CLOSED_STREAMS_MAX_COUNT
    """Closed HTTP/2 streams each connection remembers (default 1,024; h2's own 65,536
    grows a long-lived client's connection by ~8 MiB)."""
    authenticator: Authenticator | None = None
    """Checks each call's ``authorization`` header (the ACL's verify_grpc_authorization);
    None: no authentication (ACL off)."""
    authorizer: Authorizer | None = None
    """Checks the authenticated account holds what each call needs on its topics and group
    (the ACL's authorize_grpc); None: authentication only."""
    sign: RequestHook | None = None
    """Signs the proxy's own requests to name servers and brokers with ACL on (an account's
    SessionCredentials.sign); None: unsigned."""
    tls: TlsClientSettings | None = None
    """TLS toward name servers and brokers; None: plain TCP."""
    server_tls: TlsServerSettings | None = None
    """TLS of the gRPC listener, with the remoting port's tls.server.* settings: enforcing
    (TLS only), permissive (TLS and plain HTTP/2 on one port, told apart by the first byte)
    or disabled / None (plain only). The 5.x SDKs turn TLS on by default."""


def _goaway_event(frame: GoAwayFrame) -> tuple[list[Any], list[Any]]:
    """h2's handling of a received GOAWAY without its state change: h2 closes the connection
    state at once (no more frames may be sent, the open streams' answers included); the
    reference gRPC server finishes the open streams first."""
    event = ConnectionTerminated()
    try:
        event.error_code = ErrorCodes(frame.error_code)
    except ValueError:
        event.error_code = frame.error_code
    event.last_stream_id = frame.last_stream_id
    event.additional_data = frame.additional_data or None
    return [], [event]


class _BoundedH2Protocol(H2Protocol):
    """grpclib's connection with h2's record of closed streams bounded to
    ``closed_streams_max_count`` entries (h2 keeps 2**16 per connection: ~8 MiB, filled by
    one busy 5.x client in half an hour), and a client's GOAWAY handled as the reference gRPC
    server does: the calls already open finish (their answers and statuses reach the client),
    then the connection closes (PROXY_GOAWAY_DRAIN_MAX_MS at most). grpclib dropped the
    connection at once, so a 5.x client shutting down got "14 UNAVAILABLE: Connection dropped"
    instead of its half-closed Telemetry stream's status."""

    def __init__(self, base: H2Protocol, closed_streams_max_count: int) -> None:
        super().__init__(base.handler, base.config, base.h2_config)
        self._closed_streams_max_count = closed_streams_max_count
        self._draining: asyncio.Task[None] | None = None

    def connection_made(self, transport: BaseTransport) -> None:
        super().connection_made(transport)
        # grpclib's Connection wraps the h2 state machine as ``_connection``; no stream
        # exists yet, so the empty record is replaced by a smaller one of the same kind.
        h2_connection = self.connection._connection
        h2_connection._closed_streams = SizeLimitDict(size_limit=self._closed_streams_max_count)
        h2_connection._frame_dispatch_table[GoAwayFrame] = _goaway_event
        self.processor.processors[ConnectionTerminated] = self._goaway_received

    def _goaway_received(self, event: ConnectionTerminated) -> None:
        reason = f"Received GOAWAY frame, closing connection; error_code: {event.error_code}"
        if not self.processor.streams:
            self.processor.close(reason)
        elif self._draining is None:
            self._draining = asyncio.get_running_loop().create_task(
                self._close_when_drained(reason), name="proxy-goaway-drain"
            )

    async def _close_when_drained(self, reason: str) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + limits.PROXY_GOAWAY_DRAIN_MAX_MS / 1000
        waiter = self.connection.stream_close_waiter
        while self.processor.streams and not self.connection.is_closing():
            waiter.clear()
            try:
                await asyncio.wait_for(waiter.wait(), max(0.0, deadline - loop.time()))
            except TimeoutError:
                open_calls = len(self.processor.streams)
                _log.info("%d call(s) open %d ms after GOAWAY: closing", open_calls,
                          limits.PROXY_GOAWAY_DRAIN_MAX_MS)  # fmt: skip
                break
        if hasattr(self.processor, "processors"):  # grpclib deletes it once closed
            self.processor.close(reason)


class _Server(Server):
    """grpclib's server, remembering its connections so that stop can close them (grpclib
    cancels their calls but leaves the sockets open), each with a bounded record of closed
    streams (:class:`_BoundedH2Protocol`)."""

    def __init__(self, handlers: list[MessagingService], closed_streams_max_count: int) -> None:
        invariant(closed_streams_max_count > 0, "closed streams remembered is positive")
        super().__init__(handlers)
        self.protocols: weakref.WeakSet[H2Protocol] = weakref.WeakSet()
        self._closed_streams_max_count = closed_streams_max_count

    def _protocol_factory(self) -> H2Protocol:
        protocol = _BoundedH2Protocol(super()._protocol_factory(), self._closed_streams_max_count)
        self.protocols.add(protocol)
        return protocol

    async def start_permissive(
        self, host: str, port: int, context: ssl.SSLContext
    ) -> socket.socket:
        """Listen on ``host:port`` for TLS and plain connections alike (grpclib's own start
        takes one or the other); the listening socket."""
        server = await PermissiveTlsServer.start(self._protocol_factory, host, port, context)
        self._server = server  # type: ignore[assignment]  # the asyncio.Server calls it needs
        self._server_closed_fut = asyncio.get_running_loop().create_future()
        return server.sockets[0]

    def close_connections(self) -> None:
        for protocol in list(self.protocols):
            connection = getattr(protocol, "connection", None)
            if connection is not None:
                connection.close()


class ProxyServer(SocketServer):
    def __init__(
        self,
        namesrv_addresses: list[str],
        *,
        host: str = "127.0.0.1",
        port: int = 8081,
        config: ProxyConfig | None = None,
        clock: Clock | None = None,
        on_crash: CrashHandler | None = None,
    ) -> None:
        super().__init__(host, port)
        self.config = config or ProxyConfig()
        self._clock = clock or SystemClock()
        dispatcher = Dispatcher()
        self.pool = ClientPool(dispatcher, request_hook=self.config.sign, tls=self.config.tls)
        self.directory = BrokerDirectory(self.pool, namesrv_addresses)
        self.clients = ClientRegistry()
        self.producing = Producing(
            self.directory, self.clients, max_body_bytes=self.config.max_body_bytes
        )
        dispatcher.register(
            RequestCode.CHECK_TRANSACTION_STATE,
            self.producing.check_transaction_state,
            family="client",
        )
        self.consuming = Consuming(
            self.directory,
            min_invisible_time_ms=self.config.min_invisible_time_ms,
            auto_renew_invisible_time_ms=self.config.auto_renew_invisible_time_ms,
            renew_ahead_ms=self.config.renew_ahead_ms,
            pool_factory=lambda: ClientPool(
                Dispatcher(), request_hook=self.config.sign, tls=self.config.tls
            ),
        )
        self.service = MessagingService(
            self.directory,
            self.clients,
            self.producing,
            self.consuming,
            max_body_bytes=self.config.max_body_bytes,
            on_producer=self._producer_seen,
            authenticator=self.config.authenticator,
            authorizer=self.config.authorizer,
        )
        self._server: _Server | None = None
        self._client_id = f"{socket.gethostname()}@proxy-{os.getpid()}"
        self._housekeeping = Service(
            "proxy-housekeeping",
            self._housekeep,
            interval_ms=limits.PROXY_PRODUCER_HEARTBEAT_INTERVAL_MS,
            clock=self._clock,
            on_crash=on_crash,
        )
        self._renewing = Service(
            "proxy-auto-renew",
            self.renew_step,
            interval_ms=limits.PROXY_AUTO_RENEW_INTERVAL_MS,
            clock=self._clock,
            on_crash=on_crash,
        )

    async def start(self) -> None:
        """Listen; raises OSError when the port cannot be bound."""
        server_tls = self.config.server_tls
        mode = TlsMode.DISABLED if server_tls is None else server_tls.mode
        context = None if server_tls is None or not server_tls.enabled else _h2_context(server_tls)
        self._server = _Server([self.service], self.config.closed_streams_max_count)
        if context is not None and mode is TlsMode.PERMISSIVE:
            self._socket = await self._server.start_permissive(
                self.host, self._requested_port, context
            )
        else:
            self._socket = sock = listening_socket(self.host, self._requested_port)
            await self._server.start(sock=sock, ssl=context)
        self._housekeeping.start()
        self._renewing.start()
        _log.info("5.x gRPC proxy serving on %s (TLS %s)", self.address, mode.value)

    async def stop(self, timeout_ms: int = limits.REMOTING_STOP_GRACE_MS) -> None:
        """Stop listening, end open calls, close broker connections. Idempotent."""
        await self._housekeeping.stop(timeout_ms)
        await self._renewing.stop(timeout_ms)
        server, self._server = self._server, None
        if server is not None:
            server.close()
            await server.wait_closed()
            server.close_connections()
        await self.consuming.registration.close()
        await self.pool.close(timeout_ms)
        self._socket = None

    def _producer_seen(self) -> None:
        self._housekeeping.wakeup()

    async def _housekeep(self) -> None:
        for client_id in self.clients.expire():
            self.consuming.renewal.forget_client(client_id)
            await self.consuming.registration.forget(client_id)
        await self._register_producers()

    async def renew_step(self) -> None:
        """Renew the invisible time of auto-renewed messages about to come back."""
        await self.consuming.renewal.renew_due(self._clock.now_ms())

    async def _register_producers(self) -> None:
        """Heartbeat each broker as producer of every topic a live 5.x producer publishes,
        so CHECK_TRANSACTION_STATE comes to this proxy."""
        topics = sorted({topic for session in self.clients.producing() for topic in session.topics})
        groups_by_address: dict[str, set[str]] = {}
        for topic in topics:
            try:
                brokers = await self.directory.brokers(topic)
            except (BolideError, OSError) as error:
                _log.debug("producer registration: no route for %s: %s", topic, error)
                continue
            for broker in brokers:
                groups_by_address.setdefault(broker.address, set()).add(topic)
        for address, groups in groups_by_address.items():
            data = HeartbeatData(
                self._client_id, tuple(ProducerData(group) for group in sorted(groups))
            )
            try:
                await heartbeat(self.pool, address, data, limits.PROXY_RPC_TIMEOUT_MS)
            except (BolideError, OSError) as error:
                _log.warning("producer heartbeat to %s failed: %s", address, error)


def _h2_context(settings: TlsServerSettings) -> ssl.SSLContext:
    """The listener's server context, offering HTTP/2 by ALPN (gRPC clients require it).
    Raises ConfigError when the certificate or key cannot be used."""
    context = settings.context()
    context.set_alpn_protocols(["h2"])
    return context
