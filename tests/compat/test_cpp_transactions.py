"""Committed transactional messages reach a real C++ consumer (rocketmq==0.4.4) once, as
ordinary messages carrying their transaction's marks; rolled-back ones never do.

rocketmq==0.4.4 has no transaction producer (its librocketmq exports no
CreateTransactionProducer; docs/transactions.md), so Bolide's TransactionProducer sends; the
C++ PushConsumer is the real client under test.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from bolide.client.message import Message
from bolide.client.producer.transaction import LocalTransactionState, TransactionProducer
from bolide.protocol.msgid import decode_offset_message_id
from bolide.testing.cluster import Cluster
from tests.compat.cpp_clients import WAIT_TIMEOUT_S, destroy_push_consumer, new_quiet_push_consumer
from tests.integration.client_support import create_topic

pytestmark = [pytest.mark.compat, pytest.mark.timeout(180)]

TOPIC = "TxCpp"


def decide(message: Message, state: LocalTransactionState) -> LocalTransactionState:
    return state


def never_asked(message: object) -> LocalTransactionState:
    raise AssertionError("every transaction here ends at once; no check is expected")


async def test_cpp_consumer_gets_committed_messages_once(
    cpp_home: Path, bolide_cluster: Cluster
) -> None:
    del cpp_home  # a private HOME must be in place before the native library logs
    await create_topic(bolide_cluster, TOPIC, 2)
    received: list[tuple[str, str, int, str]] = []
    lock = threading.Lock()
    loop = asyncio.get_running_loop()
    changed = asyncio.Event()

    def on_message(message: Any) -> None:
        with lock:
            received.append((
                message.keys.decode(), message.body.decode(),
                int(message.prepared_transaction_offset),
                (message.get_property("TRAN_MSG") or b"").decode(),
            ))  # fmt: skip
        loop.call_soon_threadsafe(changed.set)

    consumer = new_quiet_push_consumer("CG_TX_CPP", bolide_cluster.namesrv_address,
                                       instance_name="tx-cpp")  # fmt: skip
    consumer.subscribe(TOPIC, on_message, "*")
    await asyncio.to_thread(consumer.start)
    halves: dict[str, int] = {}
    try:
        async with TransactionProducer(
            "PG_TX_CPP", bolide_cluster.namesrv_address, checker=never_asked
        ) as producer:
            for index in range(10):
                state = (
                    LocalTransactionState.COMMIT_MESSAGE
                    if index % 2 == 0
                    else LocalTransactionState.ROLLBACK_MESSAGE
                )
                result = await producer.send_in_transaction(
                    Message(TOPIC, f"order-{index}".encode(), keys=f"k{index}"), decide, state
                )
                halves[f"k{index}"] = decode_offset_message_id(result.offset_msg_id)[1]

        async def five() -> None:
            while True:
                changed.clear()
                with lock:
                    if len(received) >= 5:
                        return
                await changed.wait()

        await asyncio.wait_for(five(), WAIT_TIMEOUT_S)
    finally:
        await asyncio.to_thread(destroy_push_consumer, consumer)
    with lock:
        got = sorted(received)
    assert [keys for keys, *_ in got] == ["k0", "k2", "k4", "k6", "k8"]
    for keys, body, prepared_offset, tran_msg in got:
        assert body == f"order-{keys[1:]}"
        assert prepared_offset == halves[keys]  # the half it committed
        assert tran_msg == ""  # no longer a half message
