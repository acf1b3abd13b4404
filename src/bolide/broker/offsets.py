"""The broker's committed consumer offsets, and the service that persists them.

Consumers in CLUSTERING mode commit their progress to the broker (UPDATE_CONSUMER_OFFSET, or
piggybacked on a pull); the broker keeps it in one table keyed ``topic@group`` holding
``{queue id: next offset to consume}``, and writes the table to ``consumerOffset.json`` every
5 s and at shutdown (RocketMQ's offset management, docs/protocol.md §2.6 and §4.4).

:class:`ConsumerOffsetManager` is the table: plain methods, no I/O except :meth:`load` and
:meth:`persist`. :class:`ConsumerOffsetFlushService` is the thin timer around it that writes
changed tables off the event loop.

consumerOffset.json (written as standard JSON; fastjson's unquoted numeric keys are accepted
when reading, since a Java broker writes ``{0:12}``)::

    {
      "offsetTable": {
        "<topic>@<group>": {"<queue id>": <offset>, ...},
        ...
      }
    }
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from bolide.base import limits
from bolide.base.clock import Clock
from bolide.base.errors import BackpressureError, StoreIOError
from bolide.base.fileio import read_with_backup
from bolide.base.service import CrashHandler, Service
from bolide.broker.config import ConfigFileWriter
from bolide.protocol.bodies.config import ConsumerOffsetSerializeWrapper
from bolide.protocol.bodies.fastjson import BodyError

__all__ = [
    "TOPIC_GROUP_SEPARATOR",
    "ConsumerOffsetFlushService",
    "ConsumerOffsetManager",
    "decode_offset_table",
    "encode_offset_table",
]

_log = logging.getLogger("bolide.broker.offsets")

TOPIC_GROUP_SEPARATOR = "@"
"""Joins topic and group in the table's keys (``topic@group``); topic names never contain it."""

OffsetTable = dict[tuple[str, str], dict[int, int]]
"""(topic, group) -> {queue id: committed offset}."""


def encode_offset_table(table: Mapping[tuple[str, str], Mapping[int, int]]) -> bytes:
    """The consumerOffset.json bytes for ``table``: standard JSON, keys in a stable order."""
    offset_table = {
        f"{topic}{TOPIC_GROUP_SEPARATOR}{group}": dict(sorted(queues.items()))
        for (topic, group), queues in sorted(table.items())
    }
    return ConsumerOffsetSerializeWrapper(offset_table).to_json()


def decode_offset_table(raw: bytes) -> OffsetTable:
    """Parse consumerOffset.json bytes, standard or fastjson (unquoted numeric keys).

    Raises ValueError (what :func:`read_with_backup` expects) when the bytes are not a JSON
    object with an ``offsetTable`` object of ``{queue id: integer offset}`` objects. A key
    without ``@`` is skipped with a warning, as Java's helpers skip it.
    """
    try:
        wrapper = ConsumerOffsetSerializeWrapper.from_json(raw)
    except BodyError as error:
        raise ValueError(f"consumerOffset.json: {error}") from error
    table: OffsetTable = {}
    for key, queues in wrapper.offset_table.items():
        # Topic names never contain "@" (their pattern forbids it), so the first one splits.
        topic, separator, group = key.partition(TOPIC_GROUP_SEPARATOR)
        if not separator or not topic or not group:
            _log.warning("consumerOffset.json: skipping key %r (expected topic@group)", key)
            continue
        table[(topic, group)] = queues
    return table


class ConsumerOffsetManager:
    """Committed offsets per ``topic@group`` and queue, persisted to ``path``.

    The table holds at most ``limits.CONSUMER_OFFSET_MAX_ENTRIES`` (queue) entries. Every
    mutation bumps :attr:`version`, so the flush service writes only changed tables.
    Not thread-safe: use it from the event loop thread.
    """

    def __init__(
        self, path: Path, *, max_entries: int = limits.CONSUMER_OFFSET_MAX_ENTRIES
    ) -> None:
        self._max_entries = max_entries
        self._table: OffsetTable = {}
        self._entry_count = 0
        self._version = 0
        self.on_commit: Callable[[str, str, int, int], None] | None = None
        """Told ``(group, topic, queue id, offset)`` of every commit (the broker's trace)."""
        self.file = ConfigFileWriter(path, self)
        """Writes ``path``; the flush service calls its :meth:`~ConfigFileWriter.flush`."""

    @property
    def path(self) -> Path:
        return self.file.path

    @property
    def version(self) -> int:
        """Bumped by every change, so unchanged tables are not rewritten."""
        return self._version

    # --- reading and writing the file ---------------------------------------------------------

    def load(self) -> None:
        """Replace the table with ``path`` (or ``path.bak`` if the main file is damaged).

        A missing file means an empty table. Raises :class:`CorruptDataError` when both files
        exist but neither parses: the broker should not start and forget every group's progress.
        """
        table = read_with_backup(self.path, decode_offset_table)
        self._table = table or {}
        self._entry_count = sum(len(queues) for queues in self._table.values())
        self._version += 1
        self.file.mark_written()

    def merge_from_master(self, table: OffsetTable) -> None:
        """A slave takes its master's offsets (SlaveSynchronize: Java's putAll), entry per
        topic@group; entries only this broker has stay."""
        for key, queues in table.items():
            self._table[key] = dict(queues)
        self._entry_count = sum(len(queues) for queues in self._table.values())
        self._version += 1

    def encode(self) -> bytes:
        """The consumerOffset.json bytes of the current table."""
        return encode_offset_table(self._table)

    def persist(self) -> bool:
        """Write the table to ``path`` now if it changed since the last write; True if written.

        Blocks on fsync: for startup, tools and tests; the flush service writes off the loop.
        Raises OSError when the file cannot be written.
        """
        return self.file.flush_blocking()

    # --- the table ----------------------------------------------------------------------------

    @property
    def entry_count(self) -> int:
        """(topic@group, queue) entries held."""
        return self._entry_count

    def commit_offset(
        self, client_host: str, group: str, topic: str, queue_id: int, offset: int
    ) -> None:
        """Store ``offset`` as ``group``'s progress on ``topic`` queue ``queue_id``.

        No monotonic check (as RocketMQ): an offset smaller than the stored one is stored too,
        and logged as a WARNING naming ``client_host`` ("host:port"), since it usually means
        a reset or a consumer re-reading. Raises :class:`BackpressureError` when the entry is
        new and the table already holds its maximum.
        """
        queues = self._table.get((topic, group))
        previous = None if queues is None else queues.get(queue_id)
        if previous is None:
            self._reserve_entries(1)
            self._entry_count += 1
        elif offset < previous:
            _log.warning(
                "consumer offset moved backwards: client=%s key=%s%s%s queue=%d offset %d -> %d",
                client_host,
                topic,
                TOPIC_GROUP_SEPARATOR,
                group,
                queue_id,
                previous,
                offset,
            )
        if queues is None:
            queues = self._table[(topic, group)] = {}
        queues[queue_id] = offset
        self._version += 1
        if self.on_commit is not None:
            self.on_commit(group, topic, queue_id, offset)

    def query_offset(self, group: str, topic: str, queue_id: int) -> int:
        """The committed offset of ``group`` on ``topic`` queue ``queue_id``, or -1 if none."""
        queues = self._table.get((topic, group))
        if queues is None:
            return -1
        return queues.get(queue_id, -1)

    def queue_offsets(self, group: str, topic: str) -> dict[int, int]:
        """``{queue id: committed offset}`` of ``group`` on ``topic`` (a copy; empty if none)."""
        return dict(self._table.get((topic, group), {}))

    def set_queue_offsets(self, group: str, topic: str, offsets: Mapping[int, int]) -> None:
        """Overwrite several queues' offsets at once without warnings (admin offset reset).

        Raises :class:`BackpressureError` if the new entries do not fit the table.
        """
        if not offsets:
            return
        queues = self._table.get((topic, group), {})
        added = sum(1 for queue_id in offsets if queue_id not in queues)
        self._reserve_entries(added)
        self._entry_count += added
        queues.update(offsets)
        self._table[(topic, group)] = queues
        self._version += 1

    def groups_of_topic(self, topic: str) -> list[str]:
        """Groups with committed offsets on ``topic``, sorted (Java whichGroupByTopic)."""
        return sorted(group for (each_topic, group) in self._table if each_topic == topic)

    def topics_of_group(self, group: str) -> list[str]:
        """Topics (retry topics too) ``group`` has offsets on, sorted (whichTopicByConsumer)."""
        return sorted(topic for (topic, each_group) in self._table if each_group == group)

    def offsets_of_group(self, group: str) -> dict[str, dict[int, int]]:
        """``{topic: {queue id: offset}}`` of ``group`` (copies), for progress views."""
        return {
            topic: dict(queues)
            for (topic, each_group), queues in sorted(self._table.items())
            if each_group == group
        }

    def remove_group(self, group: str) -> list[str]:
        """Forget every offset of ``group`` (group deleted); returns the topics it had."""
        return self._remove(key for key in self._table if key[1] == group)

    def remove_topic(self, topic: str) -> list[str]:
        """Forget every group's offsets on ``topic`` (topic deleted); returns those groups."""
        return [group for _, group in self._keys_removed(k for k in self._table if k[0] == topic)]

    def remove_offsets(self, group: str, topic: str) -> bool:
        """Forget ``group``'s offsets on ``topic``; True if there were any."""
        return bool(self._remove([(topic, group)] if (topic, group) in self._table else []))

    def clone_offsets(
        self, source_group: str, destination_group: str, topic: str | None = None
    ) -> list[str]:
        """Copy ``source_group``'s offsets to ``destination_group`` (CLONE_GROUP_OFFSET).

        Only ``topic`` when given, else every topic of the source group. The destination's
        offsets on those topics are replaced. Returns the topics copied. Raises
        :class:`BackpressureError` if the copies do not fit the table (nothing is copied then).
        """
        topics = [topic] if topic is not None else self.topics_of_group(source_group)
        copies = {
            each: dict(self._table[(each, source_group)])
            for each in topics
            if (each, source_group) in self._table
        }
        added = sum(len(queues) for queues in copies.values()) - sum(
            len(self._table.get((each, destination_group), {})) for each in copies
        )
        self._reserve_entries(added)
        for each, queues in copies.items():
            self._table[(each, destination_group)] = queues
        self._entry_count += added
        if copies:
            self._version += 1
        return sorted(copies)

    def entries(self) -> list[tuple[tuple[str, str], dict[int, int]]]:
        """Every ``((topic, group), {queue id: offset})`` entry, not copied: the caller
        reads them at once on the loop thread and does not change them (metrics scrapes)."""
        return list(self._table.items())

    def table_snapshot(self) -> dict[str, dict[int, int]]:
        """The whole table as ``{"topic@group": {queue id: offset}}`` (copies; admin dumps)."""
        return {
            f"{topic}{TOPIC_GROUP_SEPARATOR}{group}": dict(queues)
            for (topic, group), queues in sorted(self._table.items())
        }

    def _reserve_entries(self, count: int) -> None:
        if count > 0 and self._entry_count + count > self._max_entries:
            raise BackpressureError(
                f"consumer offset table full ({self._max_entries} entries): commit refused"
            )

    def _keys_removed(self, keys: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
        removed = list(keys)
        for key in removed:
            self._entry_count -= len(self._table.pop(key))
        if removed:
            self._version += 1
        return removed

    def _remove(self, keys: Iterable[tuple[str, str]]) -> list[str]:
        return sorted(topic for topic, _ in self._keys_removed(keys))


class ConsumerOffsetFlushService:
    """Writes the offset table every ``interval_ms`` (if it changed) and once more at stop.

    The table is encoded on the loop (a consistent snapshot) and written, with fsync, in a
    worker thread so the loop keeps serving. A failed periodic write is logged and retried
    at the next tick (the table stays in memory); a failed final write at :meth:`stop`
    raises :class:`StoreIOError`. Create it inside the running loop; nothing runs before
    :meth:`start`.
    """

    def __init__(
        self,
        manager: ConsumerOffsetManager,
        *,
        clock: Clock,
        interval_ms: int = limits.CONSUMER_OFFSET_FLUSH_INTERVAL_MS,
        on_crash: CrashHandler | None = None,
    ) -> None:
        self._manager = manager
        self._flushed = asyncio.Condition()
        self.flush_count = 0
        """Writes completed (tests and shutdown coordination wait on it)."""
        self._service = Service(
            "consumer-offset-flush",
            self._step,
            interval_ms=interval_ms,
            clock=clock,
            on_crash=on_crash,
        )

    @property
    def running(self) -> bool:
        return self._service.running

    def start(self) -> None:
        self._service.start()

    async def flush(self) -> bool:
        """Write the table now if it changed; True if written. Raises OSError on failure."""
        written = await self._manager.file.flush()
        if written:
            async with self._flushed:
                self.flush_count += 1
                self._flushed.notify_all()
        return written

    async def wait_flushed(self, count: int) -> None:
        """Return once :attr:`flush_count` has reached ``count``."""
        async with self._flushed:
            await self._flushed.wait_for(lambda: self.flush_count >= count)

    async def stop(self, timeout_ms: int = 5_000) -> None:
        """Stop the timer, then write the table one last time if it changed.

        Raises :class:`StoreIOError` if that final write fails: the caller should report
        that offsets committed since the last successful write may be lost.
        """
        await self._service.stop(timeout_ms)
        try:
            await self.flush()
        except OSError as error:
            raise StoreIOError(f"cannot write {self._manager.path}: {error}") from error

    async def _step(self) -> None:
        try:
            await self.flush()
        except OSError:
            # Offsets stay in memory; the next tick (or shutdown) writes them.
            _log.exception("cannot write %s; will retry", self._manager.path)
