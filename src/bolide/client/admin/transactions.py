"""Transaction operations under :class:`~bolide.client.admin.AdminClient`: the pending half
messages of every broker (``bolide transaction list``) and resuming a given-up one
(``bolide transaction resume``)."""

from __future__ import annotations

from collections.abc import Iterable

from bolide.base.errors import InvalidMessageError, ProtocolError
from bolide.client.admin.session import AdminSession
from bolide.client.rpc.transactions import query_half_messages, resume_check_half_message
from bolide.protocol.address import format_socket_address
from bolide.protocol.bodies.transaction import HalfMessageList, QueryHalfMessagesRequestHeader
from bolide.protocol.msgid import decode_offset_message_id

__all__ = ["pending_transactions", "resume_transaction"]


async def pending_transactions(
    admin: AdminSession,
    *,
    group: str | None,
    topic: str | None,
    max_count: int | None,
    given_up: bool,
    cluster: str | None,
    brokers: Iterable[str],
) -> dict[str, HalfMessageList]:
    """See :meth:`AdminClient.pending_transactions`."""
    header = QueryHalfMessagesRequestHeader(group, topic, max_count, given_up)
    return await admin._on_each(
        await admin.targets(cluster, brokers),
        lambda name, address: query_half_messages(admin.pool, address, header, admin.timeout_ms),
        "listing pending transactions",
    )


async def resume_transaction(admin: AdminSession, offset_msg_id: str) -> str:
    """See :meth:`AdminClient.resume_transaction`."""
    try:
        store_host, _ = decode_offset_message_id(offset_msg_id)
    except ProtocolError as error:
        raise InvalidMessageError(f"{offset_msg_id!r} is not an offset message id") from error
    address = format_socket_address(store_host)
    await resume_check_half_message(admin.pool, address, offset_msg_id, admin.timeout_ms)
    return address
