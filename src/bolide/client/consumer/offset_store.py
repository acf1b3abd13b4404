"""Consumption progress kept by a consumer (RocketMQ's consumption progress): remote for clustering,
a local file for
broadcasting.

Both stores keep an in-memory table ``MessageQueue -> next offset to consume``. After a batch
is consumed the consumer moves a queue's entry forward with ``update_offset(...,
increase_only=True)`` (a late batch never moves it back); a reset or a corrected pull offset
sets it outright (``increase_only=False``). Nothing is written per message: the client's
persist service calls :meth:`OffsetStore.persist_all` every 5 s and the consumer calls it at
shutdown.

* :class:`RemoteOffsetStore` (clustering): persisting sends ``UPDATE_CONSUMER_OFFSET`` oneway
  to the master of the queue's broker — the consumer does not wait for the broker (RocketMQ's
  consumption progress,
  "egg 2"). Reading from the store sends ``QUERY_CONSUMER_OFFSET``.
* :class:`LocalFileOffsetStore` (broadcasting): every consumer has its own progress in
  ``<base dir>/offsets/<client id>/<group>/offsets.json``, replaced atomically (tmp + fsync +
  rename, previous content kept as ``offsets.json.bak``)::

      {"offsetTable":[{"brokerName":"broker-a","offset":12,"queueId":0,"topic":"T"}, ...]}

Reading returns the offset, or :data:`OFFSET_NOT_FOUND` (-1: no progress stored — the
consumer then applies its ConsumeFrom rule) or :data:`OFFSET_READ_FAILED` (-2: the broker
could not be asked; the queue is skipped until the next rebalance), as Java does.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

from bolide.base.errors import BolideError, CorruptDataError, RemoteError
from bolide.base.fileio import atomic_write_with_backup, read_with_backup
from bolide.protocol.bodies import BodyError, MessageQueue, ResetOffsetBodyForC

__all__ = [
    "OFFSET_NOT_FOUND",
    "OFFSET_READ_FAILED",
    "LocalFileOffsetStore",
    "OffsetBroker",
    "OffsetStore",
    "ReadOffsetType",
    "RemoteOffsetStore",
    "local_offsets_path",
]

_log = logging.getLogger("bolide.client.offset_store")

OFFSET_NOT_FOUND = -1
"""``read_offset``: no progress is stored for the queue."""
OFFSET_READ_FAILED = -2
"""``read_offset``: the progress could not be read (broker unreachable, timeout)."""


class ReadOffsetType(enum.Enum):
    """Where :meth:`OffsetStore.read_offset` looks."""

    READ_FROM_MEMORY = "memory"
    """Only the in-memory table."""
    READ_FROM_STORE = "store"
    """Only the broker (remote) or the file (local); the answer also updates memory."""
    MEMORY_FIRST_THEN_STORE = "memory-then-store"
    """Memory when it has the queue, else the store."""


class OffsetStore(Protocol):
    """The operations both stores offer (RocketMQ's OffsetStore)."""

    async def load(self) -> None:
        """Read what the store keeps at start (local file); nothing for the remote store."""
        ...

    def update_offset(self, queue: MessageQueue, offset: int, *, increase_only: bool) -> None:
        """Set the in-memory offset; with ``increase_only`` never move it backwards."""
        ...

    async def read_offset(self, queue: MessageQueue, read_type: ReadOffsetType) -> int:
        """The offset, or OFFSET_NOT_FOUND / OFFSET_READ_FAILED."""
        ...

    async def persist_all(self, queues: Iterable[MessageQueue]) -> None:
        """Persist the offsets of ``queues`` (the queues the consumer owns now)."""
        ...

    async def persist(self, queue: MessageQueue) -> None:
        """Persist one queue's offset (when the queue is dropped by a rebalance)."""
        ...

    def remove_offset(self, queue: MessageQueue) -> None:
        """Forget a queue's in-memory offset."""
        ...

    def clone_offset_table(self, topic: str) -> dict[MessageQueue, int]:
        """A copy of the in-memory offsets of ``topic``'s queues."""
        ...


class OffsetBroker(Protocol):
    """The two broker calls the remote store needs; the consumer adapts the client instance.

    ``query_consumer_offset`` returns None when the broker has no offset (QUERY_NOT_FOUND),
    raises :class:`RemoteError` when it answers with another error code and another
    :class:`BolideError` when it cannot be reached or does not answer in time.
    """

    async def query_consumer_offset(self, queue: MessageQueue) -> int | None: ...

    async def update_consumer_offset_oneway(self, queue: MessageQueue, offset: int) -> None: ...


class _MemoryTable:
    """The in-memory part both stores share."""

    def __init__(self) -> None:
        self.offsets: dict[MessageQueue, int] = {}

    def update_offset(self, queue: MessageQueue, offset: int, *, increase_only: bool) -> None:
        previous = self.offsets.get(queue)
        if previous is None or not increase_only or offset > previous:
            self.offsets[queue] = offset

    def remove_offset(self, queue: MessageQueue) -> None:
        self.offsets.pop(queue, None)

    def clone_offset_table(self, topic: str) -> dict[MessageQueue, int]:
        return {queue: offset for queue, offset in self.offsets.items() if queue.topic == topic}

    def _answer_from_memory(self, queue: MessageQueue, read_type: ReadOffsetType) -> int | None:
        """What ``read_offset`` answers from memory: the offset held (unless READ_FROM_STORE),
        OFFSET_NOT_FOUND when READ_FROM_MEMORY finds none; None when the store must be read."""
        if read_type is ReadOffsetType.READ_FROM_STORE:
            return None
        offset = self.offsets.get(queue)
        if offset is not None:
            return offset
        return OFFSET_NOT_FOUND if read_type is ReadOffsetType.READ_FROM_MEMORY else None


class RemoteOffsetStore(_MemoryTable):
    """Clustering progress: memory, synchronised to the broker (module docstring)."""

    def __init__(self, broker: OffsetBroker) -> None:
        super().__init__()
        self._broker = broker

    async def load(self) -> None:
        """Nothing to load: the broker is asked queue by queue."""

    async def read_offset(self, queue: MessageQueue, read_type: ReadOffsetType) -> int:
        """See :meth:`OffsetStore.read_offset`. A broker answer other than SUCCESS gives
        OFFSET_NOT_FOUND; no answer gives OFFSET_READ_FAILED (Java's -1 and -2)."""
        in_memory = self._answer_from_memory(queue, read_type)
        if in_memory is not None:
            return in_memory
        try:
            offset = await self._broker.query_consumer_offset(queue)
        except RemoteError as error:
            _log.debug("no stored offset for %s: %s", queue, error)
            return OFFSET_NOT_FOUND
        except BolideError as error:
            _log.warning("cannot read the offset of %s from the broker: %s", queue, error)
            return OFFSET_READ_FAILED
        if offset is None:
            return OFFSET_NOT_FOUND
        self.update_offset(queue, offset, increase_only=False)
        return offset

    async def persist_all(self, queues: Iterable[MessageQueue]) -> None:
        """Send the offset of each of ``queues`` oneway; forget entries of queues not among
        them (they belong to other consumers now). A failing broker is logged and skipped."""
        owned = set(queues)
        for queue, offset in list(self.offsets.items()):
            if queue not in owned:
                del self.offsets[queue]
                continue
            await self._send(queue, offset)

    async def persist(self, queue: MessageQueue) -> None:
        """Send one queue's offset oneway (nothing when memory has none)."""
        offset = self.offsets.get(queue)
        if offset is not None:
            await self._send(queue, offset)

    async def _send(self, queue: MessageQueue, offset: int) -> None:
        try:
            await self._broker.update_consumer_offset_oneway(queue, offset)
        except BolideError as error:
            _log.warning("cannot persist offset %d of %s: %s", offset, queue, error)


def local_offsets_path(base_directory: Path, client_id: str, group: str) -> Path:
    """``<base dir>/offsets/<client id>/<group>/offsets.json``.

    The client id may hold characters a file name should not (``@``, ``#`` are fine on POSIX;
    ``/`` is not): ``/`` and ``\\`` become ``_``.
    """

    def safe(name: str) -> str:
        return name.replace("/", "_").replace("\\", "_")

    return base_directory / "offsets" / safe(client_id) / safe(group) / "offsets.json"


class LocalFileOffsetStore(_MemoryTable):
    """Broadcasting progress in a local file (module docstring). File writes and reads run in
    a worker thread so the fsync never blocks the event loop.

    The file keeps every queue it ever held: persisting writes the owned queues' offsets over
    what the file had, so a queue forgotten in memory (dropped by a rebalance or a reset)
    keeps its last persisted offset for when it comes back.
    """

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        self._written: dict[MessageQueue, int] = {}
        """What the file holds (as last read or written)."""

    async def load(self) -> None:
        """Fill memory from the file (or its ``.bak`` when the file is damaged).

        Raises:
            CorruptDataError: both the file and its backup exist and are unreadable.
        """
        stored = await asyncio.to_thread(self._read_file)
        self._written = dict(stored)
        self.offsets.update(stored)

    async def read_offset(self, queue: MessageQueue, read_type: ReadOffsetType) -> int:
        """See :meth:`OffsetStore.read_offset`; reading from the store re-reads the file
        (an unreadable file counts as OFFSET_READ_FAILED)."""
        in_memory = self._answer_from_memory(queue, read_type)
        if in_memory is not None:
            return in_memory
        try:
            stored = await asyncio.to_thread(self._read_file)
        except (CorruptDataError, OSError) as error:
            _log.warning("cannot read %s: %s", self.path, error)
            return OFFSET_READ_FAILED
        offset = stored.get(queue)
        if offset is None:
            return OFFSET_NOT_FOUND
        self.update_offset(queue, offset, increase_only=False)
        return offset

    async def persist_all(self, queues: Iterable[MessageQueue]) -> None:
        """Write the offsets of ``queues`` (those memory has) into the file, atomically; other
        queues keep what the file had.

        Raises:
            OSError: the file cannot be written (the previous content stays intact).
        """
        owned = set(queues)
        changes = {queue: offset for queue, offset in self.offsets.items() if queue in owned}
        if not changes or all(self._written.get(q) == o for q, o in changes.items()):
            return  # nothing new: no fsync
        snapshot = {**self._written, **changes}
        await asyncio.to_thread(self._write_file, snapshot)
        self._written = snapshot

    async def persist(self, queue: MessageQueue) -> None:
        """Write one queue's offset into the file (the file is rewritten whole)."""
        await self.persist_all([queue])

    def _read_file(self) -> dict[MessageQueue, int]:
        def parse(raw: bytes) -> dict[MessageQueue, int]:
            try:
                return dict(ResetOffsetBodyForC.from_json(raw).offset_table)
            except BodyError as error:
                raise ValueError(str(error)) from error

        return read_with_backup(self.path, parse) or {}

    def _write_file(self, snapshot: dict[MessageQueue, int]) -> None:
        # The list form is standard JSON with named fields (the reset body C++ clients read).
        atomic_write_with_backup(self.path, ResetOffsetBodyForC(snapshot).to_json())
