"""A client's HTTP/2 GOAWAY (issue 29, finding 12(a)): the proxy finishes the call already
open on the connection, as the reference gRPC server does, before it closes; grpclib dropped
the connection at once and the client got "14 UNAVAILABLE: Connection dropped". Driven with
raw frames (hyperframe, hpack), since a gRPC client library cancels its own calls when it
closes the channel."""

from __future__ import annotations

import asyncio
import struct

from hpack import Decoder, Encoder
from hyperframe.frame import (
    DataFrame,
    Frame,
    GoAwayFrame,
    HeadersFrame,
    SettingsFrame,
)

from tests.proxy.test_service import SERVICE, Proxy, _receive_request
from tests.proxy.test_service import proxy as proxy  # the fixture

__all__ = ["proxy"]

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
READ_GUARD_S = 30.0


async def _frames(reader: asyncio.StreamReader) -> list[Frame]:
    """Every frame the server sends until it closes the connection."""
    frames: list[Frame] = []
    while True:
        try:
            head = await asyncio.wait_for(reader.readexactly(9), READ_GUARD_S)
        except asyncio.IncompleteReadError:
            return frames
        frame, length = Frame.parse_frame_header(memoryview(head))
        body = await reader.readexactly(length)
        frame.parse_body(memoryview(body))
        frames.append(frame)


async def test_an_open_call_finishes_after_the_clients_goaway(proxy: Proxy) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.server.port)
    try:
        request = _receive_request("Plain", "GoawayGroup", 30_000)
        request.long_polling_timeout.FromMilliseconds(1_000)  # the call is open a while
        payload = request.SerializeToString()
        headers = HeadersFrame(1, flags=["END_HEADERS"])
        headers.data = Encoder().encode(
            [
                (":method", "POST"),
                (":scheme", "http"),
                (":path", SERVICE + "ReceiveMessage"),
                (":authority", proxy.server.address),
                ("content-type", "application/grpc"),
                ("te", "trailers"),
                ("x-mq-client-id", "goaway-client@1"),
                ("x-mq-language", "PYTHON"),
            ]
        )
        data = DataFrame(1, flags=["END_STREAM"])  # half-closed, as the SDK's stream
        data.data = b"\x00" + struct.pack(">I", len(payload)) + payload
        writer.write(
            PREFACE + SettingsFrame(0).serialize() + headers.serialize() + data.serialize()
        )
        # GOAWAY at once: the client starts no new stream, the open one must still finish.
        writer.write(SettingsFrame(0, flags=["ACK"]).serialize())
        writer.write(GoAwayFrame(0, last_stream_id=0, error_code=0).serialize())
        await writer.drain()
        frames = await _frames(reader)
    finally:
        writer.close()
    decoder = Decoder()
    blocks = [
        {str(name): str(value) for name, value in decoder.decode(frame.data)}
        for frame in frames
        if isinstance(frame, HeadersFrame)
    ]
    statuses = [block["grpc-status"] for block in blocks if "grpc-status" in block]
    assert statuses == ["0"], blocks  # the call's own status, then the server closed
    # the proxy serves new connections as before
    assert await proxy.receive(_receive_request("Plain", "GoawayGroup", 30_000))
