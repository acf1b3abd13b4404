"""The exactly-once sink's parts, called in this process the way Spark's tasks and driver call
them (no JVM): the ledger's decisions for check-back, a batch committed once though its commit
runs twice, and a replay of a recorded batch rolled back."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql.types import IntegerType, StringType, StructField, StructType

from bolide.base.clock import ManualClock
from bolide.base.errors import ConfigError
from bolide.client.producer.producer import Producer
from bolide.client.producer.transaction import LocalTransactionState
from bolide.client.rpc.transactions import query_half_messages
from bolide.protocol.bodies.transaction import HalfMessageList, QueryHalfMessagesRequestHeader
from bolide.protocol.message import MessageExt, PropertyKey
from bolide.spark.client import BlockingClient
from bolide.spark.exactly_once import (
    BATCH_PROPERTY,
    LEDGER_TOPIC,
    QUERY_PROPERTY,
    HalfRef,
    Ledger,
    LedgerRecord,
    _check_state,
    commit_batch,
    write_halves,
)
from bolide.spark.options import parse_write_options
from bolide.spark.source import _write_options
from bolide.spark.writer import BolideStreamWriter
from tests.spark.conftest import WAIT_S, BackgroundCluster, rows_of_topic

SINK_GROUP = "bolide-spark-writer"
HALF = HalfRef("t", "broker-a", 0, 7, "UNIQ-1", "0A0000", None)


def _checked(unique_key: str, batch: str = "3") -> MessageExt:
    properties = {QUERY_PROPERTY: "q", BATCH_PROPERTY: batch, PropertyKey.UNIQ_KEY: unique_key}
    return MessageExt("t", b"x", properties=properties)


def test_check_back_answers_from_the_ledger() -> None:
    client = BlockingClient("127.0.0.1:1", "test")
    try:
        ledger = Ledger(client)
        assert _check_state(ledger, _checked("UNIQ-1")) is LocalTransactionState.UNKNOW
        ledger.records["q:3"] = LedgerRecord("run-1", (HALF,))
        assert _check_state(ledger, _checked("UNIQ-1")) is LocalTransactionState.COMMIT_MESSAGE
        assert _check_state(ledger, _checked("UNIQ-2")) is LocalTransactionState.ROLLBACK_MESSAGE
        assert _check_state(ledger, _checked("UNIQ-1", "4")) is LocalTransactionState.UNKNOW
        assert _check_state(ledger, MessageExt("t", b"")) is LocalTransactionState.UNKNOW
        # The first record of a batch decides; an unreadable one is ignored.
        ledger._add("q:3", b'{"run": "run-2", "halves": []}')
        ledger._add("q:5", b"not json")
        assert ledger.records == {"q:3": LedgerRecord("run-1", (HALF,))}
    finally:
        client.close()
    assert HalfRef(*HALF.to_list()) == HALF
    assert HALF.send_result().queue.queue_id == 0


def test_exactly_once_is_for_write_streams_without_delay_or_sharding() -> None:
    with pytest.raises(ConfigError, match="applies to writeStream only"):
        _write_options({"namesrv": "h:1", "topic": "t", "exactlyOnce": "true"}, streaming=False)
    options = _write_options({"namesrv": "h:1", "topic": "t", "exactlyOnce": "yes"}, streaming=True)
    schema = StructType(
        [StructField("body", StringType()), StructField("delay_level", IntegerType())]
    )
    with pytest.raises(ConfigError, match=r"cannot honour the column\(s\) delay_level"):
        BolideStreamWriter(options, schema)
    BolideStreamWriter(options, StructType([StructField("body", StringType())]))


def _count(cluster: BackgroundCluster, topic: str, at_least: int) -> int:
    deadline = time.monotonic() + WAIT_S
    while True:  # END_TRANSACTION is one way: wait for the broker to have applied it
        count = len(rows_of_topic(cluster, topic))
        if count >= at_least or time.monotonic() > deadline:
            return count
        time.sleep(0.1)


def test_a_batch_is_committed_once_and_its_replay_rolled_back(
    cluster: BackgroundCluster,
) -> None:
    cluster.create_topic("eo", 2)
    cluster.create_topic(LEDGER_TOPIC, 1)
    options = parse_write_options({"namesrv": cluster.namesrv_address, "topic": "eo"})
    rows = pa.RecordBatch.from_pydict({"body": [f"r{n}".encode() for n in range(30)]})
    first = write_halves(options, iter([rows]), ("query", 0, "run-1"), 0)
    assert len(first.halves) == 30
    assert len(rows_of_topic(cluster, "eo")) == 0, "half messages are not visible"

    assert commit_batch(options, ("query", 0, "run-1"), [first]) == (30, 0)
    assert commit_batch(options, ("query", 0, "run-1"), [first]) == (30, 0)  # Spark's repeat
    # A driver restarted after the decision replays batch 0 with new halves.
    replay = write_halves(options, iter([rows]), ("query", 0, "run-2"), 0)
    assert commit_batch(options, ("query", 0, "run-2"), [replay]) == (30, 30)
    assert _count(cluster, "eo", 30) == 30
    bodies = Counter(row["body"] for row in rows_of_topic(cluster, "eo"))
    assert set(bodies.values()) == {1} and len(bodies) == 30
    assert _count(cluster, LEDGER_TOPIC, 1) == 1, "one record per batch"


def _halves(cluster: BackgroundCluster, *, given_up: bool) -> HalfMessageList:
    """The broker's pending (or given-up) halves of the sink's producer group."""
    assert cluster.broker is not None
    client = BlockingClient(cluster.namesrv_address, "test")
    header = QueryHalfMessagesRequestHeader(SINK_GROUP, None, None, given_up)
    address = cluster.broker.address

    async def listed() -> HalfMessageList:
        return await query_half_messages(client.instance.pool, address, header, 3_000)

    try:
        return client.run(listed())
    finally:
        client.close()


def _wait_halves(
    cluster: BackgroundCluster, what: str, done: Callable[[HalfMessageList, HalfMessageList], bool]
) -> None:
    deadline = time.monotonic() + WAIT_S
    while not done(_halves(cluster, given_up=False), _halves(cluster, given_up=True)):
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {WAIT_S} s for {what}")
        time.sleep(0.1)


CHECK_INTERVAL_MS = 1_000


@pytest.fixture
def checking_cluster(tmp_path: Path) -> Iterator[BackgroundCluster]:
    """A broker on a manual clock: its checker runs when the test moves the clock on by
    CHECK_INTERVAL_MS; no transaction timeout; a half is given up after two checks."""
    settings: dict[str, object] = {
        "transaction_check_interval_ms": CHECK_INTERVAL_MS,
        "transaction_timeout_ms": 0,
        "transaction_check_max_count": 2,
    }
    started = BackgroundCluster(tmp_path, broker_clock=ManualClock(), settings=settings)
    started.start()
    try:
        yield started
    finally:
        started.stop()


def _check_round(
    cluster: BackgroundCluster, done: Callable[[HalfMessageList, HalfMessageList], bool]
) -> None:
    """Move the broker's clock to its next check round and wait for its outcome."""
    cluster.advance_broker_clock(CHECK_INTERVAL_MS)
    _wait_halves(cluster, "a check round", done)


def test_halves_left_by_a_dead_run_are_settled_and_given_up_recorded_ones_rescued(
    checking_cluster: BackgroundCluster,
) -> None:
    cluster = checking_cluster
    cluster.create_topic("eo", 2)
    cluster.create_topic(LEDGER_TOPIC, 1)
    options = parse_write_options({"namesrv": cluster.namesrv_address, "topic": "eo"})
    rows = pa.RecordBatch.from_pydict({"body": [f"r{n}".encode() for n in range(20)]})
    # Run 1 wrote batch 0 and died before deciding; nobody answers the checks: given up.
    dead = write_halves(options, iter([rows]), ("query", 0, "run-1"), 0)
    for checks in (1, 2):

        def checked(pending: HalfMessageList, _: HalfMessageList, times: int = checks) -> bool:
            return all(half.check_times == times for half in pending.half_messages)

        _check_round(cluster, checked)
    _check_round(cluster, lambda _, given_up: len(given_up.half_messages) == 20)
    # Its batch is recorded (as a driver killed right after its decision leaves it) ...
    client = BlockingClient(cluster.namesrv_address, "test")
    try:
        ledger = Ledger(client)
        recorder = Producer("recorder", instance=client.instance)
        client.run(recorder.start())
        try:
            record = LedgerRecord("run-1", dead.halves)
            client.run(ledger.record(recorder, "query:0", record))
        finally:
            client.run(recorder.shutdown())
    finally:
        client.close()
    # ... and run 2's replay of it leaves halves pending, checked once, undecided.
    replay = write_halves(options, iter([rows]), ("query", 0, "run-2"), 0)
    _check_round(cluster, lambda pending, _: pending.pending_count == 20 and all(
        h.check_times == 1 for h in pending.half_messages))  # fmt: skip

    # Run 3 replays batch 0 again: the recorded halves come back and are committed, run 2's
    # (not named in any report it has) are rolled back from the ledger.
    third = write_halves(options, iter([rows]), ("query", 0, "run-3"), 0)
    assert commit_batch(options, ("query", 0, "run-3"), [third]) == (20, 20)
    listing = _halves(cluster, given_up=False)
    assert listing.pending_count == 0, "a half stayed open"
    # Run 2's halves were rolled back from the ledger, not given up by the broker.
    assert (listing.rollback_count, listing.discard_count) == (40, 20)
    bodies = Counter(row["body"] for row in rows_of_topic(cluster, "eo"))
    assert bodies == Counter(f"r{n}".encode() for n in range(20))
    assert {h.msg_id for h in dead.halves} >= {
        row["msg_id"] for row in rows_of_topic(cluster, "eo")
    }
    assert replay.halves
