"""A soak run: a standalone under mixed traffic for ``--minutes``, watched for leaks and loss.

``bolide standalone`` runs in a child process with the 5.x proxy, the dashboard and metrics on
(bench/fuzz_support.py starts it). Traffic, all at once for the whole run:

* 4.x (Bolide's client): a producer at ``--rate`` msg/s with a push consumer group, a second
  consumer of that group joining and leaving every ``CHURN_INTERVAL_S``; delayed messages
  (level 1); a consumer that asks for every message again once (retries through %RETRY%);
  transactions (even ones committed, odd ones rolled back); an orderly group fed by sharding
  key, checked for order per key;
* the real C++ client (``rocketmq==0.4.4``) producing, read by a Bolide consumer;
* the official 5.x Python SDK producing and reading with a SimpleConsumer through the proxy;
* a scrape of /metrics and the dashboard's cluster page every ``SCRAPE_INTERVAL_S``;
* a Spark structured streaming query (bench/soak_spark.py: local[1], ``format("bolide")`` on
  SoakPlain from its earliest offset into a memory sink, a micro-batch every 5 s), whose rows
  and batch durations are printed with every sample and which is stopped after the drain.

Every ``--sample-seconds`` (default: a twelfth of the run, at most 60 s) it samples the
broker's anonymous resident memory (RssAnon: the heap; the mapped store files, RssFile, grow
with the data written and are reported apart) and open descriptors (/proc), its event
loop's live tasks, parked long polls and POP in-flight table (GET_BROKER_RUNTIME_INFO), and
the 4.x send latency percentiles. When the traffic stops it drains (at most
``DRAIN_TIMEOUT_S``), then judges:

* loss: every message sent is received (rolled-back transactions: none), order kept per key;
  the Spark query is alive, read at least every plain message sent, and each id once;
* growth: the Theil–Sen slope (median of pairwise slopes, robust to one transient sample)
  over the last half of the samples stays within its tolerance (``TOLERANCES``: RssAnon
  2 MiB/min, 1 descriptor/min, 20 tasks/min, 50 parked long polls/min, 50 in-flight POP
  messages/min — what a run that levels off stays below);
* latency: the p99 of the last third of the samples is at most twice that of the first
  third plus 20 ms (``P99_DRIFT_FACTOR``, ``P99_DRIFT_SLACK_MS``).

The last line is the verdict with its figures; the exit status is 0 only when it passes.
``--plots DIR`` writes RSS, descriptors and p99 over time as PNG (bench/soak_plot.py, headless
Chromium); ``--samples FILE`` appends each sample to FILE as a JSON line, which
``bench/soak_plot.py FILE`` plots afterwards.

    .venv/bin/python bench/soak.py --minutes 60 [--rate 50] [--plots docs/images] [--samples F]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.fuzz_http import http_get, status_of
from bench.fuzz_support import ServerUnderTest
from bench.soak_plot import write_plots
from bench.soak_spark import SparkProgress, SparkStream
from bolide.client.admin import AdminClient
from bolide.client.config import ConsumeFrom
from bolide.client.consumer.listener import ConsumeResult, OrderlyResult
from bolide.client.consumer.options import ConsumerOptions
from bolide.client.consumer.push_consumer import PushConsumer
from bolide.client.message import Message
from bolide.client.producer.producer import Producer
from bolide.client.producer.transaction import LocalTransactionState, TransactionProducer
from bolide.protocol.bodies import KVTable, SubscriptionGroupConfig
from bolide.protocol.codes import RequestCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.message import MessageExt
from bolide.remoting import ClientPool
from bolide.remoting import loop as remoting_loop

CHURN_INTERVAL_S = 30.0
SCRAPE_INTERVAL_S = 15.0
DRAIN_TIMEOUT_S = 120.0
"""After the traffic stops: time for retries (10 s, then 30 s back-off) and delays to land."""
TOLERANCES = {
    "rss_kib": 2048.0,
    "open_fds": 1.0,
    "asyncio_tasks": 20.0,
    "long_polls": 50.0,
    "pop_in_flight": 50.0,
}
"""Largest slope per minute, over the last half of the samples, of a figure that levels off."""
P99_DRIFT_FACTOR = 2.0
P99_DRIFT_SLACK_MS = 20.0
STREAMS = ("plain", "delay", "retry", "tx", "orderly", "cpp", "sdk5")
ORDER_KEYS = 8


@dataclass
class Sample:
    minute: float
    rss_kib: float
    """Anonymous resident memory (RssAnon): the heap, where a leak shows."""
    rss_file_kib: float
    """File-backed resident memory (RssFile): the mapped commit log and queues the broker
    touched, which grows with the data written (reported, not judged)."""
    open_fds: float
    asyncio_tasks: float
    long_polls: float
    pop_in_flight: float
    p50_ms: float
    p99_ms: float


@dataclass
class Ledger:
    """What each stream sent and what came back (bodies as text)."""

    sent: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    received: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    rolled_back: set[str] = field(default_factory=set)
    order_errors: int = 0
    last_per_key: dict[str, int] = field(default_factory=dict)
    latencies_ms: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def got(self, stream: str, body: bytes) -> None:
        with self.lock:
            self.received[stream].add(body.decode(errors="replace"))

    def missing(self) -> dict[str, int]:
        return {s: len(self.sent[s] - self.received[s]) for s in STREAMS if self.sent[s]}


class Soak:
    def __init__(self, server: ServerUnderTest, rate: int) -> None:
        self.server = server
        self.namesrv = server.listeners["namesrv"]
        self.rate = rate
        self.ledger = Ledger()
        self.stop = asyncio.Event()
        self.consumers: list[PushConsumer] = []

    # --- consumers ------------------------------------------------------------------------

    async def consumer(self, group: str, topic: str, stream: str, **options: Any) -> PushConsumer:
        seen_once: set[str] = set()

        def listener(messages: list[MessageExt]) -> ConsumeResult:
            for message in messages:
                body = bytes(message.body).decode(errors="replace")
                if stream == "retry" and body not in seen_once:
                    seen_once.add(body)
                    return ConsumeResult.RECONSUME_LATER
                self.ledger.got(stream, bytes(message.body))
            return ConsumeResult.SUCCESS

        consumer = PushConsumer(
            group,
            self.namesrv,
            consume_from=ConsumeFrom.FIRST_OFFSET,
            options=ConsumerOptions(consume_batch_max_size=1),
            **options,
        )
        consumer.subscribe(topic, "*")
        consumer.register_listener(listener)
        await consumer.start()
        self.consumers.append(consumer)
        return consumer

    async def orderly_consumer(self) -> None:
        def listener(messages: list[MessageExt]) -> OrderlyResult:
            for message in messages:
                key, sequence = bytes(message.body).decode().split("-")[1:3]
                with self.ledger.lock:
                    if int(sequence) <= self.ledger.last_per_key.get(key, -1):
                        self.ledger.order_errors += 1
                    self.ledger.last_per_key[key] = int(sequence)
                self.ledger.got("orderly", bytes(message.body))
            return OrderlyResult.SUCCESS

        consumer = PushConsumer("SoakOrderlyGroup", self.namesrv, orderly=True,
                                consume_from=ConsumeFrom.FIRST_OFFSET)  # fmt: skip
        consumer.subscribe("SoakOrderly", "*")
        consumer.register_listener(listener)
        await consumer.start()
        self.consumers.append(consumer)

    # --- producers ------------------------------------------------------------------------

    async def paced(self, interval_s: float, step: Any) -> None:
        index = 0
        while not self.stop.is_set():
            try:
                await step(index)
            except Exception as error:  # a failed send is counted, not fatal: the run goes on
                self.ledger.errors.append(f"{step.__name__}: {error!r}")
            index += 1
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(interval_s):
                    await self.stop.wait()

    async def bolide_producers(self) -> None:
        producer = Producer("SoakProducers", self.namesrv)
        await producer.start()
        tx = TransactionProducer("SoakTx", self.namesrv, checker=lambda m: _tx_state(m.body))
        await tx.start()

        async def plain(index: int) -> None:
            body = f"plain-{index}"
            started = time.perf_counter()
            await producer.send(Message("SoakPlain", body.encode()))
            self.ledger.latencies_ms.append((time.perf_counter() - started) * 1000)
            self.ledger.sent["plain"].add(body)
            if index % 10 == 0:
                await side(index // 10)

        async def side(index: int) -> None:
            await producer.send(Message("SoakDelay", f"delay-{index}".encode(), delay_level=1))
            self.ledger.sent["delay"].add(f"delay-{index}")
            await producer.send(Message("SoakRetry", f"retry-{index}".encode()))
            self.ledger.sent["retry"].add(f"retry-{index}")
            key = index % ORDER_KEYS
            body = f"order-{key}-{index}"
            await producer.send(Message("SoakOrderly", body.encode()), sharding_key=str(key))
            self.ledger.sent["orderly"].add(body)
            tx_body = f"tx-{index}"
            await tx.send_in_transaction(Message("SoakTx", tx_body.encode()),
                                         lambda m, a: _tx_state(m.body))  # fmt: skip
            (self.ledger.sent["tx"] if index % 2 == 0 else self.ledger.rolled_back).add(tx_body)

        try:
            await self.paced(1 / self.rate, plain)
        finally:
            await producer.shutdown()
            await tx.shutdown()

    async def churn(self) -> None:
        """A second consumer of the plain group joins, then leaves, over and over."""
        while not self.stop.is_set():
            extra = await self.consumer("SoakPlainGroup", "SoakPlain", "plain")
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(CHURN_INTERVAL_S):
                    await self.stop.wait()
            self.consumers.remove(extra)
            await extra.shutdown()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(CHURN_INTERVAL_S):
                    await self.stop.wait()

    async def scrape(self) -> None:
        while not self.stop.is_set():
            for listener, path in (("metrics", "/metrics"), ("dashboard", "/")):
                status = status_of(await http_get(self.server, listener, path))
                if status != 200:
                    self.ledger.errors.append(f"scrape {listener}{path}: {status}")
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(SCRAPE_INTERVAL_S):
                    await self.stop.wait()

    # --- the real clients, on threads -----------------------------------------------------------

    def cpp_producer(self, stop: threading.Event) -> None:
        from rocketmq.client import Message as CppMessage
        from rocketmq.client import Producer as CppProducer

        producer = CppProducer("SoakCppProducers")
        producer.set_namesrv_addr(self.namesrv)
        producer.start()
        try:
            index = 0
            while not stop.wait(0.2):
                message = CppMessage("SoakCpp")
                message.set_body(f"cpp-{index}")
                try:
                    producer.send_sync(message)
                    with self.ledger.lock:
                        self.ledger.sent["cpp"].add(f"cpp-{index}")
                except Exception as error:  # the C++ client's own errors: counted
                    self.ledger.errors.append(f"cpp send: {error!r}")
                index += 1
        finally:
            producer.shutdown()

    def sdk5_clients(self, stop: threading.Event) -> None:
        from rocketmq import (
            ClientConfiguration,
            Credentials,
            FilterExpression,
            SimpleConsumer,
        )
        from rocketmq import Message as SdkMessage
        from rocketmq import Producer as SdkProducer

        configuration = ClientConfiguration(self.server.listeners["proxy"], Credentials())
        producer = SdkProducer(configuration, ("SoakSdk",))
        producer.startup()
        consumer = SimpleConsumer(configuration, "SoakSdkGroup",
                                  {"SoakSdk": FilterExpression("*")}, await_duration=2)  # fmt: skip
        consumer.startup()
        try:
            index = 0
            while not stop.is_set() or self.ledger.sent["sdk5"] - self.ledger.received["sdk5"]:
                if not stop.is_set():
                    message = SdkMessage()
                    message.topic, message.body = "SoakSdk", f"sdk5-{index}".encode()
                    producer.send(message)
                    with self.ledger.lock:
                        self.ledger.sent["sdk5"].add(f"sdk5-{index}")
                    index += 1
                for received in consumer.receive(16, 30):
                    self.ledger.got("sdk5", received.body)
                    consumer.ack(received)
                if stop.is_set() and self.drained.is_set():
                    break
        finally:
            consumer.shutdown()
            producer.shutdown()

    drained = threading.Event()


def _tx_state(body: bytes | memoryview) -> LocalTransactionState:
    index = int(bytes(body).decode().split("-")[1])
    if index % 2 == 0:
        return LocalTransactionState.COMMIT_MESSAGE
    return LocalTransactionState.ROLLBACK_MESSAGE


# --- sampling and the verdict --------------------------------------------------------------------


async def sample(soak: Soak, started: float) -> Sample:
    pool = ClientPool()
    try:
        response = await pool.invoke(
            soak.server.listeners["broker"],
            RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO),
        )
    finally:
        await pool.close()
    table = dict(KVTable.from_json(response.body).table)
    latencies, soak.ledger.latencies_ms = soak.ledger.latencies_ms, []
    cuts = statistics.quantiles(latencies, n=100) if len(latencies) >= 2 else [0.0] * 99
    return Sample(
        minute=(time.monotonic() - started) / 60,
        rss_kib=soak.server.rss_kib("RssAnon"),
        rss_file_kib=soak.server.rss_kib("RssFile"),
        open_fds=soak.server.open_fds(),
        asyncio_tasks=float(table.get("bolideAsyncioTasks", "nan")),
        long_polls=float(table.get("longPollingParkedPulls", "nan")),
        pop_in_flight=float(table.get("bolidePopInFlightMessages", "nan")),
        p50_ms=cuts[49],
        p99_ms=cuts[98],
    )


def slope_per_minute(points: list[tuple[float, float]]) -> float:
    """Theil–Sen slope of ``(minute, value)`` points: the median of the slopes between every
    pair (0 with fewer than two distinct minutes).

    Not least squares: the last sample of a fit has the most leverage, so one transient there
    (descriptors of a consumer joining while a scrape is open: 133 once, 106–110 otherwise)
    decided a 10-minute run's verdict. A leak raises every sample, so the median of pairwise
    slopes still sees it; a spike moves fewer than half of them (breakdown point ~29%).
    """
    slopes = [
        (y2 - y1) / (x2 - x1)
        for index, (x1, y1) in enumerate(points)
        for x2, y2 in points[index + 1 :]
        if x2 != x1
    ]
    return statistics.median(slopes) if slopes else 0.0


def judge(
    samples: list[Sample],
    ledger: Ledger,
    spark: SparkProgress | None = None,
    spark_distinct: int = 0,
) -> tuple[bool, str]:
    failures: list[str] = []
    half = samples[len(samples) // 2 :]
    slopes = {
        name: slope_per_minute([(s.minute, getattr(s, name)) for s in half]) for name in TOLERANCES
    }
    for name, value in slopes.items():
        if value > TOLERANCES[name]:
            failures.append(f"{name} grows {value:.1f}/min > {TOLERANCES[name]:g}")
    missing = ledger.missing()
    if any(missing.values()):
        failures.append(f"lost {missing}")
    leaked = ledger.rolled_back & ledger.received["tx"]
    if leaked:
        failures.append(f"{len(leaked)} rolled-back transactions delivered")
    if ledger.order_errors:
        failures.append(f"{ledger.order_errors} orderly messages out of order")
    third = max(1, len(samples) // 3)
    first = statistics.median(s.p99_ms for s in samples[:third])
    last = statistics.median(s.p99_ms for s in samples[-third:])
    if last > first * P99_DRIFT_FACTOR + P99_DRIFT_SLACK_MS:
        failures.append(f"p99 drifted {first:.1f} -> {last:.1f} ms")
    failures.extend(_spark_failures(spark, spark_distinct, len(ledger.sent["plain"])))
    sent = sum(len(v) for v in ledger.sent.values())
    figures = (
        f"minutes={samples[-1].minute:.1f} sent={sent} lost={sum(missing.values())} "
        f"order_errors={ledger.order_errors} send_errors={len(ledger.errors)} "
        f"rss_anon={samples[0].rss_kib:.0f}->{samples[-1].rss_kib:.0f}KiB "
        f"rss_file={samples[0].rss_file_kib:.0f}->{samples[-1].rss_file_kib:.0f}KiB "
        f"fds={samples[0].open_fds:.0f}->{samples[-1].open_fds:.0f} "
        f"tasks={samples[0].asyncio_tasks:.0f}->{samples[-1].asyncio_tasks:.0f} "
        + " ".join(f"slope_{k}={v:.2f}/min" for k, v in slopes.items())
        + f" p99={first:.1f}->{last:.1f}ms"
        + ("" if spark is None else f" spark_rows={spark.rows} spark_batches={spark.batches}"
           f" spark_max_batch_ms={spark.max_batch_ms:.0f}")
    )  # fmt: skip
    verdict = "PASS" if not failures else "FAIL (" + "; ".join(failures) + ")"
    return not failures, f"soak verdict: {verdict} — {figures}"


def _spark_failures(spark: SparkProgress | None, distinct: int, plain_sent: int) -> list[str]:
    """The streaming query must have lived the whole run, read every plain message, once."""
    if spark is None:
        return []
    failures = []
    if spark.error:
        failures.append(f"spark query died: {spark.error}")
    if spark.rows < plain_sent:
        failures.append(f"spark read {spark.rows} of {plain_sent} plain messages")
    if distinct != spark.rows:
        failures.append(f"spark rows {spark.rows} but {distinct} distinct ids")
    return failures


def plot(samples: list[Sample], directory: Path) -> str:
    """RSS, descriptors and p99 over time as PNG under ``directory`` (bench/soak_plot.py)."""
    if len(samples) < 2:
        return "plots: fewer than 2 samples, none written"
    try:
        written = write_plots([dataclasses.asdict(s) for s in samples], directory)
    except Exception as error:  # Chromium missing or failing: the soak's verdict still stands
        return f"plots: none written ({error!r})"
    return "plots: " + ", ".join(str(path) for path in written)


def record_sample(taken: Sample, path: str) -> None:
    """Append one sample as a JSON line to ``path`` (nothing when empty), flushed at once so a
    run cut short still leaves every sample taken (bench/soak_plot.py reads the file)."""
    if path:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(dataclasses.asdict(taken)) + "\n")


# --- the run ------------------------------------------------------------------------------------


async def soak_run(server: ServerUnderTest, options: argparse.Namespace) -> tuple[bool, str]:
    soak = Soak(server, options.rate)
    async with AdminClient(soak.namesrv) as admin:
        for topic in ("SoakPlain", "SoakDelay", "SoakRetry", "SoakTx", "SoakCpp", "SoakSdk"):
            await admin.create_topic(topic, queue_count=4)
        await admin.create_topic("SoakOrderly", queue_count=4, order=True)
        for group in ("SoakSdkGroup", "SoakOrderlyGroup"):
            await admin.create_group(SubscriptionGroupConfig(group))
    for group, topic, stream in (
        ("SoakPlainGroup", "SoakPlain", "plain"), ("SoakDelayGroup", "SoakDelay", "delay"),
        ("SoakRetryGroup", "SoakRetry", "retry"), ("SoakTxGroup", "SoakTx", "tx"),
        ("SoakCppGroup", "SoakCpp", "cpp"),
    ):  # fmt: skip
        await soak.consumer(group, topic, stream)
    await soak.orderly_consumer()
    thread_stop = threading.Event()
    threads = [
        threading.Thread(target=soak.cpp_producer, args=(thread_stop,), daemon=True),
        threading.Thread(target=soak.sdk5_clients, args=(thread_stop,), daemon=True),
    ]
    for thread in threads:
        thread.start()
    spark = SparkStream(soak.namesrv, "SoakPlain", soak.server.root / "spark-checkpoint")
    await asyncio.to_thread(spark.start)
    tasks = [asyncio.ensure_future(work()) for work in
             (soak.bolide_producers, soak.churn, soak.scrape)]  # fmt: skip
    started = time.monotonic()
    interval_s = options.sample_seconds or min(60.0, options.minutes * 60 / 12)
    samples = [await sample(soak, started)]
    record_sample(samples[-1], options.samples)
    while time.monotonic() - started < options.minutes * 60:
        await asyncio.sleep(interval_s)
        samples.append(await sample(soak, started))
        record_sample(samples[-1], options.samples)
        print(f"  {samples[-1]}", flush=True)
        print(f"  {await asyncio.to_thread(spark.progress)}", flush=True)
    soak.stop.set()
    thread_stop.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    deadline = time.monotonic() + DRAIN_TIMEOUT_S
    # consumers in this process and in threads: poll, bounded
    while any(soak.ledger.missing().values()) and time.monotonic() < deadline:  # noqa: ASYNC110
        await asyncio.sleep(1.0)
    while (await asyncio.to_thread(spark.progress)).rows < len(soak.ledger.sent["plain"]):
        if time.monotonic() >= deadline:
            break
        await asyncio.sleep(1.0)
    spark_final, spark_distinct = await asyncio.to_thread(spark.stop)
    print(f"  {spark_final} distinct={spark_distinct}", flush=True)
    soak.drained.set()
    for thread in threads:
        await asyncio.to_thread(thread.join, 60)
    for consumer in soak.consumers:
        await consumer.shutdown()
    ok, verdict = judge(samples, soak.ledger, spark_final, spark_distinct)
    if options.plots:
        print(plot(samples, Path(options.plots)))
    if soak.ledger.errors:
        print(f"send errors: {len(soak.ledger.errors)}, first: {soak.ledger.errors[0]}")
    return ok, verdict


def main() -> int:
    parser = argparse.ArgumentParser(description="Soak a bolide standalone (issue 30).")
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--rate", type=int, default=50, help="4.x plain sends per second")
    parser.add_argument("--sample-seconds", type=float, default=0.0)
    parser.add_argument("--plots", default="", help="directory for PNG plots (e.g. docs/images)")
    parser.add_argument("--samples", default="", help="append each sample to this JSON-lines file")
    options = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bolide-soak-"))
    server = ServerUnderTest(root)
    try:
        server.start()
        ok, verdict = remoting_loop.run(soak_run(server, options))
    finally:
        server.stop()
        if os.environ.get("BOLIDE_SOAK_KEEP_LOG"):
            shutil.copy(server.log_path, os.environ["BOLIDE_SOAK_KEEP_LOG"])
        shutil.rmtree(root, ignore_errors=True)
    print(verdict, flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
