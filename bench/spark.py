"""The Spark data source: sink rows/s, batch-read rows/s, streaming micro-batch rows/s.

``bolide standalone`` runs as a child process (port 0, a temporary data directory, ASYNC
flush); Spark runs ``local[2]`` in this process, its Python workers on the same 2 cores. Steps:

1. **sink**: ``spark.range(N)`` with 1 KiB bodies written with ``df.write.format("bolide")``
   into a topic of ``--queues`` queues (this also loads the data for the reads);
2. **batch read**: ``spark.read.format("bolide")`` of the whole topic, every body touched
   (``sum(length(body))``);
3. **streaming**: ``spark.readStream.format("bolide")`` from earliest with
   ``maxMessagesPerTrigger`` into the ``noop`` sink, Trigger.AvailableNow.

The broker runs with ``maxTransferCountOnMessageInMemory=--pull-batch`` and
``maxTransferBytesOnMessageInMemory=4 MiB`` (RocketMQ's defaults are 32 messages and 256 KiB
a pull), and the reads ask for ``pullBatchSize=--pull-batch`` messages a pull; ``--pull-batch
32`` measures what a default broker allows.

4. **ceiling**: the same three actions over a trivial Python data source (``ceiling``, this
   file) that yields ready Arrow record batches of the source's row shape (8,192 rows, the
   bodies as long) from ``--queues`` partitions and whose sink drops the batches it gets:
   what Spark's Python Data Source API carries on this machine in the same run. The ratios
   Bolide / ceiling are printed last.

Each rate is rows over the wall time of the Spark action (planning included; the JVM and the
Python workers are warmed by a small write, batch read and streaming read first). Beside it,
the CPU time per row of the Spark side — the JVM, and Python: this process, Spark's Python
daemons and workers — and of the broker: on a shared machine they move far less than the
rates do.

    .venv/bin/python bench/spark.py [--messages 1000000] [--body-bytes 1024] [--queues 4]
        [--per-trigger 200000] [--pull-batch 1024]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bolide.bench.runtime import process_cpu_s, process_tree_cpu_s
from bolide.client.config import build_client_config
from bolide.client.instance import ClientInstance
from bolide.protocol.bodies import PERM_READ, PERM_WRITE
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import CreateTopicRequestHeader
from bolide.remoting import ClientPool
from bolide.remoting.loop import run as run_loop
from bolide.spark.queues import fetch_bounds, list_queues

TOPIC = "spark-bench"
READY_TIMEOUT_S = 60
DISPATCH_TIMEOUT_S = 120
DISK_MAX_USED_SPACE_RATIO_PERCENT = 95
TRANSFER_MAX_BYTES = 4 * 1024 * 1024
SEND_TIMEOUT_MS = 30_000
"""The sink's send timeout: a shared machine's broker can answer a 1 MiB batch in over the
default 3 s, which fails the task instead of measuring it."""


@dataclass(frozen=True)
class Options:
    messages: int
    body_bytes: int
    queues: int
    per_trigger: int
    pull_batch: int


class Standalone:
    """``bolide standalone`` in a child process."""

    def __init__(self, data_dir: Path, pull_batch: int) -> None:
        bolide = str(Path(sys.executable).parent / "bolide")
        # A shared machine's disk may be fuller than the broker's default 75 % limit, past
        # which it deletes the oldest commit-log files at once (the reads would then lose data).
        config = data_dir / "broker.conf"
        # Larger pulls than RocketMQ's default 32 messages / 256 KiB (the reads ask for them).
        config.write_text(
            f"diskMaxUsedSpaceRatio={DISK_MAX_USED_SPACE_RATIO_PERCENT}\n"
            f"maxTransferCountOnMessageInMemory={pull_batch}\n"
            f"maxTransferBytesOnMessageInMemory={TRANSFER_MAX_BYTES}\n"
        )
        self.process = subprocess.Popen(
            [bolide, "standalone", "--namesrv-port", "0", "--broker-port", "0", "--proxy-port", "0",
             "--no-metrics", "--no-dashboard", "--config", str(config),
             "--data-dir", str(data_dir / "store")],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )  # fmt: skip
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line.startswith("bolide ready"):
            self.stop()
            raise RuntimeError(f"bolide standalone did not start: {line!r}")
        fields = dict(part.split("=", 1) for part in line.split()[2:])
        self.namesrv, self.broker = fields["namesrv"], fields["broker"]

    def cpu_seconds(self) -> float:
        return process_cpu_s(self.process.pid)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(READY_TIMEOUT_S)


async def _create_topic(broker: str, queues: int) -> None:
    pool = ClientPool()
    try:
        header = CreateTopicRequestHeader(TOPIC, "TBW102", queues, queues, PERM_READ | PERM_WRITE)
        request = RemotingCommand.request(
            RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext_fields()
        )
        response = await pool.invoke(broker, request, 10_000)
        if response.code != ResponseCode.SUCCESS:
            raise RuntimeError(f"cannot create {TOPIC}: {response.remark}")
    finally:
        await pool.close()


def _session() -> Any:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from pyspark.sql import SparkSession

    from bolide.spark import BolideDataSource

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("bolide-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "2g")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(BolideDataSource)
    return spark


def _spark_cpu_seconds() -> float:
    """CPU used so far by this process and its descendants (the JVM and Spark's Python
    daemon and workers, which Spark keeps alive between tasks; and the broker)."""
    return process_tree_cpu_s(os.getpid())


def _jvm_cpu_seconds(spark: Any) -> float:
    """CPU used so far by Spark's JVM (the gateway's java process)."""
    return process_cpu_s(spark.sparkContext._gateway.proc.pid)


@dataclass(frozen=True)
class Timing:
    seconds: float
    broker_cpu_s: float
    spark_cpu_s: float
    jvm_cpu_s: float


def _timed(server: Standalone, spark: Any, action: Any) -> tuple[Timing, Any]:
    broker, tree, jvm = server.cpu_seconds(), _spark_cpu_seconds(), _jvm_cpu_seconds(spark)
    started = time.perf_counter()
    result = action()
    seconds = time.perf_counter() - started
    timing = Timing(
        seconds,
        server.cpu_seconds() - broker,
        _spark_cpu_seconds() - tree,
        _jvm_cpu_seconds(spark) - jvm,
    )
    return timing, result


def _line(name: str, rows: int, timing: Timing) -> str:
    # The broker is a child of this process: its CPU is in the tree's, and taken out here.
    python_s = timing.spark_cpu_s - timing.jvm_cpu_s - timing.broker_cpu_s
    jvm_us = timing.jvm_cpu_s / rows * 1e6
    python_us = python_s / rows * 1e6
    broker_us = timing.broker_cpu_s / rows * 1e6
    return (
        f"{name:<34} {rows:>9,} rows {timing.seconds:>6.1f} s {rows / timing.seconds:>9,.0f} rows/s"
        f"  CPU/row: Spark {jvm_us + python_us:5.1f} µs (JVM {jvm_us:4.1f}, Python"
        f" {python_us:4.1f}), broker {broker_us:5.1f} µs"
    )


async def _stored_messages(namesrv: str) -> int:
    """Messages the topic's consume queues hold now (the sum of the queues' max offsets)."""
    instance = ClientInstance(build_client_config(namesrv, "spark-bench-check"))
    await instance.start()
    try:
        bounds = await fetch_bounds(instance, await list_queues(instance, [TOPIC]))
    finally:
        await instance.shutdown()
    return sum(bound.max_offset for bound in bounds.values())


def _wait_dispatched(namesrv: str, messages: int) -> None:
    """Wait (bounded) until the broker's consume queues cover every message written: the
    broker indexes the commit log behind the writes, and a read sees only indexed messages."""
    deadline = time.monotonic() + DISPATCH_TIMEOUT_S
    stored = run_loop(_stored_messages(namesrv))
    while stored < messages and time.monotonic() < deadline:
        time.sleep(0.2)
        stored = run_loop(_stored_messages(namesrv))
    if stored < messages:
        print(f"(only {stored:,} of {messages:,} messages indexed after {DISPATCH_TIMEOUT_S} s)")


def run(options: Options) -> None:
    with tempfile.TemporaryDirectory(prefix="bolide-spark-bench-") as data_dir:
        server = Standalone(Path(data_dir), options.pull_batch)
        try:
            run_loop(_create_topic(server.broker, options.queues))
            spark = _session()
            try:
                _measure(spark, server, options)
            finally:
                spark.stop()
        finally:
            server.stop()


CEILING_BATCH_ROWS = 8_192
"""Rows of each ready record batch of the ceiling source (the Bolide reader's batch size)."""


def _ceiling_batch(rows: int, body_bytes: int, properties: int = 1) -> Any:
    """One record batch of the source's Arrow schema, ``rows`` rows of ``body_bytes`` bodies
    and ``properties`` entries in each row's property map."""
    import pyarrow as pa

    from bolide.spark.records import ARROW_SCHEMA

    columns: dict[str, Any] = {}
    for field in ARROW_SCHEMA:
        if field.name == "body":
            columns[field.name] = pa.array([b"\xab" * body_bytes] * rows, field.type)
        elif field.name == "properties":
            entries = [(f"PROPERTY_{n}", "0123456789ABCDEF") for n in range(properties - 1)]
            columns[field.name] = pa.array([[("UNIQ_KEY", "k"), *entries]] * rows, field.type)
        elif pa.types.is_string(field.type):
            columns[field.name] = pa.array(["x"] * rows, field.type)
        elif field.name == "body_error":
            columns[field.name] = pa.nulls(rows, field.type)
        else:
            columns[field.name] = pa.array([0] * rows).cast(field.type)
    return pa.RecordBatch.from_pydict(columns, schema=ARROW_SCHEMA)


def _ceiling_source() -> Any:
    """The ``ceiling`` data source class (defined here, shipped to the workers by value)."""
    from pyspark.sql.datasource import (
        DataSource,
        DataSourceArrowWriter,
        DataSourceReader,
        DataSourceStreamReader,
        InputPartition,
        WriterCommitMessage,
    )
    from pyspark.sql.streaming.datasource import ReadMaxRows

    from bolide.spark.source import SOURCE_SCHEMA

    def batches(rows: int, body_bytes: int, properties: int) -> Any:
        ready = _ceiling_batch(min(rows, CEILING_BATCH_ROWS), body_bytes, properties)
        while rows > 0:
            take = min(rows, ready.num_rows)
            yield ready if take == ready.num_rows else ready.slice(0, take)
            rows -= take

    class Reader(DataSourceReader):
        def __init__(self, options: dict[str, str]) -> None:
            self.rows, self.parts = int(options["rows"]), int(options["parts"])
            self.body_bytes = int(options["body_bytes"])
            self.properties = int(options.get("properties", "1"))

        def partitions(self) -> list[InputPartition]:
            share = -(-self.rows // self.parts)
            sizes = [min(share, self.rows - n * share) for n in range(self.parts)]
            return [InputPartition(size) for size in sizes if size > 0]

        def read(self, partition: InputPartition) -> Any:
            return batches(partition.value, self.body_bytes, self.properties)

    class StreamReader(DataSourceStreamReader):
        def __init__(self, options: dict[str, str]) -> None:
            self.batch = Reader(options)
            self.per_trigger = int(options["per_trigger"])

        def initialOffset(self) -> dict[str, int]:  # noqa: N802
            return {"n": 0}

        def getDefaultReadLimit(self) -> Any:  # noqa: N802
            return ReadMaxRows(self.per_trigger)

        def latestOffset(self, start: dict[str, int], limit: Any) -> dict[str, int]:  # noqa: N802
            end = self.batch.rows
            if isinstance(limit, ReadMaxRows):
                end = min(end, start["n"] + limit.max_rows)
            return {"n": end}

        def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
            rows, parts = end["n"] - start["n"], self.batch.parts
            share = -(-rows // parts)
            sizes = [min(share, rows - n * share) for n in range(parts)]
            return [InputPartition(size) for size in sizes if size > 0]

        def read(self, partition: InputPartition) -> Any:
            return batches(partition.value, self.batch.body_bytes, self.batch.properties)

    class Writer(DataSourceArrowWriter):
        def write(self, iterator: Any) -> WriterCommitMessage:
            for _ in iterator:
                pass
            return WriterCommitMessage()

    class Ceiling(DataSource):
        @classmethod
        def name(cls) -> str:
            return "ceiling"

        def schema(self) -> Any:
            return SOURCE_SCHEMA

        def reader(self, schema: Any) -> DataSourceReader:
            return Reader(dict(self.options))

        def streamReader(self, schema: Any) -> DataSourceStreamReader:  # noqa: N802
            return StreamReader(dict(self.options))

        def writer(self, schema: Any, overwrite: bool) -> DataSourceArrowWriter:
            return Writer()

    return Ceiling


def _measure_ceiling(spark: Any, server: Standalone, options: Options) -> dict[str, float]:
    """Rows/s of the batch read, streaming read and write over the ``ceiling`` source."""
    from pyspark.sql import functions as sf

    spark.dataSource.register(_ceiling_source())

    def source() -> Any:
        return (
            spark.read.format("ceiling")
            .option("rows", str(options.messages))
            .option("parts", str(options.queues))
            .option("body_bytes", str(options.body_bytes))
        )

    def stream() -> int:
        query = (
            spark.readStream.format("ceiling")
            .option("rows", str(options.messages))
            .option("parts", str(options.queues))
            .option("body_bytes", str(options.body_bytes))
            .option("per_trigger", str(options.per_trigger))
            .load()
            .select(sf.length("body").alias("size"))
            .writeStream.format("noop")
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        return sum(int(progress["numInputRows"]) for progress in query.recentProgress)

    rows = spark.range(options.messages).select(
        sf.expr(f"unhex(repeat('AB', {options.body_bytes}))").alias("body"),
        sf.concat(sf.lit("k"), sf.col("id").cast("string")).alias("keys"),
    )
    source().load().count()  # warm-up
    rates: dict[str, float] = {}
    timing, _ = _timed(server, spark, lambda: rows.write.format("ceiling").mode("append").save())
    print(_line("ceiling: write (drops the batches)", options.messages, timing))
    rates["write"] = options.messages / timing.seconds
    timing, read = _timed(
        server, spark, lambda: source().load().select(sf.sum(sf.length("body"))).collect()[0][0]
    )
    print(_line("ceiling: batch read", read // options.body_bytes, timing))
    rates["batch read"] = read // options.body_bytes / timing.seconds
    timing, streamed = _timed(server, spark, stream)
    print(_line(f"ceiling: streaming ({options.per_trigger:,} per trigger)", streamed, timing))
    rates["streaming read"] = streamed / timing.seconds
    return rates


def _measure(spark: Any, server: Standalone, options: Options) -> None:
    bolide = _measure_bolide(spark, server, options)
    ceiling = _measure_ceiling(spark, server, options)
    for name in ("batch read", "streaming read", "write"):
        print(f"ratio {name:<15} Bolide / ceiling = {bolide[name] / ceiling[name]:.2f}")


def _measure_bolide(spark: Any, server: Standalone, options: Options) -> dict[str, float]:
    from pyspark.sql import functions as sf

    def source() -> Any:
        return (
            spark.read.format("bolide")
            .option("namesrv", server.namesrv)
            .option("topic", TOPIC)
            .option("pullBatchSize", str(options.pull_batch))
        )

    # Warm up the JVM and the Python workers on a small write and read.
    warm = spark.range(2_000).select(
        sf.expr(f"unhex(repeat('AB', {options.body_bytes}))").alias("body")
    )
    warm.write.format("bolide").option("namesrv", server.namesrv).option("topic", "warm-up").mode(
        "append"
    ).save()
    spark.read.format("bolide").option("namesrv", server.namesrv).option(
        "topic", "warm-up"
    ).load().count()
    # The streaming path too: its first run paid the JIT compiling the micro-batch code
    # (≈ 0.8 µs a row more JVM CPU over 400,000 rows than a second run).
    spark.readStream.format("bolide").option("namesrv", server.namesrv).option(
        "topic", "warm-up"
    ).option("startingOffsets", "earliest").load().select(
        sf.length("body").alias("size")
    ).writeStream.format("noop").trigger(availableNow=True).start().awaitTermination()

    rows = spark.range(options.messages).select(
        sf.expr(f"unhex(repeat('AB', {options.body_bytes}))").alias("body"),
        sf.concat(sf.lit("k"), sf.col("id").cast("string")).alias("keys"),
    )
    timing, _ = _timed(
        server,
        spark,
        lambda: (
            rows.write.format("bolide")
            .option("namesrv", server.namesrv)
            .option("topic", TOPIC)
            .option("sendTimeoutMs", str(SEND_TIMEOUT_MS))
            .mode("append")
            .save()
        ),
    )
    print(_line(f"sink (df.write, {options.body_bytes} B bodies)", options.messages, timing))
    rates = {"write": options.messages / timing.seconds}

    _wait_dispatched(server.namesrv, options.messages)
    timing, read = _timed(
        server, spark, lambda: source().load().select(sf.sum(sf.length("body"))).collect()[0][0]
    )
    count = read // options.body_bytes
    print(_line("batch read (sum(length(body)))", count, timing))
    rates["batch read"] = count / timing.seconds

    def stream() -> int:
        query = (
            spark.readStream.format("bolide")
            .option("namesrv", server.namesrv)
            .option("topic", TOPIC)
            .option("startingOffsets", "earliest")
            .option("maxMessagesPerTrigger", str(options.per_trigger))
            .option("pullBatchSize", str(options.pull_batch))
            .load()
            .select(sf.length("body").alias("size"))
            .writeStream.format("noop")
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        return sum(int(progress["numInputRows"]) for progress in query.recentProgress)

    timing, streamed = _timed(server, spark, stream)
    print(_line(f"streaming ({options.per_trigger:,} per trigger)", streamed, timing))
    rates["streaming read"] = streamed / timing.seconds
    return rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--body-bytes", type=int, default=1024)
    parser.add_argument("--queues", type=int, default=4)
    parser.add_argument("--per-trigger", type=int, default=200_000)
    parser.add_argument("--pull-batch", type=int, default=1024)
    arguments = parser.parse_args()
    run(
        Options(
            arguments.messages,
            arguments.body_bytes,
            arguments.queues,
            arguments.per_trigger,
            arguments.pull_batch,
        )
    )


if __name__ == "__main__":
    main()
