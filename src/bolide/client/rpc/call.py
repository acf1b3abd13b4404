"""The one way every client RPC is made: send, await, and turn unwanted codes into errors.

Response codes become typed errors through :func:`bolide.protocol.codes.remote_error` (one
table decides which are retriable). Transport failures stay what the remoting layer raises:
:class:`~bolide.base.errors.ConnectionClosedError`,
:class:`~bolide.base.errors.RequestTimeoutError`, :class:`~bolide.base.errors.BackpressureError`.
"""

from __future__ import annotations

from collections.abc import Collection

from bolide.base.errors import RemoteError
from bolide.protocol.codes import RequestCode, ResponseCode, remote_error
from bolide.protocol.command import RemotingCommand
from bolide.remoting import ClientPool

__all__ = ["SUCCESS_ONLY", "call", "call_code", "call_oneway", "describe_code"]

SUCCESS_ONLY: Collection[int] = (ResponseCode.SUCCESS,)


def describe_code(code: int) -> str:
    """``"TOPIC_NOT_EXIST (17)"`` for a known response code, ``"code 999"`` otherwise."""
    try:
        return f"{ResponseCode(code).name} ({code})"
    except ValueError:
        return f"code {code}"


async def call(
    pool: ClientPool,
    address: str,
    request: RemotingCommand,
    timeout_ms: int,
    *,
    accept: Collection[int] = SUCCESS_ONLY,
) -> RemotingCommand:
    """Invoke ``request`` on ``address`` and return the response when its code is in
    ``accept``.

    Raises:
        RemoteError: any other response code; the message names the peer, the request and
            the code, ``code``/``remark``/``retriable`` come from the codes table.
        ConnectionClosedError, RequestTimeoutError, BackpressureError: from the transport.
    """
    response = await pool.invoke(address, request, timeout_ms)
    if response.code not in accept:
        raise _named_error(address, request.code, response)
    return response


async def call_code(
    pool: ClientPool,
    address: str,
    code: RequestCode,
    timeout_ms: int,
    fields: dict[str, str] | None = None,
    body: bytes = b"",
) -> RemotingCommand:
    """:func:`call` of a fresh request ``code`` with the header ``fields`` and ``body``,
    successful answers only; raises as :func:`call`."""
    return await call(pool, address, RemotingCommand.request(code, fields, body), timeout_ms)


async def call_oneway(
    pool: ClientPool, address: str, request: RemotingCommand, timeout_ms: int
) -> None:
    """Send ``request`` oneway (no answer awaited); ``timeout_ms`` bounds connecting and
    buffering. Raises as :func:`call` for transport failures."""
    await pool.invoke_oneway(address, request, timeout_ms)


def _named_error(address: str, request_code: int, response: RemotingCommand) -> RemoteError:
    error = remote_error(response.code, response.remark)
    try:
        request_name = RequestCode(request_code).name
    except ValueError:
        request_name = f"request {request_code}"
    remark = f": {response.remark}" if response.remark else ""
    error.args = (f"{address} answered {request_name} with {describe_code(response.code)}{remark}",)
    return error
