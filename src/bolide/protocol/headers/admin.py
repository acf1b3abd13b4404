"""Admin headers on the broker (docs/protocol.md §2.11): create / delete topic (17, 215), topic
stats
(202), consume stats (208), producer connections (204), delete subscription group (207), who
consumes a topic (300), clone group offset (314), correction offsets (308). The consumer
connection list (203) header is :class:`~bolide.protocol.headers.client.ConsumerGroupRequestHeader`.
"""

from __future__ import annotations

from bolide.protocol.headers.fields import WireHeader, wire, wire_header

__all__ = [
    "CloneGroupOffsetRequestHeader",
    "CreateTopicRequestHeader",
    "DeleteSubscriptionGroupRequestHeader",
    "DeleteTopicRequestHeader",
    "GetConsumeStatsRequestHeader",
    "GetProducerConnectionListRequestHeader",
    "GetTopicStatsInfoRequestHeader",
    "QueryCorrectionOffsetHeader",
    "QueryTopicConsumeByWhoRequestHeader",
    "TopicRequestHeader",
]


@wire_header
class CreateTopicRequestHeader(WireHeader):
    """UPDATE_AND_CREATE_TOPIC (17). ``perm`` uses the PermName bits (READ 4, WRITE 2,
    INHERIT 1); ``topic_filter_type`` is ``SINGLE_TAG`` or ``MULTI_TAG``. ``topicFilterType``
    and ``order`` are required by Java but default here (``SINGLE_TAG``, false) when a tool
    leaves them out."""

    topic: str = wire("topic")
    default_topic: str = wire("defaultTopic")
    read_queue_count: int = wire("readQueueNums")
    write_queue_count: int = wire("writeQueueNums")
    perm: int = wire("perm")
    topic_filter_type: str = wire("topicFilterType", default="SINGLE_TAG")
    order: bool = wire("order", default=False)
    topic_sys_flag: int | None = wire("topicSysFlag", default=None)
    attributes: str | None = wire("attributes", default=None)
    """5.x topic attributes, ``+message.type=FIFO`` form."""


@wire_header
class TopicRequestHeader(WireHeader):
    """``topic`` alone: DELETE_TOPIC_IN_BROKER (215), GET_TOPIC_STATS_INFO (202) and
    QUERY_TOPIC_CONSUME_BY_WHO (300) use identical Java classes."""

    topic: str = wire("topic")


DeleteTopicRequestHeader = TopicRequestHeader
GetTopicStatsInfoRequestHeader = TopicRequestHeader
QueryTopicConsumeByWhoRequestHeader = TopicRequestHeader


@wire_header
class GetConsumeStatsRequestHeader(WireHeader):
    """GET_CONSUME_STATS (208); without ``topic``, every topic the group has offsets for."""

    consumer_group: str = wire("consumerGroup")
    topic: str | None = wire("topic", default=None)


@wire_header
class GetProducerConnectionListRequestHeader(WireHeader):
    """GET_PRODUCER_CONNECTION_LIST (204)."""

    producer_group: str = wire("producerGroup")


@wire_header
class DeleteSubscriptionGroupRequestHeader(WireHeader):
    """DELETE_SUBSCRIPTIONGROUP (207); ``remove_offset`` also drops the group's offsets."""

    group_name: str = wire("groupName")
    remove_offset: bool = wire("removeOffset", default=False)


@wire_header
class CloneGroupOffsetRequestHeader(WireHeader):
    """CLONE_GROUP_OFFSET (314): copy ``src_group``'s offsets (of ``topic``, or all) to
    ``dest_group``; ``offline`` says the source group is offline."""

    src_group: str = wire("srcGroup")
    dest_group: str = wire("destGroup")
    topic: str | None = wire("topic", default=None)
    offline: bool = wire("offline", default=False)


@wire_header
class QueryCorrectionOffsetHeader(WireHeader):
    """QUERY_CORRECTION_OFFSET (308): the lowest committed offset per queue of ``topic`` over
    its groups but ``filter_groups`` (comma-separated), compared with ``compare_group``'s."""

    topic: str = wire("topic")
    compare_group: str = wire("compareGroup")
    filter_groups: str | None = wire("filterGroups", default=None)
