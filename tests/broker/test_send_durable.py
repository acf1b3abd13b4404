"""The batch send's fast form (SEND_BATCH_MESSAGE stored at once, answered when the group
commit covering it completed) against the general path, under SYNC and ASYNC flush.

Two brokers of one cluster (same seed, same ManualClock) get the same request frames through
real Connections over in-memory transports: broker "fast" with the dispatcher's fast forms
on, broker "general" with them off. The commit log (byte for byte, the broker's own address
replaced by a placeholder), every consume-queue entry, the put statistics and every answer
frame must come out the same. Under SYNC flush a waiting batch is answered when its round
completes, so answers are compared by opaque rather than in wire order.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bolide.base.clock import ManualClock
from bolide.broker.broker import Broker
from bolide.protocol.bodies import TopicConfig
from bolide.protocol.codes import RequestCode
from bolide.protocol.command import FLAG_ONEWAY, RemotingCommand, decode_command, encode_command
from bolide.protocol.frame import FrameDecoder
from bolide.protocol.headers import SendMessageRequestHeader
from bolide.protocol.message import MessageSysFlag, PropertyKey
from bolide.protocol.record import BatchEntry, encode_batch_body, encode_properties
from bolide.remoting import Connection
from bolide.testing.cluster import Cluster
from bolide.testing.memory_transport import MemoryTransport
from bolide.testing.waiting import until

from .test_send_fast_path import (
    _PEER,
    _counts,
    _normalized,
    _odd_requests,
    _request,
    _requests,
    _state,
)


def _batch(
    topic: str,
    index: int,
    *,
    queue_id: int = 0,
    count: int = 3,
    properties: dict[str, str] | None = None,
    inner: dict[str, str] | None = None,
    sys_flag: int = 0,
    oneway: bool = False,
    body: bytes | None = None,
) -> bytes:
    header = SendMessageRequestHeader(
        producer_group="PG_BATCH",
        topic=topic,
        default_topic="TBW102",
        default_topic_queue_count=4,
        queue_id=queue_id,
        sys_flag=sys_flag,
        born_timestamp_ms=1_700_000_000_000 + index,
        flag=0,
        properties=encode_properties({PropertyKey.WAIT: "true", **(properties or {})}),
        reconsume_times=0,
        batch=True,
    )
    entries = [
        BatchEntry(
            i % 2,
            f"batch {index} message {i}".encode() * 3,
            encode_properties(
                {PropertyKey.UNIQ_KEY: f"0B00{index:016X}{i:012X}", PropertyKey.KEYS: f"k{i}"}
                | (inner or {})
            ),
        )
        for i in range(count)
    ]
    request = RemotingCommand.request(
        RequestCode.SEND_BATCH_MESSAGE,
        header.to_v2_ext_fields(),
        encode_batch_body(entries) if body is None else body,
        oneway=oneway,
    )
    request.opaque = index
    return encode_command(request)


def _frames() -> Iterator[bytes]:
    """Batches the fast form takes and batches it leaves to the general path, with singles."""
    index = 0
    for round_ in range(4):
        for queue_id in (0, 1, 3, -1):  # -1: the broker picks (its seeded random)
            index += 1
            yield _batch("BatchTopic", index, queue_id=queue_id, count=1 + round_ * 3)
        index += 1
        yield _request("BatchTopic", index, queue_id=2)  # a single send between batches
        index += 1
        yield _batch("BatchTopic", index, queue_id=9)  # beyond the queues: SYSTEM_ERROR
        index += 1
        yield _batch("BatchTopic", index, properties={PropertyKey.DELAY: "2"})  # refused
        index += 1
        yield _batch("BatchTopic", index, inner={PropertyKey.DELAY: "2"})  # inner delay
        index += 1
        yield _batch(f"Auto{round_}", index)  # unknown topic: auto-created
        index += 1
        yield _batch("%RETRY%PG_BATCH", index)  # retry topic: refused
        index += 1
        yield _batch("SCHEDULE_TOPIC_XXXX", index)  # forbidden system topic
        index += 1
        yield _batch("BatchTopic", index, sys_flag=MessageSysFlag.TRANSACTION_PREPARED)
        index += 1
        yield _batch("BatchTopic", index, body=b"\x00\x00\x00\x09broken")  # bad body
        index += 1
        yield _batch("BatchTopic", index, oneway=True)
        index += 1
        yield _batch("Multi", index, inner={PropertyKey.TAGS: "a||b"})
        index += 1
        yield _batch("BatchTopic", index, properties={PropertyKey.CLUSTER: "forged"})


async def _feed(broker: Broker, frames: list[bytes], *, fast: bool) -> dict[int, bytes]:
    """Every answer (normalized, by opaque) once all answered requests were answered."""
    dispatcher = broker.server.dispatcher
    dispatcher.fast_handlers_enabled = fast
    transport = MemoryTransport(_PEER, ("127.0.0.1", broker.port))
    connection = Connection(dispatcher)
    connection.connection_made(transport)
    decoder = FrameDecoder()
    answers: dict[int, bytes] = {}
    expected = 0

    def collect() -> bool:
        for frame in decoder.feed(transport.take()):
            answer = decode_command(frame)
            answers[answer.opaque] = _normalized(encode_command(answer), broker)
        return len(answers) == expected

    # Chunks of 4 share group-commit rounds; each chunk is answered before the next is fed,
    # so a send that suspends (an auto-created topic) is stored in the same order on both.
    for start in range(0, len(frames), 4):
        chunk = frames[start : start + 4]
        connection.data_received(b"".join(chunk))
        expected += sum(not _oneway(frame) for frame in chunk)
        await until(collect)
    connection.close()
    return answers


def _oneway(data: bytes) -> bool:
    (frame,) = FrameDecoder().feed(data)
    return bool(decode_command(frame).flag & FLAG_ONEWAY)


@pytest.mark.parametrize("flush", ["SYNC_FLUSH", "ASYNC_FLUSH"])
async def test_the_batch_fast_form_stores_and_answers_as_the_general_path(
    tmp_path: Path, flush: str
) -> None:
    settings = {"flushDiskType": flush}
    async with Cluster(
        tmp_path, broker_names=("fast", "general"), clock=ManualClock(), settings=settings
    ) as cluster:
        fast, general = cluster.broker("fast"), cluster.broker("general")
        for broker in (fast, general):
            topics = broker.context.topics
            assert await topics.update_topic_config(TopicConfig("BatchTopic", 4, 4))
            assert await topics.update_topic_config(
                TopicConfig("Multi", 2, 2, topic_filter_type="MULTI_TAG")
            )
        frames = list(_frames())
        answers_fast = await _feed(fast, frames, fast=True)
        answers_general = await _feed(general, frames, fast=False)
        assert fast.server.dispatcher.fast_answer_count >= 4 * 4  # the fast form did work
        assert general.server.dispatcher.fast_answer_count == 0
        assert answers_fast == answers_general
        assert _state(fast) == _state(general)
        assert _counts(fast) == _counts(general)


@pytest.mark.parametrize("form", ["scanned", "command"])
async def test_the_single_fast_forms_under_sync_flush_answer_as_the_general_path(
    tmp_path: Path, form: str
) -> None:
    settings = {"flushDiskType": "SYNC_FLUSH"}
    # "slow" (the general path) is as long as "fast": a timer message's recallHandle names its
    # broker, and _normalized masks the name in place (the frames keep their lengths).
    async with Cluster(
        tmp_path, broker_names=("fast", "slow"), clock=ManualClock(), settings=settings
    ) as cluster:
        fast, general = cluster.broker("fast"), cluster.broker("slow")
        for broker in (fast, general):
            topics = broker.context.topics
            assert await topics.update_topic_config(TopicConfig("FastTopic", 4, 4))
            assert await topics.update_topic_config(
                TopicConfig("Multi", 2, 2, topic_filter_type="MULTI_TAG")
            )
        frames = list(_requests())
        frames += _odd_requests(len(frames) + 1000)
        frames += [_batch("FastTopic", 5000 + i, queue_id=i % 4) for i in range(8)]
        fast.server.dispatcher.scanned_handlers_enabled = form == "scanned"
        answers_fast = await _feed(fast, frames, fast=True)
        answers_general = await _feed(general, frames, fast=False)
        assert fast.server.dispatcher.fast_answer_count >= 6 * 6 + 4 + 8
        assert answers_fast == answers_general
        assert _state(fast) == _state(general)
        assert _counts(fast) == _counts(general)
