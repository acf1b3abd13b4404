"""The exactly-once sink over real Spark drivers (their own processes) and a real broker: a
topic copied to another with the driver SIGKILLed mid-run and restarted from its checkpoint
holds every input row exactly once, and nothing is left undecided.

Seeded: each seed kills the driver after a different number of recorded batches (1 + seed %
4) with a different batch size. One seed in CI (a second took 40 s and walked the same path:
a kill between recorded batches, a restart from the checkpoint);
``bench/spark_exactly_once.py`` runs ten (``BOLIDE_SPARK_EO_SEEDS``).
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from bolide.client.message import Message
from bolide.spark.client import BlockingClient
from bolide.spark.exactly_once import LEDGER_TOPIC
from bolide.spark.queues import fetch_bounds, list_queues
from tests.spark.conftest import WAIT_S, BackgroundCluster, NamedCluster, rows_of_topic
from tests.spark.drivers import kill_driver, start_exactly_once_driver

ROWS = 240
SEEDS = tuple(range(1, 1 + int(os.environ.get("BOLIDE_SPARK_EO_SEEDS", "1"))))
POLL_S = 0.2


@pytest.fixture
def tx_cluster(tmp_path: Path) -> Iterator[BackgroundCluster]:
    started = BackgroundCluster(
        tmp_path,
        settings={"transaction_check_interval_ms": 1_000, "transaction_timeout_ms": 1_000},
    )
    started.start()
    try:
        yield started
    finally:
        started.stop()


def _count(cluster: NamedCluster, topic: str) -> int:
    client = BlockingClient(cluster.namesrv_address, "test")
    try:
        queues = client.run(list_queues(client.instance, [topic]))
        bounds = client.run(fetch_bounds(client.instance, queues))
        return sum(b.max_offset - b.min_offset for b in bounds.values())
    finally:
        client.close()


def _wait_for(condition: object, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {WAIT_S} s for {what}")
        time.sleep(POLL_S)


@pytest.mark.parametrize("seed", SEEDS)
def test_driver_killed_mid_run_then_restarted_writes_every_row_once(
    tx_cluster: BackgroundCluster, tmp_path: Path, seed: int
) -> None:
    cluster = tx_cluster
    cluster.create_topic("eo-in", 3)
    cluster.create_topic("eo-out", 2)
    cluster.create_topic(LEDGER_TOPIC, 1)
    sent = cluster.produce(
        [Message("eo-in", f"row-{n}".encode(), keys=f"k{n}") for n in range(ROWS)]
    )
    checkpoint, log = tmp_path / "checkpoint", tmp_path / "driver.log"
    per_trigger, kill_after = 30 + 10 * (seed % 3), 1 + seed % 4

    first = start_exactly_once_driver(cluster.namesrv_address, checkpoint, log, per_trigger)
    try:
        # Kill once some batches are recorded: the next one is in flight (or its commit).
        _wait_for(lambda: _count(cluster, LEDGER_TOPIC) >= kill_after or first.poll() is not None,
                  "batches to be recorded")  # fmt: skip
    finally:
        kill_driver(first)
    recorded_before = _count(cluster, LEDGER_TOPIC)
    assert recorded_before < -(-ROWS // per_trigger), "the driver finished before it was killed"

    second = start_exactly_once_driver(cluster.namesrv_address, checkpoint, log, per_trigger)
    try:
        assert second.wait(timeout=WAIT_S) == 0, log.read_text()[-4000:]
    finally:
        kill_driver(second)
    # END_TRANSACTION is one way: the last commits land on the broker shortly after.
    _wait_for(lambda: _count(cluster, "eo-out") >= ROWS, "every row in eo-out")
    rows = rows_of_topic(cluster, "eo-out")
    bodies = Counter(row["body"] for row in rows)
    assert set(bodies) == {f"row-{n}".encode() for n in range(ROWS)}
    assert set(bodies.values()) == {1}, "a row was written twice"
    assert {row["keys"] for row in rows} == {f"k{n}" for n in range(ROWS)}
    assert len(sent) == ROWS
