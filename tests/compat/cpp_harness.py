"""A scratch name server + broker that records what a real client sends, and helpers to drive
the C++ client (``rocketmq==0.4.4``, librocketmq 1.2.3) from tests.

The server answers just enough for a producer to work: GET_ROUTEINFO_BY_TOPIC with a route
pointing at itself, SEND_MESSAGE with a success header (the strings the C++ client needs),
everything else with an empty SUCCESS. Every request is kept, with its exact bytes, in arrival
order. It knows nothing of storage: it only proves what arrives on the wire.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from bolide.protocol.command import RemotingCommand, decode_command, encode_command
from bolide.protocol.frame import FrameDecoder, RawFrame, encode_frame_prefix
from bolide.protocol.msgid import offset_message_id
from tests.compat.native_shutdown import native_shutdown

GET_ROUTEINFO_BY_TOPIC = 105
SEND_MESSAGE = 10
PULL_MESSAGE = 11
SEND_MESSAGE_V2 = 310
SEND_BATCH_MESSAGE = 320
HEART_BEAT = 34
UNREGISTER_CLIENT = 35
SUCCESS = 0
PULL_NOT_FOUND = 19
FLAG_RESPONSE = 1
FLAG_ONEWAY = 2
WAIT_TIMEOUT_S = 60.0
"""Guard on waits for frames: fails a hung test instead of blocking it (never a measurement)."""


@dataclass(frozen=True, slots=True)
class CapturedRequest:
    """One request as received: the decoded command and the exact frame bytes."""

    connection_index: int
    command: RemotingCommand
    raw: bytes


def raw_frame_bytes(frame: RawFrame) -> bytes:
    """The frame's bytes as they were on the wire (length prefix, header, body)."""
    prefix = encode_frame_prefix(frame.serialize_type, len(frame.header), len(frame.body))
    return prefix + frame.header + frame.body


@dataclass
class ScratchServer:
    """Name server and broker on one 127.0.0.1 port; start with :meth:`start`."""

    queue_count: int = 4
    broker_name: str = "bolide-capture"
    requests: list[CapturedRequest] = field(default_factory=list)
    pull_records: dict[tuple[str, int], list[bytes]] = field(default_factory=dict)
    """Encoded records served to PULL_MESSAGE, by (topic, queue id); index = queue offset."""
    _server: asyncio.Server | None = None
    _changed: asyncio.Condition | None = None
    _connections: Iterator[int] = field(default_factory=itertools.count)
    _commit_log_offsets: Iterator[int] = field(default_factory=lambda: itertools.count(0, 1000))
    _queue_offsets: dict[int, Iterator[int]] = field(default_factory=dict)
    _writers: list[asyncio.StreamWriter] = field(default_factory=list)

    async def start(self) -> None:
        self._changed = asyncio.Condition()
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)

    @property
    def port(self) -> int:
        assert self._server is not None
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def stop(self) -> None:
        if self._server is None:
            return
        self._server.close()
        for writer in self._writers:
            writer.close()
        for writer in self._writers:
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
        await self._server.wait_closed()
        self._server = None

    def with_code(self, *codes: int) -> list[CapturedRequest]:
        return [request for request in self.requests if request.command.code in codes]

    async def wait_for(self, predicate: Callable[[], bool]) -> None:
        """Wait until ``predicate()`` holds, re-checked on every arriving request."""
        assert self._changed is not None
        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(predicate), WAIT_TIMEOUT_S)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.append(writer)
        connection_index = next(self._connections)
        decoder = FrameDecoder()
        with contextlib.suppress(ConnectionError):
            while data := await reader.read(65536):
                for frame in decoder.feed(data):
                    command = decode_command(frame)
                    if command.flag & FLAG_RESPONSE:
                        continue
                    self.requests.append(
                        CapturedRequest(connection_index, command, raw_frame_bytes(frame))
                    )
                    if not command.flag & FLAG_ONEWAY:
                        writer.write(encode_command(self._answer(command)))
                    await self._notify()
        writer.close()

    async def _notify(self) -> None:
        assert self._changed is not None
        async with self._changed:
            self._changed.notify_all()

    def _answer(self, request: RemotingCommand) -> RemotingCommand:
        if request.code == GET_ROUTEINFO_BY_TOPIC:
            return request.make_response(SUCCESS, body=self._route_body())
        if request.code in (SEND_MESSAGE, SEND_MESSAGE_V2, SEND_BATCH_MESSAGE):
            return request.make_response(SUCCESS, ext_fields=self._send_result(request))
        if request.code == PULL_MESSAGE:
            return self._pull_result(request)
        return request.make_response(SUCCESS)

    def _pull_result(self, request: RemotingCommand) -> RemotingCommand:
        fields = request.ext_fields
        records = self.pull_records.get((fields["topic"], int(fields["queueId"])), [])
        queue_offset = int(fields["queueOffset"])
        found = records[queue_offset : queue_offset + int(fields["maxMsgNums"])]
        ext_fields = {
            "suggestWhichBrokerId": "0",
            "nextBeginOffset": str(queue_offset + len(found)),
            "minOffset": "0",
            "maxOffset": str(len(records)),
        }
        if not found:
            return request.make_response(PULL_NOT_FOUND, ext_fields=ext_fields)
        return request.make_response(SUCCESS, ext_fields=ext_fields, body=b"".join(found))

    def _route_body(self) -> bytes:
        route: dict[str, Any] = {
            "brokerDatas": [
                {
                    "brokerAddrs": {"0": self.address},
                    "brokerName": self.broker_name,
                    "cluster": "DefaultCluster",
                }
            ],
            "filterServerTable": {},
            "queueDatas": [
                {
                    "brokerName": self.broker_name,
                    "perm": 6,
                    "readQueueNums": self.queue_count,
                    "topicSynFlag": 0,
                    "writeQueueNums": self.queue_count,
                }
            ],
        }
        return orjson.dumps(route)

    def _send_result(self, request: RemotingCommand) -> dict[str, str]:
        queue_id = max(0, int(request.ext_fields.get("queueId", "0")))
        offsets = self._queue_offsets.setdefault(queue_id, itertools.count())
        message_id = offset_message_id(("127.0.0.1", self.port), next(self._commit_log_offsets))
        return {
            "msgId": message_id,
            "queueId": str(queue_id),
            "queueOffset": str(next(offsets)),
            "MSG_REGION": "DefaultRegion",
            "TRACE_ON": "true",
        }


_PRODUCER_INSTANCE_NUMBERS = itertools.count(1)
"""Numbers the instance names of the C++ producers of this process (one client factory each)."""


def new_quiet_producer(group: str, namesrv_address: str, *, send_timeout_ms: int = 5000) -> Any:
    """A started-not C++ Producer logging at :data:`NATIVE_LOG_LEVEL` (set HOME to a temp dir
    first).

    ``send_timeout_ms`` bounds each of the (up to three) attempts of a synchronous send.
    """
    from rocketmq import ffi
    from rocketmq.client import Producer

    producer = Producer(group, timeout=send_timeout_ms)
    ffi.dll.SetProducerLogLevel(producer._handle, native_log_level())
    # librocketmq keeps one client factory (route tables, connections) per client id, process
    # wide; with the default instance name every producer of the test process shared it, and a
    # later test could inherit a connection to an earlier test's stopped broker on a reused port
    # (three attempts failing at once, reported as "No route info of this topic").
    instance_name = f"{group}-{next(_PRODUCER_INSTANCE_NUMBERS)}"
    ffi.dll.SetProducerInstanceName(producer._handle, instance_name.encode())
    producer.set_namesrv_addr(namesrv_address)
    return producer


def new_quiet_pull_consumer(group: str, namesrv_address: str) -> Any:
    """A started-not C++ PullConsumer logging at :data:`NATIVE_LOG_LEVEL` (set HOME first)."""
    from rocketmq import ffi
    from rocketmq.client import PullConsumer

    consumer = PullConsumer(group)
    ffi.dll.SetPullConsumerLogLevel(consumer._handle, native_log_level())
    consumer.set_namesrv_addr(namesrv_address)
    return consumer


def destroy_pull_consumer(consumer: Any) -> None:
    """Shut down and free the native pull consumer now."""
    from rocketmq import ffi

    handle = consumer._handle
    if handle is None:
        return
    with native_shutdown():
        consumer.shutdown()
    consumer._handle = None
    ffi.dll.DestroyPullConsumer(handle)


NATIVE_LOG_NAME_PART = "_rocketmq-cpp.log"
"""librocketmq's log files are ``$HOME/logs/rocketmq-cpp/<pid>_rocketmq-cpp.log.<n>``."""


NATIVE_LOG_LEVEL = "WARN"
"""librocketmq's log level for every C++ client of the tests (the level is process-wide): with a
single broker librocketmq 1.2.3 reports any failed send (response timeout, refused connection,
error code) as "No route info of this topic", and only its warnings say which; the compat
conftest attaches them to a failing test's report."""


def native_log_level() -> int:
    """:data:`NATIVE_LOG_LEVEL` as the wrapper's enum value."""
    from rocketmq import ffi

    return int(getattr(ffi._CLogLevel, NATIVE_LOG_LEVEL))


def native_log_lines() -> list[str]:
    """The warning and error lines librocketmq wrote in this process so far, oldest first.

    boost.log opens its file once, under the HOME of the process's first C++ client (an
    earlier test's), so the file is found among this process's open descriptors, and read
    through the descriptor: it still reads if that HOME has been deleted since.
    """
    lines: list[str] = []
    for descriptor in sorted(Path("/proc/self/fd").iterdir()):
        with contextlib.suppress(OSError):
            target = os.readlink(descriptor)
            if NATIVE_LOG_NAME_PART in target:
                text = descriptor.read_text(errors="replace")
                lines += [line for line in text.splitlines() if "](info)" not in line]
    return lines


def native_log_tail(line_count: int = 30) -> str:
    """The last ``line_count`` of :func:`native_log_lines` ("" when none)."""
    return "\n".join(native_log_lines()[-line_count:])


CONNECT_FAILURE_MARKS = ("can not connect to", "get timed_mutex timeout")
"""librocketmq 1.2.3's warnings for a connection it did not open (nothing was sent on it)."""


async def send_sync(producer: Any, message: Any) -> Any:
    """``producer.send_sync(message)`` on a worker thread; once more if librocketmq could not
    open a connection for it.

    With one broker librocketmq 1.2.3 makes a single attempt, and a connection another of its
    threads (the route or heartbeat timer) is still opening counts as failed at once, reported
    as "No route info of this topic". Nothing reached Bolide then, so a second call is what an
    application does. Any other failure (an error code, a response timeout) is raised as it
    is, librocketmq's warnings in the report (tests/compat/conftest.py).
    """
    from rocketmq.exceptions import RocketMQException

    lines_before = len(native_log_lines())
    try:
        return await asyncio.to_thread(producer.send_sync, message)
    except RocketMQException:
        fresh = native_log_lines()[lines_before:]
        if not any(mark in line for line in fresh for mark in CONNECT_FAILURE_MARKS):
            raise
    return await asyncio.to_thread(producer.send_sync, message)


def destroy_producer(producer: Any) -> None:
    """Shut down and free the native producer now (its __del__ would do it at a random time)."""
    from rocketmq import ffi

    handle = producer._handle
    if handle is None:
        return
    with native_shutdown():
        producer.shutdown()
    producer._handle = None
    ffi.dll.DestroyProducer(handle)


def make_message(
    topic: str,
    body: str,
    *,
    tags: str | None = None,
    keys: str | None = None,
    properties: dict[str, str] | None = None,
) -> Any:
    """A C++ Message with a text body (the wrapper cuts bodies at the first NUL)."""
    from rocketmq.client import Message

    message = Message(topic)
    message.set_body(body)
    if tags is not None:
        message.set_tags(tags)
    if keys is not None:
        message.set_keys(keys)
    for name, value in (properties or {}).items():
        message.set_property(name, value)
    return message


GOLDEN_DIRECTORY = Path(__file__).parent / "golden"
GOLDEN_TOPIC = "TopicGolden"
GOLDEN_GROUP = "PG_GOLDEN"


async def capture_golden_frames() -> dict[str, bytes]:
    """Record one frame of each kind the C++ producer sends, by kind.

    Run ``HOME=$(mktemp -d) .venv/bin/python -m tests.compat.cpp_harness`` to refresh
    tests/compat/golden/ (tests/protocol/test_message_cpp_golden.py decodes those files).
    """
    server = ScratchServer()
    await server.start()
    producer = new_quiet_producer(GOLDEN_GROUP, server.address)
    try:
        producer.start()
        sync = make_message(GOLDEN_TOPIC, "golden sync", tags="TagA", keys="key-1 key-2",
                            properties={"color": "blue"})  # fmt: skip
        await asyncio.to_thread(producer.send_sync, sync)
        await asyncio.to_thread(producer.send_oneway, make_message(GOLDEN_TOPIC, "golden oneway"))
        await asyncio.to_thread(
            producer.send_orderly, make_message(GOLDEN_TOPIC, "golden order"), 7
        )
        batch = [make_message(GOLDEN_TOPIC, f"golden batch {index}", tags="TagB", keys=f"b{index}")
                 for index in range(3)]  # fmt: skip
        await asyncio.to_thread(producer.send_batch, batch)
        await asyncio.to_thread(producer.send_sync, make_message(GOLDEN_TOPIC, "golden " * 700))
    finally:
        await asyncio.to_thread(destroy_producer, producer)
    await server.wait_for(lambda: bool(server.with_code(UNREGISTER_CLIENT)))
    await server.stop()
    sends = server.with_code(SEND_MESSAGE)
    frames = {
        "route_request": server.with_code(GET_ROUTEINFO_BY_TOPIC)[0],
        "send_sync": sends[0],
        "send_oneway": sends[1],
        "send_orderly": sends[2],
        "send_batch": sends[3],
        "send_compressed": sends[4],
        "unregister_client": server.with_code(UNREGISTER_CLIENT)[0],
    }
    return {name: captured.raw for name, captured in frames.items()}


def write_golden(directory: Path) -> list[Path]:
    """Capture the golden frames and write each to ``<directory>/<kind>.bin``."""
    frames = asyncio.run(capture_golden_frames())
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, raw in frames.items():
        path = directory / f"{name}.bin"
        path.write_bytes(raw)
        written.append(path)
    return written


if __name__ == "__main__":
    for written_path in write_golden(GOLDEN_DIRECTORY):
        print(written_path)
