"""Delayed messages by level: SCHEDULE_TOPIC_XXXX, one delivery loop per level, delayOffset.json
(RocketMQ's delay levels and retries; docs/protocol.md §4.3).

A message sent with ``DELAY=n`` is stored in SCHEDULE_TOPIC_XXXX, queue ``n - 1`` (levels above
the highest are clamped to it), with REAL_TOPIC / REAL_QID naming where it belongs
(:func:`schedule_target`). The store writes the delivery time (store time + the level's delay)
as the consume-queue tags code. Per level, a :class:`~bolide.base.service.Service` walks its
queue in order: each entry due by now (:func:`correct_deliver_timestamp` first pulls back a
delivery time further away than the level's whole delay, e.g. after the levels were shortened)
is re-put on its real topic and queue without DELAY (:func:`~bolide.broker.delivery.
delivery_request`); the first entry not yet due decides how long the loop sleeps. A new message
wakes a caught-up level at once, so delivery is late by the loop's reaction time only. A failed
put is retried after ``SCHEDULE_RETRY_AFTER_FAILURE_MS`` from the same entry: nothing is lost.

Progress (the next queue offset per level) goes to ``delayOffset.json`` every
flushDelayOffsetInterval (10 s) and at shutdown, atomically with ``.bak``::

    {"offsetTable": {"1": 17, "2": 0, ...}, "durableCommitLogOffset": 1048576}

``offsetTable`` is RocketMQ's (fastjson's unquoted keys are read too); only deliveries whose
record the commit log has flushed are counted, and ``durableCommitLogOffset`` says up to
where. At start the commit log after it is scanned for delivery markers, which moves each
level past what was delivered but not yet persisted: every delayed message is delivered
exactly once across restarts, ``kill -9`` included (see :mod:`bolide.broker.delivery`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from bolide.base import limits
from bolide.base.clock import Clock
from bolide.base.errors import BolideError, ConfigError
from bolide.base.fileio import read_with_backup
from bolide.base.service import Service
from bolide.broker.config import ConfigFileWriter, parse_delay_levels
from bolide.broker.delivery import (
    DurableLedger,
    Settlement,
    flush_store_logged,
    level_marker,
    markers_since,
    put_round,
    read_delivery,
    settle,
)
from bolide.protocol.message import PropertyKey
from bolide.protocol.system_topics import SCHEDULE_TOPIC
from bolide.store.api import MessageStore, PutRequest, PutResult
from bolide.store.config_files import parse_fastjson

__all__ = [
    "SCHEDULE_TOPIC",
    "DelayLevels",
    "ScheduleMessageService",
    "correct_deliver_timestamp",
    "schedule_target",
]

_log = logging.getLogger("bolide.broker.schedule")

_DROPPED_ON_DELIVERY = (PropertyKey.DELAY,)


@dataclass(frozen=True, slots=True)
class DelayLevels:
    """The delay of each level, in ms; level ``n`` (1-based) waits ``levels_ms[n - 1]``."""

    levels_ms: tuple[int, ...]

    def __post_init__(self) -> None:
        if not 0 < len(self.levels_ms) <= limits.DELAY_LEVELS_MAX_COUNT:
            raise ConfigError(f"1 to {limits.DELAY_LEVELS_MAX_COUNT} delay levels, not "
                              f"{len(self.levels_ms)}")  # fmt: skip
        if any(delay_ms <= 0 for delay_ms in self.levels_ms):
            raise ConfigError(f"delay levels must be positive: {self.levels_ms}")

    @classmethod
    def parse(cls, text: str) -> DelayLevels:
        """Parse messageDelayLevel, e.g. ``"1s 5s 10s 30s 1m 2m ... 1h 2h"`` (units s, m, h, d;
        any count up to ``DELAY_LEVELS_MAX_COUNT``). Raises :class:`ConfigError`."""
        return cls(parse_delay_levels(text))

    @property
    def max_level(self) -> int:
        return len(self.levels_ms)

    def clamp(self, level: int) -> int:
        """``level`` limited to the highest level (levels below 1 are the caller's business)."""
        return min(level, self.max_level)

    def delay_ms(self, level: int) -> int:
        """The delay of ``level``, clamped into 1..max_level."""
        return self.levels_ms[max(1, self.clamp(level)) - 1]

    def deliver_timestamp_ms(self, level: int, store_timestamp_ms: int) -> int:
        """When a message stored at ``store_timestamp_ms`` with ``level`` is due."""
        return store_timestamp_ms + self.delay_ms(level)


def correct_deliver_timestamp(now_ms: int, deliver_ms: int, level_delay_ms: int) -> int:
    """The seed's correctDeliverTimestamp: a delivery time more than the level's delay ahead of
    now (the levels were shortened, or the clock went back) is due now; others are kept."""
    if deliver_ms > now_ms + level_delay_ms:
        return now_ms
    return deliver_ms


def schedule_target(
    properties: dict[str, str], topic: str, queue_id: int, level: int
) -> tuple[str, int]:
    """Re-target a message with delay ``level`` (already clamped, > 0) to its level queue:
    records REAL_TOPIC / REAL_QID / DELAY in ``properties`` and returns
    ``(SCHEDULE_TOPIC_XXXX, level - 1)``."""
    properties[PropertyKey.REAL_TOPIC] = topic
    properties[PropertyKey.REAL_QID] = str(queue_id)
    properties[PropertyKey.DELAY] = str(level)
    return SCHEDULE_TOPIC, level - 1


class _OffsetFile:
    """delayOffset.json as a versioned document for :class:`ConfigFileWriter`."""

    def __init__(self) -> None:
        self.offsets: dict[int, int] = {}
        self.durable_commit_log_offset = 0
        self.version = 0

    def update(self, offsets: dict[int, int], durable_commit_log_offset: int) -> None:
        if (offsets, durable_commit_log_offset) != (self.offsets, self.durable_commit_log_offset):
            self.offsets = offsets
            self.durable_commit_log_offset = durable_commit_log_offset
            self.version += 1

    def encode(self) -> bytes:
        document = {
            "offsetTable": {str(level): offset for level, offset in sorted(self.offsets.items())},
            "durableCommitLogOffset": self.durable_commit_log_offset,
        }
        return orjson.dumps(document)


def _decode_offset_file(raw: bytes) -> tuple[dict[int, int], int]:
    """(level -> offset, durable commit-log offset) from delayOffset.json; ValueError if bad."""
    document: Any = parse_fastjson(raw)
    table = document.get("offsetTable") if isinstance(document, dict) else None
    if not isinstance(table, dict):
        raise ValueError("delayOffset.json has no offsetTable object")
    offsets: dict[int, int] = {}
    for key, value in table.items():
        level, offset = int(key), int(value)
        if level < 1 or offset < 0:
            raise ValueError(f"delayOffset.json: bad entry {key}: {value}")
        offsets[level] = offset
    durable = document.get("durableCommitLogOffset", -1)
    return offsets, int(durable) if isinstance(durable, int) else -1


class ScheduleMessageService:
    """Delivers SCHEDULE_TOPIC_XXXX messages when due; see the module docstring.

    ``path`` is delayOffset.json; ``segment_bytes`` the commit-log segment size (for the start
    scan); ``flush_store`` (the store's flush, when it has one) runs at stop so the final file
    counts every delivery.

    Lifecycle: :meth:`load` (reads the file, before the store serves), :meth:`start` (after
    the store started: scans, then starts one loop per level and the persister), :meth:`stop`
    (stops the loops, writes the file). Loop thread only.
    """

    def __init__(
        self,
        store: MessageStore,
        levels: DelayLevels,
        path: Path,
        clock: Clock,
        *,
        segment_bytes: int,
        persist_interval_ms: int = limits.DELAY_OFFSET_FLUSH_INTERVAL_MS,
        batch_max_messages: int = limits.SCHEDULE_DELIVERY_BATCH_MAX_MESSAGES,
        retry_after_failure_ms: int = limits.SCHEDULE_RETRY_AFTER_FAILURE_MS,
        flush_store: Callable[[], Awaitable[None]] | None = None,
        idle_check_interval_ms: int = limits.SCHEDULE_IDLE_CHECK_INTERVAL_MS,
    ) -> None:
        self._store = store
        self._levels = levels
        self._clock = clock
        self._segment_bytes = segment_bytes
        self._persist_interval_ms = persist_interval_ms
        self._batch_max_messages = batch_max_messages
        self._retry_after_failure_ms = retry_after_failure_ms
        self._flush_store = flush_store
        self._idle_check_interval_ms = idle_check_interval_ms
        self._offsets: dict[int, int] = {}
        self._ledgers: dict[int, DurableLedger[int]] = {}
        self._idle: dict[int, bool] = {}
        self._services: dict[int, Service] = {}
        self._persister: Service | None = None
        self._file = _OffsetFile()
        self._writer = ConfigFileWriter(path, self._file)
        self._file.version += 1  # written at start even when nothing changed: a scan origin
        self._loaded_durable_offset = -1
        self._listening = False
        self.delivered_count = 0
        """Messages put back on their real topic since start."""

    # --- lifecycle ------------------------------------------------------------------------------

    @property
    def path(self) -> Path:
        return self._writer.path

    def load(self) -> None:
        """Read delayOffset.json (``.bak`` if damaged); missing levels start at 0.

        Raises:
            CorruptDataError: both files exist and neither parses.
        """
        loaded = read_with_backup(self.path, _decode_offset_file)
        if loaded is not None:
            self._offsets, self._loaded_durable_offset = loaded
            self._file.update(dict(self._offsets), max(0, self._loaded_durable_offset))
            self._writer.mark_written()

    async def start(self) -> None:
        """Catch up from the commit log, then start one loop per level and the persister."""
        self._recover_from_commit_log()
        for level in self._levels_to_run():
            self._offsets.setdefault(level, 0)
            self._ledgers[level] = DurableLedger(self._offsets[level])
            self._idle[level] = False
            service = Service(
                f"schedule-level-{level}",
                self._step_for(level),
                interval_ms=self._idle_check_interval_ms,
                clock=self._clock,
                initial_delay_ms=0,
            )
            self._services[level] = service
            service.start()
        if not self._listening:
            self._store.add_arrival_listener(self._on_arrival)
            self._listening = True
        await self._persist_logged()
        self._persister = Service(
            "schedule-persist",
            self._persist_logged,
            interval_ms=self._persist_interval_ms,
            clock=self._clock,
        )
        self._persister.start()

    async def stop(self) -> None:
        """Stop every loop (a delivery in progress finishes), then write delayOffset.json."""
        services = [*self._services.values()]
        if self._persister is not None:
            services.append(self._persister)
        await asyncio.gather(*(service.stop() for service in services))
        self._services.clear()
        self._persister = None
        await self._flush_then_persist()

    async def persist(self) -> None:
        """Write delayOffset.json with the progress the flushed commit log backs.

        Raises:
            OSError: the file could not be written (the previous one is intact).
        """
        flushed = self._store.stats().commit_log_flushed_offset
        durable = {level: ledger.durable(flushed) for level, ledger in self._ledgers.items()}
        if not durable:
            durable = dict(self._offsets)
        self._file.update(durable, flushed)
        await self._writer.flush()

    async def _flush_then_persist(self) -> None:
        await flush_store_logged(self._flush_store, "delayOffset.json")
        await self._persist_logged()

    async def _persist_logged(self) -> None:
        try:
            await self.persist()
        except OSError as error:
            _log.error("delayOffset.json not written (the previous one stays): %s", error)

    def offset_table(self) -> dict[int, int]:
        """The next queue offset to deliver, per level (GET_ALL_DELAY_OFFSET)."""
        return dict(sorted(self._offsets.items()))

    def encode_offset_table(self) -> bytes:
        """``{"offsetTable": {...}}`` of the live progress (GET_ALL_DELAY_OFFSET's body)."""
        table = {str(level): offset for level, offset in self.offset_table().items()}
        return orjson.dumps({"offsetTable": table})

    @property
    def levels(self) -> DelayLevels:
        return self._levels

    def _levels_to_run(self) -> Iterable[int]:
        # Queues left by a configuration with more levels still get a loop (with the largest
        # configured delay), so their messages are not stranded.
        queue_ids = self._store.topics_and_queues().get(SCHEDULE_TOPIC, [])
        highest = max([self._levels.max_level, *(queue_id + 1 for queue_id in queue_ids)])
        return range(1, highest + 1)

    def _recover_from_commit_log(self) -> None:
        markers = markers_since(self._store, self._loaded_durable_offset, self._segment_bytes)
        moved = 0
        for marker in markers:
            if marker.level > 0 and marker.queue_offset >= self._offsets.get(marker.level, 0):
                self._offsets[marker.level] = marker.queue_offset + 1
                moved += 1
        if moved:
            _log.info("schedule: %d deliveries found past the persisted progress", moved)

    # --- delivery -------------------------------------------------------------------------------

    def _on_arrival(self, topic: str, queue_id: int, max_offset: int, tags_code: int) -> None:
        del max_offset, tags_code
        if topic != SCHEDULE_TOPIC:
            return
        level = queue_id + 1
        service = self._services.get(level)
        # Only a caught-up level needs waking: one waiting for an entry wakes for it anyway,
        # and later arrivals of the same level are never due earlier.
        if service is not None and self._idle.get(level, False):
            self._idle[level] = False
            service.wakeup()

    def _step_for(self, level: int) -> Callable[[], Awaitable[int]]:
        async def step() -> int:
            try:
                return await self._deliver_due(level)
            except (BolideError, OSError):  # a failed invariant() is a bug: the service crashes
                _log.exception("schedule level %d: delivery failed; retrying later", level)
                return self._retry_after_failure_ms

        return step

    async def _deliver_due(self, level: int) -> int:
        """Deliver the due entries of ``level`` in order, all in one store put round (one group
        commit under SYNC flush); returns ms until the next step."""
        store = self._store
        queue_id = level - 1
        offset = self._checked_offset(level)
        entries = store.consume_queue_entries(
            SCHEDULE_TOPIC, queue_id, offset, self._batch_max_messages
        )
        delay_ms = self._levels.delay_ms(level)
        now_ms = self._clock.now_ms()
        wait_ms = None
        due: list[tuple[int, int]] = []
        for commit_log_offset, size, tags_code in entries:
            deliver_ms = correct_deliver_timestamp(now_ms, tags_code, delay_ms)
            if deliver_ms > now_ms:
                wait_ms = deliver_ms - now_ms
                break
            due.append((commit_log_offset, size))
        if due and not await self._deliver_entries(level, offset, due):
            return self._retry_after_failure_ms
        if wait_ms is not None:
            return wait_ms
        if len(entries) == self._batch_max_messages:
            return 0
        self._idle[level] = True
        return self._idle_check_interval_ms

    def _checked_offset(self, level: int) -> int:
        offset = self._offsets[level]
        queue_id = level - 1
        min_offset = self._store.min_offset(SCHEDULE_TOPIC, queue_id)
        max_offset = self._store.max_offset(SCHEDULE_TOPIC, queue_id)
        corrected = min(max(offset, min_offset), max_offset)
        if corrected != offset:
            _log.error(
                "schedule level %d: offset %d outside [%d, %d]; continuing at %d",
                level, offset, min_offset, max_offset, corrected,
            )  # fmt: skip
            self._offsets[level] = corrected
            self._ledgers[level].advanced(corrected)
        return corrected

    async def _deliver_entries(
        self, level: int, first_offset: int, entries: list[tuple[int, int]]
    ) -> bool:
        """Put the records of ``entries`` (commit-log offset, size), the entries of ``level``
        from ``first_offset`` on, on their real topics in one put round. True when done with
        all of them (stored, or dropped as undeliverable); False when the rest should be
        retried later (the store stopped appending at a refusal: nothing after it stored)."""
        requests = [
            self._delivery_request(level, first_offset + index, commit_log_offset, size)
            for index, (commit_log_offset, size) in enumerate(entries)
        ]
        done = await put_round(
            self._store,
            requests,
            lambda index, result: self._settle(level, first_offset + index, result),
        )
        return done == len(requests)

    def _delivery_request(
        self, level: int, queue_offset: int, commit_log_offset: int, size: int
    ) -> PutRequest | None:
        """The put of the entry's record on its real topic; None when it cannot be delivered."""
        return read_delivery(
            self._store,
            commit_log_offset,
            size,
            drop=_DROPPED_ON_DELIVERY,
            marker=level_marker(level, queue_offset),
            log=_log,
            entry=f"schedule level {level} offset {queue_offset}",
        )

    def _settle(self, level: int, queue_offset: int, result: PutResult | None) -> bool:
        """Move ``level`` past the entry at ``queue_offset`` given its put's ``result`` (None:
        undeliverable, skipped). False when the put should be retried later."""
        settlement = settle(
            self._ledgers[level],
            queue_offset + 1,
            result,
            log=_log,
            entry=f"schedule level {level} offset {queue_offset}",
        )
        if settlement is Settlement.RETRY:
            return False
        self._offsets[level] = queue_offset + 1
        if settlement is Settlement.STORED:
            self.delivered_count += 1
        return True
