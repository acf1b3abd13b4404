"""Request-reply (codes 324/325/326): a RequestProducer here, a replier in another process."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

import bolide
from bolide.base.errors import InvalidMessageError
from bolide.client import rpc
from bolide.client.message import Message
from bolide.client.producer.request import RequestProducer
from bolide.client.reply import ReplyTimeoutError, create_reply_message
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import SendMessageRequestHeader
from bolide.protocol.message import PropertyKey
from bolide.protocol.record import encode_properties
from bolide.testing.cluster import Cluster
from tests.client.conftest import create_topic

REPOSITORY = Path(__file__).resolve().parents[2]
REPLY_TOPIC = "DefaultCluster_REPLY_TOPIC"


def request_blocking(namesrv: str) -> list[bytes]:
    """Two requests through the blocking facade: ``request`` and ``request_async``."""
    with bolide.RequestProducer("blocking-requesters", namesrv) as producer:
        first = producer.request(Message("quotes", b"IBM"), 60_000)
        second = producer.request_async(Message("quotes", b"SAP"), 60_000).result()
    return [first.body, second.body]


async def test_request_is_answered_by_a_replier_in_another_process(cluster: Cluster) -> None:
    requester = RequestProducer("requesters", cluster.namesrv_address)
    await requester.start()
    await create_topic(
        requester.instance, cluster.broker("broker-a").config.broker_address, "quotes"
    )
    replier = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.client.reply_process", cluster.namesrv_address, "quotes",
        cwd=REPOSITORY, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        assert replier.stdout is not None and replier.stdin is not None
        assert (await replier.stdout.readline()).strip() == b"ready"
        reply = await requester.request(Message("quotes", b"AAPL"), timeout_ms=60_000)
        second = await requester.request(Message("quotes", b"MSFT"), timeout_ms=60_000)
        blocking = await asyncio.to_thread(request_blocking, cluster.namesrv_address)
    finally:
        if replier.stdin is not None:
            replier.stdin.close()
        await replier.wait()
        await requester.shutdown()
    assert reply.body == b"re:AAPL" and second.body == b"re:MSFT"
    assert blocking == [b"re:IBM", b"re:SAP"]
    assert reply.topic == REPLY_TOPIC
    assert reply.properties[PropertyKey.MSG_TYPE] == "reply"
    assert reply.properties[PropertyKey.REPLY_TO_CLIENT] == requester.instance.client_id
    assert PropertyKey.PUSH_REPLY_TIME in reply.properties
    assert len(requester.instance.replies) == 0


async def test_request_without_replier_times_out(cluster: Cluster) -> None:
    requester = RequestProducer("requesters", cluster.namesrv_address)
    await requester.start()
    try:
        await create_topic(
            requester.instance, cluster.broker("broker-a").config.broker_address, "quiet"
        )
        with pytest.raises(ReplyTimeoutError, match="no reply"):
            await requester.request(Message("quiet", b"hello"), timeout_ms=1_500)
        assert len(requester.instance.replies) == 0
    finally:
        await requester.shutdown()


async def test_reply_to_an_unknown_client_is_stored_and_refused(cluster: Cluster) -> None:
    requester = RequestProducer("requesters", cluster.namesrv_address)
    await requester.start()
    try:
        properties = {
            PropertyKey.CLUSTER: "DefaultCluster",
            PropertyKey.REPLY_TO_CLIENT: "nobody@1",
            PropertyKey.CORRELATION_ID: "c-1",
        }
        reply = create_reply_message(Message("quotes", b"q", properties=properties), b"r")
        header = SendMessageRequestHeader(
            "repliers", reply.topic, "TBW102", 4, 0, 0, 1, 0,
            encode_properties(reply.properties),
        )  # fmt: skip
        request = RemotingCommand.request(
            RequestCode.SEND_REPLY_MESSAGE_V2, header.to_v2_ext_fields(), b"r"
        )
        address = cluster.broker("broker-a").config.broker_address
        response = await rpc.call(
            requester.instance.pool, address, request, 3_000, accept=(ResponseCode.SYSTEM_ERROR,)
        )
        assert "channel of <nobody@1> not found" in (response.remark or "")
        assert cluster.broker("broker-a").context.store.max_offset(REPLY_TOPIC, 0) == 1
    finally:
        await requester.shutdown()


def test_reply_needs_a_request_message() -> None:
    with pytest.raises(InvalidMessageError, match="REPLY_TO_CLIENT"):
        create_reply_message(Message("quotes", b"plain"), b"r")
