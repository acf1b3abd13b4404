"""Transactional messages from the official 5.x SDK through the proxy: commit and rollback
(EndTransaction -> END_TRANSACTION) and the broker's check of an undecided transaction
(CHECK_TRANSACTION_STATE -> Telemetry recover_orphaned_transaction_command -> the SDK's
checker -> EndTransaction from SOURCE_SERVER_CHECK)."""

from __future__ import annotations

import threading
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

BROKER_CONF = "transactionCheckInterval=1000\ntransactionTimeOut=500\n"


def test_commit_rollback_and_a_check_back(tmp_path: Path) -> None:
    from rocketmq import (
        FilterExpression,
        Producer,
        SimpleConsumer,
        TransactionChecker,
        TransactionResolution,
    )

    checked: list[bytes] = []
    lock = threading.Lock()

    class Checker(TransactionChecker):  # type: ignore[misc]
        def check(self, message: Any) -> Any:
            with lock:
                checked.append(message.body)
            return TransactionResolution.COMMIT

    conf = tmp_path / "broker.conf"
    conf.write_text(BROKER_CONF)
    with standalone(tmp_path / "data", "-c", str(conf)) as server:
        create_topic(server.namesrv, "Tx5", "TRANSACTION")
        producer = Producer(configuration(server.proxy), ("Tx5",), Checker())
        producer.startup()
        consumer = SimpleConsumer(
            configuration(server.proxy), "tx5", {"Tx5": FilterExpression("*")}, await_duration=2
        )
        consumer.startup()
        try:
            for body, decide in ((b"committed", "commit"), (b"rolled-back", "rollback")):
                transaction = producer.begin_transaction()
                producer.send(sdk_message("Tx5", body), transaction)
                getattr(transaction, decide)()
            orphan = producer.begin_transaction()
            producer.send(sdk_message("Tx5", b"checked"), orphan)  # never decided by the client
            got: list[Any] = []

            def both_arrived() -> bool:
                got.extend(consumer.receive(32, 30))
                return {m.body for m in got} >= {b"committed", b"checked"}

            wait_until(both_arrived)
            for message in got:
                consumer.ack(message)
        finally:
            consumer.shutdown()
            producer.shutdown()
    assert sorted(m.body for m in got) == [b"checked", b"committed"]
    assert b"checked" in checked
    assert b"rolled-back" not in checked
