"""One broker's Prometheus registry and its /metrics endpoint."""

from __future__ import annotations

from prometheus_client import CollectorRegistry
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

from bolide.broker.handlers.context import BrokerContext
from bolide.broker.metrics.collector import BrokerCollector, CommitLogDiffSource
from bolide.broker.metrics.server import MetricsServer

__all__ = ["BrokerMetrics"]


class BrokerMetrics:
    """One broker's registry (its families plus the process, platform and GC collectors) and,
    once :meth:`serve` ran, its HTTP endpoint."""

    def __init__(self, context: BrokerContext) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.collector = BrokerCollector(context)
        self.registry.register(self.collector)
        for extra in (ProcessCollector, PlatformCollector, GCCollector):
            extra(registry=self.registry)
        self.server: MetricsServer | None = None

    def set_commit_log_diff_source(self, source: CommitLogDiffSource | None) -> None:
        """Replication's hook: ``source()`` yields ``(slave address, bytes behind)``."""
        self.collector.commit_log_diff = source

    async def serve(self, host: str, port: int) -> MetricsServer:
        """Start ``/metrics`` on ``host:port`` (0: a free port); raises OSError."""
        server = MetricsServer(self.registry, host, port)
        await server.start()
        self.server = server
        return server

    async def stop(self) -> None:
        server, self.server = self.server, None
        if server is not None:
            await server.stop()
