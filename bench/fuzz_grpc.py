"""Fuzz the 5.x gRPC proxy over HTTP/2 with the official protos (issue 30).

Structure-aware: for every method of ``apache.rocketmq.v2.MessagingService`` (the 5.x SDK's
generated modules, ``rocketmq.grpc_protocol``) the fuzzer builds a request — valid seeds for
routes, heartbeats, sends, receives and acks, and for every method a message filled field by
field from its descriptor — then mutates it through protobuf reflection (strings, numbers at
their edges, enums out of range, repeated fields emptied or grown, sub-messages dropped) or
as serialized bytes, with good, missing or garbage metadata; unknown method paths, raw garbage
and half an HTTP/2 preface go to the port too. A call answered with gRPC status UNKNOWN or
INTERNAL is counted as a server error (an exception escaped a handler). The liveness check is
a valid QueryRoute answered with Code OK.

    .venv/bin/python bench/fuzz_grpc.py [--seconds 60] [--seed 1] [--requests N]
"""

from __future__ import annotations

import asyncio
import random
import sys
from typing import Any

import grpc
from google.protobuf import descriptor as pb_descriptor
from google.protobuf import json_format
from google.protobuf.message import Message as ProtoMessage

from bench.fuzz_support import INTERESTING_INTS, Fuzzer, Mutator, ServerUnderTest, exchange, main
from bolide.client.admin import AdminClient
from bolide.protocol.bodies import SubscriptionGroupConfig

__all__ = ["FUZZER", "attack", "liveness", "prepare"]

CONCURRENT_CALLS = 256
"""Calls in flight at once on the one HTTP/2 channel (a long poll holds its call for
CALL_TIMEOUT_S: few calls in flight leave the proxy idle)."""
ROUND_EXCHANGES = 4_096
"""Calls between two liveness checks (a round waits for its slowest call)."""
CALL_TIMEOUT_S = 2.0
"""Deadline of one fuzzed call: long polls are cut short (DEADLINE_EXCEEDED is fine)."""
FILL_DEPTH_LEVELS = 4
"""How deep the descriptor-driven filler builds nested messages."""
TOPIC = "FuzzGrpc"
GROUP = "FuzzGrpcGroup"
SERVICE_NAME = "apache.rocketmq.v2.MessagingService"
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
_SERVER_FAULTS = (grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL)
_INT_RANGES = {
    pb_descriptor.FieldDescriptor.TYPE_INT32: (-(2**31), 2**31 - 1),
    pb_descriptor.FieldDescriptor.TYPE_SINT32: (-(2**31), 2**31 - 1),
    pb_descriptor.FieldDescriptor.TYPE_SFIXED32: (-(2**31), 2**31 - 1),
    pb_descriptor.FieldDescriptor.TYPE_UINT32: (0, 2**32 - 1),
    pb_descriptor.FieldDescriptor.TYPE_FIXED32: (0, 2**32 - 1),
    pb_descriptor.FieldDescriptor.TYPE_INT64: (-(2**63), 2**63 - 1),
    pb_descriptor.FieldDescriptor.TYPE_SINT64: (-(2**63), 2**63 - 1),
    pb_descriptor.FieldDescriptor.TYPE_SFIXED64: (-(2**63), 2**63 - 1),
    pb_descriptor.FieldDescriptor.TYPE_UINT64: (0, 2**64 - 1),
    pb_descriptor.FieldDescriptor.TYPE_FIXED64: (0, 2**64 - 1),
}
_NOT_SERVER_FAULTS = ("Invalid protobuf byte sequence", "Internal error from Core")
_faults: list[str] = []


def _service() -> Any:
    from rocketmq.grpc_protocol import service_pb2

    return service_pb2.DESCRIPTOR.services_by_name["MessagingService"]


def _message_class(descriptor: Any) -> Any:
    from google.protobuf import message_factory

    return message_factory.GetMessageClass(descriptor)


_SEEDS: dict[str, dict[str, Any]] = {
    "QueryRoute": {"topic": {"name": TOPIC}, "endpoints": {"scheme": "IPv4"}},
    "Heartbeat": {"group": {"name": GROUP}, "clientType": "SIMPLE_CONSUMER"},
    "SendMessage": {"messages": [{
        "topic": {"name": TOPIC}, "body": "aGVsbG8=",
        "systemProperties": {"messageId": "01FUZZ", "bodyEncoding": "IDENTITY",
                             "messageType": "NORMAL", "tag": "T"},
    }]},
    "ReceiveMessage": {
        "group": {"name": GROUP},
        "messageQueue": {"topic": {"name": TOPIC}, "id": -1, "broker": {"name": "b"}},
        "filterExpression": {"type": "TAG", "expression": "*"}, "batchSize": 4,
        "invisibleDuration": "30s", "longPollingTimeout": "1s",
    },
    "AckMessage": {"group": {"name": GROUP}, "topic": {"name": TOPIC},
                   "entries": [{"messageId": "01FUZZ", "receiptHandle": "x"}]},
    "QueryAssignment": {"topic": {"name": TOPIC}, "group": {"name": GROUP}},
}  # fmt: skip


def _fill(message: ProtoMessage, mutator: Mutator, depth: int) -> None:
    """Set a random subset of ``message``'s fields to random values of their types."""
    rng = mutator.rng
    for field in message.DESCRIPTOR.fields:
        if rng.random() < 0.4:
            continue
        if field.type == field.TYPE_MESSAGE:
            if depth <= 0:
                continue
            if field.message_type is None or field.message_type.GetOptions().map_entry:
                continue  # maps: left to the byte mutations
            if field.is_repeated:
                for _ in range(rng.randint(0, 3)):
                    _fill(getattr(message, field.name).add(), mutator, depth - 1)
            else:
                _fill(getattr(message, field.name), mutator, depth - 1)
                if field.containing_oneof is not None:
                    getattr(message, field.name).SetInParent()
            continue
        values = [_scalar(field, mutator) for _ in range(rng.randint(1, 3))]
        if field.is_repeated:
            getattr(message, field.name).extend(values)
        else:
            setattr(message, field.name, values[0])


def _scalar(field: Any, mutator: Mutator) -> Any:
    rng = mutator.rng
    if field.type == field.TYPE_STRING:
        text = mutator.text(rng.choice((TOPIC, GROUP, "", "*")))
        return text.encode("utf-8", "replace").decode("utf-8")  # protobuf refuses surrogates
    if field.type == field.TYPE_BYTES:
        return mutator.garbage(256)
    if field.type == field.TYPE_BOOL:
        return rng.random() < 0.5
    if field.type in (field.TYPE_DOUBLE, field.TYPE_FLOAT):
        return rng.choice((0.0, -1.0, 1e308, float("nan"), float("inf")))
    if field.type == field.TYPE_ENUM:
        numbers = [value.number for value in field.enum_type.values]
        return rng.choice([*numbers, max(numbers) + 1, 999])
    low, high = _INT_RANGES[field.type]
    candidates = [value for value in INTERESTING_INTS if low <= value <= high]
    return rng.choice([*candidates, rng.randint(low, high)])


def _request(method: Any, mutator: Mutator) -> bytes:
    rng = mutator.rng
    message = _message_class(method.input_type)()
    seed = _SEEDS.get(method.name)
    if seed is not None and rng.random() < 0.6:
        json_format.ParseDict(seed, message)
    if rng.random() < 0.7:
        _fill(message, mutator, FILL_DEPTH_LEVELS)
    data = bytes(message.SerializeToString())
    if rng.random() < 0.25:
        data = mutator.bytes(data)
    return data


def _metadata(mutator: Mutator) -> tuple[tuple[str, str], ...]:
    rng = mutator.rng
    roll = rng.random()
    if roll < 0.7:
        return (("x-mq-client-id", "fuzz@1"), ("x-mq-language", "PYTHON"))
    if roll < 0.85:
        return ()
    # HTTP/2 header values: printable ASCII only (grpcio refuses the rest before sending)
    client_id, language = (
        "".join(c for c in mutator.text(seed)[:256] if 32 < ord(c) < 127)
        for seed in ("fuzz@1", "JAVA")
    )
    return (("x-mq-client-id", client_id or "x"), ("x-mq-language", language or "X"))


async def _call(channel: grpc.aio.Channel, mutator: Mutator) -> None:
    rng = mutator.rng
    methods = list(_service().methods)
    method = rng.choice(methods)
    path = f"/{SERVICE_NAME}/{method.name}"
    if rng.random() < 0.03:
        path = "/" + mutator.text(SERVICE_NAME).encode("ascii", "replace").decode() + "/X"
    body = _request(method, mutator)
    metadata = _metadata(mutator)
    try:
        if method.client_streaming:
            call = channel.stream_stream(path)
            # One command: a second one written after the server ended the call (it refused
            # the first) fails in grpcio's core as INTERNAL on the client side alone.
            stream = call(iter([body]), metadata=metadata, timeout=CALL_TIMEOUT_S)
            async for _ in stream:
                pass
        elif method.server_streaming:
            async for _ in channel.unary_stream(path)(
                body, metadata=metadata, timeout=CALL_TIMEOUT_S
            ):
                pass
        else:
            await channel.unary_unary(path)(body, metadata=metadata, timeout=CALL_TIMEOUT_S)
    except grpc.aio.AioRpcError as error:
        # INTERNAL "Invalid protobuf byte sequence" is how gRPC servers (grpc-java, grpclib)
        # answer a request that does not parse: the expected answer to mangled bytes.
        # INTERNAL "Internal error from Core" is grpcio's own: its write failed because the
        # server had already ended the stream (a refusal before reading): not the server's.
        if error.code() in _SERVER_FAULTS and error.details() not in _NOT_SERVER_FAULTS:
            _faults.append(f"{method.name}: {error.code().name} {error.details()}")
    except ValueError:
        pass  # grpcio refused our metadata before sending: nothing reached the server


async def prepare(server: ServerUnderTest) -> None:
    async with AdminClient(server.listeners["namesrv"]) as admin:
        await admin.create_topic(TOPIC, queue_count=2)
        await admin.create_group(SubscriptionGroupConfig(GROUP))


async def attack(server: ServerUnderTest, rng: random.Random, budget: int) -> int:
    mutator = Mutator(rng)
    gate = asyncio.Semaphore(CONCURRENT_CALLS)
    address = server.address("proxy")
    _faults.clear()

    async with grpc.aio.insecure_channel(server.listeners["proxy"]) as channel:

        async def one() -> None:
            async with gate:
                roll = rng.random()
                if roll < 0.9:
                    await _call(channel, mutator)
                elif roll < 0.95:
                    await exchange(address, mutator.garbage(), slow=rng.random() < 0.3, rng=rng)
                else:
                    tail = mutator.garbage(512)
                    await exchange(address, PREFACE[: rng.randrange(len(PREFACE) + 1)] + tail)

        await asyncio.gather(*(one() for _ in range(budget)))
    server.client_side_errors.extend(_faults)
    return budget


async def liveness(server: ServerUnderTest) -> bool:
    from rocketmq.grpc_protocol import QueryRouteRequest, definition_pb2, service_pb2

    request = QueryRouteRequest()
    request.topic.name = TOPIC
    request.endpoints.scheme = definition_pb2.IPv4
    try:
        async with grpc.aio.insecure_channel(server.listeners["proxy"]) as channel:
            call = channel.unary_unary(
                f"/{SERVICE_NAME}/QueryRoute",
                request_serializer=lambda m: m.SerializeToString(),
                response_deserializer=service_pb2.QueryRouteResponse.FromString,
            )
            response = await call(
                request, metadata=(("x-mq-client-id", "live@1"),), timeout=CALL_TIMEOUT_S * 5
            )
    except grpc.aio.AioRpcError:
        return False
    return bool(response.status.code == definition_pb2.OK)


FUZZER = Fuzzer("grpc", attack, liveness, prepare, round_exchanges=ROUND_EXCHANGES)
"""What ``python bench/fuzz_grpc.py`` and tests/fuzz/ run."""

if __name__ == "__main__":
    sys.exit(main(FUZZER))
