"""Client throughput through a real Bolide broker: messages per second produced (and consumed).

A name server and a broker run in a child process (an in-process ``bolide.testing.Cluster`` in
a temporary directory, ASYNC flush); the client runs in this process. Every message has a
1 KiB body. Producer scenarios:

* ``sync``: the blocking ``bolide.Producer.send``, one message at a time;
* ``async-N``: ``bolide.aio.Producer.send`` with N sends in flight;
* ``batch-B``: ``send_batch`` of B messages, one batch at a time (messages counted).

Push-consumer scenarios read a backlog stored beforehand (not timed; ``--seconds`` × 100,000
messages, more than a round can take), each round with a new group from the first offset:

* ``consume-async``: ``bolide.aio.PushConsumer`` with a coroutine listener, 1 message per call;
* ``consume-sync``: a plain-function listener (on the consumer's thread pool), 1 per call;
* ``consume-sync-B``: the same with ``consume_batch_max_size`` B.

A consume round counts the messages delivered in the ``--seconds`` after the first delivery.

Each scenario runs ``--seconds`` per round; the best of ``--rounds`` is reported, with the CPU
time the client and the server processes spent per message (for consume rounds, the consumer's
start and shutdown are included in the CPU time).

    .venv/bin/python bench/client.py [--seconds 3] [--rounds 3] [--body-bytes 1024]
        [--in-flight 32,256] [--batch 32] [--only produce|consume]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import multiprocessing
import os
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection as Pipe
from pathlib import Path

import bolide
import bolide.aio
from bolide.remoting import loop as remoting_loop
from bolide.testing.cluster import Cluster

TOPIC = "bench-client"
WARM_UP_SECONDS = 0.5


@dataclass(frozen=True)
class Options:
    seconds: float
    rounds: int
    body_bytes: int
    in_flight: tuple[int, ...]
    batch: int
    produce: bool = True
    consume: bool = True


@dataclass(frozen=True)
class Measure:
    messages_per_second: float
    client_cpu_us: float
    """Client process CPU per message, microseconds."""
    server_cpu_us: float
    """Server process CPU per message, microseconds."""


# ---- the server process --------------------------------------------------------------------


async def _serve(pipe: Pipe) -> None:
    with tempfile.TemporaryDirectory(prefix="bolide-bench-") as root:
        async with Cluster(Path(root)) as cluster:
            pipe.send(cluster.namesrv_address)
            loop = asyncio.get_running_loop()
            while True:
                command = await loop.run_in_executor(None, pipe.recv)
                if command == "stop":
                    return
                pipe.send(time.process_time())  # "cpu": this process's CPU seconds so far


def _server_process(pipe: Pipe) -> None:
    remoting_loop.run(_serve(pipe))


def _server_cpu(server: Pipe) -> float:
    server.send("cpu")
    value: float = server.recv()
    return value


# ---- scenarios -------------------------------------------------------------------------------


def _measure(
    server: Pipe, count: int, elapsed_s: float, cpu_before: tuple[float, float]
) -> Measure:
    client_cpu = time.process_time() - cpu_before[0]
    server_cpu = _server_cpu(server) - cpu_before[1]
    count = max(count, 1)
    return Measure(count / elapsed_s, client_cpu / count * 1e6, server_cpu / count * 1e6)


def sync_sends(namesrv: str, options: Options, server: Pipe) -> Measure:
    body = b"x" * options.body_bytes
    with bolide.Producer("bench-sync", namesrv=namesrv) as producer:
        warm_until = time.perf_counter() + WARM_UP_SECONDS
        while time.perf_counter() < warm_until:
            producer.send(bolide.Message(TOPIC, body))
        cpu_before = (time.process_time(), _server_cpu(server))
        started = time.perf_counter()
        stop_at = started + options.seconds
        count = 0
        while time.perf_counter() < stop_at:
            producer.send(bolide.Message(TOPIC, body))
            count += 1
        elapsed_s = time.perf_counter() - started
    return _measure(server, count, elapsed_s, cpu_before)


async def _timed(
    send_one: Callable[[], Awaitable[int]], workers: int, seconds: float
) -> tuple[int, float]:
    """Run ``workers`` coroutines calling ``send_one`` (messages per call) for ``seconds``."""
    stop_at = time.perf_counter() + seconds

    async def worker() -> int:
        sent = 0
        while time.perf_counter() < stop_at:
            sent += await send_one()
        return sent

    started = time.perf_counter()
    counts = await asyncio.gather(*(worker() for _ in range(workers)))
    return sum(counts), time.perf_counter() - started


def async_sends(namesrv: str, options: Options, server: Pipe, in_flight: int) -> Measure:
    body = b"x" * options.body_bytes

    async def run() -> Measure:
        async with bolide.aio.Producer("bench-async", namesrv=namesrv) as producer:

            async def send_one() -> int:
                await producer.send(bolide.aio.Message(TOPIC, body))
                return 1

            await _timed(send_one, in_flight, WARM_UP_SECONDS)
            cpu_before = (time.process_time(), _server_cpu(server))
            count, elapsed_s = await _timed(send_one, in_flight, options.seconds)
            return _measure(server, count, elapsed_s, cpu_before)

    return remoting_loop.run(run())


def batch_sends(namesrv: str, options: Options, server: Pipe) -> Measure:
    body = b"x" * options.body_bytes

    async def run() -> Measure:
        async with bolide.aio.Producer("bench-batch", namesrv=namesrv) as producer:

            async def send_one() -> int:
                batch = [bolide.aio.Message(TOPIC, body) for _ in range(options.batch)]
                await producer.send_batch(batch)
                return options.batch

            await _timed(send_one, 1, WARM_UP_SECONDS)
            cpu_before = (time.process_time(), _server_cpu(server))
            count, elapsed_s = await _timed(send_one, 1, options.seconds)
            return _measure(server, count, elapsed_s, cpu_before)

    return remoting_loop.run(run())


def _async_scenario(namesrv: str, server: Pipe, *, options: Options, in_flight: int) -> Measure:
    return async_sends(namesrv, options, server, in_flight)


def _scenarios(options: Options) -> list[tuple[str, Callable[[str, Pipe], Measure]]]:
    scenarios: list[tuple[str, Callable[[str, Pipe], Measure]]] = [
        ("sync", lambda namesrv, server: sync_sends(namesrv, options, server))
    ]
    for in_flight in options.in_flight:
        run_async = functools.partial(_async_scenario, options=options, in_flight=in_flight)
        scenarios.append((f"async-{in_flight}", run_async))
    scenarios.append(
        (f"batch-{options.batch}", lambda namesrv, server: batch_sends(namesrv, options, server))
    )
    return scenarios


def _consume_scenarios(
    options: Options, backlog: int
) -> list[tuple[str, Callable[[str, Pipe], Measure]]]:
    kinds = (("consume-async", "async", 1), ("consume-sync", "sync", 1),
             (f"consume-sync-{options.batch}", "sync", options.batch))  # fmt: skip
    return [
        (
            name,
            functools.partial(
                _consume_scenario, options=options, kind=kind, batch=batch, backlog=backlog
            ),
        )
        for name, kind, batch in kinds
    ]


def _consume_scenario(
    namesrv: str, server: Pipe, *, options: Options, kind: str, batch: int, backlog: int
) -> Measure:
    return push_consumes(namesrv, options, server, listener_kind=kind, batch=batch, backlog=backlog)


# ---- consume scenarios (push consumer) -------------------------------------------------------

CONSUME_TOPIC = "bench-consume"
CONSUME_BACKLOG_PER_SECOND = 100_000
"""Messages stored before the consume scenarios, per second of ``--seconds``: more than the
consumer can take in that time, so it never runs dry inside the window."""


def fill_backlog(namesrv: str, options: Options) -> int:
    """Store the consume scenarios' messages (not timed); returns how many."""
    body = b"x" * options.body_bytes
    batch_size = 64
    batches = -(-int(options.seconds * CONSUME_BACKLOG_PER_SECOND) // batch_size)

    async def run() -> int:
        async with bolide.aio.Producer("bench-backlog", namesrv=namesrv) as producer:
            for _ in range(batches):
                batch = [bolide.aio.Message(CONSUME_TOPIC, body) for _ in range(batch_size)]
                await producer.send_batch(batch)
        return batches * batch_size

    return remoting_loop.run(run())


class _Window:
    """Counts messages from the first delivery until ``seconds`` later (thread-safe)."""

    def __init__(self, seconds: float, limit: int) -> None:
        self.seconds = seconds
        self.limit = limit
        self.count = 0
        self.started = 0.0
        self.ended = 0.0
        self._lock = threading.Lock()
        self.done = threading.Event()

    def add(self, messages: int) -> None:
        with self._lock:
            now = time.perf_counter()
            if self.count == 0:
                self.started = now
            if self.done.is_set():
                return
            self.count += messages
            if now - self.started >= self.seconds or self.count >= self.limit:
                self.ended = now
                self.done.set()


def push_consumes(
    namesrv: str, options: Options, server: Pipe, *, listener_kind: str, batch: int, backlog: int
) -> Measure:
    """A new group reads the backlog from the first offset; rate over the first ``seconds``
    after the first delivery. ``listener_kind``: "async" (on the loop) or "sync" (pool)."""
    window = _Window(options.seconds, backlog)
    group = f"bench-consume-{listener_kind}-{batch}-{time.monotonic_ns()}"

    def on_sync(messages: list[bolide.MessageExt]) -> bolide.ConsumeResult:
        window.add(len(messages))
        return bolide.ConsumeResult.SUCCESS

    async def on_async(messages: list[bolide.MessageExt]) -> bolide.ConsumeResult:
        window.add(len(messages))
        return bolide.ConsumeResult.SUCCESS

    async def run() -> Measure:
        consumer = bolide.aio.PushConsumer(
            group,
            namesrv=namesrv,
            consume_from=bolide.aio.ConsumeFrom.FIRST_OFFSET,
            options=bolide.aio.ConsumerOptions(consume_batch_max_size=batch),
        )
        consumer.subscribe(CONSUME_TOPIC)
        consumer.register_listener(on_async if listener_kind == "async" else on_sync)
        cpu_before = (time.process_time(), _server_cpu(server))
        async with consumer:
            await asyncio.get_running_loop().run_in_executor(None, window.done.wait)
        elapsed_s = window.ended - window.started
        return _measure(server, window.count, elapsed_s, cpu_before)

    return remoting_loop.run(run())


# ---- main ------------------------------------------------------------------------------------


def _parse_options() -> Options:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--body-bytes", type=int, default=1024)
    parser.add_argument("--in-flight", default="32,256", help="comma-separated N for async-N")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--only", choices=("produce", "consume"), default=None)
    args = parser.parse_args()
    in_flight = tuple(int(item) for item in args.in_flight.split(",") if item)
    return Options(
        args.seconds,
        args.rounds,
        args.body_bytes,
        in_flight,
        args.batch,
        produce=args.only != "consume",
        consume=args.only != "produce",
    )


def main() -> None:
    options = _parse_options()
    context = multiprocessing.get_context("spawn")
    ours, theirs = context.Pipe()
    server = context.Process(target=_server_process, args=(theirs,), daemon=True)
    server.start()
    try:
        namesrv: str = ours.recv()
        print(f"cluster at {namesrv}; {options.body_bytes} B bodies; pid {os.getpid()}")
        print(f"{'scenario':<12} {'msgs/s':>10} {'client µs/msg':>14} {'server µs/msg':>14}")
        scenarios = _scenarios(options) if options.produce else []
        if options.consume:
            scenarios += _consume_scenarios(options, fill_backlog(namesrv, options))
        for name, scenario in scenarios:
            best: Measure | None = None
            for _ in range(options.rounds):
                measure = scenario(namesrv, ours)
                if best is None or measure.messages_per_second > best.messages_per_second:
                    best = measure
            assert best is not None
            print(
                f"{name:<12} {best.messages_per_second:>10,.0f} {best.client_cpu_us:>14.1f}"
                f" {best.server_cpu_us:>14.1f}",
                flush=True,
            )
    finally:
        ours.send("stop")
        server.join(10)
        if server.is_alive():
            server.terminate()


if __name__ == "__main__":
    main()
