"""The /metrics endpoint: a small HTTP/1.1 server on the broker's event loop.

The exposition text is prometheus_client's (``generate_latest``); only the socket handling is
ours, so the figures are read on the loop thread that owns the broker's tables (no locks)
and no web framework is needed in the broker. Building the families from those figures and
rendering them to text, the larger part of a big scrape's cost, run on a worker thread;
a family equal to the previous scrape's is not rendered again (:class:`RenderCache`).
One request per connection (``Connection: close``)
is all Prometheus needs. ``GET /metrics`` answers the exposition (gzip when asked);
The content type is the 0.0.4 text format every Prometheus version reads (prometheus_client's
newest default, 1.0.0, is the same text under a version older servers do not know).
``GET /`` a one-line page pointing at it; other paths 404, other methods 405; a request head
over :data:`~bolide.base.limits.METRICS_REQUEST_HEAD_MAX_BYTES` 431.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from bolide.base import limits

__all__ = ["MetricsServer", "RenderCache"]

_log = logging.getLogger("bolide.broker.metrics")

_INDEX = b'<html><body><a href="/metrics">/metrics</a></body></html>\n'


class MetricsServer:
    """Serves ``registry`` on ``host:port`` (port 0: a free one, see :attr:`port`)."""

    def __init__(
        self,
        registry: CollectorRegistry,
        host: str,
        port: int,
        freeze: Callable[[], Collector] | None = None,
    ) -> None:
        self._registry = registry
        self._freeze = freeze or (lambda: _Snapshot(registry.collect()))
        """Called on the loop at each scrape: reads what the scrape needs from live state;
        the collector it returns is collected and rendered on a worker thread."""
        self._host = host
        self._requested_port = port
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self.last_scrape_ms = 0.0
        """How long the latest scrape took to build, ms (wall time)."""
        self.last_collect_ms = 0.0
        """How long the latest scrape held the event loop (collecting the families), ms."""
        self._rendered = RenderCache()

    @property
    def port(self) -> int:
        if self._server is None or not self._server.sockets:
            return self._requested_port
        return int(self._server.sockets[0].getsockname()[1])

    @property
    def address(self) -> str:
        return f"{self._host}:{self.port}"

    async def start(self) -> None:
        """Listen; raises OSError when the port cannot be bound."""
        self._server = await asyncio.start_server(
            self._serve,
            self._host,
            self._requested_port,
            limit=limits.METRICS_REQUEST_HEAD_MAX_BYTES,
        )
        _log.info("metrics on http://%s/metrics", self.address)

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        for task in list(self._connections):
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*self._connections, return_exceptions=True)
        await server.wait_closed()

    def exposition(self) -> bytes:
        """The text a scrape gets, built entirely on the calling thread (tests, benchmark)."""
        return generate_latest(self._registry)

    async def exposition_off_loop(self) -> bytes:
        """The text a scrape gets: what the families need is read on the loop (the broker's
        live tables, see ``freeze``), then the families are built and rendered to text on a
        worker thread, so the loop is held only for the reading."""
        started = time.perf_counter()
        frozen = self._freeze()
        self.last_collect_ms = (time.perf_counter() - started) * 1000
        text = await asyncio.to_thread(self._render, frozen)
        self.last_scrape_ms = (time.perf_counter() - started) * 1000
        return text

    @property
    def rendered_count(self) -> int:
        """Families rendered to text so far (the others came from the render cache)."""
        return self._rendered.rendered_count

    def _render(self, frozen: Collector) -> bytes:
        return self._rendered.render(list(frozen.collect()))

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            if len(self._connections) >= limits.METRICS_CONNECTIONS_MAX_COUNT:
                writer.close()
                return
            self._connections.add(task)
        try:
            await self._answer(reader, writer)
        except (OSError, asyncio.IncompleteReadError, TimeoutError) as error:
            _log.debug("metrics connection dropped: %s", error)
        finally:
            if task is not None:
                self._connections.discard(task)
            writer.close()

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(
                reader.readuntil(b"\r\n\r\n"), limits.METRICS_REQUEST_READ_TIMEOUT_MS / 1000
            )
        except asyncio.LimitOverrunError:
            await _respond(writer, 431, b"request head too large\n", "text/plain")
            return
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3:
            await _respond(writer, 400, b"bad request line\n", "text/plain")
            return
        method, target, _ = parts
        headers = {
            name.strip().lower(): value.strip()
            for name, _, value in (line.partition(":") for line in lines[1:] if line)
        }
        path = target.split("?", 1)[0]
        if method not in ("GET", "HEAD"):
            await _respond(writer, 405, b"only GET\n", "text/plain", {"Allow": "GET, HEAD"})
        elif path == "/metrics":
            body = await self.exposition_off_loop()
            extra: dict[str, str] = {}
            if "gzip" in headers.get("accept-encoding", ""):
                body = gzip.compress(body, compresslevel=1)
                extra["Content-Encoding"] = "gzip"
            await _respond(
                writer, 200, body, CONTENT_TYPE_PLAIN_0_0_4, extra, head_only=method == "HEAD"
            )
        elif path == "/":
            await _respond(writer, 200, _INDEX, "text/html; charset=utf-8")
        else:
            await _respond(writer, 404, b"not found: try /metrics\n", "text/plain")


_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    431: "Request Header Fields Too Large",
}


async def _respond(
    writer: asyncio.StreamWriter,
    status: int,
    body: bytes,
    content_type: str,
    extra: dict[str, str] | None = None,
    *,
    head_only: bool = False,
) -> None:
    headers = {
        "Content-Type": content_type,
        "Content-Length": str(len(body)),
        "Connection": "close",
        **(extra or {}),
    }
    head = f"HTTP/1.1 {status} {_REASONS[status]}\r\n" + "".join(
        f"{name}: {value}\r\n" for name, value in headers.items()
    )
    writer.write(head.encode("latin-1") + b"\r\n" + (b"" if head_only else body))
    await writer.drain()


class _Snapshot(Collector):
    """Families already collected, rendered again as they are."""

    def __init__(self, families: Iterable[Metric]) -> None:
        self._families = list(families)

    def collect(self) -> Iterator[Metric]:
        return iter(self._families)


class RenderCache:
    """prometheus_client's text of each family, kept from the previous scrape: a family whose
    name, HELP, type and samples (labels and values) are all equal to last time is not
    rendered again. The text is byte for byte what ``generate_latest`` writes for the whole
    list (it renders family by family and joins). Used from one worker thread at a time."""

    def __init__(self) -> None:
        self._texts: dict[str, tuple[Metric, bytes]] = {}
        self._lock = threading.Lock()
        self.rendered_count = 0
        """Families rendered (not served from the cache) so far."""

    def render(self, families: list[Metric]) -> bytes:
        with self._lock:  # two scrapes at once: the second waits, then reuses the first's work
            texts: dict[str, tuple[Metric, bytes]] = {}
            parts: list[bytes] = []
            for family in families:
                cached = self._texts.get(family.name)
                if cached is None or not _same(cached[0], family):
                    cached = (family, generate_latest(_Snapshot((family,))))
                    self.rendered_count += 1
                texts[family.name] = cached
                parts.append(cached[1])
            self._texts = texts
            return b"".join(parts)


def _same(before: Metric, now: Metric) -> bool:
    return (
        before.type == now.type
        and before.documentation == now.documentation
        and before.unit == now.unit
        and before.samples == now.samples
    )
