"""Natural batching of the producer's sends (``Producer(..., auto_batch=True)``, the default).

Sends are grouped in *lanes*: one lane per topic, chosen queue (or none: the producer picks
one per request) and send timeout. A lane of a chosen queue (``queue=``, a sharding key) has at
most one request in flight, which keeps the queue's order; a lane without one may have up to
limits.PRODUCER_AUTO_BATCH_MAX_IN_FLIGHT_REQUESTS single sends in flight, but a batch on the
wire is alone (see the limit for why):

* a send to a lane with room goes out at once, alone, exactly as without batching — so sparse
  sends never wait behind a slow answer (an fsync under SYNC flush);
* sends that arrive while the lane is full (or carries a batch) wait in the lane, in arrival
  order;
* when a request is answered, everything that waited goes out as ONE batch request
  (SEND_BATCH_MESSAGE, each message keeping its own UNIQ_KEY and properties), up to
  limits.PRODUCER_AUTO_BATCH_MAX_MESSAGES messages and PRODUCER_AUTO_BATCH_MAX_BYTES bytes;
  what is left goes in the next request.

No timer adds delay: a send waits only while its lane's requests are on the wire, which is
when the throughput is there to batch. Each send still gets its own
:class:`SendResult` — its UNIQ_KEY, its offset message id (the broker lists one per message)
and its queue offset (the first message's plus its index: a batch is stored contiguously) —
or its own error. The order of a chosen queue holds because its lane sends one request at a
time, in order.

Sends that cannot travel in a batch (compressed, delayed, retry-topic or not-waiting messages,
and the caller's own ``send_batch``) still queue in their lane, to keep the order, and go out
alone. When the broker refuses a whole batch for a message's fault (MESSAGE_ILLEGAL and
friends), nothing of it was stored: each message is sent again alone, so only the faulty
one fails.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Final

from bolide.base import limits
from bolide.base.errors import (
    InvalidMessageError,
    MessageTooLargeError,
    ProtocolError,
    RemoteError,
)
from bolide.client.message import SendResult
from bolide.client.producer.prepare import PreparedSend, join_prepared
from bolide.client.producer.results import settle_batch
from bolide.protocol.bodies import MessageQueue
from bolide.protocol.codes import ResponseCode
from bolide.protocol.record import BATCH_ENTRY_OVERHEAD_BYTES

__all__ = ["SendBatcher", "SendPrepared"]

SendPrepared = Callable[[PreparedSend, MessageQueue | None, int], Awaitable[SendResult]]
"""``send(prepared, queue, timeout_ms)``: one request (retried as the producer retries) to
``queue``, or to a queue the producer picks when ``queue`` is None."""

LaneKey = tuple[str, MessageQueue | None, int]

_MESSAGE_FAULT_CODES: Final = frozenset({ResponseCode.MESSAGE_ILLEGAL})
"""Codes a broker gives a whole batch for what one of its messages holds (a body over its
maxMessageSize, bad properties); nothing of the batch was stored, so each message is tried
alone."""


class _Waiting:
    __slots__ = ("future", "msg_id", "prepared", "size_bytes")

    def __init__(self, prepared: PreparedSend, future: asyncio.Future[SendResult]) -> None:
        self.prepared = prepared
        self.future = future
        self.msg_id = prepared.msg_id
        self.size_bytes = (
            BATCH_ENTRY_OVERHEAD_BYTES + len(prepared.body) + 3 * len(prepared.properties)
        )


class _Lane:
    __slots__ = ("batch_in_flight", "in_flight", "key", "loop", "max_in_flight", "waiting")

    def __init__(self, key: LaneKey, max_in_flight: int) -> None:
        self.key = key
        self.loop = asyncio.get_running_loop()
        """The loop the lane's requests run on (a lane lives while they are in flight): looked
        up once, since on Python 3.11 each look-up costs a getpid system call."""
        self.in_flight = 0
        self.batch_in_flight = False
        self.max_in_flight = max_in_flight
        self.waiting: deque[_Waiting] = deque()

    def has_room(self) -> bool:
        """Whether another request may start: below the bound, and no batch on the wire (a
        batch in flight means sends come faster than answers: what arrives waits for it)."""
        return self.in_flight < self.max_in_flight and not self.batch_in_flight


class SendBatcher:
    """The lanes of one producer; ``send`` is what the producer's sends await.

    ``send_prepared`` makes one request (with the producer's retries); ``max_messages`` and
    ``max_bytes`` bound a batch (``max_bytes`` also by the producer's ``max_message_bytes``);
    ``max_in_flight`` bounds the requests in flight of a lane without a chosen queue (a lane
    of a chosen queue has one, to keep its order).
    """

    def __init__(
        self,
        send_prepared: SendPrepared,
        *,
        max_messages: int = limits.PRODUCER_AUTO_BATCH_MAX_MESSAGES,
        max_bytes: int = limits.PRODUCER_AUTO_BATCH_MAX_BYTES,
        max_in_flight: int = limits.PRODUCER_AUTO_BATCH_MAX_IN_FLIGHT_REQUESTS,
    ) -> None:
        self._send_prepared = send_prepared
        self._max_messages = max_messages
        self._max_bytes = max_bytes
        self._max_in_flight = max_in_flight
        self._lanes: dict[LaneKey, _Lane] = {}
        self._drains: set[asyncio.Task[None]] = set()
        self.requests_sent = 0
        """Requests this batcher made (a batch counts once): for tests and benches."""

    def send(
        self, prepared: PreparedSend, queue: MessageQueue | None, timeout_ms: int
    ) -> Awaitable[SendResult]:
        """Send ``prepared`` through its lane: at once while the lane has room for another
        request in flight, else with what else waits, when one of them is answered. The
        caller awaits the answer at once (it joined its lane when it called); that raises as
        the producer's send. A plain function: a send that waits costs no coroutine of its
        own, only the future it awaits."""
        key = (prepared.topic, queue, timeout_ms)
        lane = self._lanes.get(key)
        if lane is None:
            max_in_flight = self._max_in_flight if queue is None else 1
            lane = self._lanes[key] = _Lane(key, max_in_flight)
        elif lane.waiting or lane.batch_in_flight or lane.in_flight >= lane.max_in_flight:
            future: asyncio.Future[SendResult] = lane.loop.create_future()
            lane.waiting.append(_Waiting(prepared, future))
            return future
        lane.in_flight += 1
        return self._send_now(lane, prepared, queue, timeout_ms)

    async def _send_now(
        self, lane: _Lane, prepared: PreparedSend, queue: MessageQueue | None, timeout_ms: int
    ) -> SendResult:
        """One request for ``prepared`` alone (counted in flight by the caller)."""
        self.requests_sent += 1
        try:
            return await self._send_prepared(prepared, queue, timeout_ms)
        finally:
            self._request_done(lane)

    @property
    def waiting_count(self) -> int:
        """Sends waiting in a lane for a request in flight to be answered."""
        return sum(len(lane.waiting) for lane in self._lanes.values())

    async def wait_idle(self) -> None:
        """Wait until every send that waited in a lane has its answer (for shutdown)."""
        while self._drains:
            await asyncio.gather(*self._drains, return_exceptions=True)

    # ---- internals ---------------------------------------------------------------------------

    def _request_done(self, lane: _Lane) -> None:
        """A request of ``lane`` was answered: what waits goes next, or the lane is dropped."""
        lane.in_flight -= 1
        self._start_groups(lane)
        self._drop_if_idle(lane)

    def _drop_if_idle(self, lane: _Lane) -> None:
        if lane.in_flight == 0 and not lane.waiting and self._lanes.get(lane.key) is lane:
            del self._lanes[lane.key]

    def _start_groups(self, lane: _Lane) -> None:
        """Start a task for each request ``lane`` has room for and sends waiting for."""
        while (group := self._next_group(lane)) is not None:
            task = lane.loop.create_task(
                self._send_group(lane, group), name=f"bolide-producer-batch-{lane.key[0]}"
            )
            self._drains.add(task)
            task.add_done_callback(self._drains.discard)

    def _next_group(self, lane: _Lane) -> list[_Waiting] | None:
        """The sends of ``lane``'s next request, counted in flight, if it has room and sends
        wait (None otherwise)."""
        while lane.waiting and lane.has_room():
            group = self._take(lane.waiting)
            if group:
                lane.in_flight += 1
                lane.batch_in_flight = len(group) > 1
                return group
        return None  # no room, or every one of them was cancelled

    async def _send_group(self, lane: _Lane, group: list[_Waiting]) -> None:
        """Send ``group`` (one request) for ``lane``, then, in the same task, what waits in
        the lane while it has room for it (one task per run of requests, not per request).

        After a batch the request still counts for one pass of the event loop: the callers
        just answered run first, and what they send next joins what waits, in one request,
        instead of going alone or behind it (no timer: the loop does not sleep).
        """
        next_group: list[_Waiting] | None = group
        while next_group is not None:
            group = next_group
            try:
                if len(group) == 1:
                    await self._send_alone(group[0], lane.key)
                else:
                    await self._send_together(group, lane.key)
                    await asyncio.sleep(0)
            except BaseException as error:  # cancelled (loop closing) or a bug: nobody hangs
                for waiting in (*group, *lane.waiting):
                    _fail(waiting, error)
                lane.waiting.clear()
                if len(group) > 1:
                    lane.batch_in_flight = False
                self._request_done(lane)
                raise
            if len(group) > 1:
                lane.batch_in_flight = False
            lane.in_flight -= 1
            next_group = self._next_group(lane)
            if next_group is not None:  # room for more (single sends): they go too
                self._start_groups(lane)
        self._drop_if_idle(lane)

    def _take(self, waiting: deque[_Waiting]) -> list[_Waiting]:
        """The next request's sends: one unbatchable send, or the batchable ones in a row
        within the bounds. Sends whose caller gave up (cancelled) are dropped unsent."""
        group: list[_Waiting] = []
        size_bytes = 0
        max_bytes = self._max_bytes
        while waiting and len(group) < self._max_messages:
            head = waiting[0]
            if head.future.done():  # cancelled by its caller: never sent
                waiting.popleft()
                continue
            if not head.prepared.batchable:
                if not group:
                    group.append(waiting.popleft())
                break
            if group and (
                size_bytes + head.size_bytes > max_bytes
                or size_bytes + head.size_bytes > head.prepared.settings.max_message_bytes
            ):
                break
            group.append(waiting.popleft())
            size_bytes += head.size_bytes
        return group

    async def _send_alone(self, waiting: _Waiting, key: LaneKey) -> None:
        self.requests_sent += 1
        try:
            result = await self._send_prepared(waiting.prepared, key[1], key[2])
        except Exception as error:  # handed to the caller that awaits it
            _fail(waiting, error)
        else:
            if not waiting.future.done():
                waiting.future.set_result(result)

    async def _send_together(self, group: list[_Waiting], key: LaneKey) -> None:
        try:
            batch = join_prepared([waiting.prepared for waiting in group])
        except ProtocolError:  # an entry the batch layout cannot carry: each alone
            await self._send_each_alone(group, key)
            return
        self.requests_sent += 1
        try:
            result = await self._send_prepared(batch, key[1], key[2])
        except (InvalidMessageError, MessageTooLargeError):
            await self._send_each_alone(group, key)
            return
        except RemoteError as error:
            if error.code in _MESSAGE_FAULT_CODES:
                await self._send_each_alone(group, key)
                return
            for waiting in group:
                _fail(waiting, error)
            return
        except Exception as error:  # handed to the callers that await it
            for waiting in group:
                _fail(waiting, error)
            return
        _split(result, group)

    async def _send_each_alone(self, group: list[_Waiting], key: LaneKey) -> None:
        for waiting in group:
            if not waiting.future.done():
                await self._send_alone(waiting, key)


def _split(result: SendResult, group: list[_Waiting]) -> None:
    """Each send's own result from the batch's: its offset id, the first offset + its index."""
    try:
        settle_batch(
            group,
            result.offset_msg_id,
            result.status,
            result.queue,
            result.queue_offset,
            result.transaction_id,
            result.region_id,
        )
    except ProtocolError as error:
        for waiting in group:
            _fail(waiting, error)


def _fail(waiting: _Waiting, error: BaseException) -> None:
    future = waiting.future
    if future.done():
        return
    if isinstance(error, asyncio.CancelledError):
        future.cancel()
    else:
        future.set_exception(error)
