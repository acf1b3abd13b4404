"""Send results and received properties as Apache's 5.x proxy gives them (issue 29, finding
12 b and c), with the official 5.x SDK: a normal send's receipt carries the message id as
its transaction id; a received FIFO message shows ``__SHARDINGKEY`` and a committed
transactional one ``__transactionId__`` among its properties (Apache's proxy hides only its
STRING_HASH_SET: tags, keys, UNIQ_KEY, ...)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.compat.sdk5_support import (
    configuration,
    create_topic,
    sdk_message,
    standalone,
    wait_until,
)

pytestmark = [pytest.mark.compat, pytest.mark.timeout(180)]

pytest.importorskip("rocketmq.v5")


def _receive(consumer: Any, count: int) -> list[Any]:
    got: list[Any] = []

    def enough() -> bool:
        got.extend(consumer.receive(32, 30))
        return len(got) >= count

    wait_until(enough)
    for message in got:
        consumer.ack(message)
    return got


def test_receipts_and_received_properties_match_apaches_proxy(tmp_path: Path) -> None:
    from rocketmq import FilterExpression, Producer, SimpleConsumer, TransactionChecker

    class NeverAsked(TransactionChecker):  # type: ignore[misc]
        def check(self, message: Any) -> Any:
            raise AssertionError("the transaction is committed by the client")

    with standalone(tmp_path / "data") as server:
        create_topic(server.namesrv, "Plain5r")
        create_topic(server.namesrv, "Fifo5r", "FIFO")
        create_topic(server.namesrv, "Tx5r", "TRANSACTION")
        producer = Producer(
            configuration(server.proxy), ("Plain5r", "Fifo5r", "Tx5r"), NeverAsked()
        )
        producer.startup()
        subscriptions = {topic: FilterExpression("*") for topic in ("Plain5r", "Fifo5r", "Tx5r")}
        consumer = SimpleConsumer(
            configuration(server.proxy), "results5", subscriptions, await_duration=2
        )
        consumer.startup()
        try:
            plain = producer.send(
                sdk_message("Plain5r", b"plain", tag="t", keys="k1", properties={"a": "1"})
            )
            assert plain.transaction_id == plain.message_id  # finding 12(b)
            fifo = producer.send(sdk_message("Fifo5r", b"fifo", message_group="orders-7"))
            assert fifo.transaction_id == fifo.message_id
            transaction = producer.begin_transaction()
            committed = producer.send(sdk_message("Tx5r", b"tx"), transaction)
            transaction.commit()
            got = {message.body: message for message in _receive(consumer, 3)}
        finally:
            consumer.shutdown()
            producer.shutdown()
    assert got[b"plain"].properties == {"a": "1"}  # TAGS, KEYS, UNIQ_KEY... stay hidden
    assert got[b"fifo"].properties.get("__SHARDINGKEY") == "orders-7"  # finding 12(c)
    assert got[b"fifo"].message_group == "orders-7"
    assert got[b"tx"].properties.get("__transactionId__") == committed.message_id
