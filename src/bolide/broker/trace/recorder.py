"""Broker-side message trace (broker key ``traceOnBrokerEnable=true``): the broker writes 4.x
trace records about every message itself, so clients without trace of their own (the C++ 1.2
client, the 5.x SDKs) get it with nothing configured.

The hot paths only take notes, each one dict write or deque append: a put tells the store's
arrival listener (topic, queue, new max offset), a found pull notes the records it answered, a
commit notes (group, topic, queue, offset). A :class:`~bolide.base.service.Service` turns the
notes into records off those paths, once a :data:`~bolide.base.limits.TRACE_BROKER_INTERVAL_MS`:

1. deliveries: one ``SubBefore`` per delivered message (request id = one per pull, retry
   times = the message's reconsume times), kept open by (group, topic, queue, offset);
2. arrivals: the new messages of each noted queue, read back from the store, give ``Pub``
   and the failure of a send-back or dead letter (:mod:`.records`), which closes the group's
   open delivery of that message with a failed ``SubAfter``; a settled END_TRANSACTION gives
   ``EndTransaction`` (COMMIT_MESSAGE or ROLLBACK_MESSAGE) from its half message;
3. commits: a group's commit past an open delivery closes it with a successful ``SubAfter``
   (cost = commit time - delivery time).

POP (4.x POP consumers, and the 5.x SDKs through the proxy) gets the same steps: a pop that
answered messages opens one ``SubBefore`` per message (retry times = deliveries before this
one); an ACK_MESSAGE of the current delivery closes it with a successful ``SubAfter``; a
CHANGE_MESSAGE_INVISIBLETIME keeps it open (the 5.x SDKs' nack, or a renewal); when the
invisible time runs out, the revive's retry copy or dead letter (step 2) closes it with a
failed ``SubAfter``: context FAILED after a change (the consumer asked the message back),
TIME_OUT otherwise. A message revived in place (orderly groups) is closed failed at its next
delivery.

The records go to the trace topic (``msgTraceTopicName``, RMQ_SYS_TRACE_TOPIC by default, 1
queue) in messages of at most TRACE_MESSAGE_MAX_BYTES whose KEYS are the msgIds and user keys
they mention, so QUERY_MESSAGE on the trace topic by msgId finds them, as stock tools look.
Nothing is written about the trace topics themselves or the broker's internal topics.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bolide.base import limits
from bolide.base.clock import Clock
from bolide.base.errors import ProtocolError
from bolide.base.service import CrashHandler, Service
from bolide.broker.config import BrokerConfig
from bolide.broker.delivery import DELIVERED_FROM
from bolide.broker.trace.records import (
    FAILED_CONTEXT_CODE,
    TIME_OUT_CONTEXT_CODE,
    arrival_records,
    in_life_order,
    sub_after,
    transaction_end,
)
from bolide.protocol.address import parse_socket_address
from bolide.protocol.message import MessageExt, PropertyKey
from bolide.protocol.record import Buffer, decode_records
from bolide.protocol.system_topics import (
    REGION_TRACE_TOPIC_PREFIX,
    SCHEDULE_TOPIC,
    TIMER_TOPIC,
    TRANS_HALF_TOPIC,
)
from bolide.protocol.trace import (
    TraceRecord,
    TraceType,
    pack_records,
    trace_message_keys,
)
from bolide.store.api import MessageStore, PutRequest

__all__ = ["BrokerTrace"]

_log = logging.getLogger("bolide.broker.trace")

_TRACED_SYSTEM_TOPICS = frozenset({SCHEDULE_TOPIC, TIMER_TOPIC, TRANS_HALF_TOPIC})
_READ_MAX_BYTES = 4 * 1024 * 1024

_OpenKey = tuple[str, str, int, int]
"""(group, topic, queue id, queue offset) of a delivered message without a result yet."""


@dataclass(frozen=True, slots=True)
class _Open:
    request_id: str
    msg_id: str
    keys: str
    delivered_ms: int
    popped: bool = False
    """Delivered by POP: closed by an ack, or failed when its invisible time runs out."""
    changed: bool = False
    """A POP delivery whose invisible time the consumer changed (a nack, or a renewal)."""


class BrokerTrace:
    """The broker's trace: notes from the hot paths, records written by a background step.

    ``is_system_topic`` tells the broker's internal topics (not traced, except the delay and
    half-message topics). Use from the event loop thread only.
    """

    def __init__(
        self,
        config: BrokerConfig,
        store: MessageStore,
        clock: Clock,
        is_system_topic: Callable[[str], bool],
        *,
        on_crash: CrashHandler | None = None,
    ) -> None:
        self.trace_topic = config.msg_trace_topic_name
        self._region_id = config.region_id
        self._store = store
        self._clock = clock
        self._is_system_topic = is_system_topic
        self._born_host = parse_socket_address(config.broker_address)
        self._traced: dict[str, bool] = {}
        self._noted: dict[tuple[str, int], int] = {}
        self._read_from: dict[tuple[str, int], int] = {}
        self._deliveries: collections.deque[tuple[str, int, Sequence[Buffer], bool]] = (
            collections.deque()
        )
        self._pop_changes: collections.deque[_OpenKey] = collections.deque()
        self._pop_acks: collections.deque[tuple[_OpenKey, int]] = collections.deque()
        self._recalls: collections.deque[TraceRecord] = collections.deque()
        self._commits: collections.deque[tuple[str, str, int, int, int]] = collections.deque()
        self._ends: collections.deque[tuple[int, str, bool, str, bool, int]] = collections.deque()
        self._open: dict[tuple[str, str, int], dict[int, _Open]] = {}
        self._open_order: dict[_OpenKey, None] = {}
        self._open_by_message: dict[tuple[str, str], list[_OpenKey]] = {}
        """(group, msgId) -> its open deliveries, oldest first (a POP retry copy is the same
        message under another key; a revive ends the oldest)."""
        self._request_ids = itertools.count(1)
        self._request_prefix = f"{config.broker_name}-{clock.now_ms():x}-"
        self.records_written = 0
        """Trace records stored so far."""
        self.dropped = 0
        """Notes and records given up (bounds reached, or a put of the trace topic failed)."""
        self._service = Service(
            "broker-trace",
            self._step,
            interval_ms=limits.TRACE_BROKER_INTERVAL_MS,
            clock=clock,
            on_crash=on_crash,
        )

    def start(self) -> None:
        """Read from every queue's current end on, and start the background step."""
        for topic, queue_ids in self._store.topics_and_queues().items():
            for queue_id in queue_ids:
                self._read_from[(topic, queue_id)] = self._store.max_offset(topic, queue_id)
        self._service.start()

    async def stop(self, timeout_ms: int) -> None:
        """Stop the step; what was noted is written first."""
        await self._service.stop(timeout_ms)
        await self.flush()

    # --- notes, on the hot paths ------------------------------------------------------------

    def on_arrival(self, topic: str, queue_id: int, max_offset: int, tags_code: int) -> None:
        """The store's arrival listener: remember that ``topic`` / ``queue_id`` grew."""
        traced = self._traced.get(topic)
        if traced is None:
            traced = self._traced[topic] = self._should_trace(topic)
        if traced:
            self._noted[(topic, queue_id)] = max_offset

    def delivered(self, group: str, buffers: Sequence[Buffer], *, popped: bool = False) -> None:
        """A pull (or, ``popped``, a POP) of ``group`` answered these stored records."""
        if len(self._deliveries) >= limits.TRACE_BROKER_NOTED_MAX_EVENTS:
            self.dropped += len(buffers)
            return
        self._deliveries.append((group, self._clock.now_ms(), buffers, popped))

    def pop_acked(self, group: str, topic: str, queue_id: int, queue_offset: int) -> None:
        """``group`` acked its current POP delivery of ``topic`` / ``queue_id`` /
        ``queue_offset`` (the topic the message was popped from: a retry topic for a retry
        copy)."""
        if len(self._pop_acks) >= limits.TRACE_BROKER_NOTED_MAX_EVENTS:
            self.dropped += 1
            return
        self._pop_acks.append(((group, topic, queue_id, queue_offset), self._clock.now_ms()))

    def pop_changed(self, group: str, topic: str, queue_id: int, queue_offset: int) -> None:
        """``group`` changed the invisible time of its current POP delivery of that message."""
        if len(self._pop_changes) >= limits.TRACE_BROKER_NOTED_MAX_EVENTS:
            self.dropped += 1
            return
        self._pop_changes.append((group, topic, queue_id, queue_offset))

    def committed(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """``group`` committed ``offset`` (the next to read) on ``topic`` / ``queue_id``."""
        if len(self._commits) >= limits.TRACE_BROKER_NOTED_MAX_EVENTS:
            self.dropped += 1
            return
        self._commits.append((group, topic, queue_id, offset, self._clock.now_ms()))

    def transaction_ended(
        self,
        half_offset: int,
        group: str,
        committed: bool,
        transaction_id: str,
        *,
        from_check: bool,
    ) -> None:
        """END_TRANSACTION settled the half message at commit-log ``half_offset``."""
        if len(self._ends) >= limits.TRACE_BROKER_NOTED_MAX_EVENTS:
            self.dropped += 1
            return
        self._ends.append(
            (half_offset, group, committed, transaction_id, from_check, self._clock.now_ms())
        )

    def recalled(self, group: str, topic: str, msg_id: str, *, success: bool) -> None:
        """RECALL_MESSAGE of ``msg_id`` on ``topic`` by producer ``group`` (may be empty):
        a ``Recall`` record, as Java's producer writes (recalls are rare: built at once)."""
        if len(self._recalls) >= limits.TRACE_BROKER_NOTED_MAX_EVENTS:
            self.dropped += 1
            return
        self._recalls.append(
            TraceRecord(
                TraceType.RECALL,
                timestamp_ms=self._clock.now_ms(),
                region_id=self._region_id,
                group=group,
                topic=topic,
                msg_id=msg_id,
                success=success,
            )
        )

    def _should_trace(self, topic: str) -> bool:
        if topic == self.trace_topic or topic.startswith(REGION_TRACE_TOPIC_PREFIX):
            return False
        return topic in _TRACED_SYSTEM_TOPICS or not self._is_system_topic(topic)

    # --- the background step ----------------------------------------------------------------

    async def _step(self) -> int | None:
        await self.flush()
        return None

    async def flush(self) -> int:
        """Turn every note into records and store them now; the number of records stored."""
        puts: list[TraceRecord] = []
        deliveries: list[TraceRecord] = []
        results: list[TraceRecord] = []
        self._take_deliveries(deliveries, results)  # first: the results below close these
        self._take_pop_changes()  # before the revives (arrivals) they explain
        self._take_arrivals(puts, results)
        self._take_transaction_ends(puts)
        while self._recalls:
            puts.append(self._recalls.popleft())
        self._take_pop_acks(results)  # after arrivals: a proxy's dead letter is acked after
        self._take_commits(results)
        records = puts + in_life_order(deliveries, results)
        if not records:
            return 0
        return await self._write(records)

    def _take_deliveries(self, records: list[TraceRecord], results: list[TraceRecord]) -> None:
        while self._deliveries:
            group, now_ms, buffers, popped = self._deliveries.popleft()
            request_id = f"{self._request_prefix}{next(self._request_ids):x}"
            for message in _decoded(buffers):
                keys = message.properties.get(PropertyKey.KEYS, "")
                key = (group, message.topic, message.queue_id, message.queue_offset)
                earlier = self._close(key) if popped else None
                if earlier is not None:  # came back in place (orderly), without an ack
                    results.append(_came_back(group, earlier, now_ms))
                records.append(
                    TraceRecord(
                        TraceType.SUB_BEFORE,
                        timestamp_ms=now_ms,
                        region_id=self._region_id,
                        group=group,
                        request_id=request_id,
                        msg_id=message.msg_id,
                        retry_times=message.reconsume_times,
                        keys=keys,
                    )
                )
                self._open_delivery(key, _Open(request_id, message.msg_id, keys, now_ms, popped))

    def _open_delivery(self, key: _OpenKey, opened: _Open) -> None:
        group, topic, queue_id, offset = key
        self._open.setdefault((group, topic, queue_id), {})[offset] = opened
        self._open_order[key] = None
        keys = self._open_by_message.setdefault((group, opened.msg_id), [])
        if key not in keys:
            keys.append(key)
        while len(self._open_order) > limits.TRACE_BROKER_PENDING_MAX_ENTRIES:
            self.dropped += 1
            self._close(next(iter(self._open_order)))

    def _close(self, key: _OpenKey) -> _Open | None:
        group, topic, queue_id, offset = key
        self._open_order.pop(key, None)
        queue = self._open.get((group, topic, queue_id))
        opened = None if queue is None else queue.pop(offset, None)
        if queue is not None and not queue:
            del self._open[(group, topic, queue_id)]
        if opened is None:
            return None
        keys = self._open_by_message.get((group, opened.msg_id), [])
        if key in keys:
            keys.remove(key)
            if not keys:
                del self._open_by_message[(group, opened.msg_id)]
        return opened

    def _take_arrivals(self, puts: list[TraceRecord], results: list[TraceRecord]) -> None:
        budget = limits.TRACE_BROKER_STEP_MAX_MESSAGES
        noted, self._noted = self._noted, {}
        for (topic, queue_id), max_offset in noted.items():
            start = self._read_from.get((topic, queue_id))
            if start is None:
                start = self._store.min_offset(topic, queue_id)
            if budget <= 0 or start >= max_offset:
                if start < max_offset:
                    self._noted[(topic, queue_id)] = max_offset  # the next step reads it
                continue
            count = min(budget, max_offset - start)
            result = self._store.get_message(topic, queue_id, start, count, _READ_MAX_BYTES)
            self._read_from[(topic, queue_id)] = max(start, result.next_begin_offset)
            if result.next_begin_offset < max_offset:
                self._noted[(topic, queue_id)] = max_offset
            budget -= result.message_count
            for message in _decoded(result.buffers):
                failed_group, made = arrival_records(message, self._region_id, DELIVERED_FROM)
                if failed_group is None:
                    puts.extend(made)
                else:  # a send-back or a dead letter: the result of a delivery
                    results.append(self._failed(failed_group, message))
                    results.extend(made)

    def _failed(self, group: str, message: MessageExt) -> TraceRecord:
        """The failed SubAfter closing ``group``'s delivery of ``message`` (a send-back or a
        dead letter), timed when the broker stored it."""
        now_ms = message.store_timestamp_ms
        msg_id = message.msg_id
        open_keys = self._open_by_message.get((group, msg_id))
        key = open_keys[0] if open_keys else None
        opened = None if key is None else self._close(key)
        keys = message.properties.get(PropertyKey.KEYS, "")
        if opened is None:  # delivered before the trace started
            return sub_after(msg_id, keys, group, "", success=False, cost_time_ms=0,
                             now_ms=now_ms)  # fmt: skip
        return sub_after(msg_id, keys, group, opened.request_id, success=False,
                         cost_time_ms=now_ms - opened.delivered_ms, now_ms=now_ms,
                         context_code=_failure_code(opened))  # fmt: skip

    def _take_pop_changes(self) -> None:
        while self._pop_changes:
            key = self._pop_changes.popleft()
            group, topic, queue_id, offset = key
            queue = self._open.get((group, topic, queue_id))
            opened = None if queue is None else queue.get(offset)
            if queue is not None and opened is not None:
                queue[offset] = dataclasses.replace(opened, changed=True)

    def _take_pop_acks(self, records: list[TraceRecord]) -> None:
        while self._pop_acks:
            key, now_ms = self._pop_acks.popleft()
            opened = self._close(key)
            if opened is None:
                continue
            cost_time_ms = now_ms - opened.delivered_ms
            done = sub_after(opened.msg_id, opened.keys, key[0], opened.request_id, success=True,
                             cost_time_ms=cost_time_ms, now_ms=now_ms)  # fmt: skip
            records.append(done)

    def _take_transaction_ends(self, records: list[TraceRecord]) -> None:
        while self._ends:
            half_offset, group, committed, transaction_id, from_check, now_ms = self._ends.popleft()
            raw = self._store.read_record(half_offset)
            half = _decoded([raw])[:1] if raw is not None else []
            if not half:
                _log.warning("trace: no half message at commit-log offset %d", half_offset)
                continue
            records.append(
                transaction_end(
                    half[0], self._region_id, group, committed, transaction_id,
                    from_check=from_check, now_ms=now_ms,
                )
            )  # fmt: skip

    def _take_commits(self, records: list[TraceRecord]) -> None:
        while self._commits:
            group, topic, queue_id, offset, now_ms = self._commits.popleft()
            queue = self._open.get((group, topic, queue_id))
            if not queue:
                continue
            for queue_offset in sorted(o for o in queue if o < offset):
                opened = self._close((group, topic, queue_id, queue_offset))
                if opened is not None:
                    records.append(
                        sub_after(
                            opened.msg_id,
                            opened.keys,
                            group,
                            opened.request_id,
                            success=True,
                            cost_time_ms=now_ms - opened.delivered_ms,
                            now_ms=now_ms,
                        )
                    )

    async def _write(self, records: list[TraceRecord]) -> int:
        written = 0
        packed = pack_records(
            records, limits.TRACE_MESSAGE_MAX_RECORDS, limits.TRACE_MESSAGE_MAX_BYTES
        )
        for chunk, body in packed:
            put = PutRequest(
                topic=self.trace_topic,
                queue_id=0,
                body=body,
                flag=0,
                properties={PropertyKey.KEYS: " ".join(trace_message_keys(chunk))},
                sys_flag=0,
                born_timestamp_ms=self._clock.now_ms(),
                born_host=self._born_host,
                reconsume_times=0,
            )
            result = await self._store.put_message(put)
            if result.ok:
                written += len(chunk)
            else:
                self.dropped += len(chunk)
                _log.warning("trace records not stored: %s", result.status.name)
        self.records_written += written
        return written


def _came_back(group: str, opened: _Open, now_ms: int) -> TraceRecord:
    """The failed SubAfter of a POP delivery whose message came back in place."""
    return sub_after(opened.msg_id, opened.keys, group, opened.request_id, success=False,
                     cost_time_ms=now_ms - opened.delivered_ms, now_ms=now_ms,
                     context_code=_failure_code(opened))  # fmt: skip


def _failure_code(opened: _Open) -> int:
    """A pull delivery fails by a send-back (FAILED); a POP one when its invisible time runs
    out: FAILED when the consumer changed it (a nack), else TIME_OUT."""
    if opened.popped and not opened.changed:
        return TIME_OUT_CONTEXT_CODE
    return FAILED_CONTEXT_CODE


def _decoded(buffers: Sequence[Buffer]) -> list[MessageExt]:
    messages: list[MessageExt] = []
    for buffer in buffers:
        try:
            messages.extend(decode_records(buffer, decompress=False))
        except ProtocolError as error:  # one unreadable record does not stop the trace
            _log.warning("trace skipped a record: %s", error)
    return messages
