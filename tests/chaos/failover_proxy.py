"""A fault-injecting TCP proxy for the failover chaos harness (loopback only).

One :class:`FaultProxy` stands in front of one listener (a broker's remoting port, an HA port,
a controller, an etcd member); a client that connects to the proxy instead of the listener
can then be cut off from it without touching either process:

* ``drop()``      every open connection is reset and new ones are closed at once (a crashed
                  peer, or a firewall answering RST);
* ``blackhole()`` connections stay open but every byte is discarded both ways (a partition:
                  the peer is silent, requests time out);
* ``pause()``     bytes are held, in order, until :meth:`heal` (a long GC pause or a stalled
                  link: requests arrive late, after their senders gave up);
* ``heal()``      back to forwarding (a connection a blackhole took bytes from is reset).

:class:`ProxyMesh` keeps one proxy per (source, destination) pair, so a partition between a
chosen pair cuts exactly that pair.
"""

from __future__ import annotations

import asyncio
import contextlib
from enum import Enum

READ_BYTES = 64 * 1024
"""One socket read of a forwarded stream."""


class LinkState(Enum):
    FORWARD = "forward"
    DROP = "drop"
    BLACKHOLE = "blackhole"
    PAUSE = "pause"


class FaultProxy:
    """Forwards 127.0.0.1:<port> to ``target`` (``host:port``) and injects link faults."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.state = LinkState.FORWARD
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self.connections = 0
        self.discarded_bytes = 0
        """Bytes a blackhole swallowed so far."""
        self._holed = False
        self.discarded = asyncio.Event()
        """Set whenever a blackhole swallows bytes (tests clear it and wait)."""

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("proxy not started")
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
        # Aborting both ends of every link ends its pumps; the tasks are asyncio's server's
        # (cancelling them would make it log the cancellation).
        self.state = LinkState.DROP
        self._flowing.set()
        self._reset_all()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=5)
        if server is not None:
            await server.wait_closed()

    # --- faults -----------------------------------------------------------------------------

    def drop(self) -> None:
        self.state = LinkState.DROP
        self._flowing.set()
        self._reset_all()

    def blackhole(self) -> None:
        self.state = LinkState.BLACKHOLE
        self._flowing.set()

    def pause(self) -> None:
        self.state = LinkState.PAUSE
        self._flowing.clear()

    def heal(self) -> None:
        """Forward again. Connections that lost bytes to a blackhole are reset first: TCP
        never delivers a stream with a hole in it (it retransmits, or the connection dies)."""
        if self.state is LinkState.BLACKHOLE and self._holed:
            self._reset_all()
        self._holed = False
        self.state = LinkState.FORWARD
        self._flowing.set()

    def _reset_all(self) -> None:
        for writer in list(self._writers):
            transport = writer.transport
            with contextlib.suppress(Exception):
                transport.abort()
        self._writers.clear()

    # --- forwarding -------------------------------------------------------------------------

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.state is LinkState.DROP:
            writer.transport.abort()
            return
        host, _, port = self.target.rpartition(":")
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(host, int(port))
        except OSError:
            writer.transport.abort()
            return
        self.connections += 1
        self._writers.update((writer, upstream_writer))
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            await asyncio.gather(
                self._pump(reader, upstream_writer), self._pump(upstream_reader, writer)
            )
        finally:
            for each in (writer, upstream_writer):
                self._writers.discard(each)
                each.transport.abort()
            if task is not None:
                self._tasks.discard(task)

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                data = await reader.read(READ_BYTES)
                if not data:
                    break
                await self._flowing.wait()
                if self.state is LinkState.DROP:
                    break
                if self.state is LinkState.BLACKHOLE:
                    self.discarded_bytes += len(data)
                    self._holed = True
                    self.discarded.set()
                    continue
                writer.write(data)
                await writer.drain()
        except (OSError, ConnectionError):
            pass
        finally:
            writer.transport.abort()


class ProxyMesh:
    """One :class:`FaultProxy` per (source, destination) pair: ``partition(a, b)`` cuts
    exactly that pair (both directions when each side dials through its own proxy)."""

    def __init__(self) -> None:
        self._proxies: dict[tuple[str, str], FaultProxy] = {}

    async def proxy_for(self, source: str, destination: str, target: str) -> FaultProxy:
        """The proxy ``source`` uses to reach ``destination`` (listening at ``target``)."""
        key = (source, destination)
        proxy = self._proxies.get(key)
        if proxy is None:
            proxy = FaultProxy(target)
            await proxy.start()
            self._proxies[key] = proxy
        return proxy

    def partition(self, first: str, second: str, *, blackhole: bool = True) -> int:
        """Cut the links between ``first`` and ``second``; returns how many proxies it cut."""
        cut = 0
        for (source, destination), proxy in self._proxies.items():
            if {source, destination} == {first, second}:
                if blackhole:
                    proxy.blackhole()
                else:
                    proxy.drop()
                cut += 1
        return cut

    def heal_all(self) -> None:
        for proxy in self._proxies.values():
            proxy.heal()

    async def stop(self) -> None:
        for proxy in self._proxies.values():
            await proxy.stop()
        self._proxies.clear()
