"""Regressions found by bench/fuzz_grpc.py (issue 30), each against the real proxy."""

from __future__ import annotations

import asyncio

import grpc

from bolide.proxy.proto import definition_pb2 as pb
from bolide.proxy.proto import service_pb2 as spb
from bolide.proxy.server import ProxyConfig, ProxyServer
from bolide.testing.waiting import until
from tests.proxy.test_service import METADATA, SERVICE, Proxy, _message, proxy

__all__ = ["proxy"]  # the fixture, shared with test_service.py


async def test_an_undefined_message_type_is_refused_not_an_internal_error(proxy: Proxy) -> None:
    """A message type without an enum name (any int32 on the wire) made the refusal's text
    raise ValueError: the call ended UNKNOWN "Internal Server Error"."""
    send = spb.SendMessageRequest(messages=[_message("Ordered", b"x", "ID-9", message_type=999)])

    sent = await proxy.unary("SendMessage", send, spb.SendMessageResponse)

    assert sent.status.code == pb.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE
    assert "message type 999" in sent.status.message


async def test_a_born_timestamp_out_of_range_is_refused_not_an_internal_error(
    proxy: Proxy,
) -> None:
    """A born_timestamp outside protobuf's Timestamp range made ``ToMilliseconds`` raise
    ValueError out of the handler: the call ended UNKNOWN "Internal Server Error"."""
    message = _message("Plain", b"x", "ID-10")
    message.system_properties.born_timestamp.seconds = -(2**63)
    send = spb.SendMessageRequest(messages=[message])

    sent = await proxy.unary("SendMessage", send, spb.SendMessageResponse)

    assert sent.status.code == pb.BAD_REQUEST
    assert "born_timestamp is not a valid timestamp" in sent.status.message


def _pending_outbox_gets() -> list[asyncio.Task[object]]:
    return [
        task
        for task in asyncio.all_tasks()
        if not task.done() and not task.cancelling() and "Queue.get" in repr(task.get_coro())
    ]


async def test_a_cancelled_telemetry_call_leaves_no_pending_outbox_get(proxy: Proxy) -> None:
    """A Telemetry call reset while it waited for a push left its ``outbox.get()`` task
    behind ("Task was destroyed but it is pending!" once the session went)."""
    call = proxy.channel.stream_stream(
        SERVICE + "Telemetry",
        request_serializer=lambda m: m.SerializeToString(),
        response_deserializer=spb.TelemetryCommand.FromString,
    )
    stream = call(metadata=METADATA, timeout=10)
    command = spb.TelemetryCommand()
    command.settings.client_type = pb.PRODUCER
    await stream.write(command)
    await stream.read()  # the settings reply: the server now waits on the session's outbox
    session = proxy.server.clients.get(dict(METADATA)["x-mq-client-id"])
    await until(lambda: bool(_pending_outbox_gets()))

    stream.cancel()

    await until(lambda: not session.telemetry_open)  # the handler's finally ran
    assert _pending_outbox_gets() == []


async def test_a_connection_remembers_a_bounded_number_of_closed_streams(proxy: Proxy) -> None:
    """h2 remembered 65,536 closed streams per connection (~8 MiB): the soak's 5.x client
    grew the broker's heap by ~200 KiB/min over a whole run (issue 30)."""
    server = ProxyServer(
        [proxy.cluster.namesrv_address], port=0, config=ProxyConfig(closed_streams_max_count=8)
    )
    await server.start()
    try:
        async with grpc.aio.insecure_channel(server.address) as channel:
            call = channel.unary_unary(
                SERVICE + "QueryRoute",
                request_serializer=_serialize,
                response_deserializer=spb.QueryRouteResponse.FromString,
            )
            request = spb.QueryRouteRequest()
            request.topic.name = "Plain"
            for _ in range(40):
                answer = await call(request, metadata=METADATA, timeout=10)
                assert answer.status.code == pb.OK
            assert server._server is not None
            sizes = [
                len(protocol.connection._connection._closed_streams)
                for protocol in server._server.protocols
                if getattr(protocol, "connection", None) is not None
            ]
    finally:
        await server.stop()

    assert sizes == [8]  # one connection, its 40 finished calls remembered up to the bound


def _serialize(message: spb.QueryRouteRequest) -> bytes:
    return message.SerializeToString()
