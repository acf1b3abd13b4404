"""consumeMode=pop next to the official 5.x SDK: a streaming query and a ``SimpleConsumer``
(through Bolide's proxy) of one group share a topic's messages, none lost, none given twice.
``bolide standalone`` (name server, broker, proxy) runs as a child process."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from tests.compat.sdk5_support import (
    configuration,
    create_group,
    create_topic,
    sdk_message,
    standalone,
)
from tests.spark.conftest import WAIT_S

pytest.importorskip("rocketmq.v5", reason="the 5.x SDK (rocketmq-python-client) is not installed")

TOPIC, GROUP, MESSAGES = "Shared5", "share5", 120


def _consumer(endpoint: str) -> Any:
    from rocketmq import FilterExpression, SimpleConsumer

    consumer = SimpleConsumer(
        configuration(endpoint), GROUP, {TOPIC: FilterExpression("*")}, await_duration=1
    )
    consumer.startup()
    return consumer


def test_a_query_and_an_sdk_consumer_share_a_group(spark: SparkSession, tmp_path: Path) -> None:
    from rocketmq import Producer

    with standalone(tmp_path / "data") as server:
        create_topic(server.namesrv, TOPIC, queues=2)
        create_group(server.namesrv, GROUP)
        producer = Producer(configuration(server.proxy), (TOPIC,))
        producer.startup()
        try:
            for index in range(MESSAGES):
                producer.send(sdk_message(TOPIC, f"m{index}".encode()))
        finally:
            producer.shutdown()
        query = (
            spark.readStream.format("bolide")
            .option("namesrv", server.namesrv)
            .option("topic", TOPIC)
            .option("consumeMode", "pop")
            .option("group", GROUP)
            .option("maxMessagesPerTrigger", "10")
            .load()
            .selectExpr("cast(body AS string) AS body")
            .writeStream.format("memory")
            .queryName("pop_sdk5")
            .start()
        )
        # The SDK consumer joins once the query took its first batch: started together, the
        # SDK's receive may take all 120 before Spark plans its first micro-batch.
        deadline = time.monotonic() + WAIT_S
        while not spark.table("pop_sdk5").count() and time.monotonic() < deadline:
            query.awaitTermination(1)  # waits on the query (s), wakes early if it stopped
        consumer = _consumer(server.proxy)
        by_sdk: list[str] = []
        try:
            deadline = time.monotonic() + WAIT_S
            while time.monotonic() < deadline:
                for message in consumer.receive(8, 30):
                    consumer.ack(message)
                    by_sdk.append(message.body.decode())
                by_query = [row["body"] for row in spark.table("pop_sdk5").collect()]
                if len(by_sdk) + len(by_query) >= MESSAGES:
                    break
        finally:
            consumer.shutdown()
            query.stop()
    counts = Counter(by_sdk + by_query)
    assert set(counts) == {f"m{index}" for index in range(MESSAGES)}, "a message was lost"
    assert set(counts.values()) == {1}, "a message was given twice"
    assert by_sdk and by_query, f"not shared: sdk {len(by_sdk)}, query {len(by_query)}"
