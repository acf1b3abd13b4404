"""5.x POP consumption over remoting (docs/protocol.md): POP_MESSAGE (200050),
ACK_MESSAGE (200051) and CHANGE_MESSAGE_INVISIBLETIME (200053), as a broker's POP consumers
(and the 5.x proxy) send them.

A popped message carries its receipt handle in the property POP_CK (the broker sets it);
ACK_MESSAGE names it with the message's queue and queue offset.
"""

from __future__ import annotations

from bolide.client.rpc.call import call
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers.pop import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    PopMessageRequestHeader,
)
from bolide.protocol.message import MessageExt
from bolide.protocol.record import decode_records
from bolide.remoting import ClientPool

__all__ = ["ack_message", "change_invisible_time", "pop_message", "pop_message_raw"]

_POP_ACCEPTED = (ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND)


async def pop_message_raw(
    pool: ClientPool, address: str, header: PopMessageRequestHeader, timeout_ms: int
) -> bytes | None:
    """The popped records as the broker sent them (maybe empty), None when it answered
    PULL_NOT_FOUND (nothing within the header's poll time): for readers that decode records
    themselves (the 5.x proxy). Raises as :func:`pop_message`, less the record errors."""
    request = RemotingCommand.request(RequestCode.POP_MESSAGE, header.to_ext_fields())
    response = await call(pool, address, request, timeout_ms, accept=_POP_ACCEPTED)
    if response.code == ResponseCode.PULL_NOT_FOUND:
        return None
    return response.body


async def pop_message(
    pool: ClientPool, address: str, header: PopMessageRequestHeader, timeout_ms: int
) -> list[MessageExt]:
    """Messages popped by ``header`` from the broker at ``address`` ([] when none within the
    header's poll time); each holds its receipt handle in POP_CK.

    ``timeout_ms`` should exceed ``header.poll_time_ms`` (the broker holds a long poll).
    Raises RemoteError, ProtocolError (bad records), transport errors.
    """
    request = RemotingCommand.request(RequestCode.POP_MESSAGE, header.to_ext_fields())
    response = await call(pool, address, request, timeout_ms, accept=_POP_ACCEPTED)
    if response.code == ResponseCode.PULL_NOT_FOUND or not response.body:
        return []
    return decode_records(response.body)


async def ack_message(
    pool: ClientPool, address: str, header: AckMessageRequestHeader, timeout_ms: int
) -> None:
    """Acknowledge one popped message. Raises RemoteError (e.g. NO_MESSAGE for a stale
    handle), transport errors."""
    request = RemotingCommand.request(RequestCode.ACK_MESSAGE, header.to_ext_fields())
    await call(pool, address, request, timeout_ms)


async def change_invisible_time(
    pool: ClientPool, address: str, header: ChangeInvisibleTimeRequestHeader, timeout_ms: int
) -> ChangeInvisibleTimeResponseHeader:
    """Hide one popped message for ``header.invisible_time_ms`` more; the answer holds the
    new pop time and invisible time (the new receipt handle's). Raises RemoteError (NO_MESSAGE
    for a stale handle), transport errors."""
    request = RemotingCommand.request(
        RequestCode.CHANGE_MESSAGE_INVISIBLETIME, header.to_ext_fields()
    )
    response = await call(pool, address, request, timeout_ms)
    return ChangeInvisibleTimeResponseHeader.from_ext_fields(response.ext_fields)
