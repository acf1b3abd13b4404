"""RocketMQ 5's metric names (as its Prometheus exporter writes them) and Bolide's own
families, plus the small helpers that build families.

5.x names carry ``cluster``, ``node_type`` ("broker") and ``node_id`` (the broker name) on
every series. Counters come from the hot-path cells (``rocketmq_messages_in_total`` is the
TOPIC_PUT_NUMS running sum), gauges from the scrape's figures.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from bolide.base.histogram import BucketCounts
from bolide.broker.context import BrokerContext
from bolide.broker.metrics.figures import GroupFigures, TopicFigures, TopicKind
from bolide.broker.metrics.label_sets import LabelSets
from bolide.protocol.bodies.heartbeat import ConsumeType
from bolide.protocol.system_topics import (
    DLQ_GROUP_TOPIC_PREFIX,
    RETRY_GROUP_TOPIC_PREFIX,
    SCHEDULE_TOPIC,
)

__all__ = [
    "OtelLabelSets",
    "bolide_families",
    "gauge",
    "histogram_family",
    "otel_families",
    "otel_group_families",
    "otel_live_families",
]

_NODE = ("cluster", "node_type", "node_id")


def gauge(
    name: str,
    documentation: str,
    label_names: tuple[str, ...],
    labels: tuple[str, ...],
    value: float,
) -> GaugeMetricFamily:
    """A gauge family with one series."""
    family = GaugeMetricFamily(name, documentation, labels=label_names)
    family.add_metric(labels, value)
    return family


def histogram_family(
    name: str,
    documentation: str,
    histogram: BucketCounts,
    scale: float,
    label_names: tuple[str, ...],
    labels: tuple[str, ...],
) -> HistogramMetricFamily:
    """``histogram`` as a Prometheus histogram, bounds and sum multiplied by ``scale`` (1e-6
    turns µs into seconds)."""
    family = HistogramMetricFamily(name, documentation, labels=label_names)
    buckets = [
        ("+Inf" if bound == float("inf") else repr(round(bound * scale, 9)), float(count))
        for bound, count in histogram.cumulative()
    ]
    family.add_metric(labels, buckets, histogram.total * scale)
    return family


def _message_type(context: BrokerContext, topic: str) -> str:
    config = context.topics.find(topic)
    if config is not None and config.order:
        return "fifo"
    return "normal"


Node = tuple[str, str, str]
"""(cluster, node_type, node_id) label values."""


class OtelLabelSets:
    """The reused label dicts of the per-topic and per-group 5.x families."""

    def __init__(self) -> None:
        self.traffic_in = LabelSets((*_NODE, "topic", "message_type"))
        self.traffic_out = LabelSets((*_NODE, "topic", "consumer_group"))
        self.lag = LabelSets((*_NODE, "topic", "consumer_group", "is_retry", "is_system"))

    def all(self) -> tuple[LabelSets, ...]:
        return (self.traffic_in, self.traffic_out, self.lag)


def otel_families(
    context: BrokerContext,
    topics: dict[str, TopicFigures],
    groups: list[GroupFigures],
    label_sets: OtelLabelSets | None = None,
) -> Iterator[Metric]:
    """Every RocketMQ 5 family of the broker."""
    sets = label_sets or OtelLabelSets()
    traffic_in, rest = otel_live_families(context, topics, sets)
    yield from traffic_in
    yield from otel_group_families(context, topics, groups, sets)
    yield from rest


def otel_live_families(
    context: BrokerContext, topics: dict[str, TopicFigures], sets: OtelLabelSets
) -> tuple[list[Metric], list[Metric]]:
    """The families that read the broker's tables (built on its loop): traffic in by topic
    and message type; then broker figures, connections, storage, transactions."""
    node = _node(context)
    return list(_traffic_in(context, topics, node, sets.traffic_in)), [
        *_broker_figures(context, topics, node),
        *_connections(context, node),
        *_storage(context, node),
        *_transactions(context, node),
    ]


def otel_group_families(
    context: BrokerContext,
    topics: dict[str, TopicFigures],
    groups: list[GroupFigures],
    sets: OtelLabelSets,
) -> Iterator[Metric]:
    """Traffic out and lag by (topic, group): built from the figures alone, on any thread."""
    yield from _traffic_out_and_lag(topics, groups, _node(context), sets)


def _node(context: BrokerContext) -> Node:
    config = context.config
    return (config.broker_cluster_name, "broker", config.broker_name)


def _traffic_in(
    context: BrokerContext, topics: dict[str, TopicFigures], node: Node, label_sets: LabelSets
) -> Iterator[Metric]:
    messages_in = CounterMetricFamily(
        "rocketmq_messages_in",
        "Messages stored, by topic.",
        labels=(*_NODE, "topic", "message_type"),
    )
    throughput_in = CounterMetricFamily(
        "rocketmq_throughput_in",
        "Bytes stored, by topic.",
        labels=(*_NODE, "topic", "message_type"),
        unit="",
    )
    for topic, figures in topics.items():
        if figures.put_messages:
            labels = (*node, topic, _message_type(context, topic))
            label_sets.add(messages_in, labels, figures.put_messages)
            label_sets.add(throughput_in, labels, figures.put_bytes)
    yield from (messages_in, throughput_in)
    yield histogram_family(
        "rocketmq_message_size",
        "Stored message sizes, bytes.",
        context.stats.message_size_bytes,
        1.0,
        _NODE,
        node,
    )


def _traffic_out_and_lag(
    topics: dict[str, TopicFigures],
    groups: list[GroupFigures],
    node: Node,
    label_sets: OtelLabelSets,
) -> Iterator[Metric]:
    out_sets, lag_sets = label_sets.traffic_out, label_sets.lag
    out_labels = (*_NODE, "topic", "consumer_group")
    messages_out = CounterMetricFamily(
        "rocketmq_messages_out", "Messages delivered, by topic and group.", labels=out_labels
    )
    throughput_out = CounterMetricFamily(
        "rocketmq_throughput_out", "Bytes delivered, by topic and group.", labels=out_labels
    )
    lag_labels = (*_NODE, "topic", "consumer_group", "is_retry", "is_system")
    lag = GaugeMetricFamily(
        "rocketmq_consumer_lag_messages", "Messages not yet consumed.", labels=lag_labels
    )
    lag_latency = GaugeMetricFamily(
        "rocketmq_consumer_lag_latency",
        "Age of the oldest message not yet consumed, ms.",
        labels=lag_labels,
    )
    for each in groups:
        labels = (*node, each.topic, each.group)
        if each.get_messages:
            out_sets.add(messages_out, labels, each.get_messages)
            out_sets.add(throughput_out, labels, each.get_bytes)
        flags = (
            str(each.topic.startswith(RETRY_GROUP_TOPIC_PREFIX)).lower(),
            str(topics[each.topic].kind == TopicKind.SYSTEM).lower(),
        )
        lag_values = (*labels, *flags)
        lag_sets.add(lag, lag_values, each.lag)
        lag_sets.add(lag_latency, lag_values, each.oldest_unconsumed_age_ms)
    yield from (messages_out, throughput_out, lag, lag_latency)
    dlq = CounterMetricFamily(
        "rocketmq_send_to_dlq_messages",
        "Messages moved to a dead-letter queue, by group.",
        labels=(*_NODE, "consumer_group"),
    )
    for topic, figures in topics.items():
        if figures.kind == TopicKind.DLQ:
            dlq.add_metric(
                (*node, topic.removeprefix(DLQ_GROUP_TOPIC_PREFIX)), figures.total_offset
            )
    yield dlq


def _broker_figures(
    context: BrokerContext, topics: dict[str, TopicFigures], node: Node
) -> Iterator[Metric]:
    yield gauge("rocketmq_topic_number", "Topics on the broker.", _NODE, node, len(topics))
    yield gauge(
        "rocketmq_consumer_group_number",
        "Subscription groups on the broker.",
        _NODE,
        node,
        len(context.groups.group_names()),
    )
    yield gauge(
        "rocketmq_broker_permission",
        "The broker's permission bits (6: read and write).",
        _NODE,
        node,
        context.config.broker_permission,
    )


def _transactions(context: BrokerContext, node: tuple[str, str, str]) -> Iterator[Metric]:
    service = context.transactions
    if service is None:
        return
    for name, documentation, value in (
        ("rocketmq_commit_messages", "Transactional messages committed.", service.commit_count),
        (
            "rocketmq_rollback_messages",
            "Transactional messages rolled back.",
            service.rollback_count,
        ),
    ):
        family = CounterMetricFamily(name, documentation, labels=_NODE)
        family.add_metric(node, value)
        yield family
    yield gauge(
        "rocketmq_half_messages",
        "Half (prepared) messages waiting for their commit or rollback.",
        _NODE,
        node,
        service.pending_count,
    )


def _connections(context: BrokerContext, node: tuple[str, str, str]) -> Iterator[Metric]:
    consumers = GaugeMetricFamily(
        "rocketmq_consumer_connections",
        "Consumer connections by group, language and version.",
        labels=(*_NODE, "consumer_group", "language", "version", "consume_mode", "protocol_type"),
    )
    for group in context.consumers.groups():
        info = context.consumers.get_consumer_group_info(group)
        if info is None:
            continue
        mode = "push" if info.consume_type is ConsumeType.CONSUME_PASSIVELY else "pull"
        counts: dict[tuple[str, str], int] = {}
        for channel in info.channels.values():
            key = (channel.language.name.lower(), str(channel.version))
            counts[key] = counts.get(key, 0) + 1
        for (language, version), count in counts.items():
            consumers.add_metric((*node, group, language, version, mode, "remoting"), count)
    yield consumers
    producers = GaugeMetricFamily(
        "rocketmq_producer_connections",
        "Producer connections by language and version.",
        labels=(*_NODE, "language", "version", "protocol_type"),
    )
    producer_counts: dict[tuple[str, str], int] = {}
    for group in context.producers.groups():
        for channel in context.producers.producer_connections(group):
            key = (channel.language.name.lower(), str(channel.version))
            producer_counts[key] = producer_counts.get(key, 0) + 1
    for (language, version), count in producer_counts.items():
        producers.add_metric((*node, language, version, "remoting"), count)
    yield producers


def _storage(context: BrokerContext, node: tuple[str, str, str]) -> Iterator[Metric]:
    store = context.store.stats()
    yield gauge(
        "rocketmq_storage_size",
        "Commit-log bytes kept on disk.",
        _NODE,
        node,
        store.commit_log_max_offset - store.commit_log_min_offset,
    )
    yield gauge(
        "rocketmq_storage_flush_behind_bytes",
        "Commit-log bytes written but not yet flushed.",
        _NODE,
        node,
        max(0, store.commit_log_max_offset - store.commit_log_flushed_offset),
    )
    yield gauge(
        "rocketmq_storage_dispatch_behind_bytes",
        "Commit-log bytes not yet in a consume queue (0: written together).",
        _NODE,
        node,
        0,
    )
    timer = context.timer
    yield gauge(
        "rocketmq_timing_messages",
        "Timer messages waiting in memory for their time.",
        _NODE,
        node,
        timer.pending_in_memory if timer is not None else 0,
    )


def bolide_families(
    context: BrokerContext, flush_latency_us: BucketCounts | None
) -> Iterator[Metric]:
    config = context.config
    label_names = ("cluster", "broker")
    labels = (config.broker_cluster_name, config.broker_name)
    stats = context.stats
    yield histogram_family(
        "bolide_send_latency_seconds",
        "Send requests, from decoding to the answer (SYNC_FLUSH waits included).",
        stats.put_latency_us,
        1e-6,
        label_names,
        labels,
    )
    if flush_latency_us is not None:
        yield histogram_family(
            "bolide_flush_latency_seconds",
            "Commit-log fsync rounds.",
            flush_latency_us,
            1e-6,
            label_names,
            labels,
        )
    yield gauge(
        "bolide_long_poll_parked_pulls",
        "Pull requests parked waiting for messages.",
        label_names,
        labels,
        context.long_polling.count,
    )
    backlog = GaugeMetricFamily(
        "bolide_delay_backlog_messages",
        "Delay-level messages stored and not yet delivered, by level.",
        labels=(*label_names, "level"),
    )
    schedule = context.schedule
    if schedule is not None:
        delivered = schedule.offset_table()
        for level in range(1, schedule.levels.max_level + 1):
            stored = context.store.max_offset(SCHEDULE_TOPIC, level - 1)
            backlog.add_metric((*labels, str(level)), max(0, stored - delivered.get(level, 0)))
    yield backlog
    rebalances = CounterMetricFamily(
        "bolide_rebalance_notifications",
        "Times the broker told a group's consumers to rebalance (membership changed).",
        labels=label_names,
    )
    rebalances.add_metric(labels, stats.rebalance_notifications)
    yield rebalances
