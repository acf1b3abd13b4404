"""The send fast path against the general path: the same requests, the same bytes.

Two brokers of one cluster (same seed, same ManualClock) get the same request frames through
real Connections over in-memory transports (the same peer address): broker "fast" with the
dispatcher's fast forms on (fed scanned header values, or commands), broker "general" ("slow"
where the answers must match byte for byte: a timer message's recallHandle names the broker)
with them off. The frames include the headers the Java and C++ clients write (C++: numbers among
the extFields, ``remark: ""``, a trailing newline), headers the send scan leaves to the
general path, and escapes. Everything must come out the same:
the commit log byte for byte, every consume-queue entry, every answer frame. The only
difference allowed is each broker's own address (its port), which is part of the stored
STOREHOST and of every message id: it is replaced by a placeholder before comparing.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from bolide.base.clock import ManualClock
from bolide.broker.broker import Broker
from bolide.protocol.bodies import TopicConfig
from bolide.protocol.codes import RequestCode
from bolide.protocol.command import RemotingCommand, encode_command
from bolide.protocol.headers import SendMessageRequestHeader
from bolide.protocol.headers.recall import RecallHandle
from bolide.protocol.message import MessageSysFlag, PropertyKey
from bolide.protocol.msgid import offset_message_id
from bolide.protocol.record import encode_properties
from bolide.remoting import Connection
from bolide.store.file_store import FileMessageStore
from bolide.testing.cluster import Cluster
from bolide.testing.memory_transport import MemoryTransport

_PEER = ("127.0.0.1", 45678)


def _request(
    topic: str,
    index: int,
    *,
    code: int = RequestCode.SEND_MESSAGE_V2,
    queue_id: int = 0,
    properties: dict[str, str] | None = None,
    sys_flag: int = 0,
    batch: bool = False,
    oneway: bool = False,
) -> bytes:
    props = {PropertyKey.UNIQ_KEY: f"0A000001{index:024X}", PropertyKey.WAIT: "true"}
    props.update(properties or {})
    header = SendMessageRequestHeader(
        producer_group="PG_FAST",
        topic=topic,
        default_topic="TBW102",
        default_topic_queue_count=4,
        queue_id=queue_id,
        sys_flag=sys_flag,
        born_timestamp_ms=1_700_000_000_000 + index,
        flag=index % 3,
        properties=encode_properties(props),
        reconsume_times=0,
        batch=batch,
    )
    fields = (
        header.to_ext_fields() if code == RequestCode.SEND_MESSAGE else header.to_v2_ext_fields()
    )
    request = RemotingCommand.request(code, fields, f"body {index}".encode() * 7, oneway=oneway)
    request.opaque = index
    return encode_command(request)


def _requests() -> Iterator[bytes]:
    """Sends the fast path answers and sends it leaves to the general path, interleaved."""
    index = 0
    for round_ in range(6):
        for queue_id in (0, 1, 3, -1):  # -1: the broker picks (its seeded random)
            index += 1
            tagged = {PropertyKey.TAGS: f"T{round_}", PropertyKey.KEYS: "k1 k2"}
            yield _request("FastTopic", index, queue_id=queue_id, properties=tagged)
        index += 1
        yield _request("FastTopic", index, code=RequestCode.SEND_MESSAGE, queue_id=2)
        index += 1
        yield _request("FastTopic", index, queue_id=9)  # beyond the queues: SYSTEM_ERROR
        index += 1
        yield _request("FastTopic", index, properties={PropertyKey.DELAY: "2"})  # scheduled
        index += 1
        yield _request("FastTopic", index, properties={"TIMER_DELAY_SEC": "5"})  # timer
        index += 1
        yield _request("FastTopic", index, properties={PropertyKey.CLUSTER: "forged"})
        index += 1
        yield _request(f"Auto{round_}", index)  # unknown topic: auto-created
        index += 1
        yield _request("%RETRY%PG_FAST", index)  # retry topic
        index += 1
        yield _request("SCHEDULE_TOPIC_XXXX", index)  # forbidden system topic
        index += 1
        yield _request("bad topic!", index)  # invalid name
        index += 1
        yield _request("FastTopic", index, sys_flag=MessageSysFlag.TRANSACTION_PREPARED)
        index += 1
        yield _request("FastTopic", index, oneway=True)
        index += 1
        yield _request("FastTopic", index, queue_id=1, properties={"TRAN_MSG": "true"})
        index += 1
        yield _request("Multi", index, properties={PropertyKey.TAGS: "a||b"})


def _cpp_request(
    index: int, topic: str = "FastTopic", *, queue_id: int = 1, edits: dict[str, str] | None = None
) -> bytes:
    """A send as the C++ client writes it (code 10, some values as JSON numbers); ``edits``
    replace parts of the header text."""
    header = (
        '{"code":10,"extFields":{"AccessKey":"","OnsChannel":"ALIYUN","Signature":"",'
        f'"producerGroup":"PG_CPP","topic":"{topic}","defaultTopic":"TBW102",'
        f'"defaultTopicQueueNums":4,"queueId":{queue_id},"sysFlag":0,'
        f'"bornTimestamp":"{1_700_000_000_000 + index}","flag":0,'
        f'"properties":"UNIQ_KEY\\u0001C{index:031X}\\u0002KEYS\\u0001k\\u00e9",'
        '"reconsumeTimes":"0","unitMode":"false","batch":"false"},'
        f'"flag":0,"language":"CPP","opaque":{index},"remark":"","version":63}}\n'
    )
    for old, new in (edits or {}).items():
        header = header.replace(old, new)
    data = header.encode()
    body = f"cpp body {index}".encode()
    total = 4 + len(data) + len(body)
    return total.to_bytes(4, "big") + len(data).to_bytes(4, "big") + data + body


def _odd_requests(first_index: int) -> Iterator[bytes]:
    """Headers the scan reads in an unusual form, or leaves to the general path."""
    index = first_index
    for queue_id in (0, 2, 7):  # 7: beyond the queues, SYSTEM_ERROR
        index += 1
        yield _cpp_request(index, queue_id=queue_id)
    index += 1
    yield _cpp_request(index, topic="%RETRY%PG_FAST")
    index += 1  # an escaped topic name
    yield _cpp_request(index, edits={'"FastTopic"': '"\\u0046astTopic"'})
    index += 1  # a header key the scan does not take
    yield _cpp_request(index, edits={'"version":63': '"version":63,"extra":[1]'})
    index += 1  # a queue id that is no number: the general path names the field
    yield _cpp_request(index, edits={'"queueId":1': '"queueId":"one"'})
    index += 1  # a repeated key: the last one counts
    yield _cpp_request(index, edits={'"queueId":1': '"queueId":"x","queueId":3'})


def _host_bytes(broker: Broker) -> bytes:
    return socket.inet_aton("127.0.0.1") + broker.port.to_bytes(4, "big")


def _normalized(data: bytes, broker: Broker) -> bytes:
    prefix = offset_message_id(("127.0.0.1", broker.port), 0)[:-16].encode()
    data = re.sub(rb'"recallHandle":"([^"]*)"', lambda m: _masked_handle(m, broker), data)
    return data.replace(_host_bytes(broker), b"<HOST!!>").replace(prefix, b"<" * len(prefix))


def _masked_handle(match: re.Match[bytes], broker: Broker) -> bytes:
    """A recall handle with its broker name masked (same length when names are)."""
    handle = RecallHandle.decode(match.group(1).decode())
    masked = RecallHandle(handle.topic, "*" * len(broker.config.broker_name),
                          handle.deliver_ms, handle.message_id)  # fmt: skip
    return b'"recallHandle":"' + masked.encode().encode() + b'"'


def _state(broker: Broker) -> tuple[bytes, dict[tuple[str, int], list[tuple[int, int, int]]]]:
    store = broker.context.store
    assert isinstance(store, FileMessageStore)
    log = store.read_commit_log(0, store.commit_log_max_offset) or b""
    assert len(log) == store.commit_log_max_offset
    entries = {
        (topic, queue_id): store.consume_queue_entries(topic, queue_id, 0, 1000)
        for topic, queue_ids in store.topics_and_queues().items()
        for queue_id in queue_ids
    }
    return _normalized(log, broker), entries


def _counts(broker: Broker) -> tuple[int, int, int, int]:
    stats = broker.context.stats
    return (
        stats.put_request_count,
        stats.put_total_messages,
        stats.put_total_bytes,
        stats.put_failure_count,
    )


def _feed(
    broker: Broker,
    frames: list[bytes],
    *,
    fast: bool,
    chunk: int,
    peer: tuple[str, int] | str = _PEER,
) -> bytes:
    dispatcher = broker.server.dispatcher
    dispatcher.fast_handlers_enabled = fast
    transport = MemoryTransport(peer, ("127.0.0.1", broker.port))
    connection = Connection(dispatcher)
    connection.connection_made(transport)
    for start in range(0, len(frames), chunk):
        connection.data_received(b"".join(frames[start : start + chunk]))
    connection.close()
    return _normalized(transport.take(), broker)


@pytest.mark.parametrize(("chunk", "form"), [(1, "scanned"), (16, "scanned"), (16, "command")])
async def test_the_fast_path_stores_and_answers_as_the_general_path(
    tmp_path: Path, chunk: int, form: str
) -> None:
    clock = ManualClock()
    # "slow" (the general path) is as long as "fast": a timer message's recallHandle names
    # its broker, and _normalized masks the name in place (the frames keep their lengths).
    async with Cluster(tmp_path, broker_names=("fast", "slow"), clock=clock) as cluster:
        fast, general = cluster.broker("fast"), cluster.broker("slow")
        for broker in (fast, general):
            topics = broker.context.topics
            assert await topics.update_topic_config(TopicConfig("FastTopic", 4, 4))
            assert await topics.update_topic_config(
                TopicConfig("Multi", 2, 2, topic_filter_type="MULTI_TAG")
            )
        frames = list(_requests())
        frames += _odd_requests(len(frames) + 1000)
        fast.server.dispatcher.scanned_handlers_enabled = form == "scanned"
        answers_fast = _feed(fast, frames, fast=True, chunk=chunk)
        answers_general = _feed(general, frames, fast=False, chunk=chunk)
        assert fast.server.dispatcher.fast_answer_count >= 6 * 6 + 4  # the fast path did work
        assert general.server.dispatcher.fast_answer_count == 0
        assert answers_fast == answers_general
        assert _state(fast) == _state(general)
        assert _counts(fast) == _counts(general)
        assert len(answers_fast) > 0


async def test_an_unusable_peer_address_is_answered_alike(tmp_path: Path) -> None:
    async with Cluster(tmp_path, broker_names=("fast", "general")) as cluster:
        fast, general = cluster.broker("fast"), cluster.broker("general")
        frames = [_request("FastTopic", 1), _request("FastTopic", 2, oneway=True)]
        answers = []
        for broker, on in ((fast, True), (general, False)):
            assert await broker.context.topics.update_topic_config(TopicConfig("FastTopic", 4, 4))
            answers.append(_feed(broker, frames, fast=on, chunk=2, peer="no address"))
            assert broker.context.stats.put_failure_count == 2
        assert answers[0] == answers[1]
        assert b"SYSTEM_ERROR" not in answers[0]  # the code is a number; the remark names it
        assert b"unusable" in answers[0]
