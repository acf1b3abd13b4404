"""Long polling: pulls that found nothing wait here until a message arrives or time runs out.

A push consumer asks for a hold (PULL_MESSAGE with the suspend bit, ``suspendTimeoutMillis``
15 s from the Java and C++ clients). When the store answers PULL_NOT_FOUND the pull handler
parks the request here instead of answering; the request is woken

* by :meth:`LongPollingService.notify_message_arriving`, called by the send path for every
  stored message, when the message lands on the parked queue at or past the requested offset
  and its tags code passes the request's filter;
* by the deadline: an exact timer sleeps (on the injected clock) until the earliest deadline
  of the table, so a hold ends on time without a task per request;
* by the periodic check (a :class:`~bolide.base.service.Service` every
  ``LONG_POLL_CHECK_INTERVAL_MS``) that compares every parked queue with the store's max
  offset, a safety net for arrivals that were not notified (docs/protocol.md §2.4 item 5);
* by :meth:`LongPollingService.cancel` when the owning connection closed.

The woken handler re-runs the pull without suspension and answers with the original opaque;
an expired hold therefore answers PULL_NOT_FOUND. The table is bounded
(``LONG_POLL_MAX_PARKED_REQUESTS``): when it is full, parking is refused and the caller
answers SYSTEM_BUSY at once, so the client backs off before it pulls again.

Two ways to wait. A coroutine awaits :meth:`LongPollingService.hold`::

    reason = await long_polling.hold(topic, queue_id, queue_offset, suspend_timeout_ms,
                                     tag_codes=codes_or_none, owner=connection)
    if reason is WakeReason.CANCELLED:
        return None                      # the connection closed: nobody to answer
    response = run_pull(..., suspend=False)   # ARRIVED, EXPIRED or REFUSED

The broker's pull handler parks a callback instead (:meth:`LongPollingService.park`), which
answers from inside the wake — the put that stored the message — with no task, future or
loop turn in between: the shortest path from a send to a caught-up consumer.
"""

from __future__ import annotations

import asyncio
import enum
import functools
import heapq
import itertools
import logging
from collections.abc import Callable, Collection, Hashable
from dataclasses import dataclass

from bolide.base import limits
from bolide.base.clock import Clock
from bolide.base.errors import BolideError, ServiceCrashedError, invariant
from bolide.base.service import CrashHandler, Service

_log = logging.getLogger("bolide.broker.long_polling")


class WakeReason(enum.Enum):
    """Why a parked pull was handed back to its handler."""

    ARRIVED = "arrived"
    """A message matching the filter was stored at or past the requested offset."""
    EXPIRED = "expired"
    """The deadline passed (or the service stopped); the re-run pull answers PULL_NOT_FOUND."""
    CANCELLED = "cancelled"
    """The owner (a closed connection) was cancelled; nothing should be answered."""
    REFUSED = "refused"
    """Only from :meth:`LongPollingService.hold`: the table was full, nothing was parked."""


WakeTarget = asyncio.Future[WakeReason] | Callable[[WakeReason], None]
"""What a parked pull wakes: a future gets the reason as its result, a callback is called
with it. Each parked pull is woken exactly once."""

MaxOffsetLookup = Callable[[str, int], int]
"""``(topic, queue_id) -> max offset`` (exclusive: the next offset to be written); may raise
a :class:`~bolide.base.errors.BolideError` for an unknown queue (that queue is skipped)."""


@dataclass(slots=True, eq=False)
class _ParkedPull:
    sequence: int
    topic: str
    queue_id: int
    request_offset: int
    deadline_ms: int
    """On the clock's monotonic reading."""
    target: WakeTarget
    tag_codes: frozenset[int] | None
    """None accepts every tags code (subscription ``*``)."""
    owner: Hashable | None

    def accepts(self, max_offset: int, tags_code: int | None) -> bool:
        if self.request_offset >= max_offset:
            return False
        return tags_code is None or self.tag_codes is None or tags_code in self.tag_codes


class LongPollingService:
    """The bounded table of parked pulls, with its deadline timer and periodic check.

    Pure bookkeeping until :meth:`start`: before it (and in unit tests) deadlines are only
    enforced by explicit calls to :meth:`expire_due` or :meth:`check_now`. Between
    :meth:`start` and :meth:`stop` a timer task wakes each pull at its exact deadline and the
    periodic check runs every ``check_interval_ms``. Everything runs on the event loop's
    thread; no method blocks.

    ``max_offset_lookup`` lets the periodic check wake pulls whose data arrived without a
    notification; without it the check only expires. ``on_crash`` hears about a crash of the
    check service or the deadline timer.
    """

    def __init__(
        self,
        clock: Clock,
        *,
        max_offset_lookup: MaxOffsetLookup | None = None,
        max_parked_requests: int = limits.LONG_POLL_MAX_PARKED_REQUESTS,
        check_interval_ms: int = limits.LONG_POLL_CHECK_INTERVAL_MS,
        on_crash: CrashHandler | None = None,
    ) -> None:
        invariant(max_parked_requests > 0, "the long-poll table holds at least one pull")
        self._clock = clock
        self._max_offset_lookup = max_offset_lookup
        self._max_parked_requests = max_parked_requests
        self._on_crash = on_crash
        self._records: dict[int, _ParkedPull] = {}
        self._by_queue: dict[tuple[str, int], dict[int, _ParkedPull]] = {}
        self._by_owner: dict[Hashable, dict[int, _ParkedPull]] = {}
        # (deadline_ms, sequence); entries of pulls woken early stay until popped or compacted.
        self._deadlines: list[tuple[int, int]] = []
        self._sequence = itertools.count()
        self._check_service = Service(
            "long-poll-check",
            self._check_step,
            interval_ms=check_interval_ms,
            clock=clock,
            on_crash=on_crash,
        )
        self._timer: asyncio.Task[None] | None = None
        self._timer_deadline_ms = 0
        self._running = False
        self._stopped = False

    # --- queries ----------------------------------------------------------------------------

    @property
    def count(self) -> int:
        """Pulls parked right now."""
        return len(self._records)

    def count_for_queue(self, topic: str, queue_id: int) -> int:
        """Pulls parked on one queue."""
        return len(self._by_queue.get((topic, queue_id), ()))

    def count_for_owner(self, owner: Hashable) -> int:
        """Pulls parked by one owner (connection)."""
        return len(self._by_owner.get(owner, ()))

    def deadline_after(self, timeout_ms: int) -> int:
        """The deadline, on this service's clock, ``timeout_ms`` from now (for :meth:`park`)."""
        return self._clock.monotonic_ms() + timeout_ms

    # --- parking ----------------------------------------------------------------------------

    def park(
        self,
        topic: str,
        queue_id: int,
        request_offset: int,
        deadline_ms: int,
        wake: WakeTarget,
        *,
        tag_codes: Collection[int] | None = None,
        owner: Hashable | None = None,
    ) -> bool:
        """Park a pull of ``topic``/``queue_id`` that waits for ``request_offset``.

        ``deadline_ms`` is on the clock's monotonic reading (see :meth:`deadline_after`).
        ``tag_codes`` is the subscription's set of tag hash codes; None or an empty set accepts
        every message (an empty code set is what subscription ``*`` carries). ``owner`` groups
        pulls for :meth:`cancel`. A future ``wake`` that its holder cancels leaves the table at
        once. Returns False, parking nothing, when ``max_parked_requests`` pulls are already
        parked or the service was stopped: the caller answers at once.
        """
        return (
            self._park_record(topic, queue_id, request_offset, deadline_ms, wake, tag_codes, owner)
            is not None
        )

    async def hold(
        self,
        topic: str,
        queue_id: int,
        request_offset: int,
        timeout_ms: int,
        *,
        tag_codes: Collection[int] | None = None,
        owner: Hashable | None = None,
    ) -> WakeReason:
        """Park a pull for at most ``timeout_ms`` and wait until it is woken.

        Same arguments as :meth:`park` (with a timeout instead of a deadline). Returns
        :attr:`WakeReason.REFUSED` at once when the table is full; otherwise the reason it was
        woken. Cancelling the awaiting task removes the pull from the table.
        """
        future: asyncio.Future[WakeReason] = asyncio.get_running_loop().create_future()
        deadline_ms = self.deadline_after(timeout_ms)
        record = self._park_record(
            topic, queue_id, request_offset, deadline_ms, future, tag_codes, owner, watch=False
        )
        if record is None:
            return WakeReason.REFUSED
        try:
            return await future
        finally:
            # Only still parked when the awaiting task was cancelled.
            if self._records.get(record.sequence) is record:
                self._unlink(record)

    def _park_record(
        self,
        topic: str,
        queue_id: int,
        request_offset: int,
        deadline_ms: int,
        wake: WakeTarget,
        tag_codes: Collection[int] | None,
        owner: Hashable | None,
        *,
        watch: bool = True,
    ) -> _ParkedPull | None:
        """Park; ``watch`` drops a future target from the table as soon as it is done (hold()
        does that itself, saving a callback per wake on the pull path)."""
        if self._stopped or len(self._records) >= self._max_parked_requests:
            return None
        codes = None if not tag_codes else frozenset(tag_codes)
        record = _ParkedPull(
            next(self._sequence), topic, queue_id, request_offset, deadline_ms, wake, codes, owner
        )
        self._records[record.sequence] = record
        self._by_queue.setdefault((topic, queue_id), {})[record.sequence] = record
        if owner is not None:
            self._by_owner.setdefault(owner, {})[record.sequence] = record
        self._push_deadline(record)
        if watch and isinstance(wake, asyncio.Future):
            wake.add_done_callback(functools.partial(self._forget_done, record))
        return record

    def _push_deadline(self, record: _ParkedPull) -> None:
        heapq.heappush(self._deadlines, (record.deadline_ms, record.sequence))
        # Pulls woken by arrivals leave their deadline behind; rebuild the heap once stale
        # entries outnumber live ones, so memory follows the live table.
        heap_entries = len(self._deadlines)
        live_entries = len(self._records)
        if (
            heap_entries >= limits.LONG_POLL_HEAP_COMPACT_MIN_ENTRIES
            and heap_entries > 2 * live_entries
        ):
            self._deadlines = [(r.deadline_ms, r.sequence) for r in self._records.values()]
            heapq.heapify(self._deadlines)
        if self._running:
            self._arm_timer(record.deadline_ms)

    def _forget_done(self, record: _ParkedPull, _future: asyncio.Future[WakeReason]) -> None:
        # Called for every parked future once it is done; a no-op when this service woke it.
        if self._records.get(record.sequence) is record:
            self._unlink(record)

    def _unlink(self, record: _ParkedPull) -> None:
        del self._records[record.sequence]
        queue_key = (record.topic, record.queue_id)
        queue_table = self._by_queue[queue_key]
        del queue_table[record.sequence]
        if not queue_table:
            del self._by_queue[queue_key]
        if record.owner is not None:
            owner_table = self._by_owner[record.owner]
            del owner_table[record.sequence]
            if not owner_table:
                del self._by_owner[record.owner]

    def _wake_all(self, records: list[_ParkedPull], reason: WakeReason) -> int:
        """Unlink every record first, then wake them, so a callback may park again."""
        for record in records:
            self._unlink(record)
        for record in records:
            target = record.target
            if isinstance(target, asyncio.Future):
                if not target.done():
                    target.set_result(reason)
                continue
            try:
                target(reason)
            except Exception:
                # One broken callback must not keep the other parked pulls asleep.
                _log.exception("long-poll wake failed for %s/%d", record.topic, record.queue_id)
        return len(records)

    # --- waking -----------------------------------------------------------------------------

    def notify_message_arriving(
        self, topic: str, queue_id: int, max_offset: int, tags_code: int | None = None
    ) -> int:
        """Wake the pulls of ``topic``/``queue_id`` that the new data satisfies.

        ``max_offset`` is the queue's max offset after the append (exclusive: the next offset
        to be written); a pull is woken when its requested offset is below it and its filter
        accepts ``tags_code`` (the tags hash stored in the consume-queue entry; None = unknown,
        accepted by every filter). Returns how many pulls were woken. Cheap when nothing is
        parked on the queue: it is called for every stored message.
        """
        parked = self._by_queue.get((topic, queue_id))
        if not parked:
            return 0
        ready = [record for record in parked.values() if record.accepts(max_offset, tags_code)]
        return self._wake_all(ready, WakeReason.ARRIVED)

    def expire_due(self) -> int:
        """Wake, as EXPIRED, every pull whose deadline is now or past. Returns how many."""
        now_ms = self._clock.monotonic_ms()
        due: list[_ParkedPull] = []
        while self._deadlines and self._deadlines[0][0] <= now_ms:
            _, sequence = heapq.heappop(self._deadlines)
            record = self._records.get(sequence)
            if record is not None:
                due.append(record)
        return self._wake_all(due, WakeReason.EXPIRED)

    def check_now(self) -> int:
        """The periodic check: wake pulls whose queue has data by ``max_offset_lookup``, then
        expire the due ones. Returns how many pulls were woken."""
        woken = 0
        if self._max_offset_lookup is not None:
            for topic, queue_id in list(self._by_queue):
                try:
                    max_offset = self._max_offset_lookup(topic, queue_id)
                except BolideError as error:
                    _log.warning("long-poll check skips %s/%d: %s", topic, queue_id, error)
                    continue
                woken += self.notify_message_arriving(topic, queue_id, max_offset)
        return woken + self.expire_due()

    def cancel(self, owner: Hashable) -> int:
        """Wake every pull parked by ``owner`` as CANCELLED (its connection closed).

        Returns how many were cancelled; 0 for an unknown owner.
        """
        owned = self._by_owner.get(owner)
        if not owned:
            return 0
        return self._wake_all(list(owned.values()), WakeReason.CANCELLED)

    def release(self, owner: Hashable, topic: str | None = None) -> int:
        """Wake, as EXPIRED, every pull parked by ``owner`` (only those of ``topic`` when
        given): each is answered at once with what its queue holds. An admin offset reset
        uses it, because a consumer resumes from its new offsets only after its outstanding
        pulls ended (the C++ client waits for them, up to its 15 s hold). Returns how many
        were woken; 0 for an unknown owner."""
        owned = self._by_owner.get(owner)
        if not owned:
            return 0
        records = [record for record in owned.values() if topic is None or record.topic == topic]
        return self._wake_all(records, WakeReason.EXPIRED)

    # --- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        """Start the periodic check and the deadline timer (call on the running loop)."""
        invariant(not self._running and not self._stopped, "long polling started twice")
        self._running = True
        self._check_service.start()
        earliest_ms = self._earliest_live_deadline_ms()
        if earliest_ms is not None:
            self._arm_timer(earliest_ms)

    async def stop(self, timeout_ms: int = 5_000) -> None:
        """Stop the timers, refuse new pulls and wake the parked ones as EXPIRED, so their
        handlers answer before the listener closes. ``timeout_ms`` bounds the check step."""
        self._stopped = True
        self._running = False
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
            await asyncio.gather(timer, return_exceptions=True)
        await self._check_service.stop(timeout_ms)
        self._wake_all(list(self._records.values()), WakeReason.EXPIRED)
        self._deadlines.clear()

    async def _check_step(self) -> None:
        self.check_now()

    def _earliest_live_deadline_ms(self) -> int | None:
        heap = self._deadlines
        while heap:
            deadline_ms, sequence = heap[0]
            if sequence in self._records:
                return deadline_ms
            heapq.heappop(heap)
        return None

    def _arm_timer(self, deadline_ms: int) -> None:
        """Make sure the timer fires no later than ``deadline_ms``."""
        timer = self._timer
        if timer is not None and not timer.done() and self._timer_deadline_ms <= deadline_ms:
            return
        if timer is not None:
            timer.cancel()
        self._timer_deadline_ms = deadline_ms
        self._timer = asyncio.get_running_loop().create_task(
            self._sleep_until(deadline_ms), name="long-poll-deadline"
        )
        self._timer.add_done_callback(self._on_timer_done)

    async def _sleep_until(self, deadline_ms: int) -> None:
        await self._clock.sleep_ms(deadline_ms - self._clock.monotonic_ms())
        self._timer = None
        self.expire_due()
        earliest_ms = self._earliest_live_deadline_ms()
        if earliest_ms is not None and self._running:
            self._arm_timer(earliest_ms)

    def _on_timer_done(self, task: asyncio.Task[None]) -> None:
        if task.cancelled():
            return
        error = task.exception()
        if error is None:
            return
        _log.error("long-poll deadline timer crashed", exc_info=error)
        if self._on_crash is not None:
            crash = ServiceCrashedError("long-poll deadline timer crashed")
            crash.__cause__ = error
            self._on_crash(self._check_service, crash)
