"""Helpers for the delay, timer and retry tests: stores on a manual clock, puts, reads."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bolide.base.clock import ManualClock
from bolide.protocol.address import SocketAddress
from bolide.protocol.message import MessageExt
from bolide.protocol.record import decode_record, encode_properties
from bolide.store.api import MessageStore, PutRequest
from bolide.store.config import StoreConfig
from bolide.store.file_store import FileMessageStore
from bolide.store.memory_store import MemoryMessageStore

STORE_HOST: SocketAddress = ("127.0.0.1", 10911)
BORN_HOST: SocketAddress = ("10.1.2.3", 50000)
SEGMENT_BYTES = 64 * 1024


def store_config(
    root: Path, levels_ms: tuple[int, ...] = (1_000, 2_000), **overrides: Any
) -> StoreConfig:
    settings: dict[str, Any] = {
        "commit_log_segment_bytes": SEGMENT_BYTES,
        "consume_queue_file_entries": 64,
        "index_hash_slots": 64,
        "index_file_max_entries": 256,
        "message_delay_levels_ms": levels_ms,
    }
    settings.update(overrides)
    return StoreConfig(root / "store", **settings)


async def started_store(
    kind: str, root: Path, clock: ManualClock, levels_ms: tuple[int, ...] = (1_000, 2_000)
) -> MessageStore:
    config = store_config(root, levels_ms)
    store: MessageStore
    if kind == "memory":
        store = MemoryMessageStore(config, clock=clock, store_host=STORE_HOST)
    else:
        store = FileMessageStore(config, clock=clock, store_host=STORE_HOST)
    await store.start()
    return store


def put_request(
    topic: str,
    queue_id: int,
    body: bytes,
    properties: Mapping[str, str],
    *,
    reconsume_times: int = 0,
    tags_code: int | None = None,
) -> PutRequest:
    return PutRequest(
        topic=topic,
        queue_id=queue_id,
        body=body,
        flag=7,
        properties=encode_properties(properties),
        born_timestamp_ms=1_600_000_000_000,
        born_host=BORN_HOST,
        reconsume_times=reconsume_times,
        tags_code=tags_code,
    )


def read_queue(store: MessageStore, topic: str, queue_id: int = 0) -> list[MessageExt]:
    """Every message of a queue, decoded, in queue order."""
    messages: list[MessageExt] = []
    for commit_log_offset, _, _ in store.consume_queue_entries(
        topic, queue_id, 0, store.max_offset(topic, queue_id)
    ):
        record = store.read_record(commit_log_offset)
        assert record is not None
        messages.append(decode_record(record)[0])
    return messages
