"""One broker's Prometheus registry and its /metrics endpoint."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.gc_collector import GCCollector
from prometheus_client.metrics_core import Metric
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

from bolide.base import limits
from bolide.base.service import Service
from bolide.broker.handlers.context import BrokerContext
from bolide.broker.metrics.client_stats import ClientStatsPoller
from bolide.broker.metrics.collector import BrokerCollector, CommitLogDiffSource
from bolide.broker.metrics.server import MetricsServer

__all__ = ["BrokerMetrics"]


class BrokerMetrics:
    """One broker's registry (its families plus the process, platform and GC collectors) and,
    once :meth:`serve` ran, its HTTP endpoint."""

    def __init__(self, context: BrokerContext) -> None:
        self._context = context
        self.registry = CollectorRegistry(auto_describe=False)
        self.collector = BrokerCollector(context)
        self.client_stats = ClientStatsPoller(context)
        self.collector.client_figures = lambda: self.client_stats.figures
        self._poll: Service | None = None
        self.registry.register(self.collector)
        self._extras: list[Collector] = [
            extra(registry=self.registry)
            for extra in (ProcessCollector, PlatformCollector, GCCollector)
        ]
        self.server: MetricsServer | None = None

    def _freeze(self) -> Collector:
        """One scrape, on the loop: the broker's figures read now; its families, and the
        process, platform and GC collectors', built later on the rendering thread."""
        return _Joined([self.collector.freeze(), *self._extras])

    def add_collector(self, collector: Collector) -> None:
        """Export ``collector``'s families too (controller mode's)."""
        self.registry.register(collector)
        self._extras.append(collector)

    def set_commit_log_diff_source(self, source: CommitLogDiffSource | None) -> None:
        """Replication's hook: ``source()`` yields ``(slave address, bytes behind)``."""
        self.collector.commit_log_diff = source

    async def serve(self, host: str, port: int) -> MetricsServer:
        """Start ``/metrics`` on ``host:port`` (0: a free port); raises OSError."""
        server = MetricsServer(self.registry, host, port, freeze=self._freeze)
        await server.start()
        self.server = server
        self._poll = Service(
            "broker-client-stats",
            self._poll_step,
            interval_ms=limits.CLIENT_STATS_POLL_INTERVAL_MS,
            clock=self._context.clock,
        )
        self._poll.start()
        return server

    async def _poll_step(self) -> None:
        await self.client_stats.poll_once()

    async def stop(self) -> None:
        poll, self._poll = self._poll, None
        if poll is not None:
            await poll.stop()
        server, self.server = self.server, None
        if server is not None:
            await server.stop()


class _Joined(Collector):
    """Several collectors' families, one after another (the registry's order)."""

    def __init__(self, collectors: list[Collector]) -> None:
        self._collectors = collectors

    def collect(self) -> Iterator[Metric]:
        for collector in self._collectors:
            yield from collector.collect()
