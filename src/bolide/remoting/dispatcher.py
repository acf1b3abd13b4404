"""Request code -> handler, with a concurrency bound per family of handlers.

What a peer gets back (the rules of RocketMQ's remoting server, docs/protocol.md §1.4):

* no handler for the code -> REQUEST_CODE_NOT_SUPPORTED, remark ``" request type <code> not
  supported"`` (leading space included, as Java writes it);
* the handler's family already runs its maximum of requests -> SYSTEM_BUSY at once;
* the handler raises :class:`RequestError` -> that error's code and remark;
* the handler raises anything else -> SYSTEM_ERROR with ``str(error)`` as remark;
* the handler returns a command -> sent with the request's opaque and serialize type;
* the handler returns None, or the request is oneway (flag bit 1) -> nothing is sent.

A handler may also have a *fast* form (:meth:`Dispatcher.register_fast`): a plain function
called first, inside ``dispatch``, after the request check and the family bound, that either
answers the request at once or returns None to hand it to the ordinary handler. The broker's
single-message send uses it for the common case (no coroutine, no task, no future).

Requests never wait for one another: a long-polling pull may park for ~30 s while the same
connection keeps sending. Creating one task per request is the obvious way, but it is the hot
path, so the first step of each handler runs synchronously inside ``dispatch`` and a task is
made only when the handler actually suspends (see :class:`_Resumed`). Most handlers (offsets,
heartbeats, routes, async-flush sends) finish in that first step and never cost a task.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import sys
from collections.abc import Callable, Collection, Coroutine, Generator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from bolide.base import limits
from bolide.base.errors import BolideError, invariant
from bolide.protocol.codes import ResponseCode
from bolide.protocol.command import FLAG_ONEWAY, FLAG_RESPONSE, RemotingCommand, decode_command
from bolide.protocol.frame import RawFrame
from bolide.protocol.send_scan import SEND_SCAN_CODES, ScannedSend, scan_send_request

if TYPE_CHECKING:
    from bolide.remoting.connection import Connection

_log = logging.getLogger("bolide.remoting.dispatcher")

Handler = Callable[["Connection", RemotingCommand], Coroutine[Any, Any, RemotingCommand | None]]

RequestCheck = Callable[["Connection", RemotingCommand], RemotingCommand | None]
"""``check(connection, request) -> refusal | None``, run before any handler (the ACL): a
returned command is sent as the answer and the request goes no further. Synchronous: it must
be quick (it runs on the hot path of every request)."""
"""``async def handler(connection, request) -> response | None`` (None: send no answer).

On Python 3.11 a handler's code up to its first suspension runs outside any task, so
``asyncio.current_task()`` is None there and ``asyncio.timeout()`` / ``TaskGroup`` cannot be
entered before the first ``await`` that suspends; ``asyncio.wait_for`` works. From 3.12 on the
dispatcher uses real eager tasks and the restriction is gone.
"""


FastHandler = Callable[["Connection", RemotingCommand], RemotingCommand | bytes | None]
"""``fast(connection, request) -> response | frame | None``: the answer, computed
synchronously — a command, or the whole answer frame already encoded (its opaque, flag and
serialize type those the dispatcher would give it: the request's opaque and serialize type,
the RESPONSE flag) — or None when the request needs the ordinary handler (which then runs as
if the fast form had not been asked; so a fast handler returning None must have changed
nothing)."""


ANSWER_LATER: Final = b""
"""What a fast form returns when it took the request and will answer it itself, later, through
:meth:`Dispatcher.answer` (a SYNC-flush batch waiting for its group commit)."""

ScannedHandler = Callable[["Connection", ScannedSend, RawFrame], RemotingCommand | bytes | None]
"""``scanned(connection, values, frame) -> response | frame | None``: a fast form fed the
values :func:`~bolide.protocol.send_scan.scan_send_request` read from the frame's header
instead of a command (no RemotingCommand built); answers as a :data:`FastHandler` does (None:
nothing changed, the ordinary path takes the frame)."""


_SCANNED_HEADER_STARTS = tuple(f'{{"code":{code},'.encode() for code in sorted(SEND_SCAN_CODES))
"""How the headers of the codes the send scan reads begin as Java, C++ and Python peers write
them (``code`` first): other frames are not scanned (they take the ordinary path at once)."""


class RequestError(BolideError):
    """Raised by a handler to answer with a specific response ``code`` and ``remark``."""

    def __init__(self, code: int, remark: str) -> None:
        super().__init__(f"response code {code}: {remark}")
        self.code = code
        self.remark = remark


@dataclass(slots=True)
class _Family:
    name: str
    max_requests: int
    in_flight: int = 0


@dataclass(frozen=True, slots=True)
class _Route:
    handler: Handler
    family: _Family
    fast: FastHandler | None = None
    scanned: ScannedHandler | None = None


class Dispatcher:
    """Routes requests to handlers registered by code; see the module docstring for answers.

    ``family_limits`` sets the concurrent requests of a family (default
    :data:`~bolide.base.limits.HANDLER_CONCURRENCY_MAX_REQUESTS` for families not named).
    ``eager=False`` starts every handler in a fresh task (for measurements and debugging).
    """

    def __init__(
        self,
        *,
        family_limits: Mapping[str, int] | None = None,
        default_family_limit: int = limits.HANDLER_CONCURRENCY_MAX_REQUESTS,
        eager: bool = True,
    ) -> None:
        invariant(default_family_limit > 0, "a family runs at least one request")
        self._family_limits = dict(family_limits or {})
        invariant(all(value > 0 for value in self._family_limits.values()), "positive limits")
        self._default_family_limit = default_family_limit
        self._eager = eager
        self._families: dict[str, _Family] = {}
        self._routes: dict[int, _Route] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self.request_check: RequestCheck | None = None
        """Runs before every request when set (see :data:`RequestCheck`)."""
        self.fast_handlers_enabled = True
        """False: fast forms are never asked (every request takes its ordinary handler)."""
        self.scanned_handlers_enabled = True
        """False: scanned forms are never asked (fast forms then get a command)."""
        self._scan_ready: Callable[[], bool] | None = None
        self.fast_answer_count = 0
        """Requests answered by a fast form (see :meth:`register_fast`)."""

    def register(self, code: int, handler: Handler, *, family: str) -> None:
        """Route requests with ``code`` to ``handler``, counted against ``family``'s bound.

        Registering a code twice is a programmer error (InvariantViolationError).
        """
        invariant(code not in self._routes, f"request code {code} registered twice")
        bucket = self._families.get(family)
        if bucket is None:
            limit = self._family_limits.get(family, self._default_family_limit)
            bucket = self._families[family] = _Family(family, limit)
        self._routes[code] = _Route(handler, bucket)

    def register_fast(self, code: int, fast: FastHandler) -> None:
        """Give the handler registered for ``code`` a fast form (see :data:`FastHandler`); it
        runs within the same family bound and answers as the handler would, errors included.
        """
        route = self._routes.get(code)
        invariant(route is not None, f"request code {code} has no handler to speed up")
        assert route is not None
        self._routes[code] = _Route(route.handler, route.family, fast, route.scanned)

    def register_scanned(
        self, code: int, scanned: ScannedHandler, *, ready: Callable[[], bool]
    ) -> None:
        """Give the handler registered for ``code`` (a code the send scan reads,
        :data:`~bolide.protocol.send_scan.SEND_SCAN_CODES`) a form fed scanned header values
        (see :data:`ScannedHandler` and :meth:`dispatch_scanned`). ``ready()`` says, before a
        header is scanned, whether the form could answer at all now (the send forms cannot
        under SYNC flush): every scanned form shares that one gate."""
        route = self._routes.get(code)
        invariant(route is not None, f"request code {code} has no handler to speed up")
        invariant(code in SEND_SCAN_CODES, f"the send scan does not read request code {code}")
        invariant(self._scan_ready in (None, ready), "scanned forms share one readiness gate")
        assert route is not None
        self._routes[code] = _Route(route.handler, route.family, route.fast, scanned)
        self._scan_ready = ready

    def without(self, codes: Collection[int]) -> Dispatcher:
        """A dispatcher for a second listener: the handlers registered here now, except
        ``codes`` (answered REQUEST_CODE_NOT_SUPPORTED), with the same family bounds (the
        in-flight counts are shared) and the same :attr:`request_check` (set it before making a
        view). The broker's VIP channel is such a view."""
        view = Dispatcher(default_family_limit=self._default_family_limit, eager=self._eager)
        view.request_check = self.request_check
        view.fast_handlers_enabled = self.fast_handlers_enabled
        view.scanned_handlers_enabled = self.scanned_handlers_enabled
        view._scan_ready = self._scan_ready
        view._family_limits = self._family_limits
        view._families = self._families
        excluded = frozenset(codes)
        view._routes = {code: route for code, route in self._routes.items() if code not in excluded}
        return view

    def is_registered(self, code: int) -> bool:
        """Whether a handler is registered for ``code``."""
        return code in self._routes

    def in_flight(self, family: str) -> int:
        """Requests of ``family`` being handled right now (0 for an unknown family)."""
        bucket = self._families.get(family)
        return 0 if bucket is None else bucket.in_flight

    @property
    def suspended_handlers(self) -> int:
        """Handlers that suspended and now run as tasks."""
        return len(self._tasks)

    def dispatch(self, connection: Connection, request: RemotingCommand) -> None:
        """Start handling ``request`` from ``connection``; never raises, never blocks."""
        check = self.request_check
        if check is not None:
            refusal = check(connection, request)
            if refusal is not None:
                self._answer(connection, request, refusal)
                return
        route = self._routes.get(request.code)
        if route is None:
            self._answer(
                connection,
                request,
                request.make_response(
                    ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                    f" request type {request.code} not supported",
                ),
            )
            return
        family = route.family
        if family.in_flight >= family.max_requests:
            self._answer(
                connection,
                request,
                request.make_response(
                    ResponseCode.SYSTEM_BUSY,
                    f"[OVERLOAD] {family.name} handlers busy with {family.in_flight} requests,"
                    " try again later",
                ),
            )
            return
        fast = route.fast
        if fast is not None and self.fast_handlers_enabled:
            try:
                response = fast(connection, request)
            except Exception as error:
                self._answer(connection, request, _error_response(request, error))
                return
            if response is not None:
                self.fast_answer_count += 1
                self.answer(connection, request, response)
                return
        family.in_flight += 1
        try:
            coroutine = route.handler(connection, request)
        except Exception as error:  # a plain function posing as a handler raised at once
            family.in_flight -= 1
            self._answer(connection, request, _error_response(request, error))
            return
        if self._eager:
            self._start_eagerly(coroutine, connection, request, family)
        else:
            self._track(self._complete(coroutine, connection, request, family))

    def dispatch_scanned(self, connection: Connection, frame: RawFrame) -> bool:
        """Answer a JSON request frame through its code's scanned form when the send scan
        reads its header (:func:`~bolide.protocol.send_scan.scan_send_request`); False, having
        done nothing, when the request needs a command: no scanned form or not ready, fast
        forms off, a :attr:`request_check` (the ACL reads the whole header), a header the scan
        does not read, the family at its bound, or the form declined. Called by the connection
        before it decodes the frame."""
        ready = self._scan_ready
        if (
            ready is None
            or self.request_check is not None
            or not self.fast_handlers_enabled
            or not self.scanned_handlers_enabled
            or not frame.header.startswith(_SCANNED_HEADER_STARTS)
            or not ready()
        ):
            return False
        values = scan_send_request(frame.header)
        if values is None:
            return False
        connection.language = values[2]
        connection.version = values[3]
        route = self._routes.get(values[0])
        if route is None or route.scanned is None:
            return False
        family = route.family
        if family.in_flight >= family.max_requests:
            return False
        try:
            response = route.scanned(connection, values, frame)
        except Exception as error:
            request = decode_command(frame)
            self._answer(connection, request, _error_response(request, error))
            return True
        if response is None:
            return False
        self.fast_answer_count += 1
        if isinstance(response, bytes):
            if not connection.is_closed:
                connection.send_frame(response)
        else:
            self._answer(connection, decode_command(frame), response)
        return True

    async def cancel_handlers(self, timeout_ms: int = limits.REMOTING_STOP_GRACE_MS) -> None:
        """Give suspended handlers ``timeout_ms`` to finish, then cancel the rest (no answers).

        Used when a server stops; the dispatcher stays usable afterwards.
        """
        tasks = set(self._tasks)
        if not tasks:
            return
        _, still_running = await asyncio.wait(tasks, timeout=timeout_ms / 1000)
        for task in still_running:
            task.cancel()
        if still_running:
            await asyncio.wait(still_running)

    # ---- internals ------------------------------------------------------------------------

    def _start_eagerly(
        self,
        coroutine: Coroutine[Any, Any, RemotingCommand | None],
        connection: Connection,
        request: RemotingCommand,
        family: _Family,
    ) -> None:
        if sys.version_info >= (3, 12):
            # The interpreter's own eager start: same saving, with a current task from the start.
            self._track(self._complete(coroutine, connection, request, family), eager=True)
            return
        # The first step runs in its own copy of the context, which the task then keeps, so a
        # handler setting a context variable affects only itself, as it would in a task.
        context = contextvars.copy_context()
        try:
            first_yield = context.run(coroutine.send, None)
        except StopIteration as done:
            family.in_flight -= 1
            self._answer(connection, request, done.value)
            return
        except asyncio.CancelledError:  # it awaited something cancelled: as a task would, stop
            family.in_flight -= 1
            _log.debug("handler for request code %d was cancelled", request.code)
            return
        except Exception as error:
            family.in_flight -= 1
            self._answer(connection, request, _error_response(request, error))
            return
        except BaseException:
            family.in_flight -= 1
            raise
        if isinstance(first_yield, asyncio.Future):
            # No task has taken the future yet; until one does (``_Resumed`` marks it again),
            # clear the mark so that another handler's first step may await the same future
            # (SYNC flush: every put waits on one group-commit future).
            first_yield._asyncio_future_blocking = False
        resumed = _Resumed(coroutine, first_yield)
        self._track(self._complete(resumed, connection, request, family), context=context)

    def _track(
        self,
        coroutine: Coroutine[Any, Any, None],
        *,
        eager: bool = False,
        context: contextvars.Context | None = None,
    ) -> None:
        loop = asyncio.get_running_loop()
        if eager and sys.version_info >= (3, 12):
            task: asyncio.Task[None] = asyncio.Task(coroutine, loop=loop, eager_start=True)
            if task.done():
                return
        else:
            task = loop.create_task(coroutine, context=context)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _complete(
        self,
        awaitable: Coroutine[Any, Any, RemotingCommand | None] | _Resumed,
        connection: Connection,
        request: RemotingCommand,
        family: _Family,
    ) -> None:
        try:
            response = await awaitable
        except Exception as error:
            response = _error_response(request, error)
        finally:
            family.in_flight -= 1
        self._answer(connection, request, response)

    def answer(
        self,
        connection: Connection,
        request: RemotingCommand,
        response: RemotingCommand | bytes | None,
    ) -> None:
        """Send the answer of a request a fast form took (at once, or later after
        :data:`ANSWER_LATER`), as the dispatcher answers any other; a fast form's answer may be
        a whole precompiled frame (bytes), sent as it is."""
        if isinstance(response, bytes):
            if response and not request.flag & FLAG_ONEWAY and not connection.is_closed:
                connection.send_frame(response)
            return
        self._answer(connection, request, response)

    def _answer(
        self, connection: Connection, request: RemotingCommand, response: RemotingCommand | None
    ) -> None:
        if response is None or request.flag & FLAG_ONEWAY:
            return
        if connection.is_closed:
            _log.debug("no answer to %s: connection closed", connection.remote_address)
            return
        response.opaque = request.opaque
        response.flag |= FLAG_RESPONSE
        response.serialize_type = request.serialize_type
        try:
            connection.send(response)
        except BolideError as error:  # an unencodable response is a handler bug
            _log.error("cannot send the answer to request code %d: %s", request.code, error)
            if not connection.is_closed:
                connection.send(request.make_response(ResponseCode.SYSTEM_ERROR, str(error)))


class _Resumed:
    """Continues, inside a task, a coroutine already driven to its first suspension.

    ``dispatch`` ran the handler's first step by hand and got back what it yielded (a future
    it waits on, or None for a bare yield). Yielding that same object to the task makes the
    task wait on it exactly as if it had run the step itself; afterwards the task drives the
    coroutine directly through ``yield from``.
    """

    __slots__ = ("_coroutine", "_first_yield")

    def __init__(
        self, coroutine: Coroutine[Any, Any, RemotingCommand | None], first_yield: object
    ) -> None:
        self._coroutine = coroutine
        self._first_yield = first_yield

    def __await__(self) -> Generator[Any, None, RemotingCommand | None]:
        coroutine = self._coroutine
        pending = self._first_yield
        while True:
            if isinstance(pending, asyncio.Future):
                # Restore the "yielded by await" mark the dispatcher cleared (see
                # ``_start_eagerly``), as the task expects of a future it is handed.
                pending._asyncio_future_blocking = True
            try:
                yield pending
            except BaseException as error:  # cancellation: deliver it where the handler waits
                try:
                    pending = coroutine.throw(error)
                except StopIteration as done:
                    result: RemotingCommand | None = done.value
                    return result
                continue
            return (yield from coroutine.__await__())


def _error_response(request: RemotingCommand, error: Exception) -> RemotingCommand:
    if isinstance(error, RequestError):
        return request.make_response(error.code, error.remark)
    if isinstance(error, BolideError):
        _log.info("request code %d failed: %s", request.code, error)
    else:
        _log.error("handler for request code %d crashed", request.code, exc_info=error)
    return request.make_response(ResponseCode.SYSTEM_ERROR, str(error) or type(error).__name__)
