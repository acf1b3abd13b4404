"""The gRPC server library under the 5.x proxy: grpclib (pure Python HTTP/2 over h2, what the
proxy runs on) against grpcio's asyncio server (the reference implementation, C core), on
the two things issue 29 asks about:

* **CPU per call**: one unary method answering at once, called ``--calls`` times with
  ``--window`` calls in flight on one grpcio channel (what the 5.x SDKs use); the request is a
  SendMessageRequest with one 1 KiB message, the answer a SendMessageResponse. The server
  runs in a child process; its CPU time (user + system, /proc: Linux only) per call is the
  figure: the framework's share of a 5.x send, without the proxy's own work or the broker.
* **GOAWAY with a call open**: a raw HTTP/2 client (hyperframe, hpack) opens a call the
  server answers after 300 ms, half-closes it and sends GOAWAY at once; reported is whether
  the call's grpc-status reached the client before the server closed the connection. The
  grpclib server is run as plain grpclib and as the proxy's patched protocol.

    .venv/bin/python bench/grpc_server_overhead.py [--calls 20000] [--window 32]
"""

from __future__ import annotations

import argparse
import asyncio
import struct
import sys
import time
from typing import Any

SERVICE = "bench.Echo"
SLOW_ANSWER_S = 0.3
READY = "ready"


def _answer() -> bytes:
    from bolide.proxy.proto import definition_pb2 as pb
    from bolide.proxy.proto import service_pb2 as spb

    response = spb.SendMessageResponse()
    response.status.code = pb.OK
    entry = response.entries.add()
    entry.message_id = "0" * 32
    entry.transaction_id = "0" * 32
    entry.offset = 1
    return response.SerializeToString()


def _request_bytes() -> bytes:
    from bolide.proxy.proto import service_pb2 as spb

    request = spb.SendMessageRequest()
    message = request.messages.add(body=b"x" * 1024)
    message.topic.name = "Bench"
    message.system_properties.message_id = "0" * 32
    return request.SerializeToString()


# ---- the servers (child process) --------------------------------------------------------------


async def _serve_grpcio() -> None:
    import grpc

    answer = _answer()

    async def call(request: bytes, context: Any) -> bytes:
        return answer

    async def slow(request: bytes, context: Any) -> bytes:
        await asyncio.sleep(SLOW_ANSWER_S)
        return answer

    handlers = {
        "Call": grpc.unary_unary_rpc_method_handler(call),
        "Slow": grpc.unary_unary_rpc_method_handler(slow),
    }
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    print(READY, port, flush=True)
    await server.wait_for_termination()


async def _serve_grpclib(patched: bool) -> None:
    from grpclib.const import Cardinality, Handler
    from grpclib.server import Server, Stream

    from bolide.proxy.server import _Server

    answer = _answer()

    class Codec:
        __content_subtype__ = "proto"

        def encode(self, message: Any, message_type: Any) -> bytes:
            return bytes(message)

        def decode(self, data: bytes, message_type: Any) -> bytes:
            return data

    class Echo:
        def __mapping__(self) -> dict[str, Handler]:
            return {
                f"/{SERVICE}/Call": Handler(self.call, Cardinality.UNARY_UNARY, bytes, bytes),
                f"/{SERVICE}/Slow": Handler(self.slow, Cardinality.UNARY_UNARY, bytes, bytes),
            }

        async def call(self, stream: Stream[bytes, bytes]) -> None:
            await stream.recv_message()
            await stream.send_message(answer)

        async def slow(self, stream: Stream[bytes, bytes]) -> None:
            await stream.recv_message()
            await asyncio.sleep(SLOW_ANSWER_S)
            await stream.send_message(answer)

    if patched:
        server: Server = _Server([Echo()], 1_024)  # type: ignore[list-item]
    else:
        server = Server([Echo()])
    server._codec = Codec()  # type: ignore[assignment]  # raw bytes in and out
    await server.start("127.0.0.1", 0)
    listening: Any = server._server  # the asyncio.Server grpclib keeps
    print(READY, listening.sockets[0].getsockname()[1], flush=True)
    await server.wait_closed()


def serve(kind: str) -> None:
    from bolide.remoting import loop as remoting_loop

    if kind == "grpcio":
        asyncio.run(_serve_grpcio())
        return
    loop = remoting_loop.new_event_loop()  # uvloop, as the proxy runs
    loop.run_until_complete(_serve_grpclib(patched=kind == "proxy"))


# ---- the client (this process) ----------------------------------------------------------------


async def _start(kind: str) -> tuple[asyncio.subprocess.Process, int]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench.grpc_server_overhead", "--serve", kind,
        stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert process.stdout is not None
    line = (await asyncio.wait_for(process.stdout.readline(), 30)).decode().split()
    if not line or line[0] != READY:
        raise RuntimeError(f"{kind} server did not start")
    return process, int(line[1])


async def _calls(port: int, count: int, window: int) -> float:
    import grpc

    payload = _request_bytes()
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = channel.unary_unary(f"/{SERVICE}/Call")
        await call(payload)  # connect
        next_index = 0
        started = time.perf_counter()

        async def worker() -> None:
            nonlocal next_index
            while next_index < count:
                next_index += 1
                await call(payload, timeout=30)

        await asyncio.gather(*(worker() for _ in range(window)))
        return time.perf_counter() - started


async def _goaway_answered(port: int) -> bool:
    from hpack import Decoder, Encoder
    from hyperframe.frame import DataFrame, Frame, GoAwayFrame, HeadersFrame, SettingsFrame

    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    headers = HeadersFrame(1, flags=["END_HEADERS"])
    headers.data = Encoder().encode([
        (":method", "POST"), (":scheme", "http"), (":path", f"/{SERVICE}/Slow"),
        (":authority", f"127.0.0.1:{port}"), ("content-type", "application/grpc"),
        ("te", "trailers"),
    ])  # fmt: skip
    payload = _request_bytes()
    data = DataFrame(1, flags=["END_STREAM"])
    data.data = b"\x00" + struct.pack(">I", len(payload)) + payload
    writer.write(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + SettingsFrame(0).serialize()
                 + headers.serialize() + data.serialize()
                 + SettingsFrame(0, flags=["ACK"]).serialize()
                 + GoAwayFrame(0, last_stream_id=0, error_code=0).serialize())  # fmt: skip
    await writer.drain()
    decoder, answered = Decoder(), False
    try:
        while True:
            head = await asyncio.wait_for(reader.readexactly(9), 10)
            frame, length = Frame.parse_frame_header(memoryview(head))
            frame.parse_body(memoryview(await reader.readexactly(length)))
            if isinstance(frame, HeadersFrame) and frame.stream_id == 1:
                fields = {str(k): str(v) for k, v in decoder.decode(frame.data)}
                answered |= fields.get("grpc-status") == "0"
    except (asyncio.IncompleteReadError, ConnectionError, TimeoutError):
        pass
    finally:
        writer.close()
    return answered


async def measure(kind: str, calls: int, window: int) -> dict[str, Any]:
    from bolide.bench.runtime import process_cpu_s

    process, port = await _start(kind)
    try:
        cpu_before = process_cpu_s(process.pid)
        elapsed_s = await _calls(port, calls, window)
        cpu_s = process_cpu_s(process.pid) - cpu_before
        answered = await _goaway_answered(port)
    finally:
        process.terminate()
        await process.wait()
    return {"server": kind, "calls_per_s": calls / elapsed_s,
            "cpu_us_per_call": cpu_s / calls * 1e6, "goaway_call_answered": answered}  # fmt: skip


async def main(calls: int, window: int) -> None:
    names = {"grpclib": "grpclib 0.4 (plain)", "proxy": "grpclib + the proxy's protocol",
             "grpcio": "grpcio asyncio server"}  # fmt: skip
    print("| server | calls/s | server CPU µs/call | call open at GOAWAY answered |")
    print("|---|---|---|---|")
    for kind in ("grpclib", "proxy", "grpcio"):
        row = await measure(kind, calls, window)
        print(f"| {names[kind]} | {row['calls_per_s']:,.0f} | {row['cpu_us_per_call']:.1f} | "
              f"{'yes' if row['goaway_call_answered'] else 'no'} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--window", type=int, default=32)
    parser.add_argument("--serve", choices=("grpclib", "proxy", "grpcio"))
    arguments = parser.parse_args()
    if arguments.serve:
        serve(arguments.serve)
    else:
        asyncio.run(main(arguments.calls, arguments.window))
