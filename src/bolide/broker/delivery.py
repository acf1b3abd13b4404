"""What the delay-level service (schedule.py) and the timer service (timer.py) share.

* :func:`delivery_request` turns a waiting record (in SCHEDULE_TOPIC_XXXX or the timer topic)
  into the put that stores it on its real topic and queue.
* Every delivered message carries the property ``BOLIDE_DELIVERED_FROM`` naming where it waited
  (``L<level>:<queue offset>`` or ``T:<queue offset>``). The commit log is then the truth about
  what was delivered: after a restart, :func:`scan_delivery_markers` reads the records written
  since the last durable progress and moves the progress past every delivery it finds, so a
  message is delivered exactly once even after ``kill -9``.
* :func:`markers_since` scans from the progress a service loaded; :func:`put_round` stores a
  round of due deliveries and settles each; :func:`flush_store_logged` flushes the store before
  the progress file is written at stop.
* :class:`DurableLedger` keeps the progress that may be persisted: a delivery counts only once
  the commit log is flushed past its record. Persisting more (a delivery whose record a power
  loss could still take away) would lose that message; persisting less only means a longer
  scan at the next start.
"""

from __future__ import annotations

import collections
import enum
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final, Generic, TypeVar

from bolide.base import limits
from bolide.base.errors import ProtocolError, StoreError
from bolide.broker.held_messages import put_copy
from bolide.protocol.message import PropertyKey
from bolide.protocol.record import (
    NAME_VALUE_SEPARATOR,
    decode_properties,
    decode_record,
    encode_properties,
    read_record_header,
)
from bolide.store.api import MessageStore, PutRequest, PutResult, PutStatus

__all__ = [
    "DELIVERED_FROM",
    "TIMER_OUT_MS",
    "DeliveryMarker",
    "DurableLedger",
    "Settlement",
    "delivery_request",
    "flush_store_logged",
    "level_marker",
    "markers_since",
    "parse_marker",
    "put_round",
    "read_delivery",
    "scan_delivery_markers",
    "settle",
    "timer_marker",
]

_log = logging.getLogger("bolide.broker.delivery")

DELIVERED_FROM: Final = "BOLIDE_DELIVERED_FROM"
"""Property of a delivered message: where it waited. Producers may not set it (the send path
drops it) and send-back removes it, so only deliveries carry it."""
TIMER_OUT_MS: Final = "TIMER_OUT_MS"
"""Property of a timer message: its delivery time, epoch ms (as RocketMQ 5 names it)."""
_MARKER_BYTES = DELIVERED_FROM.encode() + NAME_VALUE_SEPARATOR.encode()
_LEVEL_PREFIX = "L"
_TIMER_PREFIX = "T"

T = TypeVar("T")

# A put that can never succeed (the record grew past a limit): retrying would block delivery.
_PERMANENT_FAILURES = frozenset({PutStatus.MESSAGE_ILLEGAL, PutStatus.PROPERTIES_SIZE_EXCEEDED})
_STORED = frozenset({PutStatus.PUT_OK, PutStatus.FLUSH_DISK_TIMEOUT})


def level_marker(level: int, queue_offset: int) -> str:
    """The marker of the message at ``queue_offset`` of delay level ``level``."""
    return f"{_LEVEL_PREFIX}{level}:{queue_offset}"


def timer_marker(queue_offset: int) -> str:
    """The marker of the message at ``queue_offset`` of the timer topic."""
    return f"{_TIMER_PREFIX}:{queue_offset}"


@dataclass(frozen=True, slots=True)
class DeliveryMarker:
    """A delivery found in the commit log. ``level`` is 0 for a timer message, whose
    ``deliver_ms`` (its TIMER_OUT_MS) orders it among the timer deliveries."""

    level: int
    queue_offset: int
    deliver_ms: int = 0


def parse_marker(text: str, properties: dict[str, str]) -> DeliveryMarker | None:
    """The marker ``text`` as a :class:`DeliveryMarker`; None when it is malformed."""
    kind, separator, offset_text = text.partition(":")
    if not separator or not offset_text.isdigit():
        return None
    if kind == _TIMER_PREFIX:
        deliver_text = properties.get(TIMER_OUT_MS, "")
        if not deliver_text.isdigit():
            return None
        return DeliveryMarker(0, int(offset_text), int(deliver_text))
    level_text = kind.removeprefix(_LEVEL_PREFIX)
    if kind.startswith(_LEVEL_PREFIX) and level_text.isdigit() and int(level_text) > 0:
        return DeliveryMarker(int(level_text), int(offset_text))
    return None


def delivery_request(record: memoryview, *, drop: tuple[str, ...], marker: str) -> PutRequest:
    """The put that delivers the waiting ``record`` to its REAL_TOPIC / REAL_QID.

    Body (as stored, still compressed if it was), flag, sysFlag, born time and host and
    reconsume times are kept; the properties lose ``drop`` (DELAY, or the timer triggers),
    gain WAIT=false (RocketMQ's messageTimeup) and the delivery ``marker``. REAL_TOPIC and
    REAL_QID stay, as in RocketMQ. The store recomputes the tags code from TAGS.

    Raises:
        ProtocolError: the record is malformed or lacks a usable REAL_TOPIC / REAL_QID.
    """
    message, _ = decode_record(record, decompress=False)
    properties = message.properties
    topic = properties.get(PropertyKey.REAL_TOPIC, "")
    queue_text = properties.get(PropertyKey.REAL_QID, "")
    if not topic or not queue_text.isdigit():
        raise ProtocolError(
            f"waiting record at {message.commit_log_offset} has no REAL_TOPIC/REAL_QID"
        )
    for name in drop:
        properties.pop(name, None)
    properties[PropertyKey.WAIT] = "false"
    properties[DELIVERED_FROM] = marker
    return put_copy(message, topic, int(queue_text), encode_properties(properties))


def read_delivery(
    store: MessageStore,
    commit_log_offset: int,
    size: int,
    *,
    drop: tuple[str, ...],
    marker: str,
    log: logging.Logger,
    entry: str,
) -> PutRequest | None:
    """The :func:`delivery_request` of the waiting record of ``size`` bytes at
    ``commit_log_offset``; None, logged on ``log`` naming the ``entry``, when the store no
    longer holds it (retention) or it cannot be delivered."""
    record = store.read_record(commit_log_offset)
    if record is None or len(record) != size:
        log.error("%s: record at %d is gone (retention?); skipped", entry, commit_log_offset)
        return None
    try:
        return delivery_request(record, drop=drop, marker=marker)
    except ProtocolError as error:
        log.error("%s: dropped: %s", entry, error)
        return None


class Settlement(enum.Enum):
    """What a due entry's put came to (:func:`settle`)."""

    STORED = "STORED"
    """Delivered: the ledger counts it once the commit log is flushed past its record."""
    PASSED = "PASSED"
    """Done with, nothing written: undeliverable, or a put that can never succeed (dropped)."""
    RETRY = "RETRY"
    """The put failed for now: the entry is to be retried later; the ledger did not move."""


def settle(
    ledger: DurableLedger[T],
    progress: T,
    result: PutResult | None,
    *,
    log: logging.Logger,
    entry: str,
) -> Settlement:
    """Move ``ledger`` to ``progress`` by the put ``result`` of a due ``entry`` (None: it was
    undeliverable, skipped), unless the put is to be retried; a drop or a retry is logged on
    ``log`` naming the ``entry``."""
    if result is None:
        ledger.advanced(progress)
        return Settlement.PASSED
    if result.status in _STORED:
        ledger.delivered(progress, result.commit_log_offset + result.wrote_bytes)
        return Settlement.STORED
    if result.status in _PERMANENT_FAILURES:
        log.error("%s: %s (%s); message dropped", entry, result.status.name, result.remark)
        ledger.advanced(progress)
        return Settlement.PASSED
    log.warning("%s: put failed (%s %s); retrying later", entry, result.status.name,
                result.remark)  # fmt: skip
    return Settlement.RETRY


async def put_round(
    store: MessageStore,
    requests: list[PutRequest | None],
    settle: Callable[[int, PutResult | None], bool],
) -> int:
    """Store the due ``requests`` (None: undeliverable, skipped) in one put round and settle
    each in order with ``settle(index, result)`` (result None: skipped), which says whether
    it is done with. Returns how many, from the first, are done with (stored, or dropped);
    the rest are to be retried later (the store stopped appending at a refusal: nothing
    after it stored; or ``settle`` asked for a retry)."""
    # Not waiting for the fsync: the ledger counts a delivery once the flushed offset
    # passes its record, and the next due messages go in without waiting for the disk.
    puts = [request for request in requests if request is not None]
    results = iter(await store.put_message_list(puts, wait_flushed=False))
    for index, request in enumerate(requests):
        result = None if request is None else next(results)
        if request is not None and result is None:
            return index  # not tried: a refusal before it
        if not settle(index, result):
            return index
    return len(requests)


async def flush_store_logged(
    flush_store: Callable[[], Awaitable[None]] | None, file_name: str
) -> None:
    """Flush the store (when it has a flush) before ``file_name`` is written at stop, so the
    final progress counts every delivery; a failure is logged (the file is written anyway)."""
    if flush_store is None:
        return
    try:
        await flush_store()
    except (OSError, StoreError) as error:
        _log.error("store not flushed before writing %s: %s", file_name, error)


class DurableLedger(Generic[T]):
    """Progress values in delivery order, each with the commit-log offset where the record of
    that delivery ends; :meth:`durable` answers the newest value whose record is flushed.

    Holds at most ``max_entries`` pending values: past that, the newest entry absorbs new
    deliveries (its value becomes durable a little later than it could; never earlier).
    """

    def __init__(self, initial: T, *, max_entries: int = 1_024) -> None:
        self._durable = initial
        self._pending: collections.deque[tuple[T, int]] = collections.deque()
        self._last_end_offset = 0
        self._max_entries = max_entries

    def delivered(self, value: T, commit_log_end_offset: int) -> None:
        """Record that progress reached ``value`` with a record ending at the given offset."""
        end_offset = max(commit_log_end_offset, self._last_end_offset)
        self._last_end_offset = end_offset
        if len(self._pending) >= self._max_entries:
            self._pending.pop()
        self._pending.append((value, end_offset))

    def advanced(self, value: T) -> None:
        """Progress moved without writing (a record skipped): durable with the previous one."""
        self.delivered(value, self._last_end_offset)

    def durable(self, flushed_offset: int) -> T:
        """The newest value whose record ends at or before ``flushed_offset``."""
        pending = self._pending
        while pending and pending[0][1] <= flushed_offset:
            self._durable = pending.popleft()[0]
        return self._durable

    def reset(self, value: T) -> None:
        """Forget pending values: ``value`` is durable (loaded from disk, or found by a scan)."""
        self._pending.clear()
        self._durable = value


def scan_delivery_markers(
    store: MessageStore,
    from_offset: int,
    end_offset: int,
    segment_bytes: int,
    *,
    max_bytes: int = limits.DELIVERY_MARKER_SCAN_MAX_BYTES,
) -> list[DeliveryMarker]:
    """Every delivery marker in the commit log between ``from_offset`` and ``end_offset``.

    ``from_offset`` must be a record boundary (a flushed offset is one). At a segment's blank
    tail the scan moves to the next segment (segments start at multiples of
    ``segment_bytes``). A range longer than ``max_bytes`` is not scanned (logged; delivery is
    then at least once for that window). Reads mapped memory; call it before serving.
    """
    if end_offset - from_offset > max_bytes:
        _log.warning(
            "not scanning %d bytes of commit log for deliveries (limit %d): messages delivered "
            "just before the last stop may be delivered again",
            end_offset - from_offset,
            max_bytes,
        )
        return []
    markers: list[DeliveryMarker] = []
    offset = from_offset
    while offset < end_offset:
        record = store.read_record(offset)
        if record is None:
            offset = (offset // segment_bytes + 1) * segment_bytes
            continue
        try:
            header = read_record_header(record)
        except ProtocolError:
            break  # a record the store returned but cannot be read: stop, scan no further
        start = header.properties_offset
        properties_bytes = bytes(record[start : start + header.properties_length])
        if _MARKER_BYTES in properties_bytes:
            marker = _marker_of(properties_bytes)
            if marker is not None:
                markers.append(marker)
        offset += header.total_size
    return markers


def markers_since(
    store: MessageStore, durable_offset: int, segment_bytes: int
) -> list[DeliveryMarker]:
    """The delivery markers of the records written since ``durable_offset``, the commit-log
    offset a loaded progress file counted (negative: no file loaded, nothing to scan)."""
    if durable_offset < 0:
        return []
    stats = store.stats()
    start = max(durable_offset, stats.commit_log_min_offset)
    return scan_delivery_markers(store, start, stats.commit_log_max_offset, segment_bytes)


def _marker_of(properties_bytes: bytes) -> DeliveryMarker | None:
    properties = decode_properties(properties_bytes.decode("utf-8", "replace"))
    text = properties.get(DELIVERED_FROM)
    return None if text is None else parse_marker(text, properties)
