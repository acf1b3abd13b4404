"""Regressions found by bench/fuzz_dashboard.py (issue 30)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from starlette.requests import Request
from starlette.types import Message

from bolide.dashboard.app import DashboardSettings
from bolide.dashboard.auth import Session
from bolide.dashboard.rendering import post_allowed
from bolide.dashboard.server import DashboardServer

WAIT_S = 60.0
"""Bound on the page's answer: a hung connection fails the test instead of blocking it."""


async def test_a_form_whose_client_left_is_refused_not_an_asgi_exception() -> None:
    """A POST whose client disconnected before its body arrived raised ClientDisconnect out
    of the CSRF check: uvicorn logged "Exception in ASGI application" with a traceback."""
    scope = {
        "type": "http", "method": "POST", "path": "/topics/create", "query_string": b"",
        "headers": [(b"host", b"127.0.0.1:8080"), (b"content-length", b"100"),
                    (b"content-type", b"application/x-www-form-urlencoded")],
    }  # fmt: skip

    async def receive() -> Message:
        return {"type": "http.disconnect"}

    session = Session(token="t", csrf="c", expires_s=0.0)

    assert await post_allowed(Request(scope, receive), session) is False


@contextlib.asynccontextmanager
async def _mute_namesrv() -> AsyncIterator[tuple[str, asyncio.Event]]:
    """A name server that accepts and never answers: its address, and an event set when a
    request reached it."""
    muted: list[asyncio.StreamWriter] = []
    asked = asyncio.Event()

    async def mute(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        muted.append(writer)
        if await reader.read(1):
            asked.set()

    namesrv = await asyncio.start_server(mute, "127.0.0.1", 0)
    port = namesrv.sockets[0].getsockname()[1]
    try:
        yield f"127.0.0.1:{port}", asked
    finally:
        for connection in muted:
            connection.close()
        namesrv.close()
        await namesrv.wait_closed()


async def _answer(settings: DashboardSettings, then: asyncio.Event | None = None) -> bytes:
    """What a dashboard with ``settings`` answers ``GET /`` with ``Connection: close``, all
    of it until it closes; with ``then``, a second request is sent once ``then`` is set."""
    server = DashboardServer(settings, "127.0.0.1", 0)
    await server.start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        await writer.drain()
        if then is not None:
            await asyncio.wait_for(then.wait(), WAIT_S)
            writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            await writer.drain()
        answer = await asyncio.wait_for(reader.read(), WAIT_S)
        writer.close()
        await writer.wait_closed()
    finally:
        await server.stop()
    return answer


async def test_bytes_after_connection_close_do_not_replace_the_answer_in_progress() -> None:
    """uvicorn/h11: bytes that came after a ``Connection: close`` request, while its page was
    still being built, were answered 400 in place of the page (or broke the page half-way,
    "Too much data for declared Content-Length"). Now the page is answered, then closed.

    The name server never answers, so the page is in progress (until its deadline) when the
    extra bytes land: they are sent once the page asked the name server."""
    async with _mute_namesrv() as (namesrv, asked):
        answer = await _answer(DashboardSettings(namesrv), then=asked)

    assert answer.startswith(b"HTTP/1.1 504"), answer[:80]
    assert answer.count(b"HTTP/1.1 ") == 1


async def test_a_request_timeout_within_the_page_deadline_is_a_504_too() -> None:
    """The admin client's request timeout is as long as the page's deadline, and either could
    fire first: the page was a 502 when the request's timer won. With a page deadline far
    longer, the request's timeout always comes first, and the answer is still a 504."""
    async with _mute_namesrv() as (namesrv, _):
        answer = await _answer(DashboardSettings(namesrv, page_deadline_ms=600_000))

    assert answer.startswith(b"HTTP/1.1 504"), answer[:80]
    assert b"no response from" in answer
