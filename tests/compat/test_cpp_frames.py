"""What the real C++ client (rocketmq==0.4.4, librocketmq 1.2.3) sends, decoded by bolide.protocol.

A scratch name server + broker (tests/compat/cpp_harness.py) records every frame; the
assertions decode them with the frame, command and header codecs and the message layer.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from bolide.protocol.command import LanguageCode
from bolide.protocol.compression import compress_body, decompress_body
from bolide.protocol.headers.send import SendMessageRequestHeader
from bolide.protocol.record import (
    body_crc,
    decode_batch_body,
    decode_properties,
    encode_properties,
    encode_record,
)
from tests.compat.cpp_harness import (
    GET_ROUTEINFO_BY_TOPIC,
    PULL_MESSAGE,
    SEND_MESSAGE,
    UNREGISTER_CLIENT,
    CapturedRequest,
    ScratchServer,
    destroy_producer,
    destroy_pull_consumer,
    make_message,
    new_quiet_producer,
    new_quiet_pull_consumer,
)

pytestmark = [pytest.mark.compat, pytest.mark.timeout(60)]

_UNIQ_KEY = re.compile("[0-9A-F]{32}")
_CPP_WIRE_VERSION = 63  # MQVersion V3_1_8


@pytest.fixture
async def producer(
    cpp_home: Path, scratch_server: ScratchServer, request: pytest.FixtureRequest
) -> AsyncIterator[Any]:
    del cpp_home  # a private HOME must be in place before the native library logs
    group = f"PG_{request.node.name}"[:60]
    client = new_quiet_producer(group, scratch_server.address)
    client.start()
    try:
        yield client
    finally:
        await asyncio.to_thread(destroy_producer, client)


async def _sends(server: ScratchServer, count: int) -> list[CapturedRequest]:
    await server.wait_for(lambda: len(server.with_code(SEND_MESSAGE)) >= count)
    return server.with_code(SEND_MESSAGE)


def _header(request: CapturedRequest) -> SendMessageRequestHeader:
    return SendMessageRequestHeader.from_ext_fields(request.command.ext_fields)


async def _call(function: Callable[..., Any], *arguments: Any) -> Any:
    """The wrapper blocks in native code: run it off the loop that serves it."""
    return await asyncio.to_thread(function, *arguments)


async def test_send_sync_with_tags_keys_and_property(
    producer: Any, scratch_server: ScratchServer
) -> None:
    message = make_message(
        "TopicSync", "hello bolide", tags="TagA", keys="order-1 order-2", properties={"p": "v"}
    )
    result = await _call(producer.send_sync, message)

    route_requests = scratch_server.with_code(GET_ROUTEINFO_BY_TOPIC)
    assert route_requests[0].command.ext_fields["topic"] == "TopicSync"
    (send,) = await _sends(scratch_server, 1)
    command = send.command
    assert command.language == LanguageCode.CPP
    assert command.version == _CPP_WIRE_VERSION
    assert command.flag == 0
    # Every C++ request carries the signing fields, even without credentials.
    assert {"AccessKey", "OnsChannel", "Signature"} <= command.ext_fields.keys()
    header = _header(send)
    assert header.topic == "TopicSync"
    assert header.producer_group == "PG_test_send_sync_with_tags_keys_and_property"
    assert header.default_topic == "TBW102"
    assert header.default_topic_queue_count == 4
    assert 0 <= header.queue_id < 4
    assert header.sys_flag == 0
    assert header.flag == 0
    assert not header.batch
    assert command.body == b"hello bolide"
    assert header.properties is not None
    assert header.properties.endswith("\x02")  # the C++ form: a separator after every pair
    properties = decode_properties(header.properties)
    assert properties["TAGS"] == "TagA"
    assert properties["KEYS"] == "order-1 order-2"
    assert properties["p"] == "v"
    assert properties["WAIT"] == "true"
    assert _UNIQ_KEY.fullmatch(properties["UNIQ_KEY"])
    # librocketmq reports the UNIQ_KEY as the message id, and our queue offset.
    assert result.msg_id == properties["UNIQ_KEY"]
    assert result.offset == 0


async def test_send_oneway_arrives_unmarked(producer: Any, scratch_server: ScratchServer) -> None:
    await _call(producer.send_oneway, make_message("TopicOneway", "fire and forget", tags="T1"))

    (send,) = await _sends(scratch_server, 1)
    # The C++ client sets the oneway bit after encoding, so the frame says flag 0.
    assert send.command.flag == 0
    header = _header(send)
    assert header.topic == "TopicOneway"
    assert decode_properties(header.properties or "")["TAGS"] == "T1"
    assert send.command.body == b"fire and forget"


async def test_send_orderly_uses_the_selected_queue(
    producer: Any, scratch_server: ScratchServer
) -> None:
    for body, argument in (("first", 7), ("second", 5)):
        await _call(producer.send_orderly, make_message("TopicOrderly", body), argument)

    first, second = await _sends(scratch_server, 2)
    # The default selector is argument % queue count: 7 % 4 and 5 % 4.
    assert _header(first).queue_id == 3
    assert _header(second).queue_id == 1
    assert [first.command.body, second.command.body] == [b"first", b"second"]


async def test_send_batch_carries_inner_messages(
    producer: Any, scratch_server: ScratchServer
) -> None:
    bodies = [f"batch body {index}" for index in range(3)]
    messages = [
        make_message("TopicBatch", body, tags="TB", keys=f"k{i}") for i, body in enumerate(bodies)
    ]
    await _call(producer.send_batch, messages)

    (send,) = await _sends(scratch_server, 1)
    assert send.command.ext_fields["batch"] == "1"  # not "true": a Java broker misreads it
    header = _header(send)
    assert header.batch
    assert header.topic == "TopicBatch"
    assert decode_properties(header.properties or "") == {"WAIT": "true"}
    entries = decode_batch_body(send.command.body)
    assert [entry.body.decode() for entry in entries] == bodies
    inner = [decode_properties(entry.properties) for entry in entries]
    assert [properties["KEYS"] for properties in inner] == ["k0", "k1", "k2"]
    assert all(properties["TAGS"] == "TB" for properties in inner)
    unique_keys = [properties["UNIQ_KEY"] for properties in inner]
    assert all(_UNIQ_KEY.fullmatch(key) for key in unique_keys)
    assert len(set(unique_keys)) == 3
    assert all(entry.flag == 0 for entry in entries)


async def test_large_body_is_zlib_compressed(producer: Any, scratch_server: ScratchServer) -> None:
    text = "compress me " * 500  # 6000 bytes, over the 4096-byte threshold
    await _call(producer.send_sync, make_message("TopicBig", text))

    (send,) = await _sends(scratch_server, 1)
    header = _header(send)
    assert header.sys_flag & 0x1
    assert len(send.command.body) < len(text)
    assert decompress_body(send.command.body) == text.encode()


async def test_route_and_unregister_requests(cpp_home: Path, scratch_server: ScratchServer) -> None:
    del cpp_home
    client = new_quiet_producer("PG_route_unregister", scratch_server.address)
    client.start()
    try:
        await _call(client.send_sync, make_message("TopicRoute", "x"))
    finally:
        await _call(destroy_producer, client)

    await scratch_server.wait_for(lambda: bool(scratch_server.with_code(UNREGISTER_CLIENT)))
    (unregister,) = scratch_server.with_code(UNREGISTER_CLIENT)
    fields = unregister.command.ext_fields
    assert fields["producerGroup"] == "PG_route_unregister"
    assert fields["consumerGroup"] == ""
    # <pid>-<ip>@<instance name>; the harness names each producer's instance (own client factory)
    assert re.fullmatch(r"\d+-127\.0\.0\.1@PG_route_unregister-\d+", fields["clientID"])
    route = scratch_server.with_code(GET_ROUTEINFO_BY_TOPIC)[0]
    assert route.command.body == b""
    # The JSON header as the C++ client writes it: jsoncpp FastWriter output.
    header = route.raw[8 : 8 + int.from_bytes(route.raw[4:8], "big")]
    assert header.endswith(b"\n")
    parsed = orjson.loads(header)
    assert parsed["language"] == "CPP"
    assert parsed["remark"] == ""
    assert "serializeTypeCurrentRPC" not in parsed


def _pulled(consumer: Any, topic: str) -> list[dict[str, Any]]:
    """Everything ``consumer.pull(topic)`` yields, read before the native result is freed."""
    return [
        {
            "topic": message.topic,
            "body": message.body,
            "tags": message.tags,
            "keys": message.keys,
            "id": message.id,
            "color": message.get_property("color"),
            "queue_id": message.queue_id,
            "queue_offset": message.queue_offset,
            "commit_log_offset": message.commit_log_offset,
            "born_timestamp": message.born_timestamp,
            "store_timestamp": message.store_timestamp,
            "store_size": message.store_size,
            "reconsume_times": message.reconsume_times,
        }
        for message in consumer.pull(topic)
    ]


async def test_cpp_pull_consumer_decodes_our_records(
    cpp_home: Path, scratch_server: ScratchServer
) -> None:
    """The reverse direction: records from encode_record, read by the C++ message decoder."""
    del cpp_home
    topic = "TopicPullDecode"
    plain_bodies = [b"first record", b"second record", b"compressed " * 400]
    records = []
    for queue_offset, plain in enumerate(plain_bodies):
        compressed = len(plain) > 4096
        stored = compress_body(plain) if compressed else plain
        properties = {
            "TAGS": f"Tag{queue_offset}",
            "KEYS": f"key-{queue_offset} other",
            "UNIQ_KEY": f"{queue_offset:032X}",
            "color": "blue",
        }
        records.append(
            encode_record(
                topic=topic.encode(),
                body=stored,
                flag=0,
                properties=encode_properties(properties).encode(),
                queue_id=1,
                queue_offset=queue_offset,
                commit_log_offset=10_000 + 1_000 * queue_offset,
                sys_flag=int(compressed),
                born_timestamp_ms=1_700_000_000_000 + queue_offset,
                born_host=("10.0.0.7", 50000),
                store_timestamp_ms=1_700_000_001_000 + queue_offset,
                store_host=("127.0.0.1", scratch_server.port),
                reconsume_times=queue_offset,
                prepared_transaction_offset=0,
                body_crc=body_crc(stored),
            )
        )
    scratch_server.pull_records[(topic, 1)] = records
    consumer = new_quiet_pull_consumer("CG_pull_decode", scratch_server.address)
    consumer.start()
    try:
        pulled = await _call(_pulled, consumer, topic)
    finally:
        await _call(destroy_pull_consumer, consumer)

    assert [message["body"] for message in pulled] == plain_bodies
    for queue_offset, message in enumerate(pulled):
        assert message["topic"] == topic
        assert message["tags"] == f"Tag{queue_offset}".encode()
        assert message["keys"] == f"key-{queue_offset} other".encode()
        assert message["color"] == b"blue"
        assert message["id"] == f"{queue_offset:032X}"  # UNIQ_KEY is the message id
        assert message["queue_id"] == 1
        assert message["queue_offset"] == queue_offset
        assert message["commit_log_offset"] == 10_000 + 1_000 * queue_offset
        assert message["born_timestamp"] == 1_700_000_000_000 + queue_offset
        assert message["store_timestamp"] == 1_700_000_001_000 + queue_offset
        assert message["store_size"] == len(records[queue_offset])
        assert message["reconsume_times"] == queue_offset
    pulls = scratch_server.with_code(PULL_MESSAGE)
    assert {int(pull.command.ext_fields["queueId"]) for pull in pulls} == {0, 1, 2, 3}
