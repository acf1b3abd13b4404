"""The file store and the memory twin, driven by the same random operations, must agree on
every answer — including after the file store restarts cleanly or recovers from a snapshot
taken mid-run (what a SIGKILL leaves behind)."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from bolide.base.clock import ManualClock
from bolide.protocol.message import MessageSysFlag, java_string_hash
from bolide.protocol.record import BatchEntry
from bolide.store.api import BatchPutRequest, GetResult, PutRequest, PutResult
from bolide.store.file_store import FileMessageStore
from bolide.store.memory_store import MemoryMessageStore

from .conftest import (
    ALL_HOURS,
    BORN_HOST,
    STORE_HOST,
    ControlledFileOps,
    copy_store_files,
    tiny_config,
)

TOPICS = ["alpha", "beta"]
TAGS = [None, "A", "B"]
KEYS = ["k1", "k2", "k3"]
FOREVER_MS = 1 << 62
NEVER_MS = 1 << 50


def _put_view(result: PutResult) -> tuple[Any, ...]:
    return (
        result.status,
        result.commit_log_offset,
        result.queue_offset,
        result.store_timestamp_ms,
        result.wrote_bytes,
        tuple(result.message_ids),
        result.message_count,
    )


def _get_view(result: GetResult) -> tuple[Any, ...]:
    return (
        result.status,
        result.next_begin_offset,
        result.min_offset,
        result.max_offset,
        result.total_bytes,
        tuple(bytes(b) for b in result.buffers),
    )


def _properties(tags: str | None, keys: list[str], unique: int) -> dict[str, str]:
    properties = {"UNIQ_KEY": f"U{unique:04d}"}
    if tags:
        properties["TAGS"] = tags
    if keys:
        properties["KEYS"] = " ".join(keys)
    return properties


class FileVersusMemory(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.directory = Path(tempfile.mkdtemp(prefix="bolide-diff-"))
        self.clock = ManualClock()
        # Retention runs only through the retention rule: the twin has no background loop.
        overrides = {
            "file_reserved_time_ms": 3_600_000,
            "delete_when_hours": ALL_HOURS,
            "retention_check_interval_ms": NEVER_MS,
        }
        self.config = tiny_config(self.directory, **overrides)
        self.file_ops = ControlledFileOps()
        self.memory = MemoryMessageStore(self.config, clock=self.clock, store_host=STORE_HOST)
        self.file = self._open_file_store(self.config)
        self.loop.run_until_complete(self.memory.start())
        self.unique = 0
        self.snapshots = 0

    def _open_file_store(self, config: Any) -> FileMessageStore:
        store = FileMessageStore(
            config, clock=self.clock, store_host=STORE_HOST, file_ops=self.file_ops
        )
        self.loop.run_until_complete(store.start())
        return store

    def teardown(self) -> None:
        self.loop.run_until_complete(self.file.shutdown())
        self.loop.run_until_complete(self.memory.shutdown())
        self.loop.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    def _both(self, call: Any) -> tuple[Any, Any]:
        async def run() -> tuple[Any, Any]:
            return await call(self.file), await call(self.memory)

        return self.loop.run_until_complete(run())

    @rule(
        topic=st.sampled_from(TOPICS),
        queue_id=st.integers(0, 2),
        body_size=st.integers(0, 1_500),
        tags=st.sampled_from(TAGS),
        keys=st.lists(st.sampled_from(KEYS), max_size=2),
        transaction=st.sampled_from([0, 0, 0, int(MessageSysFlag.TRANSACTION_PREPARED)]),
    )
    def put(
        self,
        topic: str,
        queue_id: int,
        body_size: int,
        tags: str | None,
        keys: list[str],
        transaction: int,
    ) -> None:
        self.unique += 1
        message = PutRequest(
            topic=topic,
            queue_id=queue_id,
            body=bytes([self.unique % 251]) * body_size,
            properties=_properties(tags, keys, self.unique),
            sys_flag=transaction,
            born_host=BORN_HOST,
        )
        on_file, on_memory = self._both(lambda store: store.put_message(message))
        assert _put_view(on_file) == _put_view(on_memory)

    @rule(
        topic=st.sampled_from(TOPICS),
        queue_id=st.integers(0, 2),
        sizes=st.lists(st.integers(0, 600), min_size=1, max_size=6),
        tags=st.sampled_from(TAGS),
    )
    def put_batch(self, topic: str, queue_id: int, sizes: list[int], tags: str | None) -> None:
        entries = []
        for size in sizes:
            self.unique += 1
            properties = _properties(tags, ["k1"], self.unique)
            text = "\x02".join(f"{k}\x01{v}" for k, v in properties.items())
            entries.append(BatchEntry(flag=size, body=bytes(size), properties=text))
        batch = BatchPutRequest(topic, queue_id, entries, born_host=BORN_HOST)
        on_file, on_memory = self._both(lambda store: store.put_messages(batch))
        assert _put_view(on_file) == _put_view(on_memory)

    @rule(duration_ms=st.integers(0, 2_000_000))
    def advance_clock(self, duration_ms: int) -> None:
        self.clock.advance_ms(duration_ms)

    @rule(
        topic=st.sampled_from(TOPICS),
        queue_id=st.integers(0, 3),
        offset_delta=st.integers(-2, 12),
        max_count=st.integers(1, 5),
        max_bytes=st.integers(1, 4_000),
        tags=st.sampled_from([None, frozenset({java_string_hash("A")})]),
    )
    def get(
        self,
        topic: str,
        queue_id: int,
        offset_delta: int,
        max_count: int,
        max_bytes: int,
        tags: frozenset[int] | None,
    ) -> None:
        offset = self.memory.min_offset(topic, queue_id) + offset_delta
        on_file = self.file.get_message(topic, queue_id, offset, max_count, max_bytes, tags)
        on_memory = self.memory.get_message(topic, queue_id, offset, max_count, max_bytes, tags)
        assert _get_view(on_file) == _get_view(on_memory)

    @rule(topic=st.sampled_from(TOPICS), key=st.sampled_from(KEYS), count=st.integers(1, 5))
    def query(self, topic: str, key: str, count: int) -> None:
        on_file = self.file.query_by_key(topic, key, count, 0, FOREVER_MS)
        on_memory = self.memory.query_by_key(topic, key, count, 0, FOREVER_MS)
        assert [bytes(v) for v in on_file] == [bytes(v) for v in on_memory]

    @rule(topic=st.sampled_from(TOPICS), queue_id=st.integers(0, 2), back_ms=st.integers(0, 10**7))
    def search_time(self, topic: str, queue_id: int, back_ms: int) -> None:
        timestamp = self.clock.now_ms() - back_ms
        assert self.file.offset_for_timestamp(
            topic, queue_id, timestamp
        ) == self.memory.offset_for_timestamp(topic, queue_id, timestamp)

    @rule()
    def retention(self) -> None:
        on_file, on_memory = self._both(lambda store: store.run_retention_once())
        assert on_file == on_memory

    @rule()
    def restart_cleanly(self) -> None:
        self.loop.run_until_complete(self.file.shutdown())
        self.file = self._open_file_store(self.config)

    @precondition(lambda self: self.snapshots < 3)
    @rule(flush_first=st.booleans())
    def recover_from_snapshot(self, flush_first: bool) -> None:
        """Copy the live directory (the page cache as a SIGKILL would leave it) and continue
        on the copy, which must recover to the same state."""
        self.snapshots += 1
        if flush_first:
            self.loop.run_until_complete(self.file.flush())
        copy_root = self.directory / f"copy{self.snapshots}"
        copy_store_files(self.config.store_path_root_dir, copy_root / "store")
        self.loop.run_until_complete(self.file.shutdown())
        self.config = tiny_config(
            copy_root,
            file_reserved_time_ms=3_600_000,
            delete_when_hours=ALL_HOURS,
            retention_check_interval_ms=NEVER_MS,
        )
        self.file = self._open_file_store(self.config)

    @invariant()
    def same_offsets_everywhere(self) -> None:
        assert self.file.topics_and_queues() == self.memory.topics_and_queues()
        for topic, queue_ids in self.memory.topics_and_queues().items():
            for queue_id in queue_ids:
                assert self.file.min_offset(topic, queue_id) == self.memory.min_offset(
                    topic, queue_id
                )
                assert self.file.max_offset(topic, queue_id) == self.memory.max_offset(
                    topic, queue_id
                )
                first = self.memory.min_offset(topic, queue_id)
                assert self.file.consume_queue_entries(
                    topic, queue_id, first, 100
                ) == self.memory.consume_queue_entries(topic, queue_id, first, 100)
        file_stats, memory_stats = self.file.stats(), self.memory.stats()
        assert file_stats.commit_log_max_offset == memory_stats.commit_log_max_offset
        assert file_stats.commit_log_min_offset == memory_stats.commit_log_min_offset


FileVersusMemory.TestCase.settings = settings(
    max_examples=30,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestFileVersusMemory = FileVersusMemory.TestCase
