"""NameServerRegistration against real name servers: register, re-register on demand and on
the period, survive an unreachable name server, unregister at stop."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Iterator

import pytest

from bolide.base.clock import ManualClock
from bolide.base.types import Topic
from bolide.broker.registration import BrokerIdentity, NameServerRegistration
from bolide.namesrv.namesrv import NameServer
from bolide.protocol.bodies import DataVersion, TopicConfig, TopicConfigSerializeWrapper
from bolide.remoting import ClientPool
from bolide.testing.waiting import until

IDENTITY = BrokerIdentity("DefaultCluster", "broker-r", 0, "127.0.0.1:10911", "127.0.0.1:10912")


class Topics:
    """A growing topic table with a data version, as the TopicConfigManager offers it."""

    def __init__(self) -> None:
        self.table: dict[str, TopicConfig] = {"First": TopicConfig("First", 4, 4)}
        self.version = DataVersion(1, 1)

    def add(self, name: str) -> None:
        self.table[name] = TopicConfig(name, 2, 2)
        self.version = self.version.next(self.version.timestamp_ms + 1)

    def wrapper(self) -> TopicConfigSerializeWrapper:
        return TopicConfigSerializeWrapper(dict(self.table), self.version)


@pytest.fixture
async def name_servers() -> AsyncIterator[list[NameServer]]:
    servers = [NameServer(), NameServer()]
    for server in servers:
        await server.start()
    yield servers
    for server in servers:
        await server.stop()


@pytest.fixture
def refusing_socket() -> Iterator[socket.socket]:
    """A bound socket that does not listen: connects to its port are refused, and no other
    process can take the port while the test runs (a probed-then-closed port could be)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock


async def test_registers_with_every_name_server_and_unregisters(
    name_servers: list[NameServer],
) -> None:
    topics, pool, clock = Topics(), ClientPool(), ManualClock()
    registration = NameServerRegistration(
        IDENTITY, [s.address for s in name_servers], topics.wrapper, pool, clock=clock
    )
    try:
        assert await registration.start() == 2
        for server in name_servers:
            route = server.routes.route_for_topic(Topic("First"))
            assert route is not None
            assert route.broker_datas[0].broker_addrs == {0: "127.0.0.1:10911"}
        topics.add("Second")
        registration.register_soon()
        await until(lambda: registration.registration_count >= 4)
        assert all(s.routes.route_for_topic(Topic("Second")) is not None for s in name_servers)
        topics.add("Third")
        await until(lambda: clock.sleeper_count == 1)  # the service waits for its period
        clock.advance_ms(30_000)
        await until(lambda: registration.registration_count >= 6)
        assert all(s.routes.route_for_topic(Topic("Third")) is not None for s in name_servers)
        assert await registration.stop() == 2
        assert all(s.routes.route_for_topic(Topic("First")) is None for s in name_servers)
    finally:
        await pool.close()


async def test_an_unreachable_name_server_does_not_block_the_others(
    name_servers: list[NameServer],
    refusing_socket: socket.socket,
) -> None:
    topics, pool = Topics(), ClientPool()
    addresses = [f"127.0.0.1:{refusing_socket.getsockname()[1]}", name_servers[0].address]
    registration = NameServerRegistration(
        IDENTITY, addresses, topics.wrapper, pool, clock=ManualClock(), timeout_ms=2_000
    )
    try:
        assert await asyncio.wait_for(registration.register_once(), 10) == 1
        assert name_servers[0].routes.route_for_topic(Topic("First")) is not None
    finally:
        await registration.stop()
        await pool.close()
