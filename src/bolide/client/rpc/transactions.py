"""Transaction admin requests: Bolide's QUERY_HALF_MESSAGES (each broker's undecided half
messages, oldest first, with age and check count, and its transaction counters —
:mod:`bolide.protocol.bodies.transaction`) and RocketMQ's RESUME_CHECK_HALF_MESSAGE (323).
"""

from __future__ import annotations

from bolide.client.rpc.call import call
from bolide.protocol.bodies.transaction import (
    HalfMessageList,
    QueryHalfMessagesRequestHeader,
    ResumeCheckHalfMessageRequestHeader,
)
from bolide.protocol.codes import RequestCode
from bolide.protocol.command import RemotingCommand
from bolide.remoting import ClientPool

__all__ = ["query_half_messages", "resume_check_half_message"]


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
