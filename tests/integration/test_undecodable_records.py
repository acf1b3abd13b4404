"""One record no client can decode (here a compression type nobody knows) between good ones:
the push consumer delivers all three — the bad one flagged with ``body_error`` — and its
queue moves on. Before, the whole pull failed and the consumer pulled the same offset again
every 3 s, forever."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bolide.client.config import ConsumeFrom
from bolide.client.consumer.listener import ConsumeResult
from bolide.client.consumer.push_consumer import PushConsumer
from bolide.protocol.bodies import TopicConfig
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import SendMessageRequestHeader
from bolide.protocol.message import MessageExt
from bolide.protocol.record import encode_properties
from bolide.testing.cluster import Cluster
from bolide.testing.waiting import until
from tests.integration.wire import BrokerWire, connected

pytestmark = pytest.mark.timeout(120)

TOPIC = "Mixed"


def _send(body: bytes, sys_flag: int) -> RemotingCommand:
    header = SendMessageRequestHeader(
        producer_group="PG_MIXED",
        topic=TOPIC,
        default_topic="TBW102",
        default_topic_queue_count=1,
        queue_id=0,
        sys_flag=sys_flag,
        born_timestamp_ms=1_700_000_000_000,
        flag=0,
        properties=encode_properties({"WAIT": "true"}),
    )
    return RemotingCommand.request(RequestCode.SEND_MESSAGE, header.to_ext_fields(), body)


async def _store(cluster: Cluster, wire: BrokerWire) -> None:
    broker = cluster.brokers[0]
    await broker.context.topics.update_topic_config(TopicConfig(TOPIC, 1, 1))
    await broker.registration.register_once()
    for body, sys_flag in ((b"first", 0), (b"\x00garbage", 0x401), (b"third", 0)):
        assert (await wire.invoke(_send(body, sys_flag))).code == ResponseCode.SUCCESS


async def test_a_bad_record_is_delivered_flagged_and_the_queue_moves_on(tmp_path: Path) -> None:
    async with connected(tmp_path) as (cluster, wire):
        await _store(cluster, wire)
        seen: list[MessageExt] = []
        all_seen = asyncio.Event()

        async def listener(messages: list[MessageExt]) -> ConsumeResult:
            seen.extend(messages)
            if len(seen) >= 3:
                all_seen.set()
            return ConsumeResult.SUCCESS

        consumer = PushConsumer(
            "CG_MIXED", cluster.namesrv_address, consume_from=ConsumeFrom.FIRST_OFFSET
        )
        consumer.subscribe(TOPIC, "*")
        consumer.register_listener(listener)
        async with consumer:
            await asyncio.wait_for(all_seen.wait(), 60)
            offsets = cluster.brokers[0].context.offsets
            await consumer.persist_offsets()
            await until(lambda: offsets.query_offset("CG_MIXED", TOPIC, 0) == 3)
        by_offset = {m.queue_offset: m for m in seen}
        assert [by_offset[i].body_error is None for i in range(3)] == [True, False, True]
        assert by_offset[1].body == b"\x00garbage"  # as stored
        assert "unknown compression type 4" in (by_offset[1].body_error or "")
        assert [by_offset[i].body for i in (0, 2)] == [b"first", b"third"]
