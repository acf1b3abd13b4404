"""Offset requests (docs/protocol.md §2.6): QUERY/UPDATE_CONSUMER_OFFSET (14, 15), GET_MAX_OFFSET
(30), GET_MIN_OFFSET (31), SEARCH_OFFSET_BY_TIMESTAMP (29), GET_EARLIEST_MSG_STORETIME (32).

Offsets are logical queue offsets; a max offset is exclusive (the next to be written).
"""

from __future__ import annotations

from bolide.client.rpc.call import call, call_oneway
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import (
    GetEarliestMsgStoretimeResponseHeader,
    OffsetResponseHeader,
    QueryConsumerOffsetRequestHeader,
    QueueRequestHeader,
    SearchOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from bolide.remoting import ClientPool

__all__ = [
    "get_earliest_store_time",
    "get_max_offset",
    "get_min_offset",
    "query_consumer_offset",
    "search_offset_by_timestamp",
    "update_consumer_offset",
]


async def query_consumer_offset(
    pool: ClientPool, address: str, group: str, topic: str, queue_id: int, timeout_ms: int
) -> int | None:
    """The offset ``group`` committed on the queue, or None when the broker has none
    (QUERY_NOT_FOUND). Raises RemoteError for other codes, transport errors."""
    header = QueryConsumerOffsetRequestHeader(group, topic, queue_id)
    request = RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, header.to_ext_fields())
    accept = (ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND)
    response = await call(pool, address, request, timeout_ms, accept=accept)
    if response.code == ResponseCode.QUERY_NOT_FOUND:
        return None
    return OffsetResponseHeader.from_ext_fields(response.ext_fields).offset


async def update_consumer_offset(
    pool: ClientPool,
    address: str,
    group: str,
    topic: str,
    queue_id: int,
    offset: int,
    timeout_ms: int,
    *,
    oneway: bool = False,
) -> None:
    """Store ``offset`` as ``group``'s committed offset of the queue (oneway for the periodic
    persistence, as Java does). Raises RemoteError (not oneway), transport errors."""
    header = UpdateConsumerOffsetRequestHeader(group, topic, queue_id, offset)
    fields = header.to_ext_fields()
    if oneway:
        request = RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, fields, oneway=True)
        await call_oneway(pool, address, request, timeout_ms)
        return
    await call(
        pool,
        address,
        RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, fields),
        timeout_ms,
    )


async def _queue_offset(
    pool: ClientPool, address: str, code: RequestCode, topic: str, queue_id: int, timeout_ms: int
) -> int:
    request = RemotingCommand.request(code, QueueRequestHeader(topic, queue_id).to_ext_fields())
    response = await call(pool, address, request, timeout_ms)
    return OffsetResponseHeader.from_ext_fields(response.ext_fields).offset


async def get_max_offset(
    pool: ClientPool, address: str, topic: str, queue_id: int, timeout_ms: int
) -> int:
    """The queue's max offset (exclusive; 0 for an empty or unknown queue)."""
    return await _queue_offset(
        pool, address, RequestCode.GET_MAX_OFFSET, topic, queue_id, timeout_ms
    )


async def get_min_offset(
    pool: ClientPool, address: str, topic: str, queue_id: int, timeout_ms: int
) -> int:
    """The smallest offset still stored in the queue."""
    return await _queue_offset(
        pool, address, RequestCode.GET_MIN_OFFSET, topic, queue_id, timeout_ms
    )


async def search_offset_by_timestamp(
    pool: ClientPool, address: str, topic: str, queue_id: int, timestamp_ms: int, timeout_ms: int
) -> int:
    """The offset of the message stored nearest ``timestamp_ms`` (ms since the epoch)."""
    header = SearchOffsetRequestHeader(topic, queue_id, timestamp_ms)
    request = RemotingCommand.request(
        RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, header.to_ext_fields()
    )
    response = await call(pool, address, request, timeout_ms)
    return OffsetResponseHeader.from_ext_fields(response.ext_fields).offset


async def get_earliest_store_time(
    pool: ClientPool, address: str, topic: str, queue_id: int, timeout_ms: int
) -> int:
    """Store time (ms) of the oldest message still in the queue; -1 for an unknown queue."""
    header = QueueRequestHeader(topic, queue_id)
    request = RemotingCommand.request(
        RequestCode.GET_EARLIEST_MSG_STORETIME, header.to_ext_fields()
    )
    response = await call(pool, address, request, timeout_ms)
    return GetEarliestMsgStoretimeResponseHeader.from_ext_fields(response.ext_fields).timestamp_ms
