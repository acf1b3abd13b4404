"""The exactly-once sink under faults, over real Spark drivers and a real broker process:

1. a driver copying a topic is SIGKILLed mid-run (after a seeded number of recorded batches);
2. it is restarted from its checkpoint, and the broker is SIGKILLed in the middle of a
   batch's commit: right after the driver's ledger record and before any END_TRANSACTION
   (even seeds), or after a seeded number of them (odd seeds), so some halves of the batch
   are committed and the others not;
3. the broker restarts on its data, the driver restarts from its checkpoint and finishes.

Then the target topic holds every input row exactly once (count and content), and within
the checker's window no half message of the sink's group is left pending on the broker
(QUERY_HALF_MESSAGES). Seeded: one seed in CI (``BOLIDE_SPARK_EO_FAULT_SEEDS``);
``bench/spark_exactly_once.py --faults`` runs ten.

The pause inside the commit is ``tests/spark/eo_faults/sitecustomize.py``: Spark starts the
sink's commit in a Python worker of its own, which loads it from the driver's PYTHONPATH.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bolide.base.children import child_environment
from bolide.client.blocking.loop import LoopThread
from bolide.client.message import Message
from bolide.client.producer.producer import Producer
from bolide.client.rpc.transactions import query_half_messages
from bolide.namesrv.namesrv import NameServer
from bolide.protocol.bodies import PERM_READ, PERM_WRITE, KVTable
from bolide.protocol.bodies.transaction import HalfMessageList, QueryHalfMessagesRequestHeader
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import CreateTopicRequestHeader
from bolide.remoting import ClientPool
from bolide.spark.exactly_once import LEDGER_TOPIC
from tests.spark.conftest import WAIT_S, rows_of_topic
from tests.spark.drivers import LOOPBACK, kill_driver, start_exactly_once_driver
from tests.spark.test_exactly_once import _count

BOLIDE = str(Path(sys.executable).parent / "bolide")
FAULTS = Path(__file__).resolve().parent / "eo_faults"
ROWS = 240
SEEDS = tuple(range(1, 1 + int(os.environ.get("BOLIDE_SPARK_EO_FAULT_SEEDS", "1"))))
SINK_GROUP = "bolide-spark-writer"
CHECK_INTERVAL_MS = 1_000
CHECK_MAX = 3
"""Checks every second, a half given up after three: a broker restarted while the driver is
away gives up the halves of the batch being committed (the next commit resumes them)."""
POLL_S = 0.1
PROCESS_WAIT_S = WAIT_S * 4
"""Bound on a driver's step (a JVM start and a few batches): on a 2-core machine shared by
other builds a JVM start alone took over a minute. A hang guard, not a timing assertion."""

pytestmark = pytest.mark.timeout(2_400)


class BrokerProcess:
    """A name server in this process and ``bolide broker`` as a child process, which the
    test SIGKILLs and restarts on the same data directory and port."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.thread = LoopThread("spark-fault-namesrv")
        self.namesrv = NameServer(LOOPBACK, 0)
        self.port = self.ha_port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.drain: threading.Thread | None = None

    @property
    def namesrv_address(self) -> str:
        return self.namesrv.address

    @property
    def address(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    def start(self) -> None:
        self.thread.run(self.namesrv.start())
        self.start_broker()

    def start_broker(self) -> None:
        conf = self.root / "broker.conf"
        settings = {
            "brokerClusterName": "FaultCluster", "brokerName": "broker-a",
            "namesrvAddr": self.namesrv_address, "brokerIP1": LOOPBACK,
            "listenPort": self.port, "haListenPort": self.ha_port, "vipChannelEnabled": "false",
            "transactionCheckInterval": CHECK_INTERVAL_MS, "transactionTimeOut": 1_000,
            "transactionCheckMax": CHECK_MAX, "mapedFileSizeCommitLog": 4 * 1024 * 1024,
        }  # fmt: skip
        conf.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))
        command = [BOLIDE, "broker", "-c", str(conf), "--data-dir", str(self.root / "broker")]
        with (self.root / "broker.log").open("ab") as log:
            self.process = subprocess.Popen(
                command, cwd=self.root, stdout=subprocess.PIPE, stderr=log,
                env=child_environment(),
            )  # fmt: skip
        assert self.process.stdout is not None
        ready = self.process.stdout.readline().decode()
        log_tail = (self.root / "broker.log").read_text(errors="replace")[-3000:]
        assert ready.startswith("bolide ready"), f"{ready!r}; broker log: {log_tail}"
        stdout = self.process.stdout  # drained, so the broker never blocks on a full pipe
        self.drain = threading.Thread(target=stdout.read, name="broker-stdout", daemon=True)
        self.drain.start()
        self.port = int(ready.split("broker=", 1)[1].split()[0].rsplit(":", 1)[1])
        if self.ha_port == 0:  # restarts keep both ports: clients and routes look there
            runtime = self.invoke(RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO))
            self.ha_port = int(KVTable.from_json(runtime.body).table["haListenPort"])

    def kill_broker(self) -> None:
        """SIGKILL: no shutdown at all (its page cache is kept, as a process crash leaves it)."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
        if self.process is not None:
            self.process.wait(timeout=WAIT_S)
            if self.drain is not None:
                self.drain.join(timeout=WAIT_S)  # EOF once the broker is gone
            if self.process.stdout is not None:
                self.process.stdout.close()
        self.process = None

    def stop(self) -> None:
        try:
            if self.process is not None and self.process.poll() is None:
                self.process.terminate()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.process.wait(timeout=WAIT_S)
            self.kill_broker()
            self.thread.run(self.namesrv.stop())
        finally:
            self.thread.stop()

    def invoke(self, request: RemotingCommand) -> RemotingCommand:
        async def invoke() -> RemotingCommand:
            pool = ClientPool()
            try:
                return await pool.invoke(self.address, request, 10_000)
            finally:
                await pool.close()

        return self.thread.run(invoke())

    def create_topic(self, topic: str, queue_count: int) -> None:
        header = CreateTopicRequestHeader(
            topic, "TBW102", queue_count, queue_count, PERM_READ | PERM_WRITE
        )
        request = RemotingCommand.request(
            RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext_fields()
        )
        assert self.invoke(request).code == ResponseCode.SUCCESS

    def produce(self, messages: list[Message]) -> None:
        async def send_all() -> None:
            async with Producer("spark-fault-producer", self.namesrv_address) as producer:
                for message in messages:
                    await producer.send(message)

        self.thread.run(send_all())

    def pending_halves(self) -> HalfMessageList:
        header = QueryHalfMessagesRequestHeader(SINK_GROUP, None, None, False)

        async def listed() -> HalfMessageList:
            pool = ClientPool()
            try:
                return await query_half_messages(pool, self.address, header, 10_000)
            finally:
                await pool.close()

        return self.thread.run(listed())


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    started = BrokerProcess(tmp_path)
    started.start()
    try:
        yield started
    finally:
        started.stop()


def _driver(
    cluster: BrokerProcess, work: Path, per_trigger: int, fault: int | None = None
) -> subprocess.Popen[bytes]:
    """The exactly-once driver; with ``fault``, the fault injector on its path."""
    faults = {"BOLIDE_EO_FAULT": str(fault), "BOLIDE_EO_FAULT_DIR": str(work)}
    return start_exactly_once_driver(
        cluster.namesrv_address, work / "checkpoint", work / "driver.log", per_trigger,
        first_on_path=None if fault is None else FAULTS,
        environment=None if fault is None else faults,
    )  # fmt: skip


def _wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + PROCESS_WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {PROCESS_WAIT_S} s for {what}")
        time.sleep(POLL_S)


@pytest.mark.parametrize("seed", SEEDS)
def test_driver_and_broker_killed_mid_commit_every_row_once_no_half_open(
    broker: BrokerProcess, tmp_path: Path, seed: int
) -> None:
    broker.create_topic("eo-in", 3)
    broker.create_topic("eo-out", 2)
    broker.create_topic(LEDGER_TOPIC, 1)
    broker.produce([Message("eo-in", f"row-{n}".encode(), keys=f"k{n}") for n in range(ROWS)])
    per_trigger, kill_after = 24 + 6 * (seed % 3), 1 + seed % 3
    batches = -(-ROWS // per_trigger)
    fault = 0 if seed % 2 == 0 else 1 + (seed * 7) % (per_trigger - 1)

    # 1. The driver SIGKILLed once some batches are recorded (the next one is in flight).
    first = _driver(broker, tmp_path, per_trigger)
    try:
        _wait_for(lambda: _count(broker, LEDGER_TOPIC) >= kill_after or first.poll() is not None,
                  "batches to be recorded")  # fmt: skip
    finally:
        kill_driver(first)
    assert _count(broker, LEDGER_TOPIC) < batches - 1, "too few batches left for the faults"

    # 2. Restarted; the broker SIGKILLed while a commit is paused at the fault point.
    second = _driver(broker, tmp_path, per_trigger, fault)
    try:
        _wait_for(lambda: (tmp_path / "paused").exists() or second.poll() is not None,
                  "a commit to reach the fault point")  # fmt: skip
        assert (tmp_path / "paused").exists(), (tmp_path / "driver.log").read_text()[-4000:]
        broker.kill_broker()
        (tmp_path / "go").touch()
        # Its commit fails (the broker is gone): the query stops with the error.
        _wait_for(lambda: second.poll() is not None, "the driver to fail")
        assert second.returncode != 0
    finally:
        kill_driver(second)

    # 3. The broker back on its data, the driver back from its checkpoint, to the end.
    broker.start_broker()
    third = _driver(broker, tmp_path, per_trigger)
    try:
        code = third.wait(timeout=PROCESS_WAIT_S)
        assert code == 0, (tmp_path / "driver.log").read_text()[-4000:]
    finally:
        kill_driver(third)

    rows = rows_of_topic(broker, "eo-out")
    bodies = Counter(row["body"] for row in rows)
    assert set(bodies) == {f"row-{n}".encode() for n in range(ROWS)}, "a row is missing"
    assert set(bodies.values()) == {1}, "a row was written twice"
    assert len(rows) == ROWS
    # Every half is decided: by the commits (from the ledger) or given up by the broker's
    # checks within (CHECK_MAX + 1) intervals plus the transaction timeout.
    _wait_for(lambda: broker.pending_halves().pending_count == 0, "no half left open")
