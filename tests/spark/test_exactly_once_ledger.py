"""The exactly-once sink's parts, called in this process the way Spark's tasks and driver call
them (no JVM): the ledger's decisions for check-back, a batch committed once though its commit
runs twice, and a replay of a recorded batch rolled back."""

from __future__ import annotations

import time
from collections import Counter

import pyarrow as pa
import pytest
from pyspark.sql.types import IntegerType, StringType, StructField, StructType

from bolide.base.errors import ConfigError
from bolide.client.producer.transaction import LocalTransactionState
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
