"""Broker throughput and send latency, through raw pipelined requests and the real C++ client.

``bolide standalone`` runs as a child process (port 0, a temporary data directory, ASYNC flush
unless ``--flush sync``); this process is the client. Every message has a 1 KiB body, tags,
keys and a UNIQ_KEY, as a Java producer sends them. Scenarios:

* ``raw send, 1 in flight``: SEND_MESSAGE_V2 one at a time on one connection: the unloaded
  round trip (p50/p99 latency);
* ``raw send, W in flight``: ``--window`` sends outstanding on each of ``--connections``
  connections (requests pipelined, answers matched by opaque): throughput and loaded latency;
* ``raw pull``: PULL_MESSAGE (32 per pull) over every queue until the topic is drained, one
  pull in flight per queue: messages per second served (records counted, not decoded);
* ``cpp send_sync``: real C++ producers (rocketmq==0.4.4), one per thread (``--cpp-threads``);
* ``cpp push consume``: a C++ push consumer of a new group drains what the C++ producer sent
  (its Python listener is called once per message).

Reported per scenario: messages per second, p50/p99 send latency where it applies, and the
broker process's CPU time per message (read from /proc, so Linux only).

    .venv/bin/python bench/broker.py [--messages 50000] [--window 64] [--connections 2]
        [--body-bytes 1024] [--cpp-messages 20000] [--cpp-threads 4] [--flush async|sync]
        [--skip-cpp]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import (
    CreateTopicRequestHeader,
    PullMessageRequestHeader,
    PullSysFlag,
    SendMessageRequestHeader,
)
from bolide.protocol.message import PropertyKey
from bolide.protocol.record import encode_properties
from bolide.remoting import ClientPool
from bolide.remoting import loop as remoting_loop

RAW_TOPIC = "bench-broker-raw"
CPP_TOPIC = "bench-broker-cpp"
QUEUES = 8
SEQUENTIAL_MAX_MESSAGES = 5_000
PULL_BATCH = 32
START_TIMEOUT_S = 60.0
CONSUME_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class Options:
    messages: int
    window: int
    connections: int
    body_bytes: int
    cpp_messages: int
    cpp_threads: int
    flush: str
    skip_cpp: bool


@dataclass(frozen=True)
class Result:
    scenario: str
    messages: int
    seconds: float
    server_cpu_seconds: float
    latencies_ms: tuple[float, ...] = ()

    def row(self) -> str:
        rate = self.messages / self.seconds if self.seconds else 0.0
        cpu_us = self.server_cpu_seconds / self.messages * 1e6 if self.messages else 0.0
        p50 = p99 = "-"
        if self.latencies_ms:
            cuts = statistics.quantiles(self.latencies_ms, n=100, method="inclusive")
            p50, p99 = f"{cuts[49]:.3f}", f"{cuts[98]:.3f}"
        return (
            f"{self.scenario:<28}{self.messages:>9,}{rate:>12,.0f}{p50:>10}{p99:>10}{cpu_us:>15.1f}"
        )


HEADER = (
    f"{'scenario':<28}{'messages':>9}{'msgs/s':>12}{'p50 ms':>10}{'p99 ms':>10}"
    f"{'broker µs/msg':>15}"
)


# --- the broker process -----------------------------------------------------------------------


class BrokerProcess:
    """``bolide standalone`` in a child process, stopped with SIGTERM."""

    def __init__(self, data_dir: Path, flush: str) -> None:
        self._data_dir = data_dir
        self._flush = flush
        self._process: asyncio.subprocess.Process | None = None
        self.namesrv = ""
        self.broker = ""

    async def start(self) -> None:
        bolide = str(Path(sys.executable).parent / "bolide")
        self._process = await asyncio.create_subprocess_exec(
            bolide, "standalone", "--namesrv-port", "0", "--broker-port", "0", "--proxy-port", "0",
            "--no-metrics", "--no-dashboard",
            "--data-dir", str(self._data_dir), "--flush", self._flush,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        assert self._process.stdout is not None
        line = await asyncio.wait_for(self._process.stdout.readline(), START_TIMEOUT_S)
        fields = dict(part.split("=", 1) for part in line.decode().split()[2:])
        self.namesrv, self.broker = fields["namesrv"], fields["broker"]

    def cpu_seconds(self) -> float:
        """User + system CPU the broker process has used so far."""
        assert self._process is not None
        with open(f"/proc/{self._process.pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        ticks = int(fields[11]) + int(fields[12])  # utime, stime
        return ticks / os.sysconf("SC_CLK_TCK")

    async def stop(self) -> None:
        if self._process is not None and self._process.returncode is None:
            self._process.terminate()
            await asyncio.wait_for(self._process.wait(), START_TIMEOUT_S)


# --- raw requests -----------------------------------------------------------------------------


def _send_request(topic: str, body: bytes, index: int) -> RemotingCommand:
    properties = encode_properties(
        {
            PropertyKey.TAGS: "TagA",
            PropertyKey.KEYS: f"key-{index}",
            PropertyKey.UNIQ_KEY: f"{index:032X}",
            PropertyKey.WAIT: "true",
        }
    )
    header = SendMessageRequestHeader(
        producer_group="bench-producers",
        topic=topic,
        default_topic="TBW102",
        default_topic_queue_count=4,
        queue_id=index % QUEUES,
        sys_flag=0,
        born_timestamp_ms=int(time.time() * 1000),
        flag=0,
        properties=properties,
    )
    return RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, header.to_v2_ext_fields(), body)


async def _create_topic(pool: ClientPool, broker: str, topic: str) -> None:
    header = CreateTopicRequestHeader(topic, "TBW102", QUEUES, QUEUES, 6)
    request = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext_fields())
    response = await pool.invoke(broker, request)
    if response.code != ResponseCode.SUCCESS:
        raise RuntimeError(f"cannot create {topic}: {response.remark}")


async def _raw_send(
    server: BrokerProcess, options: Options, *, count: int, window: int, connections: int
) -> Result:
    pools = [ClientPool() for _ in range(connections)]
    body = b"x" * options.body_bytes
    indexes: Iterator[int] = iter(range(count))
    latencies: list[float] = []

    async def sender(pool: ClientPool) -> None:
        for index in indexes:
            started = time.perf_counter()
            response = await pool.invoke(server.broker, _send_request(RAW_TOPIC, body, index))
            latencies.append((time.perf_counter() - started) * 1000)
            if response.code != ResponseCode.SUCCESS:
                raise RuntimeError(f"send failed: {response.code} {response.remark}")

    for pool in pools:
        await pool.connect(server.broker)
    cpu_before, started = server.cpu_seconds(), time.perf_counter()
    await asyncio.gather(*(sender(pool) for pool in pools for _ in range(window)))
    seconds = time.perf_counter() - started
    cpu = server.cpu_seconds() - cpu_before
    for pool in pools:
        await pool.close()
    scenario = f"raw send, {window * connections} in flight"
    return Result(scenario, count, seconds, cpu, tuple(latencies))


async def _raw_pull(server: BrokerProcess) -> Result:
    pool = ClientPool()
    await pool.connect(server.broker)
    counted = 0

    async def drain(queue_id: int) -> None:
        nonlocal counted
        offset = 0
        while True:
            header = PullMessageRequestHeader(
                "bench-pullers", RAW_TOPIC, queue_id, offset, PULL_BATCH,
                int(PullSysFlag.SUBSCRIPTION), 0, 0, 0, "*",
            )  # fmt: skip
            request = RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext_fields())
            response = await pool.invoke(server.broker, request)
            if response.code != ResponseCode.SUCCESS:
                return
            next_offset = int(response.ext_fields["nextBeginOffset"])
            counted += next_offset - offset
            offset = next_offset

    cpu_before, started = server.cpu_seconds(), time.perf_counter()
    await asyncio.gather(*(drain(queue_id) for queue_id in range(QUEUES)))
    seconds = time.perf_counter() - started
    cpu = server.cpu_seconds() - cpu_before
    await pool.close()
    return Result("raw pull, 8 queues", counted, seconds, cpu)


# --- the C++ client ---------------------------------------------------------------------------


def _quiet_cpp_home() -> None:
    os.environ["HOME"] = tempfile.mkdtemp(prefix="bench-cpp-home-")


def _cpp_producer(server: BrokerProcess, instance: int) -> Any:
    """A started C++ producer with its own instance name, hence its own client and connections:
    threads sharing one librocketmq 1.2.3 client contend on its transport table lock, which it
    only tries briefly, and sends then fail at once with "No route info of this topic"."""
    from rocketmq import ffi
    from rocketmq.client import Message, Producer

    producer = Producer("bench-cpp-producers", timeout=10_000)
    ffi.dll.SetProducerLogLevel(producer._handle, ffi._CLogLevel.FATAL)
    ffi.dll.SetProducerInstanceName(producer._handle, f"bench-{instance}".encode())
    producer.set_namesrv_addr(server.namesrv)
    producer.start()
    warm_up = Message(CPP_TOPIC)  # the first send fetches the route: keep it out of the figures
    warm_up.set_body("warm-up")
    producer.send_sync(warm_up)
    return producer


async def _cpp_send(server: BrokerProcess, options: Options) -> Result:
    from rocketmq.client import Message

    producers = [
        await asyncio.to_thread(_cpp_producer, server, instance)
        for instance in range(options.cpp_threads)
    ]
    body = "x" * options.body_bytes
    latencies: list[float] = []
    failures: list[str] = []
    lock = threading.Lock()
    indexes: Iterator[int] = iter(range(options.cpp_messages))

    def send_all(producer: Any) -> None:
        while True:
            with lock:
                index = next(indexes, None)
            if index is None:
                return
            message = Message(CPP_TOPIC)
            message.set_body(body)
            message.set_tags("TagA")
            message.set_keys(f"key-{index}")
            started = time.perf_counter()
            try:
                producer.send_sync(message)
            except Exception as error:  # the wrapper raises bare per-status exception classes
                with lock:
                    failures.append(f"{type(error).__name__}: {error}"[:120])
                continue
            elapsed = (time.perf_counter() - started) * 1000
            with lock:
                latencies.append(elapsed)

    try:
        cpu_before, started = server.cpu_seconds(), time.perf_counter()
        with ThreadPoolExecutor(options.cpp_threads) as threads:
            await asyncio.gather(
                *(asyncio.wrap_future(threads.submit(send_all, p)) for p in producers)
            )
        seconds = time.perf_counter() - started
        cpu = server.cpu_seconds() - cpu_before
    finally:
        for producer in producers:
            await asyncio.to_thread(producer.shutdown)
    if failures:
        print(f"cpp send_sync: {len(failures)} sends failed, e.g. {failures[:3]}", file=sys.stderr)
    scenario = f"cpp send_sync, {options.cpp_threads} producers"
    return Result(scenario, len(latencies), seconds, cpu, tuple(latencies))


async def _cpp_consume(server: BrokerProcess, expected: int) -> Result:
    from rocketmq import ffi
    from rocketmq.client import PushConsumer

    consumer = PushConsumer("bench-cpp-consumers")
    ffi.dll.SetPushConsumerLogLevel(consumer._handle, ffi._CLogLevel.FATAL)
    consumer.set_namesrv_addr(server.namesrv)
    consumer.set_instance_name("bench")
    received = 0
    done = threading.Event()
    lock = threading.Lock()

    def on_message(message: Any) -> None:
        nonlocal received
        del message
        with lock:
            received += 1
            if received >= expected:
                done.set()

    consumer.subscribe(CPP_TOPIC, on_message)
    cpu_before, started = server.cpu_seconds(), time.perf_counter()
    try:
        await asyncio.to_thread(consumer.start)
        if not await asyncio.to_thread(done.wait, CONSUME_TIMEOUT_S):
            print(f"cpp push consume: only {received} of {expected}", file=sys.stderr)
        seconds = time.perf_counter() - started
        cpu = server.cpu_seconds() - cpu_before
    finally:
        await asyncio.to_thread(consumer.shutdown)
    return Result("cpp push consume", received, seconds, cpu)


# --- main -------------------------------------------------------------------------------------


async def run(options: Options) -> list[Result]:
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="bench-broker-") as data_dir:
        server = BrokerProcess(Path(data_dir), options.flush)
        await server.start()
        try:
            pool = ClientPool()
            await _create_topic(pool, server.broker, RAW_TOPIC)
            await _create_topic(pool, server.broker, CPP_TOPIC)
            await pool.close()
            sequential = min(options.messages, SEQUENTIAL_MAX_MESSAGES)
            results.append(
                await _raw_send(server, options, count=sequential, window=1, connections=1)
            )
            results.append(
                await _raw_send(
                    server,
                    options,
                    count=options.messages,
                    window=options.window,
                    connections=options.connections,
                )
            )
            results.append(await _raw_pull(server))
            if not options.skip_cpp:
                _quiet_cpp_home()
                sent = await _cpp_send(server, options)
                results.append(sent)
                warm_ups = options.cpp_threads
                results.append(await _cpp_consume(server, sent.messages + warm_ups))
        finally:
            await server.stop()
    return results


def _parse(argv: list[str] | None) -> Options:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--window", type=int, default=64)
    parser.add_argument("--connections", type=int, default=2)
    parser.add_argument("--body-bytes", type=int, default=1024)
    parser.add_argument("--cpp-messages", type=int, default=20_000)
    parser.add_argument("--cpp-threads", type=int, default=4)
    parser.add_argument("--flush", choices=("async", "sync"), default="async")
    parser.add_argument("--skip-cpp", action="store_true")
    arguments = parser.parse_args(argv)
    return Options(
        messages=arguments.messages,
        window=arguments.window,
        connections=arguments.connections,
        body_bytes=arguments.body_bytes,
        cpp_messages=arguments.cpp_messages,
        cpp_threads=arguments.cpp_threads,
        flush=arguments.flush,
        skip_cpp=arguments.skip_cpp,
    )


def main(argv: list[str] | None = None) -> None:
    options = _parse(argv)
    results = remoting_loop.run(run(options))
    print(f"flush {options.flush}, body {options.body_bytes} B")
    print(HEADER)
    for result in results:
        print(result.row())


if __name__ == "__main__":
    main()
