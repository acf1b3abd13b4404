"""Transaction requests: END_TRANSACTION (37, oneway: a producer's decision, sent to the
broker or on the connection a check came in on; or answered, for the exactly-once sink),
Bolide's QUERY_HALF_MESSAGES (each broker's undecided half messages, oldest first, with age
and check count, and its transaction counters — :mod:`bolide.protocol.bodies.transaction`)
and RocketMQ's RESUME_CHECK_HALF_MESSAGE (323).
"""

from __future__ import annotations

from bolide.client.rpc.call import call
from bolide.protocol.bodies.transaction import (
    HalfMessageList,
    QueryHalfMessagesRequestHeader,
    ResumeCheckHalfMessageRequestHeader,
)
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import EndTransactionRequestHeader
from bolide.remoting import ClientPool, Connection

__all__ = [
    "answer_transaction_check",
    "end_transaction",
    "end_transaction_answered",
    "query_half_messages",
    "resume_check_half_message",
]


def _end_transaction_request(
    header: EndTransactionRequestHeader, remark: str | None = None, *, oneway: bool = True
) -> RemotingCommand:
    """The one END_TRANSACTION builder: oneway as producers send it, or answered."""
    request = RemotingCommand.request(
        RequestCode.END_TRANSACTION, header.to_ext_fields(), oneway=oneway
    )
    request.remark = remark
    return request


async def end_transaction(
    pool: ClientPool,
    address: str,
    header: EndTransactionRequestHeader,
    timeout_ms: int,
    *,
    remark: str | None = None,
) -> None:
    """END_TRANSACTION (oneway, as the Java producer sends it) to the broker at ``address``;
    ``remark`` carries why a local transaction failed. ``timeout_ms`` bounds connecting and
    buffering. Raises the transport's errors (no answer comes)."""
    await pool.invoke_oneway(address, _end_transaction_request(header, remark), timeout_ms)


async def end_transaction_answered(
    pool: ClientPool, address: str, header: EndTransactionRequestHeader, timeout_ms: int
) -> str | None:
    """END_TRANSACTION as a request (not oneway): when it returns, the broker has applied the
    decision. Returns None when it did, or the remark of its refusal (SYSTEM_ERROR: e.g. the
    half was decided already). Raises RemoteError for any other answer, and the transport's
    errors."""
    request = _end_transaction_request(header, oneway=False)
    accept = (ResponseCode.SUCCESS, ResponseCode.SYSTEM_ERROR)
    response = await call(pool, address, request, timeout_ms, accept=accept)
    if response.code == ResponseCode.SUCCESS:
        return None
    return response.remark or ""


async def answer_transaction_check(
    connection: Connection,
    header: EndTransactionRequestHeader,
    timeout_ms: int,
    *,
    remark: str | None = None,
) -> None:
    """END_TRANSACTION (oneway) on ``connection``, the one a broker's CHECK_TRANSACTION_STATE
    came in on. Raises the transport's errors."""
    await connection.invoke_oneway(_end_transaction_request(header, remark), timeout_ms)


async def query_half_messages(
    pool: ClientPool, address: str, header: QueryHalfMessagesRequestHeader, timeout_ms: int
) -> HalfMessageList:
    """QUERY_HALF_MESSAGES to the broker at ``address``.

    Raises RemoteError (e.g. REQUEST_CODE_NOT_SUPPORTED from a broker without it),
    ProtocolError for a body it cannot parse, transport errors.
    """
    request = RemotingCommand.request(
        RequestCode.BOLIDE_QUERY_HALF_MESSAGES, header.to_ext_fields()
    )
    response = await call(pool, address, request, timeout_ms)
    return HalfMessageList.from_json(response.body)


async def resume_check_half_message(
    pool: ClientPool, address: str, offset_msg_id: str, timeout_ms: int
) -> None:
    """RESUME_CHECK_HALF_MESSAGE (323): the broker checks the given-up half message again.

    Raises RemoteError (SYSTEM_ERROR naming why, e.g. not a given-up message), transport
    errors.
    """
    header = ResumeCheckHalfMessageRequestHeader(offset_msg_id)
    request = RemotingCommand.request(RequestCode.RESUME_CHECK_HALF_MESSAGE, header.to_ext_fields())
    await call(pool, address, request, timeout_ms)
