"""POP consumption carried out: pops read the store and record in-flight messages, acks and
invisible-time changes are made durable, expired messages come back (or go to the DLQ), and
pops that find nothing wait (long polling).

* **Pop** (``queue_id`` -1: every readable queue of the topic, starting at a rotating one):
  messages that came back are served first, then new ones from the pop offset, which moves at
  once. Each message carries its receipt handle in property ``POP_CK`` and its reconsume times
  = stored + earlier deliveries. An orderly pop skips a queue while a batch of it is in flight
  for the group, so the next batch waits until the previous one is acked (or expires).
* **Ack / change**: a handle whose pop time is not the message's current delivery is stale; an
  ack of it does nothing (the message was or will be delivered again), a change is refused.
* **Revive**: a message whose invisible time ran out comes back with one more attempt; when
  it has been delivered ``retryMaxTimes + 1`` times (the group's max attempts) it is moved to
  ``%DLQ%<group>`` instead, and counts as done.
* **Durability**: see :mod:`bolide.broker.pop.log`. After a kill -9, unacked messages come
  back once their invisible time is over; acked ones (answered) are never delivered again.
* The group's committed offset on each queue (the lowest message not yet done) is written to
  the consumer offset table, so progress views and lag work for POP groups; an admin offset
  reset (by time, too) resets the POP state of the group's queues.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from bolide.base import limits
from bolide.base.clock import Clock
from bolide.base.errors import BolideError, ProtocolError
from bolide.base.service import CrashHandler, Service
from bolide.broker.held_messages import read_message, record_copy
from bolide.broker.offsets import ConsumerOffsetManager
from bolide.broker.pop.filter import MATCH_ALL, PopFilter
from bolide.broker.pop.log import PopLog
from bolide.broker.pop.retry import POP_RETRY_QUEUE_ID, PopRetry
from bolide.broker.pop.state import InFlight, PopKey, PopState, QueueState
from bolide.protocol.headers.pop import (
    FIRST_POP_TIME_PROPERTY,
    ORDER_REVIVE_QUEUE_ID,
    POP_CK_PROPERTY,
    ConsumeInitMode,
    PopTopicType,
    ReceiptHandle,
)
from bolide.protocol.message import MessageExt, PropertyKey
from bolide.protocol.record import decode_record, decode_records
from bolide.protocol.system_topics import (
    RETRY_GROUP_TOPIC_PREFIX,
    is_pop_retry_topic_v2,
    pop_retry_topic,
)
from bolide.store.api import GetStatus, MessageStore

__all__ = ["PopBatch", "PopRequest", "PopService"]

_log = logging.getLogger("bolide.broker.pop")

POP_LOG_FILE_NAME = "pop/popCheckpoint.log"
"""Where the POP log lives, under the store root."""

StartsAtZero = Callable[[str, int], bool]
"""(topic, queue id) -> a new group reads it from 0 (newGroupStartRule, see
:mod:`bolide.broker.group_start`)."""
DeadLetter = Callable[[str, int], Awaitable[bool]]
"""(group, commit-log offset) -> stored in %DLQ%group."""
MaxAttempts = Callable[[str], int]
"""group -> max delivery attempts (retryMaxTimes + 1)."""


@dataclass(frozen=True, slots=True)
class PopRequest:
    group: str
    topic: str
    queue_ids: list[int]
    """The queues to look at, in order (the caller rotates them)."""
    max_messages: int
    invisible_time_ms: int
    poll_time_ms: int
    filter: PopFilter = MATCH_ALL
    """What the request subscribed to (tags or SQL92), applied to new and returned messages."""
    init_mode: int = ConsumeInitMode.MAX
    order: bool = False


@dataclass(frozen=True, slots=True)
class PopBatch:
    pop_time_ms: int
    records: list[bytes]
    """Re-encoded records, each with its POP_CK and reconsume times."""
    rest_count: int
    polling_full: bool = False
    start_offset_info: str = ""
    """Java's ``startOffsetInfo``: ``0 <queueId> <startOffset>`` per queue popped, ``;``-joined
    (0: not a retry topic); Java's remoting POP consumer builds each handle from these."""
    message_offset_info: str = ""
    """Java's ``msgOffsetInfo``: ``0 <queueId> <offset>,<offset>...`` per queue, ``;``-joined."""
    passed_over: bool = False
    """The filter passed over messages the request did not want: pop again at once, more
    may follow them."""


class PopService:
    """The POP engine of one broker (see the module docstring)."""

    def __init__(
        self,
        store: MessageStore,
        offsets: ConsumerOffsetManager,
        store_root: Path,
        clock: Clock,
        *,
        broker_name: str,
        dead_letter: DeadLetter,
        max_attempts: MaxAttempts,
        starts_at_zero: StartsAtZero | None = None,
        retry: PopRetry | None = None,
        rng: random.Random | None = None,
        on_crash: CrashHandler | None = None,
    ) -> None:
        self._store = store
        self._offsets = offsets
        self._clock = clock
        self._broker_name = broker_name
        self._dead_letter = dead_letter
        self._max_attempts = max_attempts
        self._starts_at_zero = starts_at_zero or _queue_start
        self._retry = retry
        self._random = rng or random.Random()
        self.state = PopState()
        self.log = PopLog(store_root / POP_LOG_FILE_NAME)
        self._waiters: dict[str, set[asyncio.Future[None]]] = {}
        self._waiter_count = 0
        self._revive = Service(
            "pop-revive",
            self.revive_step,
            interval_ms=limits.POP_REVIVE_INTERVAL_MS,
            clock=clock,
            on_crash=on_crash,
            initial_delay_ms=0,
        )

    # --- lifecycle ------------------------------------------------------------------------------

    def open(self) -> None:
        """Replay the log (then compact it)."""
        records = self.log.open()
        for record in records:
            try:
                self.state.apply(record)
            except (KeyError, ValueError, TypeError, IndexError) as error:
                _log.error("POP log record skipped (%s): %r", error, record)
        self.log.rewrite(self.state.snapshot())
        _log.info(
            "POP state: %d queues, %d messages in flight after replaying %d records",
            len(self.state.queues),
            sum(len(q.in_flight) + len(q.came_back) for q in self.state.queues.values()),
            len(records),
        )

    def start(self) -> None:
        self._revive.start()

    async def stop(self, timeout_ms: int = limits.REMOTING_STOP_GRACE_MS) -> None:
        await self._revive.stop(timeout_ms)
        for waiters in self._waiters.values():
            for future in waiters:
                if not future.done():
                    future.set_result(None)
        self.log.close()

    # --- pop ----------------------------------------------------------------------------------

    async def pop(self, request: PopRequest) -> PopBatch:
        """Pop, waiting up to ``poll_time_ms`` when nothing is there."""
        deadline_ms = self._clock.monotonic_ms() + request.poll_time_ms
        while True:
            batch = self.pop_now(request)
            left_ms = deadline_ms - self._clock.monotonic_ms()
            if batch.records or left_ms <= 0:
                return batch
            if batch.passed_over:
                await asyncio.sleep(0)  # let others in between the passes
                continue
            if self._waiter_count >= limits.POP_LONG_POLL_MAX_PARKED_REQUESTS:
                return PopBatch(batch.pop_time_ms, [], batch.rest_count, polling_full=True)
            await self._wait(request.topic, left_ms)

    def pop_now(self, request: PopRequest) -> PopBatch:
        """One pass over the queues without waiting."""
        now_ms = self._clock.now_ms()
        records: list[bytes] = []
        starts: list[str] = []
        offsets: list[str] = []
        rest = 0
        passed_over = False
        for topic, queue_id in self._sources(request):
            room = request.max_messages - len(records)
            key = (topic, request.group, queue_id)
            kind = _topic_type(topic, request.topic)
            queue = self._queue(key, request.init_mode)
            max_offset = self._store.max_offset(topic, queue_id)
            if queue.pop_offset > max_offset:
                # The queue is shorter than where the group was (topic deleted and created
                # again, store replaced): start again at its first message; nothing stored
                # is skipped (at least once).
                minimum = self._store.min_offset(topic, queue_id)
                _log.warning("POP %s: offset %d past the queue end %d, reset to %d",
                             key, queue.pop_offset, max_offset, minimum)  # fmt: skip
                self.log.append(self.state.reset(key, minimum))
                queue = self.state.queues[key]
            if room <= 0 or (request.order and queue.blocked):
                rest += max(0, max_offset - queue.pop_offset)
                continue
            before = queue.committed_offset, queue.pop_offset
            popped, start, popped_offsets = self._pop_queue(key, queue, request, room, now_ms)
            passed_over |= not popped and (queue.committed_offset, queue.pop_offset) != before
            if popped:
                records.extend(popped)
                starts.append(f"{kind} {queue_id} {start}")
                offsets.append(f"{kind} {queue_id} {','.join(map(str, popped_offsets))}")
            rest += max(0, self._store.max_offset(topic, queue_id) - queue.pop_offset)
        return PopBatch(
            now_ms, records, rest, False, ";".join(starts), ";".join(offsets), passed_over
        )

    def _sources(self, request: PopRequest) -> list[tuple[str, int]]:
        """The (topic, queue) pairs to pop, in order: the request's queues, and the group's
        retry topic for that topic — first with POP_FROM_RETRY_PROBABILITY_PERCENT, else
        last (it tops the batch up). Orderly pops never read retry topics."""
        sources = [(request.topic, queue_id) for queue_id in request.queue_ids]
        if self._retry is None or request.order:
            return sources
        retries = [
            (retry_topic, POP_RETRY_QUEUE_ID)
            for retry_topic in self._retry.read_topics(request.group, request.topic)
            if retry_topic != request.topic and self._store.max_offset(retry_topic, 0) > 0
        ]
        if not retries:
            return sources  # nothing was ever retried
        if self._random.randrange(100) < limits.POP_FROM_RETRY_PROBABILITY_PERCENT:
            return [*retries, *sources]
        return [*sources, *retries]

    def _queue(self, key: PopKey, init_mode: int) -> QueueState:
        queue = self.state.queues.get(key)
        if queue is not None:
            return queue
        topic, group, queue_id = key
        committed = self._offsets.query_offset(group, topic, queue_id)
        if committed >= 0:
            queue = self.state.queues[key] = QueueState(committed)
            return queue
        queue = self.state.queues[key] = QueueState(
            self._initial_offset(topic, queue_id, init_mode)
        )
        self._commit(key)  # the start is the group's offset at once, as Java's getInitOffset
        return queue

    def _initial_offset(self, topic: str, queue_id: int, init_mode: int) -> int:
        """Where a group without an offset starts (Java's ``getInitOffset``): the first
        message for MIN and on retry topics; else 0 when the broker's newGroupStartRule says
        so (a young queue), otherwise the newest message (max offset - 1)."""
        minimum = self._store.min_offset(topic, queue_id)
        if init_mode == ConsumeInitMode.MIN or topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            return minimum
        if minimum <= 0 and self._starts_at_zero(topic, queue_id):
            return 0
        return max(minimum, self._store.max_offset(topic, queue_id) - 1, 0)

    def _pop_queue(
        self, key: PopKey, queue: QueueState, request: PopRequest, room: int, now_ms: int
    ) -> tuple[list[bytes], int, list[int]]:
        """Pop up to ``room`` messages of one queue: (records, start offset, their offsets)."""
        topic, _, queue_id = key
        picked = self._returned(key, queue, request.filter, room)
        next_offset = max(queue.pop_offset, self._store.min_offset(topic, queue_id))
        if len(picked) < room:
            result = self._store.get_message(
                topic,
                queue_id,
                next_offset,
                room - len(picked),
                limits.PULL_BATCH_MAX_BYTES,
                request.filter.tag_codes,
            )
            if result.status in (GetStatus.FOUND, GetStatus.NO_MATCHED_MESSAGE):
                next_offset = result.next_begin_offset
                fresh = _decoded(result.buffers, topic, queue_id)
                picked.extend((m, 1) for m in fresh if request.filter.matches(m))
        picked = self._spend(key, picked, next_offset, now_ms)
        if not picked and next_offset == queue.pop_offset:
            return [], next_offset, []
        revive_queue_id = ORDER_REVIVE_QUEUE_ID if request.order else 0
        kind = _topic_type(topic, request.topic)
        entries = [(m.queue_offset, a, m.commit_log_offset) for m, a in picked]
        record = self.state.popped(key, entries, next_offset, now_ms, request.invisible_time_ms)
        self.log.append(record)
        self._commit(key)
        start = picked[0][0].queue_offset if picked else next_offset
        handle = ReceiptHandle(
            start, now_ms, request.invisible_time_ms, revive_queue_id, kind,
            self._broker_name, queue_id, 0, 0,
        )  # fmt: skip
        encoded = [self._encode(m, a, handle) for m, a in picked]
        return encoded, start, [m.queue_offset for m, _ in picked]

    def _spend(
        self,
        key: PopKey,
        picked: list[tuple[MessageExt, int]],
        next_offset: int,
        now_ms: int,
    ) -> list[tuple[MessageExt, int]]:
        """The picked messages to hand over: one whose reconsume times already reach the
        group's max attempts (stored so, or the group's retryMaxTimes was lowered) goes to
        the DLQ instead, as Apache's proxy moves it (TO_DLQ): it is recorded in flight with
        no invisible time, and the revive step dead-letters it at once."""
        max_attempts = self._max_attempts(key[1])
        spent = [(m, a) for m, a in picked if m.reconsume_times + a - 1 >= max_attempts]
        if not spent:
            return picked
        entries = [(m.queue_offset, a, m.commit_log_offset) for m, a in spent]
        self.log.append(self.state.popped(key, entries, next_offset, now_ms, 0))
        self._revive.wakeup()
        return [(m, a) for m, a in picked if m.reconsume_times + a - 1 < max_attempts]

    def _returned(
        self, key: PopKey, queue: QueueState, wanted: PopFilter, room: int
    ) -> list[tuple[MessageExt, int]]:
        """Up to ``room`` messages that came back, with their attempt numbers; those gone
        from the store, and those the request's filter does not want, are done for the
        group (Apache acks a NO_MATCH at once)."""
        picked: list[tuple[MessageExt, int]] = []
        for offset in sorted(queue.came_back):
            if len(picked) >= room:
                break
            attempts, commit_log_offset = queue.came_back[offset]
            message = self._read_one(commit_log_offset)
            if message is None:  # the record is gone (retention): nothing to deliver
                queue.came_back.pop(offset)
            elif not wanted.matches(message):
                self.log.append(self.state.finished(key, offset))
            else:
                picked.append((message, attempts + 1))
        return picked

    def _read_one(self, commit_log_offset: int) -> MessageExt | None:
        return read_message(self._store, commit_log_offset, log=_log, reader="POP")

    def _encode(self, message: MessageExt, attempts: int, batch: ReceiptHandle) -> bytes:
        """The record handed over, with its own receipt handle (``batch`` with the message's
        offsets) in POP_CK. A retry copy keeps its retry topic, as Java's broker hands it
        (Java's POP clients key ``startOffsetInfo`` by it, then show the topic in
        RETRY_TOPIC; the proxy shows the topic the receive named)."""
        handle = dataclasses.replace(
            batch,
            queue_offset=message.queue_offset,
            commit_log_offset=message.commit_log_offset,
        )
        properties = dict(message.properties)
        properties[POP_CK_PROPERTY] = handle.encode()
        return record_copy(
            message,
            topic=message.topic,
            queue_id=message.queue_id,
            properties=properties,
            reconsume_times=message.reconsume_times + attempts - 1,
        )

    # --- ack and change -------------------------------------------------------------------------

    async def ack(self, group: str, topic: str, handle: ReceiptHandle) -> bool:
        """Acknowledge; True when the handle was the message's current delivery. Durable
        (fsynced) before it returns. Raises OSError when the log cannot be written."""
        key = (_handle_topic(group, topic, handle), group, handle.queue_id)
        record = self.state.acked(key, handle.queue_offset, handle.pop_time_ms)
        if record is None:
            return False
        self.log.append(record)
        self._commit(key)
        await self.log.sync()
        return True

    async def change_invisible_time(
        self, group: str, topic: str, handle: ReceiptHandle, invisible_time_ms: int
    ) -> ReceiptHandle | None:
        """Hide the message for ``invisible_time_ms`` from now; returns its new handle, or
        None when the handle is stale. Raises OSError when the log cannot be written."""
        key = (_handle_topic(group, topic, handle), group, handle.queue_id)
        now_ms = self._clock.now_ms()
        if now_ms == handle.pop_time_ms:
            now_ms += 1  # a new handle must differ from the old one
        record = self.state.changed(
            key, handle.queue_offset, handle.pop_time_ms, now_ms, invisible_time_ms
        )
        if record is None:
            return None
        self.log.append(record)
        await self.log.sync()
        return dataclasses.replace(handle, pop_time_ms=now_ms, invisible_time_ms=invisible_time_ms)

    def reset(self, group: str, topic: str, offsets: dict[int, int]) -> None:
        """Admin offset reset: the group pops ``topic`` queue by queue from ``offsets``."""
        for queue_id, offset in offsets.items():
            self.log.append(self.state.reset((topic, group, queue_id), offset))
        self._wake(topic)

    # --- revive -------------------------------------------------------------------------------

    async def revive_step(self) -> int | None:
        """Bring back (or dead-letter) every message whose invisible time ran out; returns
        how long to wait before the next step."""
        now_ms = self._clock.now_ms()
        topics: set[str] = set()
        for key, offset, entry in self.state.due(now_ms):
            topics.add(await self._revive_one(key, offset, entry))
        for topic in topics:
            self._wake(topic)
        next_deadline = self.state.next_deadline_ms()
        if self.log.size_bytes > limits.POP_LOG_COMPACT_BYTES:
            self.log.rewrite(self.state.snapshot())
        if next_deadline is None:
            return None
        return max(1, min(limits.POP_REVIVE_INTERVAL_MS, next_deadline - now_ms))

    async def _revive_one(self, key: PopKey, offset: int, entry: InFlight) -> str:
        """One expired message: to the DLQ once delivered max-attempts times, else a copy in
        the group's retry topic (in place when that is not possible: orderly groups, no
        retry store, a failed put); returns the topic whose pops should wake."""
        topic, group, _ = key
        message = self._read_one(entry.commit_log_offset)
        if message is None:  # gone (retention): nothing to bring back
            self.log.append(self.state.finished(key, offset))
            self._commit(key)
            return topic
        woken = message.properties.get(PropertyKey.RETRY_TOPIC, topic)
        if message.reconsume_times + entry.attempts >= self._max_attempts(group):
            await self._move_to_dlq(key, offset, entry.commit_log_offset)
            return woken
        retry = self._retry
        if retry is None or not retry.applies_to(group):
            self.state.bring_back(key, offset)
            return woken
        first_pop_ms = int(message.properties.get(FIRST_POP_TIME_PROPERTY) or entry.pop_time_ms)
        try:
            stored = await retry.put(group, topic, message, entry.attempts, first_pop_ms)
        except (BolideError, OSError) as error:
            stored = False
            _log.error("POP: retry of %s/%d of %s failed: %s", topic, offset, group, error)
        if not stored:
            self.state.bring_back(key, offset)
            return woken
        self.log.append(self.state.finished(key, offset))
        self._commit(key)
        await self.log.sync()
        return woken

    async def _move_to_dlq(self, key: PopKey, offset: int, commit_log_offset: int) -> None:
        topic, group, _ = key
        try:
            stored = await self._dead_letter(group, commit_log_offset)
        except (BolideError, OSError) as error:
            stored = False
            _log.error("POP: moving %s/%d of %s to the DLQ failed: %s", topic, offset, group, error)
        if not stored:
            self.state.bring_back(key, offset)  # try again after another delivery
            return
        self.log.append(self.state.dead_lettered(key, offset))
        self._commit(key)
        await self.log.sync()

    # --- waiting ------------------------------------------------------------------------------

    def notify_arrival(self, topic: str) -> None:
        """A message arrived on ``topic`` (store arrival listener)."""
        if topic in self._waiters:
            self._wake(topic)

    def on_arrival(self, topic: str, queue_id: int, max_offset: int, tags_code: int) -> None:
        """:meth:`notify_arrival` as the store's arrival listener (called for every put)."""
        del queue_id, max_offset, tags_code
        if topic in self._waiters:
            self._wake(topic)

    def _wake(self, topic: str) -> None:
        for future in self._waiters.pop(topic, ()):
            if not future.done():
                future.set_result(None)

    async def _wait(self, topic: str, timeout_ms: int) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        waiters = self._waiters.setdefault(topic, set())
        waiters.add(future)
        self._waiter_count += 1
        self._revive.wakeup()  # re-plan the revive timer around this waiter
        try:
            await asyncio.wait_for(future, timeout_ms / 1000)
        except TimeoutError:
            pass
        finally:
            self._waiter_count -= 1
            current = self._waiters.get(topic)
            if current is not None:
                current.discard(future)
                if not current:
                    del self._waiters[topic]

    def _commit(self, key: PopKey) -> None:
        topic, group, queue_id = key
        queue = self.state.queues.get(key)
        if queue is None:
            return
        committed = queue.committed_offset
        if self._offsets.query_offset(group, topic, queue_id) != committed:
            try:
                self._offsets.set_queue_offsets(group, topic, {queue_id: committed})
            except BolideError as error:
                _log.warning("POP progress of %s on %s not recorded: %s", group, topic, error)


def _queue_start(topic: str, queue_id: int) -> bool:
    """Without a broker's rule: 0 whenever the queue still starts there (QUEUE_START)."""
    del topic, queue_id
    return True


def _decoded(buffers: list[memoryview], topic: str, queue_id: int) -> list[MessageExt]:
    """The records read, decoded; one that does not decode is left out alone (logged), the
    others are handed over."""
    try:
        return decode_records(b"".join(buffers), decompress=False)
    except ProtocolError:
        pass
    messages = []
    for buffer in buffers:
        try:
            messages.append(decode_record(buffer, decompress=False)[0])
        except ProtocolError as error:
            _log.error("POP: an unreadable record in %s/%d left out: %s", topic, queue_id, error)
    return messages


def _handle_topic(group: str, topic: str, handle: ReceiptHandle) -> str:
    """The topic a handle's message was popped from: the group's retry topic (V1 or V2 name)
    for a retry handle (the request names the normal topic, as Java's proxy does)."""
    if handle.topic_type == PopTopicType.RETRY:
        return pop_retry_topic(group, topic)
    if handle.topic_type == PopTopicType.RETRY_V2:
        return pop_retry_topic(group, topic, v2=True)
    return topic


def _topic_type(topic: str, request_topic: str) -> int:
    """A handle's topic type for a message popped from ``topic`` by a pop of
    ``request_topic``."""
    if topic == request_topic:
        return PopTopicType.NORMAL
    return PopTopicType.RETRY_V2 if is_pop_retry_topic_v2(topic) else PopTopicType.RETRY
