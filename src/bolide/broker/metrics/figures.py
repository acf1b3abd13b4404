"""What a scrape reads from the broker: per topic and per (topic, group) figures, computed at
read time from the store's offsets, the offset table and the stats cells.

Nothing here runs per message: the hot path only adds to counters (:mod:`bolide.broker.stats`).
A read walks each topic's queues once (the max offsets are kept for the lag of every group on
that topic) and each ``topic@group`` entry of the offset table once; on this machine a broker
with 10,000 queues is read in well under 100 ms (see docs/benchmarks.md).

Lag follows the Java broker's ConsumeStats: per queue ``max offset - committed offset`` where a
queue without a committed offset counts from 0, never negative.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from bolide.broker.context import BrokerContext
from bolide.broker.metrics.stats_items import StatsName, group_stats_key
from bolide.protocol.bodies.heartbeat import MessageModel
from bolide.protocol.system_topics import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX

__all__ = ["GroupFigures", "TopicFigures", "TopicKind", "group_figures", "topic_figures"]


class TopicKind:
    """Which exporter family a topic's figures go to."""

    NORMAL = "normal"
    RETRY = "retry"
    DLQ = "dlq"
    SYSTEM = "system"


def topic_kind(context: BrokerContext, topic: str) -> str:
    if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return TopicKind.RETRY
    if topic.startswith(DLQ_GROUP_TOPIC_PREFIX):
        return TopicKind.DLQ
    if context.topics.is_system_topic(topic):
        return TopicKind.SYSTEM
    return TopicKind.NORMAL


@dataclass(slots=True)
class TopicFigures:
    topic: str
    kind: str
    max_offsets: list[int]
    """Per queue id (read queues), the next offset to be written."""
    put_messages: int
    put_bytes: int
    put_tps: float
    put_bytes_per_second: float
    has_put_stats: bool
    """Whether the topic has put stats at all (the exporter emits its rates only then)."""

    @property
    def total_offset(self) -> int:
        return sum(self.max_offsets)


@dataclass(slots=True)
class GroupFigures:
    topic: str
    group: str
    broker_offset: int
    consumer_offset: int
    lag: int
    oldest_unconsumed_age_ms: int
    """now - store time of the first unconsumed message over the group's queues (0: no lag)."""
    online_consumers: int
    message_model: MessageModel
    get_messages: int
    get_bytes: int
    get_tps: float
    get_bytes_per_second: float
    send_back_per_minute: int
    has_get_stats: bool
    """Whether the pair has get stats at all (the exporter emits its rates only then)."""


def topic_figures(context: BrokerContext) -> dict[str, TopicFigures]:
    """Every topic of the broker, with its queues' max offsets and put rates."""
    store, now_ms = context.store, context.clock.now_ms()
    table = context.stats.table
    put_nums = table.cells(StatsName.TOPIC_PUT_NUMS)
    put_size = table.cells(StatsName.TOPIC_PUT_SIZE)
    result: dict[str, TopicFigures] = {}
    for topic, config in context.topics.topic_config_table().items():
        max_offset = store.max_offset
        offsets = [max_offset(topic, queue_id) for queue_id in range(config.read_queue_count)]
        nums, size = put_nums.get(topic), put_size.get(topic)
        nums_minute = nums.figures(nums.minute, now_ms) if nums is not None else None
        size_minute = size.figures(size.minute, now_ms) if size is not None else None
        result[topic] = TopicFigures(
            topic=topic,
            kind=topic_kind(context, topic),
            max_offsets=offsets,
            put_messages=nums.value if nums is not None else 0,
            put_bytes=size.value if size is not None else 0,
            put_tps=nums_minute.tps if nums_minute is not None else 0.0,
            put_bytes_per_second=size_minute.tps if size_minute is not None else 0.0,
            has_put_stats=nums is not None,
        )
    return result


def _group_topic_pairs(context: BrokerContext) -> Iterator[tuple[str, str, dict[int, int]]]:
    """(topic, group, committed offsets) for every offset-table entry and every online
    subscription without one yet."""
    seen: set[tuple[str, str]] = set()
    for (topic, group), queues in context.offsets.entries():
        seen.add((topic, group))
        yield topic, group, queues
    consumers = context.consumers
    for group in consumers.groups():
        info = consumers.get_consumer_group_info(group)
        if info is None:
            continue
        for topic in info.subscriptions:
            if (topic, group) not in seen:
                yield topic, group, {}


def group_figures(
    context: BrokerContext, topics: dict[str, TopicFigures]
) -> Iterator[GroupFigures]:
    """Lag, offsets and get rates of every (topic, group) the broker knows of."""
    store, now_ms = context.store, context.clock.now_ms()
    table = context.stats.table
    get_nums = table.cells(StatsName.GROUP_GET_NUMS)
    get_size = table.cells(StatsName.GROUP_GET_SIZE)
    send_back = table.cells(StatsName.SNDBCK_PUT_NUMS)
    consumers = context.consumers
    for topic, group, committed in _group_topic_pairs(context):
        figures = topics.get(topic)
        if figures is None:  # offsets of a topic deleted since: nothing to lag behind
            continue
        consumer_total = lag = 0
        oldest_ms = now_ms
        for queue_id, broker_offset in enumerate(figures.max_offsets):
            consumer_offset = max(0, committed.get(queue_id, 0))
            consumer_total += consumer_offset
            behind = broker_offset - consumer_offset
            if behind > 0:
                lag += behind
                stored_ms = store.store_time_at(topic, queue_id, consumer_offset)
                if stored_ms <= 0:  # below the queue's first message: the exporter's
                    stored_ms = store.earliest_store_time(topic, queue_id)  # OFFSET_ILLEGAL step
                if 0 < stored_ms < oldest_ms:
                    oldest_ms = stored_ms
        info = consumers.get_consumer_group_info(group)
        key = group_stats_key(topic, group)
        nums, size, back = get_nums.get(key), get_size.get(key), send_back.get(key)
        yield GroupFigures(
            topic=topic,
            group=group,
            broker_offset=figures.total_offset,
            consumer_offset=consumer_total,
            lag=lag,
            oldest_unconsumed_age_ms=now_ms - oldest_ms if lag else 0,
            online_consumers=len(info.channels) if info is not None else 0,
            message_model=info.message_model if info is not None else MessageModel.CLUSTERING,
            get_messages=nums.value if nums is not None else 0,
            get_bytes=size.value if size is not None else 0,
            get_tps=nums.figures(nums.minute, now_ms).tps if nums is not None else 0.0,
            get_bytes_per_second=size.figures(size.minute, now_ms).tps if size else 0.0,
            send_back_per_minute=back.figures(back.minute, now_ms).sum if back else 0,
            has_get_stats=nums is not None,
        )
