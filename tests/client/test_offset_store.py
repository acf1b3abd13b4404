"""Offset stores (RocketMQ's consumption progress): increase-only memory, remote persistence
(oneway, owned queues
only, every 5 s through the client instance's persist loop on a manual clock), and the local
file store's atomic file with its backup."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Collection, Mapping
from pathlib import Path

import pytest

from bolide.base import limits
from bolide.base.clock import ManualClock
from bolide.base.errors import CorruptDataError
from bolide.client.config import ClientConfig
from bolide.client.consumer.offset_store import (
    OFFSET_NOT_FOUND,
    OFFSET_READ_FAILED,
    LocalFileOffsetStore,
    ReadOffsetType,
    RemoteOffsetStore,
    local_offsets_path,
)
from bolide.client.instance import ClientInstance
from bolide.protocol.bodies import ConsumerData, ConsumerRunningInfo, MessageQueue
from bolide.protocol.codes import ResponseCode
from bolide.testing.waiting import until
from tests.client.consumer_peers import MemoryOffsetBroker, queues

Q0, Q1, Q2 = queues("T", 3)


async def test_update_is_increase_only_unless_told_otherwise() -> None:
    store = RemoteOffsetStore(MemoryOffsetBroker())
    store.update_offset(Q0, 10, increase_only=True)
    store.update_offset(Q0, 7, increase_only=True)
    assert await store.read_offset(Q0, ReadOffsetType.READ_FROM_MEMORY) == 10
    store.update_offset(Q0, 12, increase_only=True)
    assert await store.read_offset(Q0, ReadOffsetType.READ_FROM_MEMORY) == 12
    store.update_offset(Q0, 3, increase_only=False)  # a reset moves it back
    assert await store.read_offset(Q0, ReadOffsetType.READ_FROM_MEMORY) == 3


async def test_remote_read_from_store_asks_the_broker_and_remembers() -> None:
    broker = MemoryOffsetBroker(committed={Q0: 42})
    store = RemoteOffsetStore(broker)
    assert await store.read_offset(Q0, ReadOffsetType.READ_FROM_MEMORY) == OFFSET_NOT_FOUND
    assert await store.read_offset(Q0, ReadOffsetType.READ_FROM_STORE) == 42
    broker.committed[Q0] = 50  # memory now answers without the broker
    assert await store.read_offset(Q0, ReadOffsetType.MEMORY_FIRST_THEN_STORE) == 42
    assert await store.read_offset(Q1, ReadOffsetType.MEMORY_FIRST_THEN_STORE) == OFFSET_NOT_FOUND


async def test_remote_read_failures_map_to_java_codes() -> None:
    broker = MemoryOffsetBroker(error_code=ResponseCode.SYSTEM_ERROR)
    store = RemoteOffsetStore(broker)
    assert await store.read_offset(Q0, ReadOffsetType.READ_FROM_STORE) == OFFSET_NOT_FOUND
    broker.error_code, broker.unreachable = None, True
    assert await store.read_offset(Q0, ReadOffsetType.READ_FROM_STORE) == OFFSET_READ_FAILED


async def test_remote_persist_all_sends_owned_queues_and_forgets_the_rest() -> None:
    broker = MemoryOffsetBroker()
    store = RemoteOffsetStore(broker)
    for queue, offset in ((Q0, 5), (Q1, 6), (Q2, 7)):
        store.update_offset(queue, offset, increase_only=True)
    await store.persist_all([Q0, Q2])
    assert broker.updates == [(Q0, 5), (Q2, 7)]
    assert store.clone_offset_table("T") == {Q0: 5, Q2: 7}  # Q1 went to another consumer
    await store.persist(Q1)  # nothing in memory: nothing sent
    assert broker.updates == [(Q0, 5), (Q2, 7)]


async def test_remote_persist_survives_an_unreachable_broker() -> None:
    broker = MemoryOffsetBroker(unreachable=True)
    store = RemoteOffsetStore(broker)
    store.update_offset(Q0, 5, increase_only=True)
    await store.persist_all([Q0])  # logged, not raised
    broker.unreachable = False
    await store.persist_all([Q0])
    assert broker.updates == [(Q0, 5)]


class _PersistingConsumer:
    """The smallest InstanceConsumer: its persist call is the offset store's persist_all."""

    group = "G"

    def __init__(self, store: RemoteOffsetStore, owned: list[MessageQueue]) -> None:
        self.store = store
        self.owned = owned

    def consumer_data(self) -> ConsumerData:
        return ConsumerData("G")

    def subscribed_topics(self) -> Collection[str]:
        return ()

    async def do_rebalance(self) -> None:
        return None

    async def persist_offsets(self) -> None:
        await self.store.persist_all(self.owned)

    async def reset_offsets(self, topic: str, offsets: Mapping[MessageQueue, int]) -> None:
        return None

    def running_info(self) -> ConsumerRunningInfo:
        return ConsumerRunningInfo()


async def test_offsets_reach_the_broker_every_5_s_through_the_instance() -> None:
    clock = ManualClock()
    config = ClientConfig(("127.0.0.1:9",), "127.0.0.1", 1, "persist-test")
    instance = ClientInstance(config, clock=clock)
    broker = MemoryOffsetBroker()
    store = RemoteOffsetStore(broker)
    instance.register_consumer(_PersistingConsumer(store, [Q0]))
    await instance.start()
    try:
        store.update_offset(Q0, 3, increase_only=True)
        await until(lambda: clock.sleeper_count >= 4)  # the four loops are parked
        clock.advance_ms(limits.CONSUMER_OFFSET_PERSIST_INITIAL_DELAY_MS - 1)
        for _ in range(50):
            await asyncio.sleep(0)
        assert broker.updates == []  # the first persist waits 10 s
        clock.advance_ms(1)
        await until(lambda: broker.updates == [(Q0, 3)])
        store.update_offset(Q0, 9, increase_only=True)
        await until(lambda: clock.sleeper_count >= 4)  # the persist loop sleeps again
        clock.advance_ms(limits.CONSUMER_OFFSET_PERSIST_INTERVAL_MS)
        await until(lambda: broker.updates == [(Q0, 3), (Q0, 9)])
    finally:
        await instance.shutdown()


def test_local_path_layout(tmp_path: Path) -> None:
    path = local_offsets_path(tmp_path, "10.0.0.1@12#w/1", "billing")
    assert path == tmp_path / "offsets" / "10.0.0.1@12#w_1" / "billing" / "offsets.json"


async def test_local_store_round_trip_through_the_file(tmp_path: Path) -> None:
    path = local_offsets_path(tmp_path, "cid", "G")
    store = LocalFileOffsetStore(path)
    await store.load()  # no file yet: empty
    store.update_offset(Q0, 11, increase_only=True)
    store.update_offset(Q1, 4, increase_only=True)
    await store.persist_all([Q0, Q1])
    document = json.loads(path.read_text())
    assert sorted((e["queueId"], e["offset"]) for e in document["offsetTable"]) == [(0, 11), (1, 4)]
    fresh = LocalFileOffsetStore(path)
    await fresh.load()
    assert await fresh.read_offset(Q0, ReadOffsetType.READ_FROM_MEMORY) == 11
    assert await fresh.read_offset(Q1, ReadOffsetType.READ_FROM_STORE) == 4
    assert await fresh.read_offset(Q2, ReadOffsetType.READ_FROM_STORE) == OFFSET_NOT_FOUND


async def test_local_store_keeps_a_backup_and_recovers_from_it(tmp_path: Path) -> None:
    path = local_offsets_path(tmp_path, "cid", "G")
    store = LocalFileOffsetStore(path)
    store.update_offset(Q0, 1, increase_only=True)
    await store.persist_all([Q0])
    store.update_offset(Q0, 2, increase_only=True)
    await store.persist_all([Q0])
    assert path.with_name("offsets.json.bak").exists()
    path.write_bytes(b'{"offsetTable":[{"brokerName":')  # torn main file
    recovered = LocalFileOffsetStore(path)
    await recovered.load()
    assert await recovered.read_offset(Q0, ReadOffsetType.READ_FROM_MEMORY) == 1
    path.with_name("offsets.json.bak").write_bytes(b"garbage")
    with pytest.raises(CorruptDataError):
        await LocalFileOffsetStore(path).load()
    assert await recovered.read_offset(Q0, ReadOffsetType.READ_FROM_STORE) == OFFSET_READ_FAILED


async def test_local_persist_of_one_queue_keeps_the_others(tmp_path: Path) -> None:
    path = local_offsets_path(tmp_path, "cid", "G")
    store = LocalFileOffsetStore(path)
    store.update_offset(Q0, 8, increase_only=True)
    store.update_offset(Q1, 9, increase_only=True)
    await store.persist_all([Q0, Q1])
    store.update_offset(Q0, 20, increase_only=True)
    store.update_offset(Q1, 21, increase_only=True)
    await store.persist(Q1)  # only Q1 is written; Q0 keeps its persisted offset
    fresh = LocalFileOffsetStore(path)
    await fresh.load()
    assert fresh.clone_offset_table("T") == {Q0: 8, Q1: 21}


async def test_local_file_keeps_queues_dropped_from_memory(tmp_path: Path) -> None:
    path = local_offsets_path(tmp_path, "cid", "G")
    store = LocalFileOffsetStore(path)
    store.update_offset(Q0, 8, increase_only=True)
    store.update_offset(Q1, 9, increase_only=True)
    await store.persist_all([Q0, Q1])
    store.remove_offset(Q1)  # e.g. dropped by a reset, to be read back from the file
    store.update_offset(Q0, 10, increase_only=True)
    await store.persist_all([Q0])
    assert await store.read_offset(Q1, ReadOffsetType.READ_FROM_STORE) == 9
    fresh = LocalFileOffsetStore(path)
    await fresh.load()
    assert fresh.clone_offset_table("T") == {Q0: 10, Q1: 9}
