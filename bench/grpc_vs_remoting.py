"""Cost per message of the 5.x gRPC path (proxy + POP) beside the 4.x remoting path.

``bolide standalone`` (name server, broker and proxy in one process) runs as a child process;
this process is the client: raw remoting requests for 4.x, grpcio's asyncio client with the
official protobuf messages for 5.x (what every 5.x SDK sends). 1 KiB bodies. Scenarios:

* ``4.x send``: SEND_MESSAGE_V2, ``--window`` in flight on one connection;
* ``5.x send``: SendMessage (one message per call), ``--window`` calls in flight on one channel;
* ``4.x pull``: PULL_MESSAGE, 32 per pull, one pull in flight per queue, until drained;
* ``5.x receive+ack``: ReceiveMessage (batch 32) then one AckMessage for the batch,
  ``--receivers`` loops, until drained.

Reported: messages per second and the standalone's CPU time per message (broker + proxy,
read from /proc: Linux only).

    .venv/bin/python bench/grpc_vs_remoting.py [--messages 20000] [--window 32] [--receivers 4]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import grpc

from bench.broker import HEADER, QUEUES, Result, _create_topic, _send_request
from bolide.bench.runtime import process_cpu_s
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import PullMessageRequestHeader, PullSysFlag
from bolide.proxy.proto import definition_pb2 as pb
from bolide.proxy.proto import service_pb2 as spb
from bolide.remoting import ClientPool
from bolide.remoting import loop as remoting_loop

SERVICE = "/apache.rocketmq.v2.MessagingService/"
METADATA = (("x-mq-client-id", "bench@grpc"),)
START_TIMEOUT_S = 60.0


class Standalone:
    def __init__(self, data_dir: Path) -> None:
        self._data_dir = data_dir
        self.process: asyncio.subprocess.Process | None = None
        self.fields: dict[str, str] = {}

    async def start(self) -> None:
        bolide = str(Path(sys.executable).parent / "bolide")
        self.process = await asyncio.create_subprocess_exec(
            bolide, "standalone", "--namesrv-port", "0", "--broker-port", "0",
            "--proxy-port", "0", "--no-metrics", "--no-dashboard",
            "--data-dir", str(self._data_dir),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        assert self.process.stdout is not None
        line = await asyncio.wait_for(self.process.stdout.readline(), START_TIMEOUT_S)
        self.fields = dict(part.split("=", 1) for part in line.decode().split()[2:])

    def cpu_seconds(self) -> float:
        assert self.process is not None
        return process_cpu_s(self.process.pid)

    async def stop(self) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.terminate()
            await asyncio.wait_for(self.process.wait(), START_TIMEOUT_S)


def _unary(channel: grpc.aio.Channel, method: str, response_type: Any) -> Any:
    return channel.unary_unary(
        SERVICE + method,
        request_serializer=lambda m: m.SerializeToString(),
        response_deserializer=response_type.FromString,
    )


async def send_4x(server: Standalone, topic: str, count: int, window: int) -> Result:
    pool = ClientPool()
    broker = server.fields["broker"]
    await _create_topic(pool, broker, topic)
    body = b"x" * 1024
    indexes = iter(range(count))

    async def sender() -> None:
        for index in indexes:
            response = await pool.invoke(broker, _send_request(topic, body, index))
            if response.code != ResponseCode.SUCCESS:
                raise RuntimeError(f"send failed: {response.remark}")

    cpu, started = server.cpu_seconds(), time.perf_counter()
    await asyncio.gather(*(sender() for _ in range(window)))
    result = Result(
        f"4.x send, {window} in flight",
        count,
        time.perf_counter() - started,
        server.cpu_seconds() - cpu,
    )
    await pool.close()
    return result


async def send_5x(server: Standalone, topic: str, count: int, window: int) -> Result:
    pool = ClientPool()
    await _create_topic(pool, server.fields["broker"], topic)
    await pool.close()
    body = b"x" * 1024
    indexes = iter(range(count))
    async with grpc.aio.insecure_channel(server.fields["proxy"]) as channel:
        send = _unary(channel, "SendMessage", spb.SendMessageResponse)

        async def sender() -> None:
            for index in indexes:
                message = pb.Message(body=body)
                message.topic.name = topic
                message.system_properties.message_id = f"{index:032X}"
                message.system_properties.tag = "TagA"
                message.system_properties.keys.append(f"key-{index}")
                message.system_properties.message_type = pb.NORMAL
                response = await send(spb.SendMessageRequest(messages=[message]), metadata=METADATA)
                if response.status.code != pb.OK:
                    raise RuntimeError(f"send failed: {response.status}")

        cpu, started = server.cpu_seconds(), time.perf_counter()
        await asyncio.gather(*(sender() for _ in range(window)))
        return Result(
            f"5.x send, {window} in flight",
            count,
            time.perf_counter() - started,
            server.cpu_seconds() - cpu,
        )


async def pull_4x(server: Standalone, topic: str, count: int) -> Result:
    pool = ClientPool()
    broker = server.fields["broker"]
    total = 0

    async def drain(queue_id: int) -> None:
        nonlocal total
        offset = 0
        while True:
            header = PullMessageRequestHeader(
                consumer_group="bench-pull",
                topic=topic,
                queue_id=queue_id,
                queue_offset=offset,
                max_messages=32,
                sys_flag=int(PullSysFlag.SUBSCRIPTION),
                commit_offset=0,
                suspend_timeout_ms=0,
                subscription="*",
                sub_version=0,
            )
            request = RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext_fields())
            response = await pool.invoke(broker, request)
            if response.code != ResponseCode.SUCCESS:
                return
            next_offset = int(response.ext_fields["nextBeginOffset"])
            total += next_offset - offset
            offset = next_offset

    cpu, started = server.cpu_seconds(), time.perf_counter()
    await asyncio.gather(*(drain(queue_id) for queue_id in range(QUEUES)))
    seconds = time.perf_counter() - started
    result = Result("4.x pull, 32 per pull", total, seconds, server.cpu_seconds() - cpu)
    await pool.close()
    if total < count:
        raise RuntimeError(f"pulled {total} of {count}")
    return result


async def receive_5x(server: Standalone, topic: str, count: int, receivers: int) -> Result:
    total = 0
    async with grpc.aio.insecure_channel(server.fields["proxy"]) as channel:
        receive = channel.unary_stream(
            SERVICE + "ReceiveMessage",
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=spb.ReceiveMessageResponse.FromString,
        )
        ack = _unary(channel, "AckMessage", spb.AckMessageResponse)

        async def loop() -> None:
            nonlocal total
            while total < count:
                request = spb.ReceiveMessageRequest(batch_size=32)
                request.group.name = "bench-pop"
                request.message_queue.topic.name = topic
                request.message_queue.id = -1
                request.message_queue.broker.name = "broker-a"
                request.invisible_duration.FromSeconds(60)
                request.long_polling_timeout.FromMilliseconds(0)
                messages = [
                    r.message
                    async for r in receive(request, metadata=METADATA)
                    if r.HasField("message")
                ]
                if not messages:
                    return
                entries = [
                    spb.AckMessageEntry(
                        message_id=m.system_properties.message_id,
                        receipt_handle=m.system_properties.receipt_handle,
                    )
                    for m in messages
                ]
                acked = spb.AckMessageRequest(entries=entries)
                acked.group.name, acked.topic.name = "bench-pop", topic
                await ack(acked, metadata=METADATA)
                total += len(messages)

        cpu, started = server.cpu_seconds(), time.perf_counter()
        await asyncio.gather(*(loop() for _ in range(receivers)))
        return Result(
            f"5.x receive+ack, {receivers} loops",
            total,
            time.perf_counter() - started,
            server.cpu_seconds() - cpu,
        )


async def main(options: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="bolide-bench-grpc-") as directory:
        server = Standalone(Path(directory) / "data")
        await server.start()
        try:
            results = [
                await send_4x(server, "bench-4x", options.messages, options.window),
                await send_5x(server, "bench-5x", options.messages, options.window),
                await pull_4x(server, "bench-4x", options.messages),
                await receive_5x(server, "bench-5x", options.messages, options.receivers),
            ]
        finally:
            await server.stop()
    command = " ".join(["python bench/grpc_vs_remoting.py", *sys.argv[1:]])
    print(f"# {command}")
    print(HEADER)
    for result in results:
        print(result.row())
    by_name = {r.scenario.split(",")[0]: r for r in results}
    for kind in ("send", "pull"):
        four = by_name["4.x send" if kind == "send" else "4.x pull"]
        five = by_name["5.x send" if kind == "send" else "5.x receive+ack"]
        ratio = (five.server_cpu_seconds / five.messages) / (
            four.server_cpu_seconds / four.messages
        )
        print(f"5.x / 4.x server CPU per message ({kind}): {ratio:.1f}x")


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--window", type=int, default=32)
    parser.add_argument("--receivers", type=int, default=4)
    return parser.parse_args(argv)


if __name__ == "__main__":
    remoting_loop.run(main(parse(sys.argv[1:])))
