"""Message lookup (docs/protocol.md §2.7): VIEW_MESSAGE_BY_ID (33) and QUERY_MESSAGE (12)."""

from __future__ import annotations

from bolide.base.errors import ProtocolError
from bolide.client.rpc.call import call
from bolide.protocol.address import format_socket_address
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import QueryMessageRequestHeader, ViewMessageRequestHeader
from bolide.protocol.message import MessageExt
from bolide.protocol.msgid import decode_offset_message_id
from bolide.protocol.record import decode_pulled_records
from bolide.remoting import ClientPool

__all__ = ["query_message", "view_message", "view_message_by_id"]


async def view_message(
    pool: ClientPool, address: str, commit_log_offset: int, timeout_ms: int
) -> MessageExt:
    """The message stored at ``commit_log_offset`` on the broker at ``address``.

    Raises RemoteError (SYSTEM_ERROR when nothing is there), ProtocolError, transport errors.
    """
    header = ViewMessageRequestHeader(commit_log_offset)
    request = RemotingCommand.request(RequestCode.VIEW_MESSAGE_BY_ID, header.to_ext_fields())
    response = await call(pool, address, request, timeout_ms)
    messages = decode_pulled_records(response.body)
    if not messages:
        raise ProtocolError(f"VIEW_MESSAGE_BY_ID answer from {address} has no record")
    return messages[0]


async def view_message_by_id(pool: ClientPool, offset_msg_id: str, timeout_ms: int) -> MessageExt:
    """The message named by an offset message id, fetched from the store host it names.

    Raises ProtocolError (not an offset message id), then as :func:`view_message`.
    """
    store_host, commit_log_offset = decode_offset_message_id(offset_msg_id)
    address = format_socket_address(store_host)
    return await view_message(pool, address, commit_log_offset, timeout_ms)


async def query_message(
    pool: ClientPool,
    address: str,
    header: QueryMessageRequestHeader,
    timeout_ms: int,
) -> list[MessageExt]:
    """Messages of ``header.topic`` indexed under ``header.key`` (a KEYS entry, or the
    UNIQ_KEY when ``header.unique_key_query``) stored in the time window; [] when none.

    The broker's index matches hashes, so the answer is re-filtered here by topic and key.
    Raises RemoteError, ProtocolError, transport errors.
    """
    request = RemotingCommand.request(RequestCode.QUERY_MESSAGE, header.to_ext_fields())
    accept = (ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND)
    response = await call(pool, address, request, timeout_ms, accept=accept)
    if response.code == ResponseCode.QUERY_NOT_FOUND or not response.body:
        return []
    try:
        messages = decode_pulled_records(response.body)
    except ProtocolError as error:
        raise ProtocolError(f"QUERY_MESSAGE answer from {address}: {error}") from error
    if header.unique_key_query:
        return [m for m in messages if m.topic == header.topic and m.unique_key == header.key]
    return [m for m in messages if m.topic == header.topic and header.key in m.key_list]
