"""Broker statistics headers: VIEW_BROKER_STATS_DATA (315), QUERY_CONSUME_TIME_SPAN (303),
QUERY_CONSUME_QUEUE (321). GET/UPDATE_BROKER_CONFIG (26/25) carry no request header; 26
answers ``version`` (the config's DataVersion as JSON text)."""

from __future__ import annotations

from bolide.protocol.headers.fields import WireHeader, wire, wire_header

__all__ = [
    "QueryConsumeQueueRequestHeader",
    "QueryConsumeTimeSpanRequestHeader",
    "ViewBrokerStatsDataRequestHeader",
]


@wire_header
class ViewBrokerStatsDataRequestHeader(WireHeader):
    """VIEW_BROKER_STATS_DATA (315): a stats name (TOPIC_PUT_NUMS, GROUP_GET_NUMS, ...) and
    its key (a topic, ``topic@group``, the cluster name)."""

    stats_name: str = wire("statsName")
    stats_key: str = wire("statsKey")


@wire_header
class QueryConsumeTimeSpanRequestHeader(WireHeader):
    """QUERY_CONSUME_TIME_SPAN (303): per queue of ``topic``, the store times of its oldest
    and newest message and of the group's next message."""

    topic: str = wire("topic")
    group: str = wire("group")


@wire_header
class QueryConsumeQueueRequestHeader(WireHeader):
    """QUERY_CONSUME_QUEUE (321): ``count`` consume-queue entries of one queue from ``index``;
    with ``consumerGroup``, its subscription of the topic too."""

    topic: str = wire("topic")
    queue_id: int = wire("queueId")
    index: int = wire("index")
    count: int = wire("count")
    consumer_group: str | None = wire("consumerGroup", default=None)
