"""Bolide's TransactionProducer end to end over sockets, against a broker whose checker runs
every 100 ms: commit, rollback, check-back, failing callbacks, the blocking facade, a second
producer of the group answering for a dead one, and the transaction listing."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import bolide
from bolide.base.errors import InvalidMessageError
from bolide.broker.transactions import TransactionService
from bolide.client.admin import AdminClient
from bolide.client.config import ConsumeFrom
from bolide.client.consumer.push_consumer import PushConsumer
from bolide.client.message import Message, MessageExt
from bolide.client.producer.transaction import (
    LocalTransactionState,
    TransactionProducer,
)
from bolide.testing.cluster import Cluster
from tests.integration.client_support import WAIT_S, Collector, create_topic, eventually

TOPIC = "tx-orders"
GROUP = "tx-group"
FAST_CHECKS = {
    "transaction_check_interval_ms": 100,
    "transaction_timeout_ms": 300,
    "transaction_check_max_count": 50,
}


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    async with Cluster(tmp_path / "cluster", settings=FAST_CHECKS) as running:
        await create_topic(running, TOPIC, 2)
        yield running


def service(cluster: Cluster) -> TransactionService:
    found = cluster.brokers[0].context.transactions
    assert found is not None
    return found


def delivered(cluster: Cluster) -> int:
    store = cluster.brokers[0].context.store
    return sum(store.max_offset(TOPIC, queue_id) for queue_id in range(2))


class Checker:
    """A checker that answers ``state`` (or, for a body in ``by_body``, that body's state)
    and records the messages it was asked about. Answering what the local transaction
    decided keeps a test right even when a slow machine lets a check overtake the END."""

    def __init__(
        self,
        state: LocalTransactionState,
        by_body: dict[bytes, LocalTransactionState] | None = None,
    ) -> None:
        self.state = state
        self.by_body = by_body or {}
        self.asked: list[MessageExt] = []
        self.asked_event = asyncio.Event()

    async def __call__(self, message: MessageExt) -> LocalTransactionState:
        self.asked.append(message)
        self.asked_event.set()
        return self.by_body.get(message.body, self.state)


async def test_commit_rollback_and_check_back(cluster: Cluster) -> None:
    checker = Checker(
        LocalTransactionState.COMMIT_MESSAGE,
        {b"cancelled": LocalTransactionState.ROLLBACK_MESSAGE},
    )
    collector = Collector()
    consumer = PushConsumer(
        "tx-readers", namesrv=cluster.namesrv_address, consume_from=ConsumeFrom.FIRST_OFFSET
    )
    consumer.subscribe(TOPIC, "*")
    consumer.register_listener(collector.bind())
    async with (
        TransactionProducer(GROUP, namesrv=cluster.namesrv_address, checker=checker) as producer,
        consumer,
    ):
        committed = await producer.send_in_transaction(
            Message(TOPIC, b"paid", keys="order-1"),
            lambda message, arg: LocalTransactionState.COMMIT_MESSAGE,
        )
        assert committed.local_transaction_state is LocalTransactionState.COMMIT_MESSAGE
        rolled_back = await producer.send_in_transaction(
            Message(TOPIC, b"cancelled", keys="order-2"),
            lambda message, arg: LocalTransactionState.ROLLBACK_MESSAGE,
        )
        assert rolled_back.local_transaction_state is LocalTransactionState.ROLLBACK_MESSAGE

        async def undecided(message: Message, arg: object) -> LocalTransactionState:
            assert arg == "context"
            return LocalTransactionState.UNKNOW

        await producer.send_in_transaction(
            Message(TOPIC, b"decided later", keys="order-3"), undecided, "context"
        )
        async with asyncio.timeout(WAIT_S):
            await checker.asked_event.wait()
            await collector.wait_for(lambda: set(collector.keys) >= {"order-1", "order-3"})
        await eventually(lambda: service(cluster).pending_count == 0)
        [asked] = [m for m in checker.asked if m.body == b"decided later"][:1]
        assert asked.topic == TOPIC
        assert asked.body == b"decided later"
        assert asked.keys == "order-3"
    assert sorted(collector.keys) == ["order-1", "order-3"]
    assert delivered(cluster) == 2
    listing = service(cluster).list_pending("broker-a")
    assert (listing.commit_count, listing.rollback_count) == (2, 1)
    assert service(cluster).commits_by_topic == {TOPIC: 2}
    assert service(cluster).rollbacks_by_topic == {TOPIC: 1}
    assert service(cluster).half_messages_by_topic() == {}


async def test_failing_callbacks_count_as_unknown(cluster: Cluster) -> None:
    calls = 0

    def flaky_checker(message: MessageExt) -> LocalTransactionState:
        nonlocal calls
        calls += 1
        assert threading.current_thread() is not threading.main_thread()
        if calls == 1:
            raise RuntimeError("database unreachable")
        return LocalTransactionState.COMMIT_MESSAGE

    def failing(message: Message, arg: object) -> LocalTransactionState:
        raise RuntimeError("local transaction crashed")

    async with TransactionProducer(
        GROUP, namesrv=cluster.namesrv_address, checker=flaky_checker
    ) as producer:
        result = await producer.send_in_transaction(Message(TOPIC, b"x"), failing)
        assert result.local_transaction_state is LocalTransactionState.UNKNOW
        await eventually(lambda: service(cluster).pending_count == 0)
    assert calls >= 2
    assert delivered(cluster) == 1


async def test_delayed_messages_are_refused_before_sending(cluster: Cluster) -> None:
    checker = Checker(LocalTransactionState.COMMIT_MESSAGE)
    async with TransactionProducer(GROUP, namesrv=cluster.namesrv_address, checker=checker) as tx:
        with pytest.raises(InvalidMessageError):
            await tx.send_in_transaction(
                Message(TOPIC, b"x", delay_level=2),
                lambda message, arg: LocalTransactionState.COMMIT_MESSAGE,
            )
    assert service(cluster).half_count == 0


async def test_blocking_facade(cluster: Cluster) -> None:
    ran_on: list[threading.Thread] = []

    def execute(message: bolide.Message, arg: object) -> bolide.LocalTransactionState:
        ran_on.append(threading.current_thread())
        return bolide.LocalTransactionState.COMMIT_MESSAGE

    def run() -> bolide.TransactionSendResult:
        with bolide.TransactionProducer(
            GROUP,
            namesrv=cluster.namesrv_address,
            checker=lambda message: bolide.LocalTransactionState.COMMIT_MESSAGE,
        ) as producer:
            return producer.send_in_transaction(bolide.Message(TOPIC, b"sync"), execute)

    caller = threading.Thread(target=lambda: results.append(run()))
    results: list[bolide.TransactionSendResult] = []
    caller.start()
    await eventually(lambda: not caller.is_alive())
    caller.join()
    assert ran_on == [caller]
    assert results[0].local_transaction_state is bolide.LocalTransactionState.COMMIT_MESSAGE
    await eventually(lambda: delivered(cluster) == 1)


async def test_the_blocking_facade_logs_a_failing_local_transaction(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    def execute(message: bolide.Message, arg: object) -> bolide.LocalTransactionState:
        raise RuntimeError("ledger write failed")

    def run() -> bolide.TransactionSendResult:
        with bolide.TransactionProducer(
            GROUP,
            namesrv=cluster.namesrv_address,
            checker=lambda message: bolide.LocalTransactionState.ROLLBACK_MESSAGE,
        ) as producer:
            return producer.send_in_transaction(bolide.Message(TOPIC, b"sync"), execute)

    results: list[bolide.TransactionSendResult] = []
    caller = threading.Thread(target=lambda: results.append(run()))
    with caplog.at_level(logging.WARNING, logger="bolide.client.producer.transaction"):
        caller.start()
        await eventually(lambda: not caller.is_alive())
        caller.join()
    assert results[0].local_transaction_state is bolide.LocalTransactionState.UNKNOW
    (record,) = [r for r in caplog.records if "local transaction" in r.getMessage()]
    assert "ledger write failed" in record.getMessage()
    assert record.exc_info is not None and record.exc_info[0] is RuntimeError


async def test_another_producer_of_the_group_answers_for_a_dead_one(cluster: Cluster) -> None:
    first_checker = Checker(LocalTransactionState.UNKNOW)
    second_checker = Checker(LocalTransactionState.COMMIT_MESSAGE)
    first = TransactionProducer(
        GROUP, namesrv=cluster.namesrv_address, checker=first_checker, instance_name="first"
    )
    async with TransactionProducer(
        GROUP, namesrv=cluster.namesrv_address, checker=second_checker, instance_name="second"
    ) as second:
        await second.send_in_transaction(
            Message(TOPIC, b"warm-up"), lambda m, a: LocalTransactionState.COMMIT_MESSAGE
        )
        await first.start()
        await first.send_in_transaction(
            Message(TOPIC, b"orphan"), lambda m, a: LocalTransactionState.UNKNOW
        )
        # The first producer dies without unregistering: its connections just close.
        await first.instance.pool.close()
        async with asyncio.timeout(WAIT_S):
            await second_checker.asked_event.wait()
        await eventually(lambda: delivered(cluster) == 2)
        assert [message.body for message in second_checker.asked] == [b"orphan"]


async def test_admin_lists_pending_transactions(cluster: Cluster, tmp_path: Path) -> None:
    checker = Checker(LocalTransactionState.UNKNOW)
    async with (
        TransactionProducer(GROUP, namesrv=cluster.namesrv_address, checker=checker) as tx,
        AdminClient(cluster.namesrv_address) as admin,
    ):
        sent = await tx.send_in_transaction(
            Message(TOPIC, b"open", keys="order-9", tags="new"),
            lambda m, a: LocalTransactionState.UNKNOW,
        )
        async with asyncio.timeout(WAIT_S):
            await checker.asked_event.wait()
        listings = await admin.pending_transactions()
        [listing] = listings.values()
        [info] = listing.half_messages
        assert info.msg_id == sent.msg_id
        assert (info.topic, info.producer_group, info.keys, info.tags) == (
            TOPIC, GROUP, "order-9", "new",
        )  # fmt: skip
        assert info.check_times >= 1
        assert info.age_ms >= 300
        assert listing.pending_count == 1
        assert (await admin.pending_transactions(group="other")).popitem()[1].pending_count == 0
