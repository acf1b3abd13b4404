"""The broker's Prometheus metrics, built at scrape time by a prometheus_client collector.

Three sets of names (every one listed with its meaning in docs/operations.md):

* rocketmq-exporter's gauges, names, HELP texts and label names exactly as the exporter
  emits them, so Grafana dashboard 10477 and its alert rules work unchanged
  (``rocketmq_producer_tps{cluster,broker,topic}``, ``rocketmq_group_diff{group,topic,
  countOfOnlineConsumers,msgModel}``, ``rocketmq_brokeruntime_*{cluster,brokerIP,brokerHost,
  des,boottime,broker_version}``, ...). The ``rocketmq_client_*`` family comes from the
  consumers' running info, asked in the background (:mod:`.client_stats`), never during a
  scrape.
* RocketMQ 5's OpenTelemetry names as its Prometheus exporter writes them
  (``rocketmq_messages_in_total``, ``rocketmq_consumer_lag_messages``, ...), each with
  ``cluster``, ``node_type="broker"`` and ``node_id`` (the broker name).
* Bolide's own: send latency and flush latency histograms, parked long polls, delay backlog
  per level, timer backlog, rebalance notifications.

The collector keeps no figures between scrapes: rates come from the stats cells, lag from the
store's max offsets and the offset table (:mod:`.figures`), read on the broker's loop by
:meth:`BrokerCollector.freeze`; only the label dicts of the previous scrape's series are kept
for reuse (:mod:`.label_sets`). The large families are built from the figures later, on the
thread that renders them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from bolide.base.histogram import BucketCounts
from bolide.broker.context import BrokerContext
from bolide.broker.metrics.client_stats import ClientFigures
from bolide.broker.metrics.figures import (
    GroupFigures,
    TopicFigures,
    TopicKind,
    group_figures,
    topic_figures,
)
from bolide.broker.metrics.label_sets import LabelSets
from bolide.broker.metrics.otel import (
    OtelLabelSets,
    bolide_families,
    gauge,
    otel_group_families,
    otel_live_families,
)
from bolide.broker.metrics.runtime import pmdt_counts, runtime_numbers
from bolide.protocol.bodies.heartbeat import MessageModel
from bolide.protocol.system_topics import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX

__all__ = ["BrokerCollector", "CommitLogDiffSource"]

_log = logging.getLogger("bolide.broker.metrics")

CommitLogDiffSource = Callable[[], Iterable[tuple[str, int]]]
"""Replication plugs in here: ``(slave address, master max offset - slave max offset)`` per
slave, exported as ``rocketmq_broker_commitlog_diff``."""

_RUNTIME_GAUGES: tuple[tuple[str, str, str], ...] = (
    # (gauge suffix, HELP text as the exporter writes it, runtime-info key)
    ("msg_put_total_today_now", "brokerRuntimeMsgPutTotalTodayNow", "msgPutTotalTodayNow"),
    ("msg_gettotal_today_now", "brokerRuntimeMsgGetTotalTodayNow", "msgGetTotalTodayNow"),
    ("dispatch_behind_bytes", "brokerRuntimeDispatchBehindBytes", "dispatchBehindBytes"),
    ("put_message_size_total", "brokerRuntimePutMessageSizeTotal", "putMessageSizeTotal"),
    ("put_message_average_size", "brokerRuntimePutMessageAverageSize", "putMessageAverageSize"),
    (
        "query_threadpool_queue_capacity",
        "brokerRuntimeQueryThreadPoolQueueCapacity",
        "queryThreadPoolQueueCapacity",
    ),
    (
        "remain_transientstore_buffer_numbs",
        "brokerRuntimeRemainTransientStoreBufferNumbs",
        "remainTransientStoreBufferNumbs",
    ),
    (
        "putmessage_entire_time_max",
        "brokerRuntimePutMessageEntireTimeMax",
        "putMessageEntireTimeMax",
    ),
    (
        "earliest_message_timestamp",
        "brokerRuntimeEarliestMessageTimeStamp",
        "earliestMessageTimeStamp",
    ),
    (
        "start_accept_sendrequest_time",
        "brokerRuntimeStartAcceptSendRequestTimeStamp",
        "startAcceptSendRequestTimeStamp",
    ),
    (
        "send_threadpool_queue_size",
        "brokerRuntimeSendThreadPoolQueueSize",
        "sendThreadPoolQueueSize",
    ),
    ("putmessage_times_total", "brokerRuntimePutMessageTimesTotal", "putMessageTimesTotal"),
    (
        "getmessage_entire_time_max",
        "brokerRuntimeGetMessageEntireTimeMax",
        "getMessageEntireTimeMax",
    ),
    ("pagecache_lock_time_mills", "brokerRuntimePageCacheLockTimeMills", "pageCacheLockTimeMills"),
    ("commitlog_disk_ratio", "brokerRuntimeCommitLogDiskRatio", "commitLogDiskRatio"),
    ("consumequeue_disk_ratio", "brokerRuntimeConsumeQueueDiskRatio", "consumeQueueDiskRatio"),
    ("put_latency_99", "brokerRuntimePutLatency99", "putLatency99"),
    ("put_latency_999", "brokerRuntimePutLatency999", "putLatency999"),
    ("dispatch_maxbuffer", "brokerRuntimeDispatchMaxBuffer", "dispatchMaxBuffer"),
    (
        "pull_threadpoolqueue_capacity",
        "brokerRuntimePullThreadPoolQueueCapacity",
        "pullThreadPoolQueueCapacity",
    ),
    (
        "send_threadpoolqueue_capacity",
        "brokerRuntimeSendThreadPoolQueueCapacity",
        "sendThreadPoolQueueCapacity",
    ),
    (
        "pull_threadpoolqueue_size",
        "brokerRuntimePullThreadPoolQueueSizeF",
        "pullThreadPoolQueueSize",
    ),
    (
        "query_threadpoolqueue_size",
        "brokerRuntimeQueryThreadPoolQueueSize",
        "queryThreadPoolQueueSize",
    ),
    (
        "pull_threadpoolqueue_headwait_timemills",
        "brokerRuntimePullThreadPoolQueueHeadWaitTimeMills",
        "pullThreadPoolQueueHeadWaitTimeMills",
    ),
    (
        "query_threadpoolqueue_headwait_timemills",
        "brokerRuntimeQueryThreadPoolQueueHeadWaitTimeMills",
        "queryThreadPoolQueueHeadWaitTimeMills",
    ),
    (
        "send_threadpoolqueue_headwait_timemills",
        "brokerRuntimeSendThreadPoolQueueHeadWaitTimeMills",
        "sendThreadPoolQueueHeadWaitTimeMills",
    ),
    (
        "commitlogdir_capacity_free",
        "brokerRuntimeCommitLogDirCapacityFree",
        "commitLogDirCapacityFree",
    ),
    (
        "commitlogdir_capacity_total",
        "brokerRuntimeCommitLogDirCapacityTotal",
        "commitLogDirCapacityTotal",
    ),
    ("commitlog_maxoffset", "brokerRuntimeCommitLogMaxOffset", "commitLogMaxOffset"),
    ("commitlog_minoffset", "brokerRuntimeCommitLogMinOffset", "commitLogMinOffset"),
    (
        "remain_howmanydata_toflush",
        "brokerRuntimeRemainHowManyDataToFlush",
        "remainHowManyDataToFlush",
    ),
)

_RATE_GAUGES: tuple[tuple[str, str, int], ...] = (
    # (gauge stem, HELP stem, index into BrokerStats.rates: put, got, found, missed; 4 = total)
    ("put_tps", "brokerRuntimePutTps", 0),
    ("gettransfered_tps", "brokerRuntimeGetTransferedTps", 1),
    ("getfound_tps", "brokerRuntimeGetFoundTps", 2),
    ("getmiss_tps", "brokerRuntimeGetMissTps", 3),
    ("gettotal_tps", "brokerRuntimeGetTotalTps", 4),
)

_DAY_GAUGES: tuple[tuple[str, str, str], ...] = (
    ("msg_gettotal_yesterdaymorning", "brokerRuntimeMsgGetTotalYesterdayMorning",
     "msgGetTotalYesterdayMorning"),
    ("msg_puttotal_yesterdaymorning", "brokerRuntimeMsgPutTotalYesterdayMorning",
     "msgPutTotalYesterdayMorning"),
    ("msg_gettotal_todaymorning", "brokerRuntimeMsgGetTotalTodayMorning",
     "msgGetTotalTodayMorning"),
    ("msg_puttotal_todaymorning", "brokerRuntimeMsgPutTotalTodayMorning",
     "msgPutTotalTodayMorning"),
)  # fmt: skip

RUNTIME_LABELS = ("cluster", "brokerIP", "brokerHost", "des", "boottime", "broker_version")
TOPIC_LABELS = ("cluster", "broker", "topic")
GROUP_LABELS = ("cluster", "broker", "topic", "group")
DIFF_LABELS = ("group", "topic", "countOfOnlineConsumers", "msgModel")
BROKER_LABELS = ("cluster", "brokerIP", "broker")
OTEL_LABELS = ("cluster", "node_type", "node_id")


class BrokerCollector(Collector):
    """Every family of the broker's /metrics, computed from ``context`` at each scrape."""

    def __init__(self, context: BrokerContext) -> None:
        self._context = context
        self.commit_log_diff: CommitLogDiffSource | None = None
        """Set by replication (the master) to export ``rocketmq_broker_commitlog_diff``."""
        self.flush_latency_us: BucketCounts | None = None
        """The store's fsync round durations (µs), when the store measures them."""
        self.client_figures: Callable[[], list[ClientFigures]] = list
        """The consumers' latest running-info figures (the ``rocketmq_client_*`` family)."""
        self._topic_labels = LabelSets(TOPIC_LABELS)
        self._dlq_labels = LabelSets(("cluster", "broker", "group"))
        self._group_labels = LabelSets(GROUP_LABELS)
        self._diff_labels = LabelSets(DIFF_LABELS)
        self._otel_labels = OtelLabelSets()
        self._label_sets = (
            self._topic_labels,
            self._dlq_labels,
            self._group_labels,
            self._diff_labels,
            *self._otel_labels.all(),
        )

    def collect(self) -> Iterator[Metric]:
        yield from self.freeze().collect()

    def freeze(self) -> Collector:
        """Read what the scrape needs from the broker's live tables (on its loop): the
        topic and group figures and the small families. The returned collector builds the
        large per-topic and per-group families from that copy alone, on any thread."""
        context = self._context
        for label_sets in self._label_sets:
            label_sets.next_scrape()
        topics = topic_figures(context)
        groups = list(group_figures(context, topics))
        broker = [*self._exporter_broker(), *self._exporter_runtime()]
        clients = list(_client_families(self.client_figures()))
        otel_in, otel_rest = otel_live_families(context, topics, self._otel_labels)
        bolide = list(self._bolide())

        def build() -> Iterator[Metric]:
            yield from self._exporter_topics(topics)
            yield from self._exporter_groups(groups)
            yield from broker
            yield from clients
            yield from otel_in
            yield from otel_group_families(context, topics, groups, self._otel_labels)
            yield from otel_rest
            yield from bolide

        return _Frozen(build)

    # --- rocketmq-exporter ------------------------------------------------------------------

    def _ids(self) -> tuple[str, str, str]:
        config = self._context.config
        return config.broker_cluster_name, config.broker_name, config.broker_ip1

    def _exporter_topics(self, topics: dict[str, TopicFigures]) -> Iterator[Metric]:
        cluster, broker, _ = self._ids()
        offset = GaugeMetricFamily("rocketmq_producer_offset", "TopicOffset", labels=TOPIC_LABELS)
        retry = GaugeMetricFamily(
            "rocketmq_topic_retry_offset", "TopicRetryOffset", labels=TOPIC_LABELS
        )
        dlq = GaugeMetricFamily(
            "rocketmq_topic_dlq_offset",
            "TopicRetryOffset",  # the exporter's HELP text, typo included
            labels=("cluster", "broker", "group"),
        )
        tps = GaugeMetricFamily("rocketmq_producer_tps", "TopicPutNums", labels=TOPIC_LABELS)
        size = GaugeMetricFamily(
            "rocketmq_producer_message_size", "TopicPutMessageSize", labels=TOPIC_LABELS
        )
        topic_labels, dlq_labels = self._topic_labels, self._dlq_labels
        for topic, figures in topics.items():
            kind = figures.kind
            if kind == TopicKind.SYSTEM:
                continue
            labels = (cluster, broker, topic)
            if kind == TopicKind.NORMAL:
                topic_labels.add(offset, labels, figures.total_offset)
            elif kind == TopicKind.RETRY:
                topic_labels.add(retry, labels, figures.total_offset)
            else:
                group = topic[len(DLQ_GROUP_TOPIC_PREFIX) :]
                dlq_labels.add(dlq, (cluster, broker, group), figures.total_offset)
            if figures.has_put_stats:
                topic_labels.add(tps, labels, figures.put_tps)
                topic_labels.add(size, labels, figures.put_bytes_per_second)
        yield from (offset, retry, dlq, tps, size)

    def _exporter_groups(self, groups: list[GroupFigures]) -> Iterator[Metric]:
        cluster, broker, _ = self._ids()
        families = {
            name: GaugeMetricFamily(name, documentation, labels=GROUP_LABELS)
            for name, documentation in (
                ("rocketmq_consumer_tps", "GroupGetNums"),
                ("rocketmq_group_consume_tps", "GroupConsumeTPS"),
                ("rocketmq_consumer_offset", "GroupBrokerTotalOffset"),
                ("rocketmq_group_consume_total_offset", "GroupConsumeTotalOffset"),
                ("rocketmq_consumer_message_size", "GroupGetMessageSize"),
                ("rocketmq_send_back_nums", "SendBackNums"),
                ("rocketmq_group_get_latency_by_storetime", "GroupGetLatencyByStoreTime"),
            )
        }
        diffs = {
            kind: GaugeMetricFamily(name, documentation, labels=DIFF_LABELS)
            for kind, name, documentation in (
                (TopicKind.NORMAL, "rocketmq_group_diff", "GroupDiff"),
                (TopicKind.RETRY, "rocketmq_group_retrydiff", "GroupRetryDiff"),
                (TopicKind.DLQ, "rocketmq_group_dlqdiff", "GroupDLQDiff"),
            )
        }
        group_labels, diff_labels = self._group_labels, self._diff_labels
        for each in groups:
            labels = (cluster, broker, each.topic, each.group)
            clustering = each.message_model == MessageModel.CLUSTERING
            # As the exporter's MetricsCollectTask: the committed offsets summed (its
            # "GroupBrokerTotalOffset" is the consumer side, for every message model); the
            # latency and the diff for clustering groups only. rocketmq_group_consume_tps and
            # rocketmq_group_consume_total_offset are declared there but never filled.
            values: list[tuple[str, float]] = [("rocketmq_consumer_offset", each.consumer_offset)]
            if clustering:
                values.append(
                    ("rocketmq_group_get_latency_by_storetime", each.oldest_unconsumed_age_ms)
                )
            if each.has_get_stats:  # like the exporter: rates only where stats exist
                values += (
                    ("rocketmq_consumer_tps", each.get_tps),
                    ("rocketmq_consumer_message_size", each.get_bytes_per_second),
                    ("rocketmq_send_back_nums", each.send_back_per_minute),
                )
            for name, value in values:
                group_labels.add(families[name], labels, value)
            if not clustering:
                continue
            kind = _diff_kind(each.topic)
            diff_labels.add(
                diffs[kind],
                (each.group, each.topic, str(each.online_consumers), str(int(each.message_model))),
                each.lag,
            )
        yield from families.values()
        yield from diffs.values()

    def _exporter_broker(self) -> Iterator[Metric]:
        context = self._context
        cluster, broker, broker_ip = self._ids()
        rates = context.stats.rates(60_000)
        labels = (cluster, broker_ip, broker)
        for name, documentation, value in (
            ("rocketmq_broker_tps", "BrokerPutNums", rates[0]),
            ("rocketmq_broker_qps", "BrokerGetNums", rates[1]),
        ):
            yield gauge(name, documentation, BROKER_LABELS, labels, value)
        diff = GaugeMetricFamily(
            "rocketmq_broker_commitlog_diff", "brokerCommitLogDiffGauge", labels=BROKER_LABELS
        )
        if self.commit_log_diff is not None:
            try:
                for slave, behind_bytes in self.commit_log_diff():
                    diff.add_metric((cluster, slave, broker), behind_bytes)
            except Exception as error:  # a scrape must not fail on a replication hiccup
                _log.warning("commit-log diff unavailable: %s", error)
        yield diff
        consumers = GaugeMetricFamily("rocketmq_group_count", "GroupCount", labels=(
            "caddr", "localaddr", "group"))  # fmt: skip
        # As the exporter: one series per online consumer (caddr = its address, localaddr =
        # its client id), each valued at the group's online count.
        for group in context.consumers.groups():
            info = context.consumers.get_consumer_group_info(group)
            if info is None:
                continue
            for channel in info.channels.values():
                consumers.add_metric(
                    (channel.remote_address, channel.client_id, group), len(info.channels)
                )
        yield consumers
        producers = GaugeMetricFamily(
            "rocketmq_producer_count",
            "producer instance counter",
            labels=("cluster", "broker", "group"),
        )
        for group in context.producers.groups():
            count = len(context.producers.producer_connections(group))
            producers.add_metric((cluster, broker, group), count)
        yield producers

    def _exporter_runtime(self) -> Iterator[Metric]:
        context = self._context
        config = context.config
        numbers = runtime_numbers(context)
        info = context.stats.runtime_info()
        labels = (
            config.broker_cluster_name,
            config.broker_address,
            config.broker_ip1,
            info["brokerVersionDesc"],
            str(context.stats.boot_timestamp_ms),
            info["brokerVersion"],
        )
        prefix = "rocketmq_brokeruntime_"
        for label, suffix, count in pmdt_counts(context):
            documentation = "PutMessageDistributeTimeMap" + (
                "10toMore" if suffix == "10stomore" else suffix
            )
            del label
            yield gauge(prefix + "pmdt_" + suffix, documentation, RUNTIME_LABELS, labels, count)
        for suffix, documentation, key in _RUNTIME_GAUGES:
            if key in numbers:
                yield gauge(prefix + suffix, documentation, RUNTIME_LABELS, labels, numbers[key])
        for suffix, documentation, key in _DAY_GAUGES:
            yield gauge(prefix + suffix, documentation, RUNTIME_LABELS, labels, float(info[key]))
        for window_s in (600, 60, 10):
            put, got, found, missed = context.stats.rates(window_s * 1000)
            values = (put, got, found, missed, found + missed)
            for stem, documentation, index in _RATE_GAUGES:
                yield gauge(
                    f"{prefix}{stem}{window_s}",
                    f"{documentation}{window_s}",
                    RUNTIME_LABELS,
                    labels,
                    values[index],
                )

    # --- RocketMQ 5 names -------------------------------------------------------------------

    # --- Bolide's own -------------------------------------------------------------------------

    def _bolide(self) -> Iterator[Metric]:
        yield from bolide_families(self._context, self.flush_latency_us)


_CLIENT_FAMILIES = (
    (
        "rocketmq_client_consume_fail_msg_count",
        "consumerClientFailedMsgCounts",
        "consumeFailedMsgs",
    ),
    ("rocketmq_client_consume_fail_msg_tps", "consumerClientFailedTPS", "consumeFailedTPS"),
    ("rocketmq_client_consume_ok_msg_tps", "consumerClientOKTPS", "consumeOKTPS"),
    ("rocketmq_client_consume_rt", "consumerClientRT", "consumeRT"),
    ("rocketmq_client_consumer_pull_rt", "consumerClientPullRT", "pullRT"),
    ("rocketmq_client_consumer_pull_tps", "consumerClientPullTPS", "pullTPS"),
)
CLIENT_LABELS = ("clientAddr", "clientId", "group", "topic")


def _client_families(figures: list[ClientFigures]) -> Iterator[Metric]:
    for name, documentation, key in _CLIENT_FAMILIES:
        family = GaugeMetricFamily(name, documentation, labels=CLIENT_LABELS)
        for each in figures:
            if key in each.status:
                labels = (each.client_address, each.client_id, each.group, each.topic)
                family.add_metric(labels, each.status[key])
        yield family


class _Frozen(Collector):
    """One scrape's families, built by ``build`` from figures already read."""

    def __init__(self, build: Callable[[], Iterator[Metric]]) -> None:
        self._build = build

    def collect(self) -> Iterator[Metric]:
        return self._build()


def _diff_kind(topic: str) -> str:
    if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return TopicKind.RETRY
    if topic.startswith(DLQ_GROUP_TOPIC_PREFIX):
        return TopicKind.DLQ
    return TopicKind.NORMAL
