"""The admin requests of a broker's store maintenance and two progress queries (mqadmin's
cleanExpiredCQ, cleanUnusedTopic, deleteExpiredCommitLog, the offset-correction query and
the consumers' own status): CLEAN_EXPIRED_CONSUMEQUEUE (306), CLEAN_UNUSED_TOPIC (316),
DELETE_EXPIRED_COMMITLOG (329), QUERY_CORRECTION_OFFSET (308) and
INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223). Each raises RemoteError for an unwanted
response code, ProtocolError for a body it cannot parse, and the transport's errors."""

from __future__ import annotations

from bolide.client.rpc.call import call
from bolide.protocol.bodies.consumer_status import GetConsumerStatusBody, QueryCorrectionOffsetBody
from bolide.protocol.bodies.queue import MessageQueue
from bolide.protocol.codes import RequestCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import GetConsumerStatusRequestHeader, QueryCorrectionOffsetHeader
from bolide.remoting import ClientPool

__all__ = ["MAINTENANCE_CODES", "consumer_status", "correction_offsets", "run_maintenance"]

MAINTENANCE_CODES = frozenset(
    {
        RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE,
        RequestCode.CLEAN_UNUSED_TOPIC,
        RequestCode.DELETE_EXPIRED_COMMITLOG,
    }
)
"""The header-less maintenance requests :func:`run_maintenance` sends."""


async def run_maintenance(
    pool: ClientPool, address: str, code: RequestCode, timeout_ms: int
) -> str:
    """One of :data:`MAINTENANCE_CODES` to the broker at ``address``; returns its remark
    (what it did; empty from a Java broker). Raises ValueError for another code (a bug)."""
    if code not in MAINTENANCE_CODES:
        raise ValueError(f"request code {code} is no store maintenance request")
    response = await call(pool, address, RemotingCommand.request(code), timeout_ms)
    return response.remark or ""


async def correction_offsets(
    pool: ClientPool, address: str, header: QueryCorrectionOffsetHeader, timeout_ms: int
) -> dict[int, int]:
    """QUERY_CORRECTION_OFFSET: queue id -> correction offset on the broker at ``address``."""
    request = RemotingCommand.request(RequestCode.QUERY_CORRECTION_OFFSET, header.to_ext_fields())
    response = await call(pool, address, request, timeout_ms)
    return QueryCorrectionOffsetBody.from_json(response.body).correction_offsets


async def consumer_status(
    pool: ClientPool, address: str, header: GetConsumerStatusRequestHeader, timeout_ms: int
) -> dict[str, dict[MessageQueue, int]]:
    """INVOKE_BROKER_TO_GET_CONSUMER_STATUS: client id -> the offsets of the topic it
    reports, over the group's clients connected to the broker at ``address``. Raises
    RemoteError SYSTEM_ERROR when the group has no client online there."""
    code = RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS
    request = RemotingCommand.request(code, header.to_ext_fields())
    response = await call(pool, address, request, timeout_ms)
    return GetConsumerStatusBody.from_json(response.body).consumer_table
