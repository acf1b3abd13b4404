"""Client side of remoting: one connection per ``host:port``, opened on demand.

Concurrent callers of a cold address share one connect. After a connect to an address fails,
the next attempt waits an exponential back-off (RECONNECT_BACKOFF_INITIAL_MS doubling up to
RECONNECT_BACKOFF_MAX_MS); a caller whose timeout ends before that fails at once instead of
hammering a dead broker. A connect that succeeds resets the back-off. A connection that closes
is forgotten: the next call reconnects at once (the peer may simply have restarted).

Requests the server sends us on these connections (NOTIFY_CONSUMER_IDS_CHANGED, reset offset,
GET_CONSUMER_RUNNING_INFO...) go to the pool's dispatcher.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from bolide.base import limits
from bolide.base.clock import Clock, SystemClock
from bolide.base.errors import ConnectionClosedError, RequestTimeoutError, invariant
from bolide.protocol.command import RemotingCommand
from bolide.remoting.connection import Connection, ConnectionSettings, close_connections
from bolide.remoting.dispatcher import Dispatcher
from bolide.remoting.tls import TlsClientSettings

_log = logging.getLogger("bolide.remoting.client_pool")

RequestHook = Callable[[RemotingCommand], None]
"""Runs on every request the pool sends, just before it is written (signing, for the ACL)."""

PoolCloseCallback = Callable[[str, Connection], None]
"""``on_connection_close(address, connection)``; ``connection.close_reason`` says why."""


def split_address(address: str) -> tuple[str, int]:
    """``"host:port"`` (or ``"[v6]:port"``) -> (host, port). Raises ValueError when malformed."""
    host, separator, port_text = address.rpartition(":")
    if not separator or not host or not port_text.isdigit():
        raise ValueError(f"address {address!r} is not host:port")
    port = int(port_text)
    if not 0 < port < 65_536:
        raise ValueError(f"address {address!r} has port {port} outside 1..65535")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, port


def reconnect_delay_ms(consecutive_failures: int) -> int:
    """Wait before the next connect after ``consecutive_failures`` failed ones (0 -> none)."""
    if consecutive_failures <= 0:
        return 0
    exponent = min(consecutive_failures - 1, 30)  # 2**30 * 100 ms is far past the cap anyway
    return min(limits.RECONNECT_BACKOFF_INITIAL_MS << exponent, limits.RECONNECT_BACKOFF_MAX_MS)


@dataclass(slots=True)
class _Backoff:
    failures: int
    next_attempt_ms: int
    """Monotonic clock time before which no connect is tried."""
    last_error: BaseException


class ClientPool:
    """Connections to servers, keyed by the address string callers use.

    ``dispatcher`` answers requests servers send us (default: an empty one, which answers
    REQUEST_CODE_NOT_SUPPORTED). ``clock`` times the reconnect back-off (tests use a
    ManualClock); request timeouts run on the event loop's timers. ``request_hook`` sees
    every request before it is sent (the ACL signer). ``tls`` connects over TLS (its files
    are read here: ConfigError when they cannot be used).
    """

    def __init__(
        self,
        dispatcher: Dispatcher | None = None,
        *,
        settings: ConnectionSettings | None = None,
        clock: Clock | None = None,
        connect_timeout_ms: int = limits.CONNECT_TIMEOUT_MS,
        on_connection_close: PoolCloseCallback | None = None,
        request_hook: RequestHook | None = None,
        tls: TlsClientSettings | None = None,
    ) -> None:
        invariant(connect_timeout_ms > 0, "a connect timeout is positive")
        self._request_hook = request_hook
        self._ssl_context = None if tls is None else tls.context()
        self._dispatcher = dispatcher or Dispatcher()
        self._settings = settings or ConnectionSettings()
        self._clock = clock or SystemClock()
        self._connect_timeout_ms = connect_timeout_ms
        self._on_connection_close = on_connection_close
        self._connections: dict[str, Connection] = {}
        self._connecting: dict[str, asyncio.Future[Connection]] = {}
        self._backoff: dict[str, _Backoff] = {}
        self._closed = False

    @property
    def dispatcher(self) -> Dispatcher:
        return self._dispatcher

    @property
    def connections(self) -> dict[str, Connection]:
        """Open connections by address (a copy)."""
        return {a: c for a, c in self._connections.items() if not c.is_closed}

    def backoff_ms(self, address: str) -> int:
        """Milliseconds until the next connect to ``address`` may be tried (0: right away)."""
        backoff = self._backoff.get(address)
        if backoff is None:
            return 0
        return max(0, backoff.next_attempt_ms - self._clock.monotonic_ms())

    def invoke(
        self,
        address: str,
        request: RemotingCommand,
        timeout_ms: int = limits.REQUEST_TIMEOUT_DEFAULT_MS,
    ) -> Coroutine[Any, Any, RemotingCommand]:
        """Send ``request`` to ``address``; await the response (any response code).

        ``timeout_ms`` covers connecting (when needed) and the exchange. Raises
        ConnectionClosedError (``__cause__``: the connect failure or why the connection
        closed), RequestTimeoutError, BackpressureError (opaque table full), ValueError
        (malformed address). A plain function: over an open connection the caller awaits the
        connection's own invoke (one coroutine less a request, every RPC of a client).
        """
        connection = self._connections.get(address)
        if connection is None or connection.is_closed:
            return self._connect_and_invoke(address, request, timeout_ms)
        if self._request_hook is not None:
            self._request_hook(request)
        return connection.invoke(request, timeout_ms)

    async def _connect_and_invoke(
        self, address: str, request: RemotingCommand, timeout_ms: int
    ) -> RemotingCommand:
        connection, timeout_ms = await self._connected(address, timeout_ms)
        if self._request_hook is not None:
            self._request_hook(request)
        return await connection.invoke(request, timeout_ms)

    async def invoke_oneway(
        self,
        address: str,
        request: RemotingCommand,
        timeout_ms: int = limits.REQUEST_TIMEOUT_DEFAULT_MS,
    ) -> None:
        """Send ``request`` oneway; ``timeout_ms`` bounds connecting and waiting for buffer
        space. Raises as :meth:`invoke`, except that no response is awaited."""
        connection = self._connections.get(address)
        if connection is None or connection.is_closed:
            connection, timeout_ms = await self._connected(address, timeout_ms)
        if self._request_hook is not None:
            self._request_hook(request)
        await connection.invoke_oneway(request, timeout_ms)

    async def _connected(self, address: str, timeout_ms: int) -> tuple[Connection, int]:
        """:meth:`connect` within ``timeout_ms``, and what is left of it (at least 1 ms) for
        the request that waited for the connection."""
        started_ms = self._clock.monotonic_ms()
        connection = await self.connect(address, timeout_ms)
        return connection, max(1, timeout_ms - (self._clock.monotonic_ms() - started_ms))

    async def connect(
        self, address: str, timeout_ms: int = limits.CONNECT_TIMEOUT_MS
    ) -> Connection:
        """The open connection to ``address``, connecting first if there is none.

        Waits out a reconnect back-off when it ends within ``timeout_ms``. Raises
        ConnectionClosedError (pool closed, connect failed, or back-off longer than
        ``timeout_ms``; ``__cause__`` = the connect failure), RequestTimeoutError when the
        shared connect outlasts ``timeout_ms``, ValueError for a malformed address.
        """
        self._refuse_if_closed()
        connection = self._connections.get(address)
        if connection is not None and not connection.is_closed:
            return connection
        shared = self._connecting.get(address)
        if shared is None:
            host, port = split_address(address)
            wait_ms = self.backoff_ms(address)
            if wait_ms >= timeout_ms:
                backoff = self._backoff[address]
                raise ConnectionClosedError(
                    f"not reconnecting to {address} for {wait_ms} ms after"
                    f" {backoff.failures} failed attempts: {backoff.last_error}"
                ) from backoff.last_error
            shared = asyncio.ensure_future(self._open(address, host, port, wait_ms))
            shared.add_done_callback(_retrieve_exception)
            self._connecting[address] = shared
        try:
            return await asyncio.wait_for(asyncio.shield(shared), timeout_ms / 1000)
        except TimeoutError as error:
            raise RequestTimeoutError(
                f"connection to {address} not ready within {timeout_ms} ms"
            ) from error
        except ConnectionClosedError as error:
            # A fresh error per caller, caused by the original failure (OSError, timeout...).
            raise ConnectionClosedError(str(error)) from (error.__cause__ or error)
        except asyncio.CancelledError:
            if shared.cancelled() and self._closed:
                raise ConnectionClosedError("client pool closed while connecting") from None
            raise

    async def close(self, timeout_ms: int = limits.REMOTING_STOP_GRACE_MS) -> None:
        """Close every connection (pending calls fail with ConnectionClosedError) and refuse
        new calls. Unsent data gets ``timeout_ms`` to be flushed. Idempotent."""
        self._closed = True
        for shared in list(self._connecting.values()):
            shared.cancel()
        connections = list(self._connections.values())
        self._connections.clear()
        reason = ConnectionClosedError("client pool closed")
        await close_connections(connections, reason, timeout_ms)

    # ---- internals ------------------------------------------------------------------------

    async def _open(self, address: str, host: str, port: int, wait_ms: int) -> Connection:
        """Wait out the back-off, connect, record the outcome. Shared by concurrent callers."""
        try:
            if wait_ms > 0:
                await self._clock.sleep_ms(wait_ms)
            self._refuse_if_closed()
            loop = asyncio.get_running_loop()
            try:
                _, connection = await asyncio.wait_for(
                    loop.create_connection(
                        lambda: self._new_connection(address),
                        host,
                        port,
                        ssl=self._ssl_context,
                        ssl_handshake_timeout=(
                            None
                            if self._ssl_context is None
                            else limits.TLS_HANDSHAKE_TIMEOUT_MS / 1000
                        ),
                    ),
                    self._connect_timeout_ms / 1000,
                )
            except (OSError, TimeoutError, ssl.SSLError) as error:
                self._record_failure(address, error)
                _log.info("connect to %s failed: %s", address, error)
                raise ConnectionClosedError(f"cannot connect to {address}: {error}") from error
            if self._closed:  # closed while we were connecting
                connection.close(ConnectionClosedError("client pool closed"))
                self._refuse_if_closed()
            self._backoff.pop(address, None)
            self._connections[address] = connection
            return connection
        finally:
            self._connecting.pop(address, None)

    def _refuse_if_closed(self) -> None:
        if self._closed:
            raise ConnectionClosedError("client pool is closed")

    def _record_failure(self, address: str, error: BaseException) -> None:
        previous = self._backoff.get(address)
        failures = 1 if previous is None else previous.failures + 1
        next_attempt_ms = self._clock.monotonic_ms() + reconnect_delay_ms(failures)
        self._backoff[address] = _Backoff(failures, next_attempt_ms, error)

    def _new_connection(self, address: str) -> Connection:
        return Connection(
            self._dispatcher,
            settings=self._settings,
            on_close=lambda connection: self._closed_connection(address, connection),
        )

    def _closed_connection(self, address: str, connection: Connection) -> None:
        if self._connections.get(address) is connection:
            del self._connections[address]
        if self._on_connection_close is not None:
            self._on_connection_close(address, connection)


def _retrieve_exception(future: asyncio.Future[Connection]) -> None:
    """Mark a shared connect's failure as seen even when every caller timed out first."""
    if not future.cancelled():
        future.exception()
