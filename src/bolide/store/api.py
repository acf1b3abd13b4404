"""The interface between the broker and a message store, and the values that cross it.

Two implementations: :class:`bolide.store.file_store.FileMessageStore` (durable, the real one)
and :class:`bolide.store.memory_store.MemoryMessageStore` (the reference twin that the
contract suite holds the file store to). Reads are plain methods (they never wait); puts are
coroutines because a SYNC_FLUSH put waits for its fsync.

Offsets: a *queue offset* counts messages in one consume queue (0, 1, 2, ...); a *commit-log
offset* is a byte position in the commit log, unique per record. ``max_offset`` is exclusive:
the queue offset the next message will get.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Final, Protocol

from bolide.protocol.address import SocketAddress
from bolide.protocol.record import BatchEntry


class PutStatus(enum.Enum):
    """Outcome of a put (RocketMQ's PutMessageStatus, the ones a Bolide store produces)."""

    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    """Stored, but the fsync did not complete in sync_flush_timeout_ms (or failed)."""
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    """Topic, queue id, body or record size out of bounds; nothing stored."""
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    """Properties over 32767 bytes; nothing stored."""
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    """Store not started or shut down, or a write failed earlier and the segment refuses
    appends until recovery; nothing stored."""
    DISK_FULL = "DISK_FULL"
    """No disk space for the record; nothing stored."""
    OS_PAGE_CACHE_BUSY = "OS_PAGE_CACHE_BUSY"
    """Reserved for a busy page cache; not produced by Bolide stores."""
    UNKNOWN_ERROR = "UNKNOWN_ERROR"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    """Stored on a SYNC_MASTER, but the slave did not acknowledge it within 3 s (broker/ha)."""
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"
    """Stored on a SYNC_MASTER that has no slave in sync (none, or > 256 MiB behind)."""


class GetStatus(enum.Enum):
    """Outcome of :meth:`MessageStore.get_message` (RocketMQ's GetMessageStatus)."""

    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    """Entries were scanned but none matched the tag filter."""
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    """Entries point at commit-log records that retention has deleted."""
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    """The offset is inside [min, max) but its consume-queue entry could not be read."""
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    """Offset beyond max offset."""
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    """Offset equals max offset: caught up, nothing new yet."""
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    """Offset below min offset (retention deleted it)."""
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    """No consume queue for this topic and queue id."""
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"
    """The queue exists but holds nothing (max offset 0)."""


@dataclass(slots=True)
class PutRequest:
    """One message to store.

    ``body`` is stored as given (compressed when ``sys_flag`` says so). ``properties`` is the
    properties string (docs/protocol.md §3.3) or a mapping that the store encodes; the store reads
    TAGS, KEYS, UNIQ_KEY and DELAY from it. ``tags_code`` overrides the consume-queue tags
    code; leave it None: the store computes Java's hash of TAGS, or for SCHEDULE_TOPIC_XXXX
    the delivery time (store time + delay of the DELAY level), and recovery recomputes it the
    same way. A PREPARED or ROLLBACK transaction record gets no consume-queue entry and queue
    offset 0.
    """

    topic: str
    queue_id: int
    body: bytes | bytearray | memoryview
    flag: int = 0
    properties: Mapping[str, str] | str = ""
    sys_flag: int = 0
    born_timestamp_ms: int = 0
    born_host: SocketAddress = ("127.0.0.1", 0)
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    tags_code: int | None = None


@dataclass(slots=True)
class BatchPutRequest:
    """The inner messages of one batch send, stored as consecutive records of one queue.

    Each entry keeps its own flag, body and properties; ``extra_properties`` (a properties
    string, e.g. CLUSTER) is appended to every entry's properties. All records land in one
    commit-log segment, in order, with consecutive queue offsets.
    """

    topic: str
    queue_id: int
    entries: Sequence[BatchEntry]
    sys_flag: int = 0
    born_timestamp_ms: int = 0
    born_host: SocketAddress = ("127.0.0.1", 0)
    reconsume_times: int = 0
    extra_properties: str = ""


MESSAGE_REFUSALS: Final = frozenset({PutStatus.MESSAGE_ILLEGAL, PutStatus.PROPERTIES_SIZE_EXCEEDED})
"""Refusals for what one message holds: the next request of a put_message_list is still tried."""


@dataclass(slots=True)
class PutResult:
    """What a put did. Offsets and ids are those of the first record; -1 when nothing stored.

    ``message_ids`` holds the offset message id of every stored record, in order.
    """

    status: PutStatus
    commit_log_offset: int = -1
    queue_offset: int = -1
    store_timestamp_ms: int = 0
    wrote_bytes: int = 0
    message_ids: list[str] = field(default_factory=list)
    message_count: int = 0
    remark: str = ""

    @property
    def ok(self) -> bool:
        return self.status is PutStatus.PUT_OK


@dataclass(slots=True)
class GetResult:
    """The records a read found, as zero-copy views (each one whole stored record).

    ``next_begin_offset`` is where the next read of this queue should start. The views stay
    valid after retention deletes their segment (the mapping lives as long as a view does).
    """

    status: GetStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    buffers: list[memoryview] = field(default_factory=list)
    total_bytes: int = 0

    @property
    def message_count(self) -> int:
        return len(self.buffers)


@dataclass(frozen=True, slots=True)
class RecoveryReport:
    """What :meth:`MessageStore.start` found and repaired.

    ``clean_shutdown`` is true when no ``abort`` file was left behind. ``cut_offset`` is the
    commit-log offset where a torn or corrupt tail was cut (None when nothing was cut),
    ``cut_reason`` says why and ``cut_bytes`` how many non-zero bytes past it were discarded;
    ``segments_removed`` names segment files deleted because they lay past the cut.
    """

    clean_shutdown: bool = True
    checkpoint_found: bool = False
    scan_start_offset: int = 0
    commit_log_min_offset: int = 0
    commit_log_max_offset: int = 0
    records_scanned: int = 0
    cut_offset: int | None = None
    cut_reason: str | None = None
    cut_bytes: int = 0
    segments_removed: tuple[str, ...] = ()
    consume_queue_entries_dropped: int = 0
    consume_queue_entries_rebuilt: int = 0
    consume_queue_gaps: int = 0
    index_entries_rebuilt: int = 0

    @property
    def cut(self) -> bool:
        return self.cut_offset is not None


@dataclass(frozen=True, slots=True)
class StoreStats:
    """Counters and gauges for the broker's runtime info."""

    put_message_count: int
    put_message_bytes: int
    put_failure_count: int
    commit_log_min_offset: int
    commit_log_max_offset: int
    commit_log_flushed_offset: int
    disk_used_ratio_percent: float
    topic_count: int
    queue_count: int


ArrivalListener = Callable[[str, int, int, int], object]
"""``(topic, queue_id, max_offset, tags_code)``: called on the loop once a message is readable
(what it returns is ignored: a bound method that returns a count may be registered as is)."""


class MessageStore(Protocol):
    """What the broker calls. Implementations: FileMessageStore, MemoryMessageStore."""

    async def start(self) -> RecoveryReport:
        """Open (recovering after a crash) and start background loops.

        Raises:
            StoreError: the directory cannot be opened or its files do not fit together.
        """
        ...

    async def shutdown(self) -> None:
        """Flush everything, write the checkpoint, remove ``abort``; puts then answer
        SERVICE_NOT_AVAILABLE and reads find nothing."""
        ...

    async def put_message(self, request: PutRequest) -> PutResult:
        """Store one message. Never raises for bad input or disk trouble: see PutStatus."""
        ...

    @property
    def puts_at_once(self) -> bool:
        """Whether :meth:`put_message_at_once` stores (True) or returns None (SYNC flush)."""
        ...

    def put_message_at_once(self, request: PutRequest) -> PutResult | None:
        """Store one message as :meth:`put_message` would when that needs no wait (ASYNC
        flush): the same record, the same result, without a coroutine (the broker's send fast
        path). None, having stored nothing, when the put would wait (SYNC flush)."""
        ...

    async def put_messages(self, request: BatchPutRequest) -> PutResult:
        """Store a batch as consecutive records (all or nothing). Never raises: see PutStatus."""
        ...

    def put_message_then(
        self, request: PutRequest, done: Callable[[PutResult], None]
    ) -> PutResult | None:
        """:meth:`put_message` appending now, without a coroutine: the result at once, or None
        and ``done(result)`` later, as :meth:`put_messages_then` answers a batch."""
        ...

    def put_messages_then(
        self, request: BatchPutRequest, done: Callable[[PutResult], None]
    ) -> PutResult | None:
        """Store a batch as :meth:`put_messages` would, appending it now, without a coroutine:
        the result at once when nothing is to be waited for (ASYNC flush, a refusal, or already
        durable); else None, and ``done(result)`` is called on the loop once the SYNC group
        commit round covering the batch completed (FLUSH_DISK_TIMEOUT when it did not in time)
        — the same result :meth:`put_messages` returns, never before the records are durable."""
        ...

    async def put_message_list(
        self, requests: Sequence[PutRequest], *, wait_flushed: bool = True
    ) -> list[PutResult | None]:
        """Store each request as :meth:`put_message` would, in order, sharing one flush wait
        (under SYNC_FLUSH one group commit covers them all). Appending stops at the first
        refusal that is not the message's own fault (anything but MESSAGE_ILLEGAL and
        PROPERTIES_SIZE_EXCEEDED): the requests after it are not tried and get None, so a
        stored message never follows one that may be tried again. Never raises.

        ``wait_flushed=False``: answer once appended; under SYNC_FLUSH a group-commit round is
        started for them but not awaited (for callers that track durability themselves from
        the flushed offset, as the delivery ledgers do)."""
        ...

    def get_message(
        self,
        topic: str,
        queue_id: int,
        queue_offset: int,
        max_count: int,
        max_bytes: int,
        tag_codes: frozenset[int] | None = None,
    ) -> GetResult:
        """Read up to ``max_count`` records from ``queue_offset`` whose tags code is in
        ``tag_codes`` (None: all), at most ``max_bytes`` (the first record always fits).
        Scans at most max(PULL_SCAN_MIN_BYTES, max_count * 20) bytes of consume queue."""
        ...

    def max_offset(self, topic: str, queue_id: int) -> int:
        """Exclusive: the next queue offset to be written; 0 if the queue does not exist."""
        ...

    def min_offset(self, topic: str, queue_id: int) -> int:
        """Smallest queue offset still readable; 0 if the queue does not exist."""
        ...

    def offset_for_timestamp(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """First queue offset whose store time is at or after ``timestamp_ms``: min offset when
        the timestamp precedes everything, max offset when it follows everything; 0 if the queue
        does not exist."""
        ...

    def earliest_store_time(self, topic: str, queue_id: int) -> int:
        """Store time (ms) of the message at min offset; -1 when none."""
        ...

    def store_time_at(self, topic: str, queue_id: int, queue_offset: int) -> int:
        """Store time (ms) of the message at ``queue_offset``; -1 when none."""
        ...

    def read_record(self, commit_log_offset: int) -> memoryview | None:
        """The whole record starting at ``commit_log_offset``; None if there is none."""
        ...

    def query_by_key(
        self,
        topic: str,
        key: str,
        max_count: int,
        begin_ms: int,
        end_ms: int,
        *,
        unique: bool = False,
    ) -> list[memoryview]:
        """Records of ``topic`` whose KEYS hold ``key`` (``unique``: whose UNIQ_KEY is ``key``),
        stored within [begin_ms, end_ms], newest first, at most
        min(max_count, INDEX_QUERY_MAX_MESSAGES)."""
        ...

    def consume_queue_entries(
        self, topic: str, queue_id: int, from_offset: int, count: int
    ) -> list[tuple[int, int, int]]:
        """``(commit_log_offset, size, tags_code)`` of up to ``count`` entries from
        ``from_offset`` (clamped to [min, max))."""
        ...

    def delete_topic(self, topic: str) -> None:
        """Forget every consume queue of ``topic`` (the commit log keeps its records)."""
        ...

    def prepare_queues(self, topic: str, queue_count: int) -> None:
        """Warm start for a topic just created: make the files of its queues ``0 ..
        queue_count - 1`` that have none yet in the background, so their first puts do not
        (a store without files: nothing to do). Returns at once; never fails a later put."""
        ...

    def topics_and_queues(self) -> dict[str, list[int]]:
        """Every topic with a consume queue, with its sorted queue ids."""
        ...

    def add_arrival_listener(self, listener: ArrivalListener) -> None:
        """Call ``listener`` after every put that adds consume-queue entries, once the whole
        put is readable: once per distinct tags code of its records (a batch), in order.
        Inside :meth:`notifications_held` (and a put_message_list), at the block's end."""
        ...

    def notifications_held(self) -> AbstractContextManager[None]:
        """A block whose puts tell the arrival listeners together when it ends: once per
        queue and distinct tags code (in the order the queues were first written, with the
        queue's max offset then), not once per message. For a caller that stores many
        messages in one go on the loop (the frames of one read); blocks may nest."""
        ...

    def stats(self) -> StoreStats: ...

    async def run_retention_once(self, *, manual: bool = False) -> int:
        """Apply retention now (age at deleteWhen, disk pressure at once; ``manual``: age
        whatever the hour, an admin's DELETE_EXPIRED_COMMITLOG); returns the number of
        commit-log segments deleted."""
        ...
