"""Regressions found by bench/fuzz_dashboard.py (issue 30)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.types import Message

from bolide.dashboard.auth import Session
from bolide.dashboard.rendering import post_allowed


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
