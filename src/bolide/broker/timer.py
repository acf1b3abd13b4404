"""Timer messages: delivery at any millisecond up to a maximum delay (what RocketMQ 5 added).

A producer sets one of (read in this order, as RocketMQ 5 does):

* ``TIMER_DELAY_SEC`` — seconds from now;
* ``TIMER_DELAY_MS`` — milliseconds from now;
* ``TIMER_DELIVER_MS`` — an absolute epoch time in ms.

A delivery time more than ``max_delay_ms`` (timerMaxDelaySec, 3 days by default) ahead is
refused (MESSAGE_ILLEGAL); one already past is delivered at once, as an ordinary message. A
DELAY level wins over timer properties (they are then dropped), as in RocketMQ 5. Otherwise
:meth:`TimerMessageService.plan` re-targets the message to the timer topic
``rmq_sys_wheel_timer`` queue 0 with REAL_TOPIC / REAL_QID and ``TIMER_OUT_MS`` = its delivery
time.

Each message arriving there gets an entry in the store's timer log
(:mod:`bolide.store.timer_log`: delivery time, commit-log offset, size, at the same index as
its consume-queue entry). Entries due within the load window (10 min) sit in a heap ordered by
(delivery time, index); one :class:`~bolide.base.service.Service` sleeps until the first is
due, re-puts it on its real topic (without the timer properties), and so on, in time order.
Later entries stay on disk until a rescan of the log moves the window on.

Progress is the key (delivery time, index) of the last delivery: everything at or below it is
delivered, since delivery follows key order. It is written to
``<store root>/config/timerProgress.json`` every 10 s and at shutdown::

    {"deliveredDeliverMs": 1700000001234, "deliveredQueueOffset": 17,
     "durableCommitLogOffset": 1048576}

counting only deliveries whose record the commit log has flushed; at start the commit log
after ``durableCommitLogOffset`` is scanned for delivery markers (bolide.broker.delivery), so
each timer message is delivered exactly once across restarts, ``kill -9`` included.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, Final

import orjson

from bolide.base import limits
from bolide.base.clock import Clock
from bolide.base.errors import (
    BolideError,
    InvalidMessageError,
    ProtocolError,
    StoreIOError,
)
from bolide.base.fileio import read_with_backup
from bolide.base.service import Service
from bolide.broker.config import ConfigFileWriter
from bolide.broker.delivery import (
    TIMER_OUT_MS,
    DurableLedger,
    Settlement,
    flush_store_logged,
    markers_since,
    put_round,
    read_delivery,
    settle,
    timer_marker,
)
from bolide.protocol.message import PropertyKey
from bolide.protocol.record import decode_properties, read_record_header
from bolide.protocol.system_topics import TIMER_TOPIC
from bolide.store.api import MessageStore, PutRequest, PutResult
from bolide.store.config_files import parse_fastjson
from bolide.store.timer_log import TimerEntry, TimerLog

__all__ = [
    "TIMER_OUT_MS",
    "TIMER_PROGRESS_FILE_NAME",
    "TIMER_TOPIC",
    "TIMER_TRIGGER_PROPERTIES",
    "TimerMessageService",
    "TimerPropertyError",
    "timer_deliver_ms",
]

_log = logging.getLogger("bolide.broker.timer")

TIMER_PROGRESS_FILE_NAME: Final = "timerProgress.json"
TIMER_TRIGGER_PROPERTIES: Final = (
    PropertyKey.TIMER_DELAY_SEC,
    PropertyKey.TIMER_DELAY_MS,
    PropertyKey.TIMER_DELIVER_MS,
)
"""The properties that ask for a delivery time; a delivered message no longer has them."""

_REINDEX_BATCH_ENTRIES = 4_096
TIMER_DEL_UNIQKEY: Final = "TIMER_DEL_UNIQKEY"
"""Property of a recall marker: the UNIQ_KEY of the timer message it cancels (RocketMQ 5)."""

_NOTHING_DELIVERED: tuple[int, int] = (0, -1)

_HeapItem = tuple[int, int, int, int]
"""(deliver_ms, queue offset, commit-log offset, size)."""


class TimerPropertyError(InvalidMessageError):
    """A timer property is not a whole number, or asks for a time beyond the maximum delay."""


def timer_deliver_ms(properties: Mapping[str, str], now_ms: int, max_delay_ms: int) -> int | None:
    """The delivery time (epoch ms) the timer properties ask for; None without any.

    Raises:
        TimerPropertyError: a value is not an integer, a delay is negative, or the time is
            more than ``max_delay_ms`` after ``now_ms``.
    """
    for name, scale, relative in (
        (PropertyKey.TIMER_DELAY_SEC, 1_000, True),
        (PropertyKey.TIMER_DELAY_MS, 1, True),
        (PropertyKey.TIMER_DELIVER_MS, 1, False),
    ):
        text = properties.get(name)
        if text is None:
            continue
        try:
            value = int(text)
        except ValueError as error:
            raise TimerPropertyError(f"timer property {name}={text!r} is not a number") from error
        if relative and value < 0:
            raise TimerPropertyError(f"timer property {name}={text!r} is negative")
        deliver_ms = now_ms + value * scale if relative else value
        if deliver_ms - now_ms > max_delay_ms:
            raise TimerPropertyError(
                f"timer property {name}={text!r} asks for delivery more than "
                f"{max_delay_ms // 1000} s ahead (timerMaxDelaySec)"
            )
        return deliver_ms
    return None


class _ProgressFile:
    """timerProgress.json as a versioned document for :class:`ConfigFileWriter`."""

    def __init__(self) -> None:
        self.delivered: tuple[int, int] = _NOTHING_DELIVERED
        self.durable_commit_log_offset = 0
        self.version = 0

    def update(self, delivered: tuple[int, int], durable_commit_log_offset: int) -> None:
        if (delivered, durable_commit_log_offset) != (
            self.delivered,
            self.durable_commit_log_offset,
        ):
            self.delivered = delivered
            self.durable_commit_log_offset = durable_commit_log_offset
            self.version += 1

    def encode(self) -> bytes:
        return orjson.dumps(
            {
                "deliveredDeliverMs": self.delivered[0],
                "deliveredQueueOffset": self.delivered[1],
                "durableCommitLogOffset": self.durable_commit_log_offset,
            }
        )


def _decode_progress(raw: bytes) -> tuple[tuple[int, int], int]:
    document: Any = parse_fastjson(raw)
    try:
        delivered = (int(document["deliveredDeliverMs"]), int(document["deliveredQueueOffset"]))
        return delivered, int(document["durableCommitLogOffset"])
    except (KeyError, TypeError) as error:
        raise ValueError(f"timerProgress.json: {error}") from error


class TimerMessageService:
    """Delivers timer messages when due; see the module docstring.

    ``log`` is the store's timer log (opened by :meth:`load`); ``progress_path`` is
    timerProgress.json; ``segment_bytes`` the commit-log segment size; ``flush_store`` (the
    store's flush, when it has one) runs at stop so the final progress counts every delivery.

    Lifecycle: :meth:`load`, then :meth:`start` after the store started, :meth:`stop` before
    it stops. Loop thread only.
    """

    def __init__(
        self,
        store: MessageStore,
        log: TimerLog,
        progress_path: Path,
        clock: Clock,
        *,
        segment_bytes: int,
        max_delay_ms: int = limits.TIMER_MAX_DELAY_MS,
        load_window_ms: int = limits.TIMER_LOAD_WINDOW_MS,
        persist_interval_ms: int = limits.DELAY_OFFSET_FLUSH_INTERVAL_MS,
        batch_max_messages: int = limits.SCHEDULE_DELIVERY_BATCH_MAX_MESSAGES,
        retry_after_failure_ms: int = limits.SCHEDULE_RETRY_AFTER_FAILURE_MS,
        flush_store: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._store = store
        self._log = log
        self._clock = clock
        self._segment_bytes = segment_bytes
        self.max_delay_ms = max_delay_ms
        self._window_ms = load_window_ms
        self._persist_interval_ms = persist_interval_ms
        self._batch_max_messages = batch_max_messages
        self._retry_after_failure_ms = retry_after_failure_ms
        self._flush_store = flush_store
        self._heap: list[_HeapItem] = []
        self._horizon_ms = 0
        self._delivered: tuple[int, int] = _NOTHING_DELIVERED
        self._ledger: DurableLedger[tuple[int, int]] = DurableLedger(_NOTHING_DELIVERED)
        self._low_durable_index = 0
        self._next_wake_ms = 0
        self._file = _ProgressFile()
        self._writer = ConfigFileWriter(progress_path, self._file)
        self._file.version += 1  # written at start even when nothing changed: a scan origin
        self._loaded_durable_offset = -1
        self._deliverer: Service | None = None
        self._persister: Service | None = None
        self._listening = False
        self.delivered_count = 0
        """Messages put back on their real topic since start."""
        self._recalled: dict[str, int] = {}
        """UNIQ_KEY -> delivery time of timer messages recalled (their recall marker came due,
        the message itself not yet)."""

    # --- planning (send path) -------------------------------------------------------------------

    def plan(self, properties: dict[str, str], topic: str, queue_id: int) -> tuple[str, int]:
        """Where a message with ``properties`` bound for ``topic``/``queue_id`` is stored.

        Without timer properties, or with a time already past (the triggers are then dropped),
        that is ``(topic, queue_id)``. Otherwise the message goes to ``(TIMER_TOPIC, 0)`` and
        ``properties`` gain REAL_TOPIC, REAL_QID and TIMER_OUT_MS. Only for messages without a
        DELAY level.

        Raises:
            TimerPropertyError: see :func:`timer_deliver_ms`.
        """
        now_ms = self._clock.now_ms()
        deliver_ms = timer_deliver_ms(properties, now_ms, self.max_delay_ms)
        if deliver_ms is None:
            return topic, queue_id
        if deliver_ms <= now_ms:
            for name in TIMER_TRIGGER_PROPERTIES:
                properties.pop(name, None)
            return topic, queue_id
        # Never at or below what was delivered (only a wall clock set back allows it): the
        # progress key would count the message as delivered.
        deliver_ms = max(deliver_ms, self._delivered[0] + 1)
        properties[PropertyKey.REAL_TOPIC] = topic
        properties[PropertyKey.REAL_QID] = str(queue_id)
        properties[TIMER_OUT_MS] = str(deliver_ms)
        return TIMER_TOPIC, 0

    # --- lifecycle ------------------------------------------------------------------------------

    @property
    def pending_in_memory(self) -> int:
        """Timer messages due within the load window, not yet delivered."""
        return len(self._heap)

    @property
    def delivered_key(self) -> tuple[int, int]:
        """(delivery time, queue offset) of the last delivery; (0, -1) before the first."""
        return self._delivered

    def load(self) -> None:
        """Open the timer log and read timerProgress.json (blocking).

        Raises:
            StoreIOError: the timer log cannot be opened.
            CorruptDataError: timerProgress.json and its .bak both fail to parse.
        """
        self._log.open()
        loaded = read_with_backup(self._writer.path, _decode_progress)
        if loaded is not None:
            self._delivered, self._loaded_durable_offset = loaded
            self._ledger.reset(self._delivered)
            self._file.update(self._delivered, self._loaded_durable_offset)
            self._writer.mark_written()

    async def start(self) -> None:
        """Reconcile the log with the timer queue, catch up from the commit log, load the
        window, then start delivering."""
        self._reconcile_log()
        self._recover_from_commit_log()
        now_ms = self._clock.now_ms()
        self._horizon_ms = now_ms + self._window_ms
        self._rescan(self._log.start_index, self._log.end_index, -1, self._horizon_ms)
        self._deliverer = Service(
            "timer-delivery",
            self._step,
            interval_ms=self._window_ms // 2,
            clock=self._clock,
            initial_delay_ms=0,
        )
        self._persister = Service(
            "timer-persist",
            self._persist_logged,
            interval_ms=self._persist_interval_ms,
            clock=self._clock,
        )
        if not self._listening:
            self._store.add_arrival_listener(self._on_arrival)
            self._listening = True
        self._deliverer.start()
        self._persister.start()
        await self._persist_logged()

    async def stop(self) -> None:
        """Stop delivering (a delivery in progress finishes), write the progress, sync and
        close the log."""
        services = [service for service in (self._deliverer, self._persister) if service]
        await asyncio.gather(*(service.stop() for service in services))
        self._deliverer = self._persister = None
        await flush_store_logged(self._flush_store, "timerProgress.json")
        await self._persist_logged()
        self._log.close()

    async def persist(self) -> None:
        """Write timerProgress.json with the progress the flushed commit log backs and sync the
        timer log (its files holding only delivered entries go at the next window rescan).

        Raises:
            OSError, StoreIOError: a file could not be written.
        """
        flushed = self._store.stats().commit_log_flushed_offset
        self._file.update(self._ledger.durable(flushed), flushed)
        await self._writer.flush()
        await asyncio.to_thread(self._log.sync)

    async def _persist_logged(self) -> None:
        try:
            await self.persist()
        except (OSError, StoreIOError) as error:
            _log.error("timer progress not written (the previous one stays): %s", error)

    # --- the log against the queue --------------------------------------------------------------

    def _reconcile_log(self) -> None:
        """Make log entry i describe queue entry i for every i the queue has."""
        store, log = self._store, self._log
        queue_min = store.min_offset(TIMER_TOPIC, 0)
        queue_max = store.max_offset(TIMER_TOPIC, 0)
        if log.end_index > queue_max:
            _log.warning("timer log ahead of its queue (%d > %d): cut", log.end_index, queue_max)
            log.truncate(queue_max)
        if len(log) == 0 or log.end_index < queue_min:
            log.reset(queue_min)
        index = max(log.start_index, queue_min)
        while index < log.end_index:
            entries = log.read(index, _REINDEX_BATCH_ENTRIES)
            queue = store.consume_queue_entries(TIMER_TOPIC, 0, index, len(entries))
            mismatch = next(
                (
                    position
                    for position, (entry, (offset, size, _)) in enumerate(
                        zip(entries, queue, strict=False)
                    )
                    if entry.commit_log_offset != offset or entry.size != size
                ),
                None,
            )
            if mismatch is not None or not queue:
                cut = index + (mismatch or 0)
                _log.warning("timer log differs from its queue at %d: re-indexing", cut)
                log.truncate(cut)
                break
            index += len(entries)
        self._index_new_entries(queue_max)

    def _index_new_entries(self, queue_max: int) -> list[TimerEntry]:
        """Append log entries for queue entries [log end, queue_max) read from their records."""
        added: list[TimerEntry] = []
        while self._log.end_index < queue_max:
            start = self._log.end_index
            queue = self._store.consume_queue_entries(
                TIMER_TOPIC, 0, start, min(queue_max - start, _REINDEX_BATCH_ENTRIES)
            )
            if not queue:
                break
            for commit_log_offset, size, _ in queue:
                entry = TimerEntry(self._deliver_ms_of(commit_log_offset), commit_log_offset, size)
                self._log.append(entry)
                added.append(entry)
        return added

    def _deliver_ms_of(self, commit_log_offset: int) -> int:
        """TIMER_OUT_MS of the record; 1 (due at once) when it cannot be read."""
        record = self._store.read_record(commit_log_offset)
        if record is not None:
            try:
                header = read_record_header(record)
                start = header.properties_offset
                text = str(record[start : start + header.properties_length], "utf-8")
                value = decode_properties(text).get(TIMER_OUT_MS, "")
                if value.isdigit() and int(value) > 0:
                    return int(value)
            except (ProtocolError, UnicodeDecodeError):
                pass
        _log.error("timer record at %d has no readable TIMER_OUT_MS: due now", commit_log_offset)
        return 1

    def _recover_from_commit_log(self) -> None:
        markers = markers_since(self._store, self._loaded_durable_offset, self._segment_bytes)
        found = [(m.deliver_ms, m.queue_offset) for m in markers if m.level == 0]
        if found and max(found) > self._delivered:
            self._delivered = max(found)
            self._ledger.reset(self._delivered)
            _log.info("timer: deliveries found up to %s past the persisted progress", found[-1])

    def _rescan(self, start: int, end: int, low_ms: int, high_ms: int) -> None:
        """Load the undelivered entries of [start, end) due in [low_ms, high_ms) into the
        heap and note the first index not durably delivered (blocking)."""
        items, self._low_durable_index = _scan_log(
            self._log, start, end, low_ms, high_ms, self._delivered, self._ledger.durable(-1)
        )
        for item in items:
            heapq.heappush(self._heap, item)

    # --- delivery -------------------------------------------------------------------------------

    def _on_arrival(self, topic: str, queue_id: int, max_offset: int, tags_code: int) -> None:
        del tags_code
        if topic != TIMER_TOPIC or queue_id != 0 or self._deliverer is None:
            return
        first = self._log.end_index
        try:
            added = self._index_new_entries(max_offset)
        except StoreIOError:
            _log.exception("timer log append failed; the entry is re-indexed at next start")
            return
        wake = False
        for index, entry in enumerate(added, start=first):
            if entry.deliver_ms < self._horizon_ms:
                heapq.heappush(self._heap, (entry.deliver_ms, index, *entry[1:]))
                wake |= entry.deliver_ms < self._next_wake_ms
        if wake:
            self._deliverer.wakeup()

    async def _step(self) -> int:
        try:
            return await self._deliver_due()
        except (BolideError, OSError):  # a failed invariant() is a bug: the service crashes
            _log.exception("timer delivery failed; retrying later")
            return self._retry_after_failure_ms

    async def _deliver_due(self) -> int:
        """Deliver what is due, in key order; returns ms until the next step."""
        now_ms = self._clock.now_ms()
        if now_ms >= self._horizon_ms - self._window_ms // 2:
            await self._advance_window(now_ms)
        heap = self._heap
        due: list[_HeapItem] = []
        while heap and heap[0][0] <= now_ms and len(due) < self._batch_max_messages:
            due.append(heapq.heappop(heap))
        if due:
            settled = await self._deliver_items(due)
            if settled < len(due):
                for item in due[settled:]:
                    heapq.heappush(heap, item)
                return self._retry_after_failure_ms
            if len(due) == self._batch_max_messages:
                return 0
            now_ms = self._clock.now_ms()
        wake_ms = self._horizon_ms - self._window_ms // 2
        if heap:
            wake_ms = min(wake_ms, heap[0][0])
        self._next_wake_ms = wake_ms
        return max(0, wake_ms - now_ms)

    async def _advance_window(self, now_ms: int) -> None:
        old_horizon_ms, self._horizon_ms = self._horizon_ms, now_ms + self._window_ms
        # Arrivals during the scan already use the new horizon; the scan covers the log as it
        # was when it started. No delivery runs meanwhile (this step awaits the scan).
        items, self._low_durable_index = await asyncio.to_thread(
            _scan_log,
            self._log,
            self._log.start_index,
            self._log.end_index,
            old_horizon_ms,
            self._horizon_ms,
            self._delivered,
            self._ledger.durable(-1),
        )
        for item in items:
            heapq.heappush(self._heap, item)
        # Here, not in a worker thread's way: files whose entries are all durably delivered.
        self._log.delete_before(self._low_durable_index)

    async def _deliver_items(self, items: list[_HeapItem]) -> int:
        """Re-put the due ``items`` (in key order) in one store put round (one group commit
        under SYNC flush). Returns how many, from the first, are done with (stored, or dropped
        as undeliverable); the rest are to be retried later (the store stopped appending at a
        refusal: nothing after it was stored)."""
        requests = [self._delivery_request(item) for item in items]
        return await put_round(
            self._store, requests, lambda index, result: self._settle(items[index], result)
        )

    async def recall(self, topic: str, unique_key: str, deliver_ms: int) -> PutResult | None:
        """Cancel the timer message ``unique_key`` of ``topic`` due at ``deliver_ms`` (RocketMQ
        5's RECALL_MESSAGE): a recall marker is stored on the timer topic, due 1 ms earlier, so
        it comes due first and the message is then dropped instead of delivered. Durable as
        any timer message; the window: a crash in the millisecond between the two. Returns
        None when it is too late (due now, or already delivered), else the marker's put.
        """
        marker_ms = deliver_ms - 1
        if marker_ms <= max(self._clock.now_ms(), self._delivered[0]):
            return None
        properties = {
            TIMER_OUT_MS: str(marker_ms),
            TIMER_DEL_UNIQKEY: unique_key,
            PropertyKey.REAL_TOPIC: topic,
            PropertyKey.REAL_QID: "0",
            PropertyKey.WAIT: "false",
        }
        return await self._store.put_message(
            PutRequest(topic=TIMER_TOPIC, queue_id=0, body=b"", properties=properties)
        )

    def _recalled_now(self, request: PutRequest, queue_offset: int) -> bool:
        """Whether the due ``request`` is a recall marker (noted) or a recalled message."""
        properties = request.properties
        text = properties if isinstance(properties, str) else ""
        if isinstance(properties, str) and TIMER_DEL_UNIQKEY not in text and not self._recalled:
            return False
        parsed = decode_properties(text) if isinstance(properties, str) else dict(properties)
        unique_key = parsed.get(TIMER_DEL_UNIQKEY)
        if unique_key is not None:
            self._recalled[unique_key] = int(parsed.get(TIMER_OUT_MS, "0") or 0) + 1
            if len(self._recalled) > limits.TIMER_RECALLED_MAX_ENTRIES:
                self._recalled.pop(next(iter(self._recalled)))
            return True
        if self._recalled.pop(parsed.get(PropertyKey.UNIQ_KEY, ""), None) is not None:
            _log.info("timer message %d recalled: not delivered", queue_offset)
            return True
        return False

    def _delivery_request(self, item: _HeapItem) -> PutRequest | None:
        """The put of a due message on its real topic; None when it cannot be delivered."""
        request = self._delivery_request_of(item)
        if request is not None and self._recalled_now(request, item[1]):
            return None
        return request

    def _delivery_request_of(self, item: _HeapItem) -> PutRequest | None:
        _, queue_offset, commit_log_offset, size = item
        return read_delivery(
            self._store,
            commit_log_offset,
            size,
            drop=TIMER_TRIGGER_PROPERTIES,
            marker=timer_marker(queue_offset),
            log=_log,
            entry=f"timer message {queue_offset}",
        )

    def _settle(self, item: _HeapItem, result: PutResult | None) -> bool:
        """Move past ``item`` given its put's ``result`` (None: undeliverable, skipped). False
        when the put should be retried later."""
        deliver_ms, queue_offset, _, _ = item
        progress = max(self._delivered, (deliver_ms, queue_offset))
        settlement = settle(
            self._ledger, progress, result, log=_log, entry=f"timer message {queue_offset}"
        )
        if settlement is Settlement.RETRY:
            return False
        self._delivered = progress
        if settlement is Settlement.STORED:
            self.delivered_count += 1
        return True


def _scan_log(
    log: TimerLog,
    start: int,
    end: int,
    low_ms: int,
    high_ms: int,
    delivered: tuple[int, int],
    durable: tuple[int, int],
) -> tuple[list[_HeapItem], int]:
    """(heap items of [start, end) due in [low_ms, high_ms) and not yet delivered, the first
    index whose key is above ``durable``: files before it may be deleted)."""
    items: list[_HeapItem] = []
    low_durable = end
    index = start
    while index < end:
        entries = log.read(index, min(end - index, _REINDEX_BATCH_ENTRIES))
        if not entries:
            break
        for position, (deliver_ms, commit_log_offset, size) in enumerate(entries, start=index):
            key = (deliver_ms, position)
            if position < low_durable and key > durable:
                low_durable = position
            if key > delivered and low_ms <= deliver_ms < high_ms:
                items.append((deliver_ms, position, commit_log_offset, size))
        index += len(entries)
    return items, low_durable
