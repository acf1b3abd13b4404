"""The shared-subscription source (consumeMode=pop) over real Spark and a real broker: two
streaming queries and an ordinary POP consumer of one group share a topic's messages, none
lost and none given twice, and a dead reader's unacked messages come back to the queries."""

from __future__ import annotations

import time
from collections import Counter

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.streaming.datasource import ReadMaxRows

from bolide.base.errors import ConfigError
from bolide.client.message import Message
from bolide.client.rpc.pop import ack_message, pop_message
from bolide.protocol.headers.pop import (
    POP_CK_PROPERTY,
    AckMessageRequestHeader,
    ConsumeInitMode,
    PopMessageRequestHeader,
)
from bolide.spark.client import BlockingClient
from bolide.spark.options import parse_read_options
from bolide.spark.pop_source import BolidePopStreamReader
from tests.spark.conftest import WAIT_S, BackgroundCluster

TOPIC, GROUP, MESSAGES = "shared", "shared-group", 90


def test_pop_options_are_checked() -> None:
    base = {"namesrv": "h:1", "topic": "t", "consumeMode": "pop", "group": "g"}
    assert parse_read_options(base, streaming=True).pop_invisible_time_ms == 60_000
    for extra, message in (
        ({"consumeMode": "poll"}, "consumeMode must be pull or pop"),
        ({"group": ""}, "needs the group option"),
        ({"startingOffsets": "earliest"}, "startingOffsets do not apply to consumeMode=pop"),
        ({"invisibleTime": "10ms"}, "invisibleTime must be between"),
    ):
        with pytest.raises(ConfigError, match=message):
            parse_read_options({**base, **extra}, streaming=True)
    with pytest.raises(ConfigError, match="invisibleTime applies to consumeMode=pop only"):
        parse_read_options({"namesrv": "h:1", "topic": "t", "invisibleTime": "5s"}, streaming=True)


def _ordinary_consumer_takes(cluster: BackgroundCluster, count: int) -> list[str]:
    """An ordinary POP consumer of the group: pops ``count`` messages and acks them."""
    client = BlockingClient(cluster.namesrv_address, "ordinary")
    assert cluster.broker is not None
    address = cluster.broker.address
    taken: list[str] = []
    try:
        client.run(client.instance.clock.sleep_ms(0))  # starts the instance
        while len(taken) < count:
            header = PopMessageRequestHeader(
                GROUP, TOPIC, -1, count - len(taken), 60_000, 1_000, int(time.time() * 1000),
                ConsumeInitMode.MIN, "TAG", "*",
            )  # fmt: skip
            messages = client.run(pop_message(client.instance.pool, address, header, 5_000))
            assert messages, "the ordinary consumer found nothing"
            for message in messages:
                ack = AckMessageRequestHeader(
                    GROUP, TOPIC, message.queue_id, message.properties[POP_CK_PROPERTY],
                    message.queue_offset,
                )  # fmt: skip
                client.run(ack_message(client.instance.pool, address, ack, 5_000))
                taken.append(message.msg_id)
    finally:
        client.close()
    return taken


def test_two_queries_and_a_consumer_share_a_group(
    spark: SparkSession, cluster: BackgroundCluster
) -> None:
    cluster.create_topic(TOPIC, 2)
    sent = cluster.produce([Message(TOPIC, f"m{n}".encode()) for n in range(MESSAGES)])
    options = {"namesrv": cluster.namesrv_address, "topic": TOPIC, "consumeMode": "pop",
               "group": GROUP}  # fmt: skip
    # A reader that pops and dies before its batch commits: its messages are never acked.
    short = parse_read_options({**options, "invisibleTime": "2s"}, streaming=True)
    dead = BolidePopStreamReader(short)
    assert dead.latestOffset({"pop": 0}, ReadMaxRows(20)) == {"pop": 1}
    unacked = {message.msg_id for _, message in dead._popped[1]}
    dead.stop()
    ordinary = _ordinary_consumer_takes(cluster, 10)

    queries = []
    for name in ("pop_q1", "pop_q2"):
        reader = spark.readStream.format("bolide").options(**options)
        stream = reader.option("maxMessagesPerTrigger", "15").load()
        queries.append(stream.select("msg_id").writeStream.format("memory").queryName(name).start())
    try:
        deadline = time.monotonic() + WAIT_S
        while True:
            got = [row["msg_id"] for name in ("pop_q1", "pop_q2")
                   for row in spark.table(name).collect()]  # fmt: skip
            if len(got) + len(ordinary) >= MESSAGES or time.monotonic() > deadline:
                break
            time.sleep(0.5)
    finally:
        for query in queries:
            query.stop()
    counts = Counter(got + ordinary)
    assert set(counts) == {result.msg_id for result in sent}, "a message was lost"
    assert set(counts.values()) == {1}, "a message was given twice"
    assert unacked <= set(got), "the dead reader's messages did not come back to the queries"
    assert len(unacked) == 20
