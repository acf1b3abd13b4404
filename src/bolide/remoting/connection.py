"""One TCP connection speaking remoting frames, used the same way by servers and clients.

Either side may send requests on a connection (a broker notifies consumers over the socket the
consumer opened), so a :class:`Connection` both matches responses to its own requests by opaque
and hands the peer's requests to a :class:`RequestSink` (the dispatcher). Frame bit 0 of
``flag`` decides: set = response, clear = request, whoever sent it.

Peers met in the wild (docs/protocol.md §7.3): the C++ client answers broker requests with flag 1
(never 3) and sends its "oneway" requests with flag 0. Both need nothing special here: flag 1
is a response, flag 0 a request that gets an answer the client drops.

Frames are written with ``transport.writelines`` so pull bodies (memoryviews over mapped
files) reach the socket without a copy, and frames written in the same loop turn share one
system call (see ``Connection._write``). Writers that could outrun a slow peer wait in
:meth:`Connection.drain` while the transport's buffer is above its high-water mark; a server
connection also stops reading requests until its answers can be written again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, cast

from bolide.base import limits
from bolide.base.errors import (
    BackpressureError,
    ConnectionClosedError,
    InvariantViolationError,
    ProtocolError,
    RequestTimeoutError,
    invariant,
)
from bolide.protocol.codes import LanguageCode
from bolide.protocol.command import (
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    Body,
    RemotingCommand,
    decode_command,
    encode_command_parts,
)
from bolide.protocol.frame import FrameDecoder, RawFrame, SerializeType

_log = logging.getLogger("bolide.remoting.connection")

_IPV4_MAPPED_PREFIX = "::ffff:"
_JSON = SerializeType.JSON.value


@dataclass(frozen=True, slots=True)
class ConnectionSettings:
    """Bounds of one connection; defaults from :mod:`bolide.base.limits`."""

    max_frame_bytes: int = limits.FRAME_MAX_BYTES
    """A peer announcing a larger frame is disconnected."""
    opaque_table_max_entries: int = limits.OPAQUE_TABLE_MAX_ENTRIES
    """Requests of ours awaiting a response; one more raises BackpressureError."""
    write_buffer_high_water_bytes: int = limits.WRITE_BUFFER_HIGH_WATER_BYTES
    """Unsent bytes above which writers wait in :meth:`Connection.drain`."""
    write_buffer_low_water_bytes: int = limits.WRITE_BUFFER_LOW_WATER_BYTES
    """Unsent bytes at which waiting writers resume."""
    write_coalesce_max_bytes: int = limits.WRITE_COALESCE_MAX_BYTES
    """Frames written in one loop turn share one system call up to this size (0: none do)."""
    pause_reading_while_write_blocked: bool = False
    """Stop reading the peer's requests while its answers cannot be written (servers: a peer
    that does not read its responses must not make us buffer answers without bound)."""

    def __post_init__(self) -> None:
        invariant(self.opaque_table_max_entries > 0, "opaque table holds at least one entry")
        invariant(
            0 <= self.write_buffer_low_water_bytes < self.write_buffer_high_water_bytes,
            "write water marks: 0 <= low < high",
        )


class RequestSink(Protocol):
    """Receives the requests a peer sends on a connection (implemented by the Dispatcher).

    A sink may also have a ``dispatch_scanned`` method (see :data:`ScannedSink`): the
    connection then offers it every JSON frame before building a command for it.
    """

    def dispatch(self, connection: Connection, request: RemotingCommand) -> None:
        """Start handling ``request``; must not raise and must not block."""
        ...


ConnectionCallback = Callable[["Connection"], None]

ScannedSink = Callable[["Connection", RawFrame], bool]
"""``dispatch_scanned(connection, frame) -> handled``: a sink's fast entry for a JSON request
frame, before any command is built (the dispatcher reads common send headers with
:func:`~bolide.protocol.send_scan.scan_send_request`); False, having done nothing, hands the
frame to the ordinary ``decode_command`` + ``dispatch``."""


def format_socket_address(address: object) -> str:
    """``"ip:port"`` for a socket address as asyncio reports it (``peername``/``sockname``).

    IPv4-mapped IPv6 hosts (``::ffff:10.0.0.5``) become plain IPv4, because RocketMQ clients
    (C++ in particular) only understand IPv4 store and born hosts. Other IPv6 hosts are written
    without brackets, as Java's address helpers do. Anything else is ``str(address)``.
    """
    if isinstance(address, tuple) and len(address) >= 2:
        host = str(address[0])
        if host.startswith(_IPV4_MAPPED_PREFIX) and "." in host:
            host = host[len(_IPV4_MAPPED_PREFIX) :]
        return f"{host}:{address[1]}"
    return str(address)


class Connection(asyncio.Protocol):
    """A remoting connection: send commands, invoke requests, receive the peer's requests.

    Create it through ``loop.create_server``/``loop.create_connection`` (the server and the
    client pool do). Attributes for owners: :attr:`remote_address`, :attr:`local_address`,
    :attr:`attributes` (free-form, e.g. the broker's client id), and :attr:`language` /
    :attr:`version` of the last request received.
    """

    def __init__(
        self,
        sink: RequestSink,
        *,
        settings: ConnectionSettings | None = None,
        on_open: ConnectionCallback | None = None,
        on_close: ConnectionCallback | None = None,
    ) -> None:
        self._sink = sink
        self._settings = settings or ConnectionSettings()
        self._on_open = on_open
        self._on_close = on_close
        self._decoder = FrameDecoder(self._settings.max_frame_bytes)
        self._scanned: ScannedSink | None = getattr(sink, "dispatch_scanned", None)
        self._transport: asyncio.Transport | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pending: dict[int, asyncio.Future[RemotingCommand]] = {}
        self._last_opaque = -1
        self._write_paused = False
        self._out: list[Body] = []
        self._out_bytes = 0
        self._batching = False
        self._flush_scheduled = False
        self._stdlib_pause_check: Callable[[], None] | None = None
        self._drain_waiters: list[asyncio.Future[None]] = []
        self._close_reason: BaseException | None = None
        self._lost = asyncio.Event()
        self.remote_address = ""
        """``"ip:port"`` of the peer (IPv4-mapped IPv6 shown as IPv4)."""
        self.local_address = ""
        """``"ip:port"`` of our end of the socket."""
        self.attributes: dict[str, object] = {}
        """Free-form data owners attach to the connection (client id, group, ...)."""
        self.language: LanguageCode | None = None
        """LanguageCode of the last request received, None before the first one."""
        self.version: int | None = None
        """Wire version (MQVersion ordinal) of the last request received."""

    # ---- state --------------------------------------------------------------------------

    @property
    def is_closed(self) -> bool:
        """True once :meth:`close` was called or the peer went away."""
        return self._close_reason is not None

    @property
    def close_reason(self) -> BaseException | None:
        """Why the connection closed (a :class:`ProtocolError`, an OSError, a
        :class:`ConnectionClosedError` for an orderly close...), None while open."""
        return self._close_reason

    @property
    def pending_requests(self) -> int:
        """Our requests awaiting a response (entries in the opaque table)."""
        return len(self._pending)

    @property
    def write_paused(self) -> bool:
        """True while the transport buffers more than the high-water mark."""
        return self._write_paused

    @property
    def write_buffer_bytes(self) -> int:
        """Bytes accepted by the transport but not yet handed to the kernel."""
        return 0 if self._transport is None else self._transport.get_write_buffer_size()

    async def wait_closed(self) -> None:
        """Return once the transport has closed (after :meth:`close` or a peer disconnect)."""
        await self._lost.wait()

    def __repr__(self) -> str:
        state = "closed" if self.is_closed else "open"
        return f"<Connection {self.local_address} -> {self.remote_address} {state}>"

    # ---- sending -------------------------------------------------------------------------

    def send(self, command: RemotingCommand, *, at_once: bool = False) -> None:
        """Write ``command`` as is (opaque and flag untouched) — responses and re-sends.

        ``at_once`` writes it (and whatever is queued) now instead of at the end of the loop
        turn: for an answer made outside its connection's receive batch whose peer is waiting
        (a woken long poll). Does not wait for buffer space: callers that can outrun the peer
        use :meth:`drain`. Raises :class:`ConnectionClosedError` when the connection is closed
        and :class:`ProtocolError` when the command cannot be encoded.
        """
        if self._close_reason is not None:
            raise self._closed_error()
        self._write(command, at_once=at_once)

    def send_frame(self, frame: bytes) -> None:
        """Write ``frame``, a whole frame already encoded (a precompiled answer), as
        :meth:`send` writes a command: same coalescing, same errors when closed."""
        if self._close_reason is not None:
            raise self._closed_error()
        self._queue([frame], len(frame))

    async def drain(self) -> None:
        """Wait until the write buffer is at or below the low-water mark.

        Returns at once when writing is not paused. Raises :class:`ConnectionClosedError` if
        the connection is or becomes closed.
        """
        if self._close_reason is not None:
            raise self._closed_error()
        if not self._write_paused:
            return
        waiter: asyncio.Future[None] = self._running_loop().create_future()
        self._drain_waiters.append(waiter)
        await waiter

    async def invoke(
        self, request: RemotingCommand, timeout_ms: int = limits.REQUEST_TIMEOUT_DEFAULT_MS
    ) -> RemotingCommand:
        """Send ``request`` and return the peer's response.

        Assigns ``request.opaque`` and clears the oneway bit. ``timeout_ms`` (> 0) covers any
        wait for buffer space plus the wait for the response; then the opaque is freed and a
        late response is dropped. Raises :class:`RequestTimeoutError`,
        :class:`ConnectionClosedError` (``__cause__`` = why the connection closed),
        :class:`BackpressureError` when ``opaque_table_max_entries`` requests are already
        outstanding, :class:`ProtocolError` when the request cannot be encoded.
        """
        invariant(timeout_ms > 0, "an invoke timeout is positive")
        invariant(not request.flag & FLAG_RESPONSE, "invoke sends requests, not responses")
        if self._close_reason is not None:
            raise self._closed_error()
        if len(self._pending) >= self._settings.opaque_table_max_entries:
            raise BackpressureError(
                f"{len(self._pending)} requests already outstanding on {self.remote_address}"
            )
        loop = self._running_loop()
        deadline = loop.time() + timeout_ms / 1000
        if self._write_paused:
            await self._drain_until(deadline, timeout_ms)
        opaque = self._next_opaque()
        request.opaque = opaque
        request.flag &= ~FLAG_ONEWAY
        future: asyncio.Future[RemotingCommand] = loop.create_future()
        alone = not self._pending  # nothing else in flight: nobody to share a write with
        self._pending[opaque] = future
        timer = loop.call_at(deadline, self._expire, opaque, timeout_ms)
        try:
            self._write(request, at_once=alone)
            return await future
        finally:
            timer.cancel()
            if self._pending.get(opaque) is future:
                del self._pending[opaque]

    async def invoke_oneway(
        self, request: RemotingCommand, timeout_ms: int = limits.REQUEST_TIMEOUT_DEFAULT_MS
    ) -> None:
        """Send ``request`` with the oneway bit set; the peer does not answer.

        Assigns ``request.opaque``. ``timeout_ms`` (> 0) bounds the wait for buffer space.
        Raises :class:`RequestTimeoutError`, :class:`ConnectionClosedError`,
        :class:`ProtocolError` (unencodable request).
        """
        invariant(timeout_ms > 0, "an invoke timeout is positive")
        invariant(not request.flag & FLAG_RESPONSE, "invoke_oneway sends requests")
        if self._close_reason is not None:
            raise self._closed_error()
        if self._write_paused:
            loop = self._running_loop()
            await self._drain_until(loop.time() + timeout_ms / 1000, timeout_ms)
        request.opaque = self._next_opaque()
        request.flag |= FLAG_ONEWAY
        self._write(request)

    def close(self, reason: BaseException | None = None, *, abort: bool = False) -> None:
        """Close the connection; idempotent.

        Pending invokes and drain waiters fail at once with :class:`ConnectionClosedError`
        whose ``__cause__`` is ``reason`` (default: a ConnectionClosedError "closed locally").
        ``abort=True`` drops unsent data (a misbehaving peer); otherwise it is flushed first.
        """
        if self._close_reason is None:
            self._finish(reason or ConnectionClosedError("closed locally"))
        if abort:
            self._out = []
        elif self._out:
            self._flush()
        transport = self._transport
        if transport is None:
            return
        if abort:
            transport.abort()
        elif not transport.is_closing():
            transport.close()

    # ---- asyncio.Protocol -----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's TCPTransport has the Transport methods without subclassing asyncio.Transport.
        self._transport = cast(asyncio.Transport, transport)
        transport = self._transport
        self._loop = asyncio.get_running_loop()
        self._stdlib_pause_check = getattr(transport, "_maybe_pause_protocol", None)
        self.remote_address = format_socket_address(transport.get_extra_info("peername"))
        self.local_address = format_socket_address(transport.get_extra_info("sockname"))
        transport.set_write_buffer_limits(
            high=self._settings.write_buffer_high_water_bytes,
            low=self._settings.write_buffer_low_water_bytes,
        )
        if self._on_open is not None:
            self._on_open(self)

    def data_received(self, data: bytes) -> None:
        self._batching = True
        try:
            frames = self._decoder.feed(data)
            scanned = self._scanned
            for frame in frames:
                if self._close_reason is not None:
                    return  # a handler closed us mid-batch: the rest is not for anyone
                if scanned is not None and frame.serialize_type == _JSON and scanned(self, frame):
                    continue  # a common send, answered from its scanned header
                self._received(decode_command(frame))
        except ProtocolError as error:
            _log.warning("closing connection from %s: %s", self.remote_address, error)
            self.close(error, abort=True)
        finally:
            self._batching = False
            if self._out:
                self._flush()

    def eof_received(self) -> bool:
        return False  # close our side too: remoting has no half-closed use

    def connection_lost(self, exc: Exception | None) -> None:
        if self._close_reason is None:
            reason = exc or ConnectionClosedError(f"{self.remote_address} closed the connection")
            if self._decoder.buffered_bytes:
                _log.info(
                    "%s went away in the middle of a frame (%d bytes buffered)",
                    self.remote_address,
                    self._decoder.buffered_bytes,
                )
            self._finish(reason)
        self._lost.set()

    def pause_writing(self) -> None:
        self._write_paused = True
        if self._settings.pause_reading_while_write_blocked and self._transport is not None:
            self._transport.pause_reading()

    def resume_writing(self) -> None:
        self._write_paused = False
        transport = self._transport
        blocked_reading = self._settings.pause_reading_while_write_blocked
        if blocked_reading and transport is not None and not transport.is_closing():
            transport.resume_reading()
        waiters, self._drain_waiters = self._drain_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    # ---- internals ------------------------------------------------------------------------

    def _received(self, command: RemotingCommand) -> None:
        if command.flag & FLAG_RESPONSE:
            future = self._pending.pop(command.opaque, None)
            if future is None or future.done():
                _log.debug(
                    "dropped a response from %s matching no request (opaque %d, code %d)",
                    self.remote_address,
                    command.opaque,
                    command.code,
                )
                return
            future.set_result(command)
            return
        self.language = command.language
        self.version = command.version
        self._sink.dispatch(self, command)

    def _write(self, command: RemotingCommand, *, at_once: bool = False) -> None:
        """Queue the frame; frames queued in one loop turn go out in one ``writelines`` call.

        Answers produced while a received batch is processed are flushed at the end of the
        batch; other writes at the end of the loop turn (``call_soon``), or at once when
        ``write_coalesce_max_bytes`` are queued. One system call then carries many small frames
        instead of one each, the main cost of a round trip when many requests are in flight.
        A lone request (``at_once``: none other awaits an answer) is written immediately,
        because waiting for the end of the loop turn only adds latency to a ping-pong
        (both measured in bench/remoting.py).
        """
        parts = encode_command_parts(command)
        self._queue(parts, len(parts[0]) + command.body_length, at_once=at_once)

    def _queue(self, parts: list[Body], size_bytes: int, *, at_once: bool = False) -> None:
        self._out += parts
        self._out_bytes += size_bytes
        if at_once or self._out_bytes >= self._settings.write_coalesce_max_bytes:
            self._flush()
        elif not self._batching and not self._flush_scheduled:
            self._flush_scheduled = True
            self._running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        out = self._out
        if not out:
            return
        self._out = []
        self._out_bytes = 0
        transport = self._transport
        if transport is None:
            raise InvariantViolationError("write before the connection was made")
        if transport.is_closing():
            return
        transport.writelines(out)
        # CPython 3.12/3.13's selector transports buffer in writelines() without the
        # high-water check that write() does (3.11 joins and calls write()): run it ourselves.
        pause_check = self._stdlib_pause_check
        if (
            pause_check is not None
            and not self._write_paused
            and transport.get_write_buffer_size() > self._settings.write_buffer_high_water_bytes
        ):
            pause_check()

    def _next_opaque(self) -> int:
        """The next opaque, wrapping within the non-negative int32 range, skipping ones in use."""
        opaque = self._last_opaque
        while True:
            opaque = opaque + 1 if opaque + 1 < limits.OPAQUE_SPACE_COUNT else 0
            if opaque not in self._pending:
                self._last_opaque = opaque
                return opaque

    def _expire(self, opaque: int, timeout_ms: int) -> None:
        future = self._pending.pop(opaque, None)
        if future is not None and not future.done():
            future.set_exception(
                RequestTimeoutError(
                    f"no response from {self.remote_address} within {timeout_ms} ms"
                    f" (opaque {opaque})"
                )
            )

    async def _drain_until(self, deadline: float, timeout_ms: int) -> None:
        remaining_s = deadline - self._running_loop().time()
        try:
            await asyncio.wait_for(self.drain(), max(0.0, remaining_s))
        except TimeoutError as error:
            raise RequestTimeoutError(
                f"write buffer to {self.remote_address} stayed full for {timeout_ms} ms"
            ) from error

    def _finish(self, reason: BaseException) -> None:
        """Record why we closed, fail every waiter, tell the owner. Runs once."""
        self._close_reason = reason
        pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(self._closed_error())
        waiters, self._drain_waiters = self._drain_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_exception(self._closed_error())
        if self._on_close is not None:
            try:
                self._on_close(self)
            except Exception:
                _log.exception("on_close callback of %s failed", self)

    def _closed_error(self) -> ConnectionClosedError:
        """A fresh error per waiter (shared instances would pile up tracebacks)."""
        reason = self._close_reason
        error = ConnectionClosedError(f"connection to {self.remote_address} closed: {reason}")
        error.__cause__ = reason
        return error

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        loop = self._loop
        if loop is None:
            raise InvariantViolationError("connection used before it was made")
        return loop


async def close_connections(
    connections: Sequence[Connection], reason: ConnectionClosedError, timeout_ms: int
) -> None:
    """Close every one of ``connections`` for ``reason``: unsent data gets up to ``timeout_ms``
    to be flushed, then the connections still open are aborted. Pending invokes on them fail
    with ``reason``."""
    for connection in connections:
        connection.close(reason)
    if not connections:
        return
    closing = [asyncio.ensure_future(c.wait_closed()) for c in connections]
    _, unfinished = await asyncio.wait(closing, timeout=timeout_ms / 1000)
    for waiter in unfinished:
        waiter.cancel()
    for connection in connections:
        connection.close(reason, abort=True)  # no-op for those already closed
