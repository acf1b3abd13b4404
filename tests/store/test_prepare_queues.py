"""Warm start for a new topic: its queues' first files are made ahead on the allocate-ahead
thread and put in place on the loop, so the first put of each queue finds its file."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from bolide.base.clock import ManualClock
from bolide.store.config import segment_file_name
from bolide.store.file_store import FileMessageStore
from bolide.store.segment import allocate_pool
from bolide.testing.waiting import until

from .conftest import STORE_HOST, ControlledFileOps, request, tiny_config


async def _open(tmp_path: Path) -> FileMessageStore:
    store = FileMessageStore(
        tiny_config(tmp_path),
        clock=ManualClock(),
        store_host=STORE_HOST,
        file_ops=ControlledFileOps(),
    )
    await store.start()
    return store


def _files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir()) if directory.exists() else []


async def _settled(store: FileMessageStore) -> None:
    await until(lambda: not store.queue_files_in_the_making())
    await asyncio.sleep(0)  # the adoption callbacks run on the loop


async def test_a_new_topics_queues_get_their_first_file_before_any_put(tmp_path: Path) -> None:
    store = await _open(tmp_path)
    try:
        store.prepare_queues("orders", 4)
        await _settled(store)
        queue_dir = store.config.consume_queue_dir / "orders"
        for queue_id in range(4):
            assert _files(queue_dir / str(queue_id)) == [segment_file_name(0)]
            queue = store._queues.get("orders", queue_id)
            assert queue is not None and len(queue.segments) == 1
            assert queue.segments[0].needs_directory_sync  # durable with the next queue flush
        assert [store.max_offset("orders", q) for q in range(4)] == [0, 0, 0, 0]
        for queue_id in range(4):
            result = await store.put_message(request(queue_id=queue_id))
            assert result.ok and result.queue_offset == 0
            assert _files(queue_dir / str(queue_id)) == [segment_file_name(0)]
        assert store.max_offset("orders", 2) == 1
        assert store.get_message("orders", 3, 0, 8, 1 << 20).message_count == 1
        store.prepare_queues("orders", 4)  # queues with files: nothing more to make
        assert not store.queue_files_in_the_making()
    finally:
        await store.shutdown()
    store = await _open(tmp_path)  # what was adopted reads back after a restart
    try:
        assert [store.max_offset("orders", q) for q in range(4)] == [1, 1, 1, 1]
    finally:
        await store.shutdown()


async def test_a_put_first_or_a_deleted_topic_leaves_no_spare_behind(tmp_path: Path) -> None:
    store = await _open(tmp_path)
    try:
        store.prepare_queues("orders", 2)
        assert (await store.put_message(request(queue_id=0))).ok  # before the spare lands
        store.prepare_queues("gone", 2)
        store.delete_topic("gone")
        await _settled(store)
        assert _files(store.config.consume_queue_dir / "orders" / "0") == [segment_file_name(0)]
        assert store.max_offset("orders", 0) == 1
        assert not list(store.config.consume_queue_dir.rglob("*.tmp"))
        assert store._queues.get("gone", 0) is None
    finally:
        await store.shutdown()


async def test_shutdown_drops_the_files_still_in_the_making(tmp_path: Path) -> None:
    store = await _open(tmp_path)
    store.prepare_queues("orders", 8)
    await store.shutdown()
    assert not list(store.config.consume_queue_dir.rglob("*.tmp"))


async def test_deleting_a_topic_cancels_the_files_not_yet_started(tmp_path: Path) -> None:
    gate = threading.Event()
    held = allocate_pool().submit(gate.wait, 30)  # holds the allocate-ahead thread
    store = await _open(tmp_path)
    try:
        store.prepare_queues("many", 64)
        store.delete_topic("many")  # nothing started: all cancelled, no wait for the thread
        assert not held.done()
        assert not store.queue_files_in_the_making()
        gate.set()
        store.prepare_queues("orders", 1)
        await _settled(store)
        assert not (store.config.consume_queue_dir / "many").exists()
    finally:
        gate.set()
        await store.shutdown()
