"""Two streaming queries (consumeMode=pop) and a 5.x SDK ``SimpleConsumer`` sharing one
group's messages, one query SIGKILLed mid-batch: the scenario of ``test_pop_share.py`` (CI
size) and ``bench/spark_pop.py`` (30,000 messages).

``bolide standalone`` (name server, broker, gRPC proxy) runs as a child process. Query A is
a driver of its own (``tests/spark/pop_driver.py``, a JSON file sink: what it committed
survives its death); query B runs in the caller's Spark session (memory sink); the SDK
consumer receives through the proxy and acknowledges each message. Query A starts alone
(with a fifth of the others' batch size, so that it is still busy when they start); B and
the consumer join once A committed a batch; A is SIGKILLed once B has rows and A, with two
batches committed, holds a popped one (its checkpoint has more offsets than commits: a batch's
messages are popped when Spark plans it, and acknowledged only once the next one is planned).
Its popped and unacknowledged messages come back to B and the consumer after their invisible
time, whether or not its file sink had written them before the kill; the run waits for them.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections import Counter
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.types import IntegerType, StringType, StructField, StructType

from bolide.client.message import Message
from bolide.client.producer.producer import Producer
from tests.compat.sdk5_support import configuration, create_group, create_topic, standalone
from tests.spark.drivers import kill_driver, start_driver

TOPIC, GROUP = "PopShare", "pop-share"
SDK_BATCH_MESSAGES = 32
SDK_INVISIBLE_S = 30
SEND_WINDOW = 64
POLL_S = 0.05
LIVE_ATTEMPTS = 3
_OUTPUT_SCHEMA = StructType([
    StructField("body", StringType()), StructField("msg_id", StringType()),
    StructField("reconsume_times", IntegerType()),
])  # fmt: skip


@dataclass
class Shared:
    """Who got what: bodies by consumer, and how many deliveries were second ones."""

    sent: int
    killed_query: Counter[str]
    live_query: Counter[str]
    sdk: Counter[str]
    came_back: int
    """Messages the live query and the SDK consumer got with reconsume_times > 0 (or a
    delivery attempt > 1): delivered before, to the killed query."""
    seconds: float
    """From query A's start to every message taken."""

    @property
    def everyone(self) -> Counter[str]:
        return self.killed_query + self.live_query + self.sdk


def _produce(namesrv: str, count: int) -> None:
    async def send_all() -> None:
        async with Producer("pop-share-producer", namesrv) as producer:
            for start in range(0, count, SEND_WINDOW):
                stop = min(count, start + SEND_WINDOW)
                await asyncio.gather(*(producer.send(Message(TOPIC, f"m{n}".encode()))
                                       for n in range(start, stop)))  # fmt: skip

    asyncio.run(send_all())


def _numbered(directory: Path) -> int:
    return sum(1 for path in directory.glob("*") if path.name.isdigit())


def _driver(
    namesrv: str, work: Path, per_trigger: int, invisible_s: int
) -> subprocess.Popen[bytes]:
    arguments = ["--namesrv", namesrv, "--topic", TOPIC, "--group", GROUP,
                 "--output", str(work / "output"), "--checkpoint", str(work / "checkpoint"),
                 "--per-trigger", str(per_trigger),
                 "--invisible-time", f"{invisible_s}s"]  # fmt: skip
    return start_driver("tests.spark.pop_driver", arguments, work / "driver.log")


def _sdk_consumer(endpoint: str) -> Any:
    from rocketmq import FilterExpression, SimpleConsumer

    consumer = SimpleConsumer(
        configuration(endpoint), GROUP, {TOPIC: FilterExpression("*")}, await_duration=1
    )
    consumer.startup()
    return consumer


def _wait(condition: Any, what: str, deadline: float, driver: subprocess.Popen[bytes]) -> None:
    while not condition():
        if time.monotonic() > deadline or driver.poll() is not None:
            raise AssertionError(f"gave up waiting for {what} (driver exit {driver.poll()})")
        time.sleep(POLL_S)


def share(
    spark: SparkSession,
    work: Path,
    messages: int,
    *,
    per_trigger: int,
    invisible_s: int,
    wait_s: float,
) -> Shared:
    """Run the scenario under ``work``; returns who got what (the caller asserts)."""
    with standalone(work / "data") as server:
        create_topic(server.namesrv, TOPIC, queues=4)
        create_group(server.namesrv, GROUP)
        _produce(server.namesrv, messages)
        started = time.monotonic()
        deadline = started + wait_s
        checkpoint = work / "checkpoint"
        # Query A takes small batches: it must still be busy when the others have started.
        driver = _driver(server.namesrv, work, max(1, per_trigger // 5), invisible_s)
        live = consumer = None
        sdk: Counter[str] = Counter()
        came_back = 0
        try:
            _wait(lambda: _numbered(checkpoint / "commits") >= 1, "query A's first commit",
                  deadline, driver)  # fmt: skip
            consumer = _sdk_consumer(server.proxy)
            for attempt in range(1, 1 + LIVE_ATTEMPTS):
                live = _live_query(spark, server.namesrv, per_trigger, invisible_s)
                try:
                    has_rows = partial(lambda query: _live_rows(query) > 0, live)
                    _wait(has_rows, "query B's first rows", deadline, driver)
                    break
                except AssertionError as error:
                    # Spark gives a Python worker 10 s to connect back; on a loaded machine
                    # a first start can miss it. The query had no rows: start it again.
                    if "failed to connect back" not in str(error) or attempt == LIVE_ATTEMPTS:
                        raise
                    live.stop()
            _wait(lambda: _numbered(checkpoint / "commits") >= 2
                  and _numbered(checkpoint / "offsets") > _numbered(checkpoint / "commits"),
                  "query A to hold a popped batch", deadline, driver)  # fmt: skip
            kill_driver(driver)
            killed = _committed_output(spark, work / "output")
            while time.monotonic() < deadline:
                for message in consumer.receive(SDK_BATCH_MESSAGES, SDK_INVISIBLE_S):
                    consumer.ack(message)
                    sdk[message.body.decode()] += 1
                    came_back += message.delivery_attempt > 1
                table = spark.table("pop_share_live")
                if table.count() + sdk.total() + killed.total() < messages:
                    continue
                rows = table.collect()
                live_bodies = Counter(row["body"] for row in rows)
                live_came_back = sum(1 for row in rows if row["reconsume_times"] > 0)
                # Every body taken is not the end: A may have died after its sink committed
                # its last batch but before Spark's commit log named it, so the messages it
                # held unacknowledged are also in its output. They still come back (nothing
                # acknowledged them): wait for that, the event the test is about.
                if len(killed + live_bodies + sdk) >= messages and came_back + live_came_back:
                    break
            seconds = time.monotonic() - started
            _live_rows(live)
            rows = spark.table("pop_share_live").collect()
            live_bodies = Counter(row["body"] for row in rows)
            came_back += sum(1 for row in rows if row["reconsume_times"] > 0)
        finally:
            kill_driver(driver)
            if consumer is not None:
                consumer.shutdown()
            if live is not None:
                live.stop()
    return Shared(messages, killed, live_bodies, sdk, came_back, seconds)


def _live_query(spark: SparkSession, namesrv: str, per_trigger: int, invisible_s: int) -> Any:
    """Query B: the topic through POP in the group, into the memory table pop_share_live."""
    return (
        spark.readStream.format("bolide").option("namesrv", namesrv)
        .option("topic", TOPIC).option("consumeMode", "pop").option("group", GROUP)
        .option("maxMessagesPerTrigger", str(per_trigger))
        .option("invisibleTime", f"{invisible_s}s").load()
        .selectExpr("cast(body AS string) AS body", "reconsume_times")
        .writeStream.format("memory").queryName("pop_share_live").start()
    )  # fmt: skip


def _live_rows(query: Any) -> int:
    """Rows query B has written so far; raises its error if it failed."""
    error = query.exception()
    if error is not None:
        raise AssertionError(f"query B failed: {error}")
    return sum(int(progress["numInputRows"]) for progress in query.recentProgress)


def _committed_output(spark: SparkSession, output: Path) -> Counter[str]:
    """The bodies of the batches query A committed (its file sink's log names them)."""
    rows = spark.read.schema(_OUTPUT_SCHEMA).json(str(output)).collect()
    return Counter(row["body"] for row in rows)
