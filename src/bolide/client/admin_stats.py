"""Admin calls for broker statistics and configuration, and consuming one message directly:
VIEW_BROKER_STATS_DATA (315), GET/UPDATE_BROKER_CONFIG (26/25), QUERY_CONSUME_TIME_SPAN (303),
QUERY_CONSUME_QUEUE (321), CONSUME_MESSAGE_DIRECTLY (309). Functions over an
:class:`~bolide.client.admin.AdminClient` (its pool and timeout); each raises RemoteError
with the broker's code and remark when the broker refuses.
"""

from __future__ import annotations

import orjson

from bolide.base import limits
from bolide.base.errors import BolideError, NotFoundError, RemoteError
from bolide.client.admin import AdminClient
from bolide.client.rpc import call
from bolide.protocol.bodies.stats import (
    LIST_FORM_FIELD,
    BrokerStatsData,
    ConsumeMessageDirectlyResult,
    ConsumeStatsList,
    QueryConsumeQueueResponseBody,
    QueryConsumeTimeSpanBody,
)
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import ConsumeMessageDirectlyResultRequestHeader
from bolide.protocol.headers.stats import (
    QueryConsumeQueueRequestHeader,
    QueryConsumeTimeSpanRequestHeader,
    ViewBrokerStatsDataRequestHeader,
)

__all__ = [
    "broker_config",
    "broker_consume_stats",
    "consume_message_directly",
    "consume_queue",
    "consume_time_span",
    "delay_offsets",
    "update_broker_config",
    "view_broker_stats",
]


async def _invoke(
    admin: AdminClient,
    address: str,
    code: RequestCode,
    fields: dict[str, str] | None = None,
    body: bytes = b"",
    timeout_ms: int | None = None,
) -> RemotingCommand:
    request = RemotingCommand.request(code, fields, body)
    return await call(admin.pool, address, request, timeout_ms or admin.timeout_ms)


async def view_broker_stats(
    admin: AdminClient, address: str, stats_name: str, stats_key: str
) -> BrokerStatsData:
    """The minute/hour/day windows of one stats cell of the broker at ``address``
    (``TOPIC_PUT_NUMS`` + topic, ``GROUP_GET_NUMS`` + ``topic@group``, ``BROKER_PUT_NUMS`` +
    cluster, ...). Raises RemoteError SYSTEM_ERROR when the cell does not exist."""
    header = ViewBrokerStatsDataRequestHeader(stats_name, stats_key)
    response = await _invoke(
        admin, address, RequestCode.VIEW_BROKER_STATS_DATA, header.to_ext_fields()
    )
    return BrokerStatsData.from_json(response.body)


async def broker_config(admin: AdminClient, address: str) -> dict[str, str]:
    """The broker's settings, by broker.conf key."""
    response = await _invoke(admin, address, RequestCode.GET_BROKER_CONFIG)
    settings: dict[str, str] = {}
    for line in bytes(response.body).decode("utf-8").splitlines():
        key, separator, value = line.partition("=")
        if separator:
            settings[key.strip()] = value.strip()
    return settings


async def update_broker_config(admin: AdminClient, address: str, changes: dict[str, str]) -> None:
    """Change live settings of the broker at ``address`` (RemoteError when refused)."""
    text = "".join(f"{key}={value}\n" for key, value in changes.items())
    await _invoke(admin, address, RequestCode.UPDATE_BROKER_CONFIG, body=text.encode())


async def consume_time_span(
    admin: AdminClient, address: str, topic: str, group: str
) -> QueryConsumeTimeSpanBody:
    """Per queue: oldest/newest store time, the group's next message time and delay."""
    header = QueryConsumeTimeSpanRequestHeader(topic, group)
    response = await _invoke(
        admin, address, RequestCode.QUERY_CONSUME_TIME_SPAN, header.to_ext_fields()
    )
    return QueryConsumeTimeSpanBody.from_json(response.body)


async def consume_queue(
    admin: AdminClient,
    address: str,
    topic: str,
    queue_id: int,
    index: int,
    count: int,
    group: str | None = None,
) -> QueryConsumeQueueResponseBody:
    """``count`` consume-queue entries of one queue from ``index``."""
    header = QueryConsumeQueueRequestHeader(topic, queue_id, index, count, group)
    response = await _invoke(
        admin, address, RequestCode.QUERY_CONSUME_QUEUE, header.to_ext_fields()
    )
    return QueryConsumeQueueResponseBody.from_json(response.body)


async def consume_message_directly(
    admin: AdminClient, group: str, client_id: str, offset_msg_id: str, broker_address: str
) -> ConsumeMessageDirectlyResult:
    """Have the consumer ``client_id`` of ``group`` run its listener on the message
    ``offset_msg_id`` stored on the broker at ``broker_address``; its verdict.

    Raises NotFoundError when the client is not online there, RemoteError otherwise.
    """
    header = ConsumeMessageDirectlyResultRequestHeader(group, client_id, offset_msg_id)
    try:
        response = await _invoke(
            admin,
            broker_address,
            RequestCode.CONSUME_MESSAGE_DIRECTLY,
            header.to_ext_fields(),
            timeout_ms=limits.CONSUME_DIRECTLY_TIMEOUT_MS + limits.ADMIN_REQUEST_TIMEOUT_MS,
        )
    except RemoteError as error:
        if error.code == ResponseCode.SYSTEM_ERROR and "not online" in str(error):
            raise NotFoundError(str(error)) from error
        raise
    try:
        return ConsumeMessageDirectlyResult.from_json(response.body)
    except BolideError as error:
        raise RemoteError(ResponseCode.SYSTEM_ERROR, f"bad answer: {error}") from error


async def broker_consume_stats(admin: AdminClient, address: str) -> ConsumeStatsList:
    """GET_BROKER_CONSUME_STATS: every group's progress on the broker at ``address``, in one
    request (with the online consumer count per group)."""
    response = await _invoke(
        admin,
        address,
        RequestCode.GET_BROKER_CONSUME_STATS,
        {"isOrder": "false", LIST_FORM_FIELD: "true"},
    )
    return ConsumeStatsList.from_json(response.body)


async def delay_offsets(admin: AdminClient, address: str) -> dict[int, int]:
    """GET_ALL_DELAY_OFFSET: per delay level, the next SCHEDULE_TOPIC_XXXX queue offset the
    broker at ``address`` will deliver."""
    response = await _invoke(admin, address, RequestCode.GET_ALL_DELAY_OFFSET)
    table = orjson.loads(bytes(response.body) or b"{}").get("offsetTable") or {}
    return {int(level): int(offset) for level, offset in table.items()}
