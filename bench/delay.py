"""Delivery lateness of timer messages and delay-level messages through a real broker.

A name server and broker run in a child process (uvloop, a temporary data directory, the given
messageDelayLevel); this process sends over a socket and long-polls the real topics.

* Timer phase: ``--timers`` messages (10,000) with TIMER_DELIVER_MS spread uniformly at random
  over ``--spread-s`` seconds (30), starting ``--lead-s`` seconds (3) after the first send, so
  every message is enqueued before it is due; sent in random order.
* Level phase: ``--level-messages`` messages per level for levels 1 and 2 ("1s 2s" by default),
  sent at a steady rate over ``--level-send-s`` seconds.

Lateness of a delivered message, in ms:

* broker: STORETIMESTAMP of the delivered record - its delivery time: TIMER_OUT_MS for a timer
  message; for a level message the delivery time its SCHEDULE_TOPIC_XXXX entry held (read from
  the broker's store at the end). "born + delay -> stored" is the same from the client's view:
  BORNTIMESTAMP (stamped right before sending) + the level's delay, so it adds the send;
* consumer: the time this process received it (a long-polling pull) - its delivery time.

    .venv/bin/python bench/delay.py [--timers 10000] [--spread-s 30] [--lead-s 3]
        [--level-messages 2000] [--level-send-s 5] [--levels "1s 2s"] [--flush async|sync]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection as Pipe
from pathlib import Path

from bolide.base.gc_pause import freeze_startup_objects
from bolide.broker.config import parse_delay_levels
from bolide.broker.delivery import DELIVERED_FROM, TIMER_OUT_MS
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import (
    PullMessageRequestHeader,
    PullSysFlag,
    SendMessageRequestHeader,
)
from bolide.protocol.message import MessageExt, PropertyKey
from bolide.protocol.record import decode_records, encode_properties
from bolide.protocol.system_topics import SCHEDULE_TOPIC
from bolide.remoting import ClientPool
from bolide.remoting import loop as remoting_loop
from bolide.store.api import MessageStore

TIMER_TOPIC = "bench-timers"
LEVEL_TOPIC = "bench-levels"
BENCH_DUE_PROPERTY = "BENCH_DUE_MS"
"""A timer message's due time, also as a user property (kept when the timer is bypassed)."""
SEND_WINDOW = 64
"""Sends in flight at once (pipelined on one connection)."""


@dataclass
class Samples:
    broker_ms: list[float] = field(default_factory=list)
    consumer_ms: list[float] = field(default_factory=list)


def _now_ms() -> float:
    return time.time_ns() / 1e6


# --- the broker process -----------------------------------------------------------------------


async def _serve(pipe: Pipe, data_dir: str, levels: str, flush: str) -> None:
    from bolide.testing.cluster import Cluster

    settings = {"messageDelayLevel": levels, "flushDiskType": flush}
    async with Cluster(Path(data_dir), settings=settings) as cluster:
        freeze_startup_objects()  # as `bolide broker` does once it is ready
        pipe.send(cluster.brokers[0].address)
        loop = asyncio.get_running_loop()
        while await loop.run_in_executor(None, pipe.recv) == "levels":
            pipe.send(_level_lateness_in_store(cluster.brokers[0].context.store))


def _level_lateness_in_store(store: MessageStore) -> list[float]:
    """Exact broker lateness of every delivered level message: its store time minus the
    delivery time its SCHEDULE_TOPIC_XXXX entry held (found through the delivery marker)."""
    lateness: list[float] = []
    offset = 0
    while offset < store.max_offset(LEVEL_TOPIC, 0):
        result = store.get_message(LEVEL_TOPIC, 0, offset, 256, 1 << 22)
        for message in decode_records(b"".join(bytes(view) for view in result.buffers)):
            marker = message.properties[DELIVERED_FROM]  # "L<level>:<queue offset>"
            level, queue_offset = (int(part) for part in marker[1:].split(":"))
            ((_, _, deliver_ms),) = store.consume_queue_entries(
                SCHEDULE_TOPIC, level - 1, queue_offset, 1
            )
            lateness.append(float(message.store_timestamp_ms - deliver_ms))
        offset = result.next_begin_offset
    return lateness


def _broker_process(pipe: Pipe, data_dir: str, levels: str, flush: str) -> None:
    with asyncio.Runner(loop_factory=remoting_loop.new_event_loop) as runner:
        runner.run(_serve(pipe, data_dir, levels, flush))


# --- sending and receiving --------------------------------------------------------------------


def _send(topic: str, body: bytes, properties: dict[str, str], born_ms: int) -> RemotingCommand:
    header = SendMessageRequestHeader(
        producer_group="PG_BENCH",
        topic=topic,
        default_topic="TBW102",
        default_topic_queue_count=1,
        queue_id=0,
        sys_flag=0,
        born_timestamp_ms=born_ms,
        flag=0,
        properties=encode_properties(properties),
    )
    return RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, header.to_v2_ext_fields(), body)


async def _send_all(
    pool: ClientPool, address: str, requests: list[tuple[float, str, dict[str, str]]]
) -> None:
    """Send ``(at_ms, topic, properties)`` in order, not before ``at_ms``, SEND_WINDOW at once."""
    window = asyncio.Semaphore(SEND_WINDOW)
    tasks: list[asyncio.Task[None]] = []

    async def one(topic: str, properties: dict[str, str]) -> None:
        async with window:
            born = int(_now_ms())
            response = await pool.invoke(address, _send(topic, b"x" * 64, properties, born), 30_000)
            if response.code != ResponseCode.SUCCESS:
                raise RuntimeError(f"send failed: {response.code} {response.remark}")

    for at_ms, topic, properties in requests:
        wait_ms = at_ms - _now_ms()
        if wait_ms > 0:
            await asyncio.sleep(wait_ms / 1000)
        await window.acquire()
        window.release()
        tasks.append(asyncio.ensure_future(one(topic, properties)))
    await asyncio.gather(*tasks)


async def _receive(
    pool: ClientPool,
    address: str,
    topic: str,
    expected: int,
    deliver: Callable[[MessageExt], float],
) -> Samples:
    """Long-poll ``topic`` queue 0 until ``expected`` messages arrived; lateness samples."""
    samples = Samples()
    offset = 0
    while offset < expected:
        header = PullMessageRequestHeader(
            consumer_group="CG_BENCH", topic=topic, queue_id=0, queue_offset=offset,
            max_messages=32, sys_flag=PullSysFlag.SUBSCRIPTION | PullSysFlag.SUSPEND,
            commit_offset=0, suspend_timeout_ms=15_000, sub_version=0, subscription="*",
        )  # fmt: skip
        request = RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext_fields())
        response = await pool.invoke(address, request, 30_000)
        received_ms = _now_ms()
        if response.code != ResponseCode.SUCCESS:
            continue
        for message in decode_records(response.body):
            deliver_ms = deliver(message)
            samples.broker_ms.append(message.store_timestamp_ms - deliver_ms)
            samples.consumer_ms.append(received_ms - deliver_ms)
        offset = int(response.ext_fields["nextBeginOffset"])
    return samples


# --- the phases -------------------------------------------------------------------------------


def _timer_due_ms(message: MessageExt) -> float:
    """When a timer message was due: its TIMER_OUT_MS, or, for one that reached the broker
    after its time (a send slower than the lead on a loaded machine: the broker stores it at
    once and drops its timer properties), the due time the bench also sent as a user
    property."""
    properties = message.properties
    return float(properties.get(TIMER_OUT_MS) or properties[BENCH_DUE_PROPERTY])


async def _timer_phase(pool: ClientPool, address: str, options: argparse.Namespace) -> Samples:
    rng = random.Random(5)
    start_ms = _now_ms()
    first_due_ms = start_ms + options.lead_s * 1000
    deliver_times = [
        first_due_ms + rng.random() * options.spread_s * 1000 for _ in range(options.timers)
    ]
    rng.shuffle(deliver_times)
    requests = [
        (
            start_ms,
            TIMER_TOPIC,
            {PropertyKey.TIMER_DELIVER_MS: str(int(due)), BENCH_DUE_PROPERTY: str(int(due))},
        )
        for due in deliver_times
    ]
    receiver = asyncio.ensure_future(
        _receive(pool, address, TIMER_TOPIC, options.timers, _timer_due_ms)
    )
    await _send_all(pool, address, requests)
    sent_in_s = (_now_ms() - start_ms) / 1000
    print(f"timer phase: {options.timers} sent in {sent_in_s:.2f} s (lead {options.lead_s} s)")
    return await receiver


async def _level_phase(pool: ClientPool, address: str, options: argparse.Namespace) -> Samples:
    delays_ms = parse_delay_levels(options.levels)
    count = options.level_messages * 2
    start_ms = _now_ms()
    step_ms = options.level_send_s * 1000 / max(1, count)
    requests = [
        (start_ms + number * step_ms, LEVEL_TOPIC, {PropertyKey.DELAY: str(1 + number % 2)})
        for number in range(count)
    ]

    receiver = asyncio.ensure_future(
        _receive(pool, address, LEVEL_TOPIC, count, lambda m: _level_deliver_ms(m, delays_ms))
    )
    await _send_all(pool, address, requests)
    return await receiver


def _level_deliver_ms(message: MessageExt, delays_ms: tuple[int, ...]) -> float:
    marker = message.properties[DELIVERED_FROM]  # "L<level>:<queue offset>"
    level = int(marker[1 : marker.index(":")])
    return float(message.born_timestamp_ms + delays_ms[level - 1])


def _row(name: str, values: list[float]) -> str:
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return (
        f"{name:<34} {len(ordered):>7} {statistics.median(ordered):>8.1f} {p99:>8.1f}"
        f" {ordered[-1]:>8.1f} {ordered[0]:>8.1f}"
    )


async def _run(address: str, options: argparse.Namespace, broker: Pipe) -> list[str]:
    pool = ClientPool()
    try:
        await pool.connect(address)
        timers = await _timer_phase(pool, address, options)
        levels = await _level_phase(pool, address, options)
    finally:
        await pool.close()
    broker.send("levels")
    level_in_store: list[float] = broker.recv()
    return [
        _row("timer: broker lateness", timers.broker_ms),
        _row("timer: consumer lateness", timers.consumer_ms),
        _row("level: broker lateness", level_in_store),
        _row("level: born + delay -> stored", levels.broker_ms),
        _row("level: consumer lateness", levels.consumer_ms),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timers", type=int, default=10_000)
    parser.add_argument("--spread-s", type=float, default=30.0)
    parser.add_argument("--lead-s", type=float, default=3.0)
    parser.add_argument("--level-messages", type=int, default=2_000)
    parser.add_argument("--level-send-s", type=float, default=5.0)
    parser.add_argument("--levels", default="1s 2s")
    parser.add_argument("--flush", choices=["async", "sync"], default="async")
    options = parser.parse_args()
    flush = "SYNC_FLUSH" if options.flush == "sync" else "ASYNC_FLUSH"
    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    with tempfile.TemporaryDirectory(prefix="bolide-bench-delay-") as data_dir:
        process = context.Process(
            target=_broker_process, args=(child, data_dir, options.levels, flush)
        )
        process.start()
        try:
            address = parent.recv()
            with asyncio.Runner(loop_factory=remoting_loop.new_event_loop) as runner:
                rows = runner.run(_run(address, options, parent))
        finally:
            parent.send("stop")
            process.join(60)
    print(f"command: {' '.join([os.path.basename(sys.executable), *sys.argv])}")
    print(f"levels {options.levels!r}, flush {flush}, {os.cpu_count()} CPUs")
    print(f"{'lateness (ms)':<34} {'count':>7} {'p50':>8} {'p99':>8} {'max':>8} {'min':>8}")
    for row in rows:
        print(row)


if __name__ == "__main__":
    main()
