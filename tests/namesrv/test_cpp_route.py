"""The real C++ client (rocketmq==0.4.4) reads routes from a Bolide name server.

A scratch broker (tests/compat/cpp_harness.py) registers with the name server; a C++
producer given only the name server's address must find the scratch broker through the route
JSON — for a registered topic, and for an unknown topic through the TBW102 fallback.
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bolide.namesrv import NameServer
from bolide.protocol.bodies import (
    DataVersion,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigSerializeWrapper,
)
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import RegisterBrokerRequestHeader, SendMessageRequestHeader
from bolide.remoting import ClientPool
from tests.compat.cpp_harness import (
    GET_ROUTEINFO_BY_TOPIC,
    SEND_MESSAGE,
    ScratchServer,
    destroy_producer,
    make_message,
    new_quiet_producer,
)

pytestmark = [pytest.mark.compat, pytest.mark.timeout(60)]


@pytest.fixture
async def scratch_broker() -> AsyncIterator[ScratchServer]:
    server = ScratchServer(broker_name="broker-a")
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
async def namesrv(scratch_broker: ScratchServer) -> AsyncIterator[NameServer]:
    server = NameServer()
    await server.start()
    pool = ClientPool()
    try:
        topics = {
            "TopicNs": TopicConfig("TopicNs", read_queue_count=2, write_queue_count=2),
            "TBW102": TopicConfig("TBW102", read_queue_count=8, write_queue_count=8, perm=7),
        }
        body = RegisterBrokerBody(
            TopicConfigSerializeWrapper(topics, DataVersion(1_700_000_000_000, 1))
        ).to_json()
        header = RegisterBrokerRequestHeader(
            broker_name="broker-a",
            broker_addr=scratch_broker.address,
            cluster_name="DefaultCluster",
            ha_server_addr="",
            broker_id=0,
            body_crc32=zlib.crc32(body) & 0x7FFFFFFF,
        )
        request = RemotingCommand.request(RequestCode.REGISTER_BROKER, header.to_ext_fields(), body)
        assert (await pool.invoke(server.address, request)).code == ResponseCode.SUCCESS
        yield server
    finally:
        await pool.close()
        await server.stop()


@pytest.fixture
async def producer(cpp_home: Path, namesrv: NameServer) -> AsyncIterator[Any]:
    del cpp_home  # a private HOME must be in place before the native library logs
    client = new_quiet_producer("PG_NAMESRV_ROUTE", namesrv.address)
    client.start()
    try:
        yield client
    finally:
        await asyncio.to_thread(destroy_producer, client)


async def test_cpp_producer_routes_through_bolide_name_server(
    producer: Any, scratch_broker: ScratchServer
) -> None:
    from rocketmq.client import SendStatus

    result = await asyncio.to_thread(producer.send_sync, make_message("TopicNs", "routed"))
    assert result.status == SendStatus.OK
    sends = scratch_broker.with_code(SEND_MESSAGE)
    assert len(sends) == 1
    header = SendMessageRequestHeader.from_ext_fields(sends[0].command.ext_fields)
    assert header.topic == "TopicNs"
    assert 0 <= header.queue_id < 2  # the route's two write queues
    assert scratch_broker.with_code(GET_ROUTEINFO_BY_TOPIC) == []  # asked us, not the broker


async def test_cpp_producer_falls_back_to_tbw102_route(
    producer: Any, scratch_broker: ScratchServer
) -> None:
    from rocketmq.client import SendStatus

    result = await asyncio.to_thread(producer.send_sync, make_message("NotYetCreated", "new"))
    assert result.status == SendStatus.OK
    sends = scratch_broker.with_code(SEND_MESSAGE)
    assert len(sends) == 1
    header = SendMessageRequestHeader.from_ext_fields(sends[0].command.ext_fields)
    assert (header.topic, header.default_topic) == ("NotYetCreated", "TBW102")
    assert 0 <= header.queue_id < 4  # TBW102's 8 queues clamped to the producer's 4
