"""Admin calls for broker statistics and configuration, and consuming one message directly:
VIEW_BROKER_STATS_DATA (315), GET/UPDATE_BROKER_CONFIG (26/25), QUERY_CONSUME_TIME_SPAN (303),
QUERY_CONSUME_QUEUE (321), CONSUME_MESSAGE_DIRECTLY (309). Functions over an
:class:`~bolide.client.admin.AdminClient` (its pool and timeout) and the requests of
:mod:`bolide.client.rpc.broker_stats`; each raises RemoteError with the broker's code and
remark when the broker refuses.
"""

from __future__ import annotations

from bolide.base import limits
from bolide.client.admin import AdminClient
from bolide.client.rpc import broker_stats as rpc
from bolide.protocol.bodies.stats import (
    BrokerStatsData,
    ConsumeMessageDirectlyResult,
    ConsumeStatsList,
    QueryConsumeQueueResponseBody,
    QueryConsumeTimeSpanBody,
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


async def view_broker_stats(
    admin: AdminClient, address: str, stats_name: str, stats_key: str
) -> BrokerStatsData:
    """The minute/hour/day windows of one stats cell of the broker at ``address``
    (``TOPIC_PUT_NUMS`` + topic, ``GROUP_GET_NUMS`` + ``topic@group``, ``BROKER_PUT_NUMS`` +
    cluster, ...). Raises RemoteError SYSTEM_ERROR when the cell does not exist."""
    return await rpc.view_broker_stats_data(
        admin.pool, address, stats_name, stats_key, admin.timeout_ms
    )


async def broker_config(admin: AdminClient, address: str) -> dict[str, str]:
    """The broker's settings, by broker.conf key."""
    return await rpc.get_broker_config(admin.pool, address, admin.timeout_ms)


async def update_broker_config(admin: AdminClient, address: str, changes: dict[str, str]) -> None:
    """Change live settings of the broker at ``address`` (RemoteError when refused)."""
    await rpc.update_broker_config(admin.pool, address, changes, admin.timeout_ms)


async def consume_time_span(
    admin: AdminClient, address: str, topic: str, group: str
) -> QueryConsumeTimeSpanBody:
    """Per queue: oldest/newest store time, the group's next message time and delay."""
    return await rpc.query_consume_time_span(admin.pool, address, topic, group, admin.timeout_ms)


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
    return await rpc.query_consume_queue(
        admin.pool, address, topic, queue_id, index, count, group, admin.timeout_ms
    )


async def consume_message_directly(
    admin: AdminClient, group: str, client_id: str, offset_msg_id: str, broker_address: str
) -> ConsumeMessageDirectlyResult:
    """Have the consumer ``client_id`` of ``group`` run its listener on the message
    ``offset_msg_id`` stored on the broker at ``broker_address``; its verdict.

    Raises NotFoundError when the client is not online there, RemoteError otherwise.
    """
    timeout_ms = limits.CONSUME_DIRECTLY_TIMEOUT_MS + limits.ADMIN_REQUEST_TIMEOUT_MS
    return await rpc.consume_message_directly(
        admin.pool, broker_address, group, client_id, offset_msg_id, timeout_ms
    )


async def broker_consume_stats(admin: AdminClient, address: str) -> ConsumeStatsList:
    """GET_BROKER_CONSUME_STATS: every group's progress on the broker at ``address``, in one
    request (with the online consumer count per group)."""
    return await rpc.get_broker_consume_stats(admin.pool, address, admin.timeout_ms)


async def delay_offsets(admin: AdminClient, address: str) -> dict[int, int]:
    """GET_ALL_DELAY_OFFSET: per delay level, the next SCHEDULE_TOPIC_XXXX queue offset the
    broker at ``address`` will deliver."""
    return await rpc.get_all_delay_offset(admin.pool, address, admin.timeout_ms)
