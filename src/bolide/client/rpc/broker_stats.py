"""The requests for one broker's statistics and settings, and consuming one message directly:
VIEW_BROKER_STATS_DATA (315), GET/UPDATE_BROKER_CONFIG (26/25), QUERY_CONSUME_TIME_SPAN (303),
QUERY_CONSUME_QUEUE (321), CONSUME_MESSAGE_DIRECTLY (309), GET_BROKER_CONSUME_STATS (317),
GET_ALL_DELAY_OFFSET (45). Each takes the pool, the broker's address and a timeout and raises
:class:`~bolide.base.errors.RemoteError` with the broker's code and remark when it refuses
(through :func:`bolide.client.rpc.call`), and the transport's errors.
:mod:`bolide.client.admin_stats` builds on them.
"""

from __future__ import annotations

import orjson

from bolide.base.errors import BolideError, NotFoundError, RemoteError
from bolide.client.rpc.call import call_code
from bolide.protocol.bodies.stats import (
    LIST_FORM_FIELD,
    BrokerStatsData,
    ConsumeMessageDirectlyResult,
    ConsumeStatsList,
    QueryConsumeQueueResponseBody,
    QueryConsumeTimeSpanBody,
)
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.headers import ConsumeMessageDirectlyResultRequestHeader
from bolide.protocol.headers.stats import (
    QueryConsumeQueueRequestHeader,
    QueryConsumeTimeSpanRequestHeader,
    ViewBrokerStatsDataRequestHeader,
)
from bolide.remoting import ClientPool

__all__ = [
    "consume_message_directly",
    "get_all_delay_offset",
    "get_broker_config",
    "get_broker_consume_stats",
    "query_consume_queue",
    "query_consume_time_span",
    "update_broker_config",
    "view_broker_stats_data",
]


_invoke = call_code


async def view_broker_stats_data(
    pool: ClientPool, address: str, stats_name: str, stats_key: str, timeout_ms: int
) -> BrokerStatsData:
    """The minute/hour/day windows of one stats cell. Raises RemoteError SYSTEM_ERROR when
    the cell does not exist."""
    fields = ViewBrokerStatsDataRequestHeader(stats_name, stats_key).to_ext_fields()
    code = RequestCode.VIEW_BROKER_STATS_DATA
    response = await _invoke(pool, address, code, timeout_ms, fields)
    return BrokerStatsData.from_json(response.body)


async def get_broker_config(pool: ClientPool, address: str, timeout_ms: int) -> dict[str, str]:
    """The broker's settings, by broker.conf key."""
    response = await _invoke(pool, address, RequestCode.GET_BROKER_CONFIG, timeout_ms)
    settings: dict[str, str] = {}
    for line in bytes(response.body).decode("utf-8").splitlines():
        key, separator, value = line.partition("=")
        if separator:
            settings[key.strip()] = value.strip()
    return settings


async def update_broker_config(
    pool: ClientPool, address: str, changes: dict[str, str], timeout_ms: int
) -> None:
    """Change live settings of the broker (RemoteError when refused)."""
    text = "".join(f"{key}={value}\n" for key, value in changes.items())
    code = RequestCode.UPDATE_BROKER_CONFIG
    await _invoke(pool, address, code, timeout_ms, body=text.encode())


async def query_consume_time_span(
    pool: ClientPool, address: str, topic: str, group: str, timeout_ms: int
) -> QueryConsumeTimeSpanBody:
    """Per queue: oldest/newest store time, the group's next message time and delay."""
    fields = QueryConsumeTimeSpanRequestHeader(topic, group).to_ext_fields()
    code = RequestCode.QUERY_CONSUME_TIME_SPAN
    response = await _invoke(pool, address, code, timeout_ms, fields)
    return QueryConsumeTimeSpanBody.from_json(response.body)


async def query_consume_queue(
    pool: ClientPool,
    address: str,
    topic: str,
    queue_id: int,
    index: int,
    count: int,
    group: str | None,
    timeout_ms: int,
) -> QueryConsumeQueueResponseBody:
    """``count`` consume-queue entries of one queue from ``index``."""
    header = QueryConsumeQueueRequestHeader(topic, queue_id, index, count, group)
    code = RequestCode.QUERY_CONSUME_QUEUE
    response = await _invoke(pool, address, code, timeout_ms, header.to_ext_fields())
    return QueryConsumeQueueResponseBody.from_json(response.body)


async def consume_message_directly(
    pool: ClientPool,
    address: str,
    group: str,
    client_id: str,
    offset_msg_id: str,
    timeout_ms: int,
) -> ConsumeMessageDirectlyResult:
    """Have the consumer ``client_id`` of ``group`` run its listener on the message
    ``offset_msg_id`` stored on the broker at ``address``; its verdict. ``timeout_ms`` must
    cover the consumer's run as well as the round trip.

    Raises NotFoundError when the client is not online there, RemoteError otherwise.
    """
    header = ConsumeMessageDirectlyResultRequestHeader(group, client_id, offset_msg_id)
    code = RequestCode.CONSUME_MESSAGE_DIRECTLY
    try:
        response = await _invoke(pool, address, code, timeout_ms, header.to_ext_fields())
    except RemoteError as error:
        if error.code == ResponseCode.SYSTEM_ERROR and "not online" in str(error):
            raise NotFoundError(str(error)) from error
        raise
    try:
        return ConsumeMessageDirectlyResult.from_json(response.body)
    except BolideError as error:
        raise RemoteError(ResponseCode.SYSTEM_ERROR, f"bad answer: {error}") from error


async def get_broker_consume_stats(
    pool: ClientPool, address: str, timeout_ms: int
) -> ConsumeStatsList:
    """GET_BROKER_CONSUME_STATS: every group's progress on the broker, in one request (with
    the online consumer count per group)."""
    fields = {"isOrder": "false", LIST_FORM_FIELD: "true"}
    code = RequestCode.GET_BROKER_CONSUME_STATS
    response = await _invoke(pool, address, code, timeout_ms, fields)
    return ConsumeStatsList.from_json(response.body)


async def get_all_delay_offset(pool: ClientPool, address: str, timeout_ms: int) -> dict[int, int]:
    """GET_ALL_DELAY_OFFSET: per delay level, the next SCHEDULE_TOPIC_XXXX queue offset the
    broker will deliver."""
    response = await _invoke(pool, address, RequestCode.GET_ALL_DELAY_OFFSET, timeout_ms)
    table = orjson.loads(bytes(response.body) or b"{}").get("offsetTable") or {}
    return {int(level): int(offset) for level, offset in table.items()}
