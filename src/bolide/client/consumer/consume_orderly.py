"""Orderly consumption: each queue's messages reach the listener one batch at a time, in queue
order, on one member of the group at a time (RocketMQ's orderly consumption, Java
ConsumeMessageOrderlyService).

Three locks keep the order (clustering mode):

1. the **broker lock** (:mod:`.orderly_locks`): the rebalance takes a queue only after its
   broker granted this client the queue's lock (:meth:`OrderlyConsumeService.admit`), the
   lock is renewed every 20 s (``lock_all``), and the client stops consuming a queue whose
   lock it lost or did not renew for 30 s;
2. the **message-queue lock**: one consume task runs a queue at a time, even across the old
   and new process queue of a queue re-created by a rebalance;
3. the **consume lock** of the process queue: the listener runs under it, and a rebalance
   that takes the queue away marks it dropped, then waits for this lock — for the batch in
   flight to end, 1 s at most (:meth:`OrderlyConsumeService.quiesce`) — before it persists
   the offset and unlocks the queue on the broker (:meth:`OrderlyConsumeService.release`).
   When the batch does not end in time the queue stays (dropped) and the next rebalance
   tries again, so the broker lock is never given up under a running listener.

A consume task (Java ``ConsumeRequest``) takes the smallest-offset messages
(:meth:`ProcessQueue.take_messages`, at most ``batch_max_size``) and calls the listener, again
and again while it answers SUCCESS (:meth:`ProcessQueue.commit`; the offset store gets the
new offset after every batch). It yields when the cache is empty, after 60 s of continuous
work (to run again 10 ms later), or when the lock is missing or expired (it asks the broker
again after 100 ms, then every 3 s while refused).

``SUSPEND_CURRENT_QUEUE_A_MOMENT`` (or an exception) puts the batch back
(:meth:`ProcessQueue.make_messages_to_consume_again`, each message's reconsume times + 1) and
consumes it again after the suspend time (the context's, else the consumer's, default 1 s,
clamped to 10 ms .. 30 s): the queue is blocked meanwhile — nothing is skipped. With
``max_reconsume_times`` set (default unlimited, as RocketMQ), a message that already failed
that many times goes to ``%DLQ%<group>`` instead (CONSUMER_SEND_MSG_BACK with a negative delay
level; if that fails, re-sent to ``%RETRY%<group>`` past its maximum, which the broker routes
to the DLQ) and the queue moves on; only the leading messages of a batch are dead-lettered,
so the committed offset never passes a message still to be retried. A message that cannot be
sent to the DLQ either way is retried like any other. Each queue's retry count and blocked
time are reported in the consumer's running info (:meth:`OrderlyConsumeService.queue_info`).

Broadcasting mode takes no locks; failures are retried the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import weakref
from collections.abc import Callable, Coroutine, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, cast

from bolide.base import limits
from bolide.base.clock import Clock
from bolide.base.errors import BolideError, invariant
from bolide.base.service import Service
from bolide.client.consumer.consume_concurrently import SendBackClient, retry_message
from bolide.client.consumer.consume_rates import ConsumeRates
from bolide.client.consumer.listener import AdaptedListener, ConsumeResult, OrderlyResult
from bolide.client.consumer.offset_store import OffsetStore
from bolide.client.consumer.orderly_locks import QueueLocker
from bolide.client.consumer.process_queue import ProcessQueue
from bolide.client.namespace import without_namespace
from bolide.client.trace import TraceDispatcher
from bolide.protocol.bodies import MessageModel, MessageQueue
from bolide.protocol.message import MessageExt, PropertyKey
from bolide.protocol.system_topics import retry_topic

__all__ = [
    "DLQ_DELAY_LEVEL",
    "INFO_BLOCKED_MS",
    "INFO_DEAD_LETTERED",
    "INFO_RETRY_TIMES",
    "OrderlyConsumeService",
    "OrderlyContext",
    "OrderlyStats",
    "clamp_suspend_ms",
    "dead_letter_prefix",
    "orderly_result_of",
]

_log = logging.getLogger("bolide.client.orderly")

DLQ_DELAY_LEVEL = -1
"""A send-back delay level below 0 asks the broker to store the message in %DLQ% at once."""
INFO_RETRY_TIMES = "orderlyRetryTimes"
"""Running-info key: failed attempts in a row of the message heading the queue."""
INFO_BLOCKED_MS = "orderlyBlockedMillis"
"""Running-info key: how long (ms) the queue has been blocked by a failing message (0: not)."""
INFO_DEAD_LETTERED = "orderlyDeadLetterCount"
"""Running-info key: messages of the queue sent to %DLQ% after max_reconsume_times."""


@dataclass(slots=True)
class OrderlyContext:
    """Per-call context handed to a two-argument orderly listener: the queue of the batch, and
    ``suspend_time_ms`` the listener may set before answering SUSPEND_CURRENT_QUEUE_A_MOMENT
    (-1, the default: the consumer's suspend time)."""

    topic: str
    broker_name: str
    queue_id: int
    suspend_time_ms: int = -1


@dataclass(slots=True)
class OrderlyStats:
    """Counters for running info and tests."""

    consumed_ok: int = 0
    suspended: int = 0
    """Messages handed back for a retry (SUSPEND, an exception, or a bad answer)."""
    dead_lettered: int = 0
    dead_letter_failed: int = 0
    consume_time_total_ms: int = 0


@dataclass(slots=True)
class _QueueState:
    """What the service keeps per process queue (dies with it)."""

    consume_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    frozen: bool = False
    """Set once a rebalance took the queue away: its offset was (or is being) persisted, so
    later commits must not touch the offset store."""
    retry_times: int = 0
    blocked_since_ms: int | None = None
    dead_lettered: int = 0

    def unblock(self) -> None:
        self.retry_times = 0
        self.blocked_since_ms = None


class _Outcome(enum.Enum):
    CONTINUE = "continue"
    """Take the next batch now."""
    DONE = "done"
    """The task ends: the cache is empty, or the queue was dropped or the service stops."""
    LATER = "later"
    """The task ends and another one was scheduled for the queue."""


def orderly_result_of(answer: object) -> OrderlyResult | None:
    """The listener's answer as an :class:`OrderlyResult`: ConsumeResult.SUCCESS counts as
    SUCCESS and RECONSUME_LATER as a suspension; anything else is None (a suspension)."""
    if isinstance(answer, OrderlyResult):
        return answer
    if answer is ConsumeResult.SUCCESS:
        return OrderlyResult.SUCCESS
    if answer is ConsumeResult.RECONSUME_LATER:
        return OrderlyResult.SUSPEND_CURRENT_QUEUE_A_MOMENT
    return None


def clamp_suspend_ms(requested_ms: int, default_ms: int) -> int:
    """The suspension to apply: ``requested_ms`` (-1: ``default_ms``) within 10 ms .. 30 s."""
    suspend_ms = default_ms if requested_ms == -1 else requested_ms
    return min(max(suspend_ms, limits.ORDERLY_SUSPEND_MIN_MS), limits.ORDERLY_SUSPEND_MAX_MS)


def dead_letter_prefix(
    messages: Sequence[MessageExt], max_reconsume_times: int | None
) -> list[MessageExt]:
    """The leading messages of a failed batch that reached ``max_reconsume_times`` failures
    (None: unlimited, never any): those go to the DLQ. The prefix stops at the first message
    still allowed a retry, so committing the prefix never skips a message to retry."""
    if max_reconsume_times is None:
        return []
    prefix: list[MessageExt] = []
    for message in messages:
        if message.reconsume_times < max_reconsume_times:
            break
        prefix.append(message)
    return prefix


async def _acquire_within(lock: asyncio.Lock, clock: Clock, timeout_ms: int) -> bool:
    """Acquire ``lock`` within ``timeout_ms`` of ``clock`` time; whether it is now held."""
    if not lock.locked():
        await lock.acquire()
        return True
    acquiring = asyncio.ensure_future(lock.acquire())
    timer = asyncio.ensure_future(clock.sleep_ms(timeout_ms))
    try:
        await asyncio.wait({acquiring, timer}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        timer.cancel()
        if not acquiring.done():
            acquiring.cancel()
    try:
        await acquiring
    except asyncio.CancelledError:
        return False
    return True


OrderlyCall = Callable[[list[MessageExt], OrderlyContext], Any]
"""An orderly listener as it is called (messages, context)."""


class OrderlyConsumeService:
    """Consumes owned queues in order (module docstring).

    ``locker`` talks to the brokers (clustering; None in broadcasting mode). ``owned_queues``
    returns the process-queue table. ``request_rebalance`` is called shortly after the broker
    refused the lock of an assigned queue, so that the rebalance retries it soon. Options:
    ``batch_max_size`` (1 message per call), ``thread_max`` (20 threads for plain-function
    listeners), ``max_reconsume_times`` (None: unlimited), ``suspend_time_ms`` (1 s),
    ``client_lock_max_live_ms`` (30 s), ``lock_renew_interval_ms`` (20 s),
    ``consume_continuously_max_ms`` (60 s), ``drop_wait_ms`` (1 s).
    """

    def __init__(
        self,
        group: str,
        listener: AdaptedListener,
        *,
        message_model: MessageModel,
        offset_store: OffsetStore,
        send_back: SendBackClient,
        locker: QueueLocker | None,
        clock: Clock,
        owned_queues: Callable[[], Mapping[MessageQueue, ProcessQueue]],
        request_rebalance: Callable[[], None] | None = None,
        batch_max_size: int = limits.CONSUME_BATCH_MAX_MESSAGES,
        thread_max: int = limits.CONSUME_THREAD_MAX_COUNT,
        max_reconsume_times: int | None = None,
        suspend_time_ms: int = limits.ORDERLY_SUSPEND_DEFAULT_MS,
        client_lock_max_live_ms: int = limits.CLIENT_LOCK_MAX_LIVE_MS,
        lock_renew_interval_ms: int = limits.CLIENT_LOCK_RENEW_INTERVAL_MS,
        consume_continuously_max_ms: int = limits.ORDERLY_CONSUME_CONTINUOUSLY_MAX_MS,
        drop_wait_ms: int = limits.ORDERLY_DROP_WAIT_MS,
        namespace: str | None = None,
    ) -> None:
        invariant(batch_max_size > 0 and thread_max > 0, "positive batch size and workers")
        invariant(lock_renew_interval_ms < client_lock_max_live_ms, "renew before expiry")
        clustering = message_model is MessageModel.CLUSTERING
        invariant(not clustering or locker is not None, "clustering needs a queue locker")
        self.group = group
        self.namespace = namespace
        """The consumer's namespace: the listener sees topics without it."""
        self.trace: TraceDispatcher | None = None
        """With the consumer's ``enable_trace``: SubBefore / SubAfter per message of a call."""
        self.stats = OrderlyStats()
        self.rates = ConsumeRates()
        """Per topic consume TPS (ok / suspended) and mean listener ms, like the concurrent
        service's, for GET_CONSUMER_RUNNING_INFO."""
        self._call = cast(OrderlyCall, listener.call)
        self._listener_is_async = listener.is_async
        self._clustering = clustering
        self._offset_store = offset_store
        self._send_back = send_back
        self._locker = locker
        self._clock = clock
        self._owned_queues = owned_queues
        self._request_rebalance = request_rebalance
        self._batch_max_size = batch_max_size
        self._thread_max = thread_max
        self.max_reconsume_times = max_reconsume_times
        self._suspend_time_ms = suspend_time_ms
        self._client_lock_max_live_ms = client_lock_max_live_ms
        self._lock_renew_interval_ms = lock_renew_interval_ms
        self._consume_continuously_max_ms = consume_continuously_max_ms
        self._drop_wait_ms = drop_wait_ms
        self._queue_locks: dict[MessageQueue, asyncio.Lock] = {}
        self._states: weakref.WeakKeyDictionary[ProcessQueue, _QueueState] = (
            weakref.WeakKeyDictionary()
        )
        self._active: set[ProcessQueue] = set()
        """Process queues with a consume task running or scheduled (Java: ``consuming``)."""
        self._tasks: set[asyncio.Task[None]] = set()
        self._busy: set[asyncio.Task[Any]] = set()
        """Tasks inside a listener call (shutdown lets them finish)."""
        self._rebalance_retry: asyncio.Task[None] | None = None
        self._lock_renewal: Service | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._accepting = False
        self._stopping = False

    # ---- lifecycle ---------------------------------------------------------------------------

    @property
    def in_flight(self) -> int:
        """Listener calls running now."""
        return len(self._busy)

    def start(self) -> None:
        """Start the lock renewal (clustering) and accept messages; on the running loop."""
        invariant(not self._accepting and not self._stopping, "orderly service started twice")
        if not self._listener_is_async:
            self._executor = ThreadPoolExecutor(
                self._thread_max, thread_name_prefix=f"bolide-orderly-{self.group}"
            )
        if self._locker is not None and self._clustering:
            self._lock_renewal = Service(
                f"lock-all-{self.group}",
                self._renew_locks,
                interval_ms=self._lock_renew_interval_ms,
                clock=self._clock,
                initial_delay_ms=min(
                    limits.CLIENT_LOCK_RENEW_INITIAL_DELAY_MS, self._lock_renew_interval_ms
                ),
            )
            self._lock_renewal.start()
        self._accepting = True

    async def shutdown(self, timeout_ms: int = limits.CONSUME_SHUTDOWN_GRACE_MS) -> None:
        """Stop consuming: scheduled tasks are cancelled, listener calls in progress get
        ``timeout_ms`` to finish (their results are still committed), then everything stops.
        The broker locks are kept: the owner persists offsets, then calls
        :meth:`unlock_all`."""
        self._accepting = False
        self._stopping = True
        if self._lock_renewal is not None:
            await self._lock_renewal.stop(timeout_ms)
        if self._rebalance_retry is not None:
            self._rebalance_retry.cancel()
        for task in list(self._tasks):
            if task not in self._busy:
                task.cancel()
        if self._tasks:
            _, unfinished = await asyncio.wait(set(self._tasks), timeout=timeout_ms / 1000)
            for task in unfinished:
                task.cancel()
            for task in unfinished:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._active.clear()
        if self._executor is not None:
            # Threads still inside a listener keep running, but nothing waits for them.
            self._executor.shutdown(wait=False, cancel_futures=True)

    async def unlock_all(self) -> None:
        """Unlock every owned queue on its broker (shutdown, after offsets were persisted)."""
        if self._locker is not None and self._clustering:
            await self._locker.unlock_all()

    async def _renew_locks(self) -> None:
        if self._locker is not None:
            await self._locker.lock_all()

    # ---- what the pull loop and the rebalance call -------------------------------------------

    def submit(
        self, messages: Sequence[MessageExt], process_queue: ProcessQueue, queue: MessageQueue
    ) -> None:
        """The pull loop cached ``messages`` in ``process_queue``: start a consume task for the
        queue unless one runs or is scheduled (it will take them)."""
        if not self._accepting or process_queue.dropped or process_queue in self._active:
            return
        self._active.add(process_queue)
        self._schedule(queue, process_queue, 0)

    def pull_hold_ms(self, queue: MessageQueue) -> int:
        """How long the pull loop waits before pulling ``queue``: 3 s while its lock is not
        held (clustering), else 0."""
        process_queue = self._owned_queues().get(queue)
        if self._clustering and process_queue is not None and not process_queue.locked:
            return limits.ORDERLY_PULL_DELAY_NOT_LOCKED_MS
        return 0

    async def admit(self, queue: MessageQueue, process_queue: ProcessQueue) -> bool:
        """Before the rebalance takes ``queue``: lock it on its broker (clustering); whether
        it may be taken. A refusal asks for another rebalance soon."""
        if self._locker is None or not self._clustering:
            return True
        if await self._locker.lock(queue, process_queue):
            return True
        self._retry_rebalance_soon()
        return False

    async def quiesce(self, queue: MessageQueue, process_queue: ProcessQueue) -> bool:
        """Before the rebalance gives ``queue`` away (``process_queue`` already dropped): wait
        for the batch in flight, ``drop_wait_ms`` at most. True: no listener call runs or
        will run for it, and its commits stop; False: still busy (try again later)."""
        state = self._state(process_queue)
        if not await _acquire_within(state.consume_lock, self._clock, self._drop_wait_ms):
            process_queue.try_unlock_times += 1
            _log.warning("%s: %s is still consuming; not given up yet", self.group, queue)
            return False
        try:
            state.frozen = True
        finally:
            state.consume_lock.release()
        return True

    async def release(self, queue: MessageQueue, process_queue: ProcessQueue) -> None:
        """After the rebalance gave ``queue`` away and persisted its offset: unlock it."""
        self._active.discard(process_queue)
        if self._locker is not None and self._clustering:
            await self._locker.unlock(queue, process_queue)

    def queue_info(self, process_queue: ProcessQueue) -> dict[str, int]:
        """The queue's orderly figures for running info (keys ``INFO_*``)."""
        state = self._states.get(process_queue) or _QueueState()
        blocked_ms = 0
        if state.blocked_since_ms is not None:
            blocked_ms = max(0, self._clock.now_ms() - state.blocked_since_ms)
        return {
            INFO_RETRY_TIMES: state.retry_times,
            INFO_BLOCKED_MS: blocked_ms,
            INFO_DEAD_LETTERED: state.dead_lettered,
        }

    # ---- scheduling ----------------------------------------------------------------------------

    def _state(self, process_queue: ProcessQueue) -> _QueueState:
        state = self._states.get(process_queue)
        if state is None:
            state = self._states[process_queue] = _QueueState()
        return state

    def _queue_lock(self, queue: MessageQueue) -> asyncio.Lock:
        lock = self._queue_locks.get(queue)
        if lock is None:
            lock = self._queue_locks[queue] = asyncio.Lock()
        return lock

    def _spawn(self, coroutine: Coroutine[Any, Any, None], name: str) -> None:
        if self._stopping:
            coroutine.close()  # shutting down: nothing new is scheduled
            return
        task = asyncio.get_running_loop().create_task(coroutine, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            _log.error("%s: orderly task crashed", self.group, exc_info=task.exception())

    def _schedule(self, queue: MessageQueue, process_queue: ProcessQueue, delay_ms: int) -> None:
        """Run a consume task for the queue after ``delay_ms`` (it stays active meanwhile)."""

        async def later() -> None:
            if delay_ms > 0:
                await self._clock.sleep_ms(delay_ms)
            await self._consume_request(queue, process_queue)

        self._spawn(later(), f"orderly-{queue}")

    def _relock_later(
        self, queue: MessageQueue, process_queue: ProcessQueue, delay_ms: int
    ) -> None:
        """Java ``tryLockLaterAndReconsume``: after ``delay_ms`` ask the broker for the lock,
        then consume 10 ms later if granted, else look again in 3 s."""

        async def later() -> None:
            await self._clock.sleep_ms(delay_ms)
            if self._ends(process_queue):
                return
            locked = self._locker is not None and await self._locker.lock(queue, process_queue)
            retry_ms = limits.ORDERLY_RESUBMIT_DELAY_MS
            self._schedule(
                queue, process_queue, retry_ms if locked else limits.ORDERLY_RELOCK_RETRY_DELAY_MS
            )

        self._spawn(later(), f"orderly-relock-{queue}")

    def _retry_rebalance_soon(self) -> None:
        if self._request_rebalance is None or self._stopping:
            return
        if self._rebalance_retry is not None and not self._rebalance_retry.done():
            return
        request = self._request_rebalance

        async def later() -> None:
            await self._clock.sleep_ms(limits.ORDERLY_LOCK_RETRY_REBALANCE_DELAY_MS)
            request()

        self._rebalance_retry = asyncio.get_running_loop().create_task(
            later(), name=f"orderly-rebalance-retry-{self.group}"
        )

    def _ends(self, process_queue: ProcessQueue) -> bool:
        """Whether the queue's task chain must end now (dropped, or stopping); ends it."""
        if process_queue.dropped or self._stopping:
            self._active.discard(process_queue)
            return True
        return False

    def _lock_valid(self, process_queue: ProcessQueue) -> bool:
        return process_queue.locked and not process_queue.is_lock_expired(
            self._clock.now_ms(), self._client_lock_max_live_ms
        )

    # ---- consuming -----------------------------------------------------------------------------

    async def _consume_request(self, queue: MessageQueue, process_queue: ProcessQueue) -> None:
        """One consume task of ``queue`` (Java ``ConsumeRequest.run``)."""
        if self._ends(process_queue):
            return
        async with self._queue_lock(queue):
            if self._clustering and not self._lock_valid(process_queue):
                if not self._ends(process_queue):
                    self._relock_later(queue, process_queue, limits.ORDERLY_RELOCK_FIRST_DELAY_MS)
                return
            begin_ms = self._clock.monotonic_ms()
            try:
                outcome = _Outcome.CONTINUE
                while outcome is _Outcome.CONTINUE:
                    outcome = await self._consume_batch(queue, process_queue, begin_ms)
            except Exception:  # outside the listener (which is guarded): send-back, commit
                self._recover(queue, process_queue)

    def _recover(self, queue: MessageQueue, process_queue: ProcessQueue) -> None:
        """A consume task failed outside the listener: roll its batch back (the messages are
        consumed again, in order) and try the queue again after the suspend time, so the
        queue is never left marked active with nobody consuming it."""
        _log.exception(
            "%s: the consume task of %s failed; its batch is rolled back and retried",
            self.group,
            queue,
        )
        process_queue.rollback()
        if self._ends(process_queue):
            return
        self._schedule(queue, process_queue, self._suspend_time_ms)

    async def _consume_batch(
        self, queue: MessageQueue, process_queue: ProcessQueue, begin_ms: int
    ) -> _Outcome:
        if self._ends(process_queue):
            return _Outcome.DONE
        if self._clustering and not self._lock_valid(process_queue):
            self._relock_later(queue, process_queue, limits.ORDERLY_RESUBMIT_DELAY_MS)
            return _Outcome.LATER
        if self._clock.monotonic_ms() - begin_ms > self._consume_continuously_max_ms:
            self._schedule(queue, process_queue, limits.ORDERLY_RESUBMIT_DELAY_MS)
            return _Outcome.LATER
        messages = process_queue.take_messages(self._batch_max_size, self._clock.now_ms())
        if not messages:
            # No await since take_messages: a pull caching more now starts a new task.
            self._active.discard(process_queue)
            return _Outcome.DONE
        self._restore_retry_topics(messages)
        context = OrderlyContext(
            without_namespace(self.namespace, queue.topic), queue.broker_name, queue.queue_id
        )
        state = self._state(process_queue)
        async with state.consume_lock:
            if process_queue.dropped:
                self._active.discard(process_queue)
                return _Outcome.DONE
            task = asyncio.current_task()
            invariant(task is not None, "consume tasks run as tasks")
            assert task is not None  # for mypy; the invariant says why
            self._busy.add(task)
            try:
                started_ms = self._clock.monotonic_ms()
                wall_started_ms = self._clock.now_ms()
                result = await self._call_listener(messages, context)
                spent_ms = self._clock.monotonic_ms() - started_ms
                if self.trace is not None:
                    self.trace.consumed(messages, started_ms=wall_started_ms,
                                        ended_ms=wall_started_ms + spent_ms,
                                        success=result is OrderlyResult.SUCCESS)  # fmt: skip
                self.stats.consume_time_total_ms += spent_ms
                ok = len(messages) if result is OrderlyResult.SUCCESS else 0
                self.rates.record(
                    queue.topic, ok, len(messages) - ok, spent_ms, self._clock.now_ms()
                )
                # Under the consume lock, so a rebalance taking the queue sees this commit.
                return await self._process_result(queue, process_queue, messages, result, context)
            finally:
                self._busy.discard(task)

    def _restore_retry_topics(self, messages: list[MessageExt]) -> None:
        group_retry_topic = retry_topic(self.group)
        for message in messages:
            original_topic = message.properties.get(PropertyKey.RETRY_TOPIC)
            if original_topic and message.topic == group_retry_topic:
                message.topic = original_topic
            message.topic = without_namespace(self.namespace, message.topic)

    async def _call_listener(
        self, messages: list[MessageExt], context: OrderlyContext
    ) -> OrderlyResult | None:
        try:
            if self._listener_is_async:
                answer = await self._call(list(messages), context)
            else:
                loop = asyncio.get_running_loop()
                answer = await loop.run_in_executor(
                    self._executor, self._call, list(messages), context
                )
        except Exception:
            _log.exception("%s: the orderly listener raised; the batch is suspended", self.group)
            return None
        result = orderly_result_of(answer)
        if result is None:
            _log.warning("%s: the orderly listener returned %r; suspending", self.group, answer)
        return result

    async def _process_result(
        self,
        queue: MessageQueue,
        process_queue: ProcessQueue,
        messages: list[MessageExt],
        result: OrderlyResult | None,
        context: OrderlyContext,
    ) -> _Outcome:
        """Java ``processConsumeResult`` with auto-commit, plus the bounded retries."""
        state = self._state(process_queue)
        if result is OrderlyResult.SUCCESS:
            self.stats.consumed_ok += len(messages)
            state.unblock()
            self._commit(queue, process_queue, state)
            return _Outcome.CONTINUE
        self.stats.suspended += len(messages)
        dead = await self._dead_letter(
            queue, dead_letter_prefix(messages, self.max_reconsume_times)
        )
        state.dead_lettered += len(dead)
        retry = messages[len(dead) :]
        if not retry:
            state.unblock()
            self._commit(queue, process_queue, state)
            return _Outcome.CONTINUE
        for message in retry:
            message.reconsume_times += 1
        process_queue.make_messages_to_consume_again(retry)
        if dead:
            state.unblock()
            self._commit(queue, process_queue, state)  # the dead-lettered prefix only
        state.retry_times = retry[0].reconsume_times
        if state.blocked_since_ms is None:
            state.blocked_since_ms = self._clock.now_ms()
        suspend_ms = clamp_suspend_ms(context.suspend_time_ms, self._suspend_time_ms)
        self._schedule(queue, process_queue, suspend_ms)
        return _Outcome.LATER

    def _commit(self, queue: MessageQueue, process_queue: ProcessQueue, state: _QueueState) -> None:
        offset = process_queue.commit()
        # A normal hand-over lets the batch in flight commit (quiesce waits for it); a reset
        # does not: its offsets are written after the quiesce and must stay.
        if offset >= 0 and not state.frozen and not process_queue.offset_reset:
            self._offset_store.update_offset(queue, offset, increase_only=False)

    async def _dead_letter(
        self, queue: MessageQueue, messages: list[MessageExt]
    ) -> list[MessageExt]:
        """Send ``messages`` to the DLQ in order; returns those sent (a prefix: the first
        that cannot be sent stops the rest, which are retried instead)."""
        sent: list[MessageExt] = []
        for message in messages:
            if not await self._dead_letter_one(queue, message):
                self.stats.dead_letter_failed += 1
                break
            self.stats.dead_lettered += 1
            sent.append(message)
            _log.warning(
                "%s: %s failed %d times; sent to the dead-letter queue",
                self.group,
                message.msg_id,
                message.reconsume_times,
            )
        return sent

    async def _dead_letter_one(self, queue: MessageQueue, message: MessageExt) -> bool:
        max_times = self.max_reconsume_times
        invariant(max_times is not None, "dead letters only with a maximum")
        assert max_times is not None  # for mypy; the invariant says why
        try:
            await self._send_back.send_back(message, queue.broker_name, DLQ_DELAY_LEVEL, max_times)
            return True
        except BolideError as error:
            _log.info("%s: DLQ send-back of %s failed (%s)", self.group, message.msg_id, error)
        try:
            # RECONSUME_TIME past MAX_RECONSUME_TIMES: the broker stores it in %DLQ%.
            await self._send_back.send_to_retry_topic(retry_message(message, self.group, max_times))
            return True
        except BolideError as error:
            _log.warning("%s: cannot dead-letter %s: %s", self.group, message.msg_id, error)
            return False
