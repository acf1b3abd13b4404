"""kill -9 of a transaction producer process: the broker's checks of its undecided
transaction go to another producer of the group, which commits it; delivered once."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

import pytest

from bolide.client.message import MessageExt
from bolide.client.producer.transaction import LocalTransactionState, TransactionProducer
from bolide.testing.cluster import Cluster
from tests.integration.client_support import WAIT_S, create_topic, eventually

pytestmark = pytest.mark.timeout(120)

CHILD = Path(__file__).with_name("transaction_producer_child.py")
TOPIC = "tx-killed"
GROUP = "tx-killed-producers"


async def test_a_killed_producers_transaction_is_settled_by_another(tmp_path: Path) -> None:
    settings = {"transaction_check_interval_ms": 100, "transaction_timeout_ms": 200}
    asked: list[MessageExt] = []
    asked_event = asyncio.Event()

    async def survivor_checker(message: MessageExt) -> LocalTransactionState:
        asked.append(message)
        asked_event.set()
        return LocalTransactionState.COMMIT_MESSAGE

    async with Cluster(tmp_path / "cluster", settings=settings) as cluster:
        await create_topic(cluster, TOPIC, 1)
        broker = cluster.brokers[0]
        async with TransactionProducer(
            GROUP, cluster.namesrv_address, checker=survivor_checker, instance_name="survivor"
        ):
            child = await asyncio.create_subprocess_exec(
                sys.executable, str(CHILD), cluster.namesrv_address, GROUP, TOPIC,
                stdout=asyncio.subprocess.PIPE,
            )  # fmt: skip
            assert child.stdout is not None
            try:
                line = await asyncio.wait_for(child.stdout.readline(), WAIT_S)
                assert line.startswith(b"SENT "), line
                msg_id = line.split()[1].decode()
                child.send_signal(signal.SIGKILL)
                assert await asyncio.wait_for(child.wait(), WAIT_S) == -signal.SIGKILL
            finally:
                if child.returncode is None:
                    child.kill()
                    await child.wait()
            async with asyncio.timeout(WAIT_S):
                while not any(message.msg_id == msg_id for message in asked):
                    asked_event.clear()
                    await asked_event.wait()
            transactions = broker.context.transactions
            assert transactions is not None
            await eventually(lambda: transactions.pending_count == 0)
        assert broker.context.store.max_offset(TOPIC, 0) == 1
