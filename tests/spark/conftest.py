"""Fixtures for the Spark tests: one local[2] SparkSession for the whole test run, and a fresh
name server + broker per test, served from a background event-loop thread of this process.

Spark's Python workers are other processes: they reach the servers over 127.0.0.1 like any
client. Serving from this process lets a test reach into the broker (retention, its clock).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Coroutine, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

import pytest

pytest.importorskip("pyspark", reason="the spark extra (pyspark, pyarrow) is not installed")
pytest.importorskip("pyarrow", reason="the spark extra (pyspark, pyarrow) is not installed")
if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
    pytest.skip("Spark needs Java (make test installs it)", allow_module_level=True)

from pyspark.sql import DataFrame, SparkSession

from bolide.base.clock import Clock, ManualClock, SystemClock
from bolide.broker.broker import Broker
from bolide.broker.config import BrokerConfig
from bolide.client import rpc
from bolide.client.blocking.loop import LoopThread
from bolide.client.message import Message, SendResult
from bolide.client.producer.producer import Producer
from bolide.namesrv.namesrv import NameServer
from bolide.protocol.bodies import (
    PERM_READ,
    PERM_WRITE,
    MessageQueue,
)
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import CreateTopicRequestHeader
from bolide.remoting import ClientPool
from bolide.spark.client import BlockingClient
from bolide.spark.offsets import QueueRange
from bolide.spark.queues import PullSettings, fetch_bounds, list_queues, pull_range
from bolide.spark.records import RowColumns
from bolide.testing.cluster import TEST_BROKER_SETTINGS
from tests.spark.drivers import LOOPBACK, local_session

T = TypeVar("T")

BROKER_NAME = "broker-a"
WAIT_S = 120.0
"""Bound on a streaming query's wait: a hang fails the test instead of CI."""


class BackgroundCluster:
    """A name server and one broker on a private loop thread.

    ``broker_clock`` (default: the system clock) drives only the broker, so a test can age
    its messages (retention) while the name server keeps real time.
    """

    def __init__(
        self,
        root: Path,
        *,
        broker_clock: Clock | None = None,
        settings: dict[str, object] | None = None,
    ) -> None:
        self.root = root
        self.broker_clock = broker_clock
        self.settings = {**TEST_BROKER_SETTINGS, **(settings or {})}
        self.thread = LoopThread("spark-test-cluster")
        self.namesrv: NameServer | None = None
        self.broker: Broker | None = None

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return self.thread.run(coroutine)

    @property
    def namesrv_address(self) -> str:
        assert self.namesrv is not None
        return self.namesrv.address

    def start(self) -> None:
        self.run(self._start())

    async def _start(self) -> None:
        self.namesrv = NameServer(LOOPBACK, 0)
        await self.namesrv.start()
        overrides: dict[str, object] = {
            **self.settings,
            "broker_name": BROKER_NAME,
            "broker_ip1": LOOPBACK,
            "listen_port": 0,
            "namesrv_addresses": (self.namesrv.address,),
            "store_path_root_dir": self.root / BROKER_NAME / "store",
        }
        self.broker = Broker(
            BrokerConfig.from_mapping({}, overrides), host=LOOPBACK, clock=self.broker_clock, seed=0
        )
        await self.broker.start()

    def stop(self) -> None:
        try:
            self.run(self._stop())
        finally:
            self.thread.stop()

    async def _stop(self) -> None:
        if self.broker is not None:
            await self.broker.stop()
        if self.namesrv is not None:
            await self.namesrv.stop()

    def create_topic(self, topic: str, queue_count: int) -> None:
        """UPDATE_AND_CREATE_TOPIC with ``queue_count`` read and write queues."""
        assert self.broker is not None
        header = CreateTopicRequestHeader(
            topic, "TBW102", queue_count, queue_count, PERM_READ | PERM_WRITE
        )
        address = self.broker.address

        async def create() -> None:
            pool = ClientPool()
            try:
                request = RemotingCommand.request(
                    RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext_fields()
                )
                response = await pool.invoke(address, request, 10_000)
                assert response.code == ResponseCode.SUCCESS, response
            finally:
                await pool.close()

        self.run(create())

    def produce(
        self, messages: Sequence[Message], *, sharding_keys: bool = False
    ) -> list[SendResult]:
        """Send ``messages`` one by one (in order; with ``sharding_keys``, each to the queue of
        its KEYS); returns the results."""

        async def send_all() -> list[SendResult]:
            async with Producer("spark-test-producer", self.namesrv_address) as producer:
                results = []
                for message in messages:
                    if sharding_keys:
                        results.append(await producer.send_orderly(message, message.keys or ""))
                    else:
                        results.append(await producer.send(message))
                return results

        return self.run(send_all())

    def advance_broker_clock(self, duration_ms: int) -> None:
        """Move the broker's ManualClock on, from its loop (sleepers wake on that thread)."""
        clock = self.broker_clock
        assert isinstance(clock, ManualClock)

        async def advance() -> None:
            clock.advance_ms(duration_ms)

        self.run(advance())

    def committed_offsets(self, topic: str, group: str, queue_count: int) -> dict[int, int | None]:
        """``group``'s committed offset of each queue of ``topic`` (None: none), as a client
        asks the broker (QUERY_CONSUMER_OFFSET)."""
        client = BlockingClient(self.namesrv_address, "test")
        try:
            instance = client.instance
            offsets: dict[int, int | None] = {}
            for queue_id in range(queue_count):
                queue = MessageQueue(topic, BROKER_NAME, queue_id)
                address = client.run(instance.queue_broker_address(queue))
                offsets[queue_id] = client.run(
                    rpc.query_consumer_offset(instance.pool, address, group, topic, queue_id, 3_000)
                )
            return offsets
        finally:
            client.close()

    def broker_clock_now_ms(self) -> int:
        """The broker's wall-clock time (its store timestamps)."""
        return (self.broker_clock or SystemClock()).now_ms()

    def retention(self) -> int:
        """Run the broker's retention once; returns the commit-log segments deleted."""
        assert self.broker is not None
        return self.run(self.broker.context.store.run_retention_once())


AGED_TOPIC = "aging"
HOUR_MS = 3_600_000


@pytest.fixture
def aged(tmp_path: Path) -> Iterator[tuple[BackgroundCluster, list[SendResult], int]]:
    """A topic of one queue whose oldest messages retention deleted: (cluster, what was sent,
    the queue's min offset now)."""
    clock = ManualClock()
    cluster = BackgroundCluster(
        tmp_path,
        broker_clock=clock,
        settings={
            "commit_log_segment_bytes": 8 * 1024,
            "file_reserved_time_hours": 1,
            "delete_when_hours": tuple(range(24)),
        },
    )
    cluster.start()
    try:
        cluster.create_topic(AGED_TOPIC, 1)
        sent = cluster.produce(
            [Message(AGED_TOPIC, bytes([65 + n % 26]) * 1000) for n in range(40)]
        )
        cluster.advance_broker_clock(2 * HOUR_MS)
        sent += cluster.produce([Message(AGED_TOPIC, b"fresh-%d" % n) for n in range(5)])
        cluster.retention()  # the broker's own retention loop may have run already
        min_offset = _min_offset(cluster)
        assert 0 < min_offset < 40
        yield cluster, sent, min_offset
    finally:
        cluster.stop()


def _min_offset(cluster: BackgroundCluster) -> int:
    client = BlockingClient(cluster.namesrv_address, "test")
    try:
        queue = MessageQueue(AGED_TOPIC, BROKER_NAME, 0)
        return client.run(fetch_bounds(client.instance, [queue]))[queue].min_offset
    finally:
        client.close()


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """One local[2] session for every Spark test (starting a JVM costs ~20 s)."""
    saved = {name: os.environ.get(name) for name in ("PYSPARK_PYTHON", "SPARK_LOCAL_IP")}
    session = local_session(
        "bolide-tests", cores=2,
        settings={"spark.sql.shuffle.partitions": "2", "spark.sql.session.timeZone": "UTC",
                  "spark.sql.streaming.forceDeleteTempCheckpointLocation": "true"},
    )  # fmt: skip
    try:
        yield session
    finally:
        session.stop()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[BackgroundCluster]:
    started = BackgroundCluster(tmp_path)
    started.start()
    try:
        yield started
    finally:
        started.stop()


def rows_of(frame: DataFrame) -> list[dict[str, Any]]:
    """Every row of ``frame`` as a dict, sorted by (topic, broker, queue id, offset)."""
    rows = [row.asDict(recursive=True) for row in frame.collect()]
    return sorted(
        rows, key=lambda r: (r["topic"], r["broker_name"], r["queue_id"], r["queue_offset"])
    )


class NamedCluster(Protocol):
    """Anything with a name server to ask (a :class:`BackgroundCluster`, a broker process)."""

    @property
    def namesrv_address(self) -> str: ...


def rows_of_topic(cluster: NamedCluster, topic: str) -> list[dict[str, Any]]:
    """Every message of ``topic`` read without Spark (the source's pull path), as rows of the
    source's schema, sorted by (queue id, offset)."""
    client = BlockingClient(cluster.namesrv_address, "test")
    rows: list[dict[str, Any]] = []
    try:
        queues = client.run(list_queues(client.instance, [topic]))
        bounds = client.run(fetch_bounds(client.instance, queues))
        for queue, queue_bounds in sorted(bounds.items()):
            columns = RowColumns(queue)
            queue_range = QueueRange(queue, queue_bounds.min_offset, queue_bounds.max_offset)
            for chunk in client.iterate(
                pull_range(client.instance, queue_range, PullSettings("t", "*"))
            ):
                columns.add(chunk.body, chunk.stop_offset)
            rows.extend(columns.take_batch().to_pylist())
    finally:
        client.close()
    return rows
