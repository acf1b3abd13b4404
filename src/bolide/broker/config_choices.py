"""The enumerated choices of broker.conf keys (brokerRole, newGroupStartRule,
metricsExporterType) and the metrics port's default; bolide.broker.config re-exports them."""

from __future__ import annotations

import enum

__all__ = ["DEFAULT_METRICS_PORT", "BrokerRole", "MetricsExporterType", "NewGroupStart"]


class NewGroupStart(enum.Enum):
    """Where a consumer group without a committed offset starts a queue (newGroupStartRule):
    what QUERY_CONSUMER_OFFSET answers it. See docs/architecture.md, "New consumer groups"."""

    MEMORY = "MEMORY"
    """RocketMQ's rule: offset 0 while the queue still starts at 0 and its first message is
    in the broker's memory window (within accessMessageInMemoryMaxRatio, 40 %, of physical
    memory from the commit log's end); else not found, and the client's consumeFromWhere
    decides (LAST_OFFSET: the max offset)."""
    QUEUE_START = "QUEUE_START"
    """Offset 0 whenever the queue still starts at 0, however old its messages."""
    CONSUME_FROM = "CONSUME_FROM"
    """Never an offset: the client's consumeFromWhere always decides."""


class BrokerRole(enum.Enum):
    """RocketMQ's brokerRole (docs/replication.md): a SYNC_MASTER answers a send once a slave
    has it, an ASYNC_MASTER at once; a SLAVE copies its master and refuses sends."""

    ASYNC_MASTER = "ASYNC_MASTER"
    SYNC_MASTER = "SYNC_MASTER"
    SLAVE = "SLAVE"

    @property
    def is_master(self) -> bool:
        return self is not BrokerRole.SLAVE


DEFAULT_METRICS_PORT = 5557
"""metricsPromExporterPort's default: rocketmq-exporter's and RocketMQ 5's Prometheus port."""


class MetricsExporterType(enum.Enum):
    """RocketMQ 5's metricsExporterType; Bolide serves PROM."""

    DISABLE = "DISABLE"
    OTLP_GRPC = "OTLP_GRPC"
    PROM = "PROM"
    LOG = "LOG"
