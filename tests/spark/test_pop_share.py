"""consumeMode=pop, CI size: two streaming queries (one a driver process of its own) and a
5.x SDK consumer share one group's messages; the process query is SIGKILLed mid-batch and
its unacknowledged messages come back to the others, none lost (``tests/spark/pop_share.py``;
``bench/spark_pop.py`` runs it with 30,000 messages)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tests.spark.conftest import WAIT_S
from tests.spark.pop_share import share

pytest.importorskip("rocketmq.v5", reason="the 5.x SDK (rocketmq-python-client) is not installed")

pytestmark = pytest.mark.timeout(1_800)  # two JVMs, a proxy and a 60 s come-back on 2 cores

MESSAGES = 1_500
PER_TRIGGER = 50
INVISIBLE_S = 60


def test_two_queries_and_an_sdk_consumer_share_a_group_through_a_query_kill(
    spark: SparkSession, tmp_path: Path
) -> None:
    shared = share(spark, tmp_path, MESSAGES, per_trigger=PER_TRIGGER,
                   invisible_s=INVISIBLE_S, wait_s=WAIT_S * 3)  # fmt: skip
    everyone = shared.everyone
    assert set(everyone) == {f"m{n}" for n in range(MESSAGES)}, "a message was lost"
    assert shared.killed_query and shared.live_query and shared.sdk, "not shared by all three"
    assert shared.came_back > 0, "the killed query's messages did not come back"
    # At-least-once: a message goes twice only when the killed query had it (its committed
    # batch's ack trails a trigger and died with it).
    twice = {body for body, count in everyone.items() if count > 1}
    assert twice <= set(shared.killed_query), sorted(twice - set(shared.killed_query))[:10]
