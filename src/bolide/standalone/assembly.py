"""Name servers and brokers in one process: started in order, stopped in reverse.

``bolide standalone`` (one name server, one broker, then its front ends) and
``bolide.testing.cluster.Cluster`` (N name servers, M brokers) both hold their servers here,
so the start order (name servers first, each broker registered when its start returns) and
the stop order (brokers newest first, then name servers newest first) have one home.
A server joins the assembly only once its ``start`` returned, so a failed start is never
stopped.
"""

from __future__ import annotations

from bolide.broker.broker import Broker
from bolide.namesrv.namesrv import NameServer

__all__ = ["Assembly"]


class Assembly:
    """The started name servers and brokers of one process.

    ``namesrvs`` and ``brokers`` list them in start order; callers may remove a server they
    stopped themselves (a failover test stops a master by hand)."""

    def __init__(self) -> None:
        self.namesrvs: list[NameServer] = []
        self.brokers: list[Broker] = []

    async def start_name_server(self, name_server: NameServer) -> NameServer:
        """Start ``name_server`` and hold it; returns it."""
        await name_server.start()
        self.namesrvs.append(name_server)
        return name_server

    async def start_broker(self, broker: Broker) -> Broker:
        """Start ``broker`` (registered with its name servers when this returns) and hold it."""
        await broker.start()
        self.brokers.append(broker)
        return broker

    async def stop(self) -> None:
        """Stop every broker, then every name server, each newest first. Idempotent; the
        lists are emptied in place."""
        brokers = list(self.brokers)
        self.brokers.clear()
        for broker in reversed(brokers):
            await broker.stop()
        namesrvs = list(self.namesrvs)
        self.namesrvs.clear()
        for namesrv in reversed(namesrvs):
            await namesrv.stop()
