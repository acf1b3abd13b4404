"""The pull loop: one task per owned queue, long-polling its broker (RocketMQ's offset management,
docs/protocol.md §2.4).

Each pass of a queue's loop (Java ``DefaultMQPushConsumerImpl.pullMessage``):

1. stop when the process queue is dropped (rebalanced away, offset illegal, shutdown);
2. record the pull time (pull-expired detection), then apply flow control: while the queue's
   cache holds too many messages or bytes, or spans too many offsets, wait 50 ms and look
   again; a paused queue waits as long as its owner says (``hold``);
3. pull ``batch_size`` messages from ``next_offset`` with the SUSPEND flag (the broker parks
   the pull up to ``suspend_timeout_ms`` when nothing is there) and, in clustering mode, the
   committed offset piggy-backed (COMMIT_OFFSET flag when it is > 0);
4. act on the status:

   ============== ==========================================================================
   FOUND          next offset = nextBeginOffset; re-filter by tag (brokers compare only tag
                  hashes); cache the messages and hand them to the sink (none left: as
                  NO_MATCHED_MSG); pull again at once
   NO_NEW_MSG,    next offset = nextBeginOffset; when nothing is cached, move the committed
   NO_MATCHED_MSG offset there too (``correctTagsOffset``); pull again at once
   OFFSET_ILLEGAL drop the process queue; 10 s later the rebalance stores nextBeginOffset as
                  the queue's offset, persists it and removes the queue, which the next
                  rebalance adds again
   error          wait 3 s (20 ms for FLOW_CONTROL) and pull again
   ============== ==========================================================================
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from bolide.base import limits
from bolide.base.clock import Clock
from bolide.base.errors import BolideError, RemoteError
from bolide.client.consumer.consume_rates import ConsumeRates
from bolide.client.consumer.offset_store import OffsetStore, ReadOffsetType
from bolide.client.consumer.process_queue import ProcessQueue
from bolide.client.rpc import PullResult, PullStatus, filter_by_tags
from bolide.protocol.bodies import MessageQueue, SubscriptionData
from bolide.protocol.codes import ResponseCode
from bolide.protocol.headers import PullMessageRequestHeader, PullSysFlag
from bolide.protocol.message import MessageExt
from bolide.protocol.system_topics import is_retry_topic

__all__ = [
    "PullClient",
    "PullLoop",
    "PullSettings",
    "build_pull_sys_flag",
    "is_flow_blocked",
]

_log = logging.getLogger("bolide.client.pull")


class PullClient(Protocol):
    """Sends one PULL_MESSAGE to the master of the queue's broker."""

    async def pull_message(
        self, queue: MessageQueue, header: PullMessageRequestHeader, timeout_ms: int
    ) -> PullResult:
        """Raises :class:`BolideError` (broker unknown, error code, transport)."""
        ...


@dataclass(frozen=True, slots=True)
class PullSettings:
    """Pull parameters; defaults are the Java push consumer's."""

    batch_size: int = limits.PULL_BATCH_SIZE_MESSAGES
    suspend_timeout_ms: int = limits.PULL_SUSPEND_TIMEOUT_MS
    rpc_timeout_ms: int = limits.PULL_RPC_TIMEOUT_MS
    max_cached_messages: int = limits.PROCESS_QUEUE_MAX_MESSAGES
    max_cached_bytes: int = limits.PROCESS_QUEUE_MAX_BYTES
    max_span_offsets: int = limits.PROCESS_QUEUE_MAX_SPAN_OFFSETS
    commit_offset_enabled: bool = True
    """Piggy-back the committed offset (clustering only: broadcast progress is local)."""
    send_subscription: bool = False
    """Put the subscription in every pull (FLAG_SUBSCRIPTION). A push consumer relies on the
    one its heartbeat registered, as Java's does; a lite pull consumer sends it."""


# Plain ints: ``int | IntFlag`` runs IntFlag.__or__, Python code, on every pull.
_COMMIT_OFFSET = int(PullSysFlag.COMMIT_OFFSET)
_SUSPEND = int(PullSysFlag.SUSPEND)
_SUBSCRIPTION = int(PullSysFlag.SUBSCRIPTION)


def build_pull_sys_flag(*, commit_offset: bool, suspend: bool, subscription: bool) -> int:
    """The PULL_MESSAGE sysFlag (PullSysFlag.buildSysFlag)."""
    flag = 0
    if commit_offset:
        flag |= _COMMIT_OFFSET
    if suspend:
        flag |= _SUSPEND
    if subscription:
        flag |= _SUBSCRIPTION
    return flag


def is_flow_blocked(process_queue: ProcessQueue, settings: PullSettings) -> bool:
    """Whether the queue's cache is over a flow-control threshold (count, bytes or span)."""
    return (
        process_queue.message_count > settings.max_cached_messages
        or process_queue.message_bytes > settings.max_cached_bytes
        or process_queue.max_span > settings.max_span_offsets
    )


def _dropped(process_queue: ProcessQueue) -> bool:
    """Read through a call: the flag changes while the loop awaits (type checkers assume not)."""
    return process_queue.dropped


MessageSink = Callable[[list[MessageExt], ProcessQueue, MessageQueue], None]
"""Receives the messages of a FOUND pull, already cached in the process queue."""


class PullLoop:
    """The pull tasks of one consumer (module docstring).

    ``subscription(topic)`` gives the current subscription (None: not subscribed, wait 3 s);
    ``sink`` receives found messages; ``fix_offset(queue, process_queue, offset)`` is the
    OFFSET_ILLEGAL fix-up, called 10 s after the status; ``hold(queue)`` returns how long
    to wait before pulling ``queue`` (ms; 0: pull now), for whole-consumer limits;
    ``skipped(queue, process_queue, offset)`` hears that everything before ``offset`` is
    consumed or filtered while nothing is cached (default: commit it, increase-only).
    """

    def __init__(
        self,
        group: str,
        *,
        client: PullClient,
        offset_store: OffsetStore,
        subscription: Callable[[str], SubscriptionData | None],
        sink: MessageSink,
        fix_offset: Callable[[MessageQueue, ProcessQueue, int], Awaitable[None]],
        clock: Clock,
        settings: PullSettings | None = None,
        hold: Callable[[MessageQueue], int] = lambda queue: 0,
        skipped: Callable[[MessageQueue, ProcessQueue, int], None] | None = None,
    ) -> None:
        self.group = group
        self.settings = settings or PullSettings()
        self._client = client
        self._offset_store = offset_store
        self._subscription = subscription
        self._sink = sink
        self._fix_offset = fix_offset
        self._clock = clock
        self._hold = hold
        self._skipped = skipped or self._commit_skipped
        self._tasks: dict[MessageQueue, asyncio.Task[None]] = {}
        self.next_offsets: dict[MessageQueue, int] = {}
        """Where each queue's next pull starts (kept after its task stops)."""
        self._fixups: set[asyncio.Task[None]] = set()
        self._stopped = False
        self.pull_count = 0
        """Pull requests answered (any status)."""
        self.found_count = 0
        """Messages handed to the sink."""
        self.rates = ConsumeRates()
        """Per topic: messages found per pull and each pull's round trip (ms), for the
        ``pullTPS`` / ``pullRT`` of GET_CONSUMER_RUNNING_INFO (Java counts them alike)."""

    @property
    def pulling(self) -> frozenset[MessageQueue]:
        """Queues with a pull task."""
        return frozenset(queue for queue, task in self._tasks.items() if not task.done())

    def start(self, queue: MessageQueue, process_queue: ProcessQueue, next_offset: int) -> None:
        """Start pulling ``queue`` from ``next_offset`` (replaces a previous task of it)."""
        if self._stopped:
            return
        self.stop(queue)
        task = asyncio.get_running_loop().create_task(
            self._queue_loop(queue, process_queue, next_offset), name=f"pull-{queue}"
        )
        self._tasks[queue] = task
        task.add_done_callback(lambda done: self._forget(queue, done))

    def stop(self, queue: MessageQueue) -> None:
        """Stop pulling ``queue`` now (a parked long poll is abandoned)."""
        task = self._tasks.pop(queue, None)
        if task is not None:
            task.cancel()

    async def shutdown(self) -> None:
        """Stop every pull task and pending fix-up; wait until they are gone."""
        self._stopped = True
        tasks = list(self._tasks.values()) + list(self._fixups)
        self._tasks.clear()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _forget(self, queue: MessageQueue, task: asyncio.Task[None]) -> None:
        if self._tasks.get(queue) is task:
            del self._tasks[queue]
        if not task.cancelled() and task.exception() is not None:
            _log.error("%s: pull task of %s crashed", self.group, queue, exc_info=task.exception())

    async def _queue_loop(
        self, queue: MessageQueue, process_queue: ProcessQueue, next_offset: int
    ) -> None:
        self.next_offsets[queue] = next_offset
        while not _dropped(process_queue):
            process_queue.last_pull_timestamp_ms = self._clock.now_ms()
            delay_ms = self._delay_before_pull(queue, process_queue)
            if delay_ms:
                await self._clock.sleep_ms(delay_ms)
                continue
            subscription = self._subscription(queue.topic)
            if subscription is None:
                await self._clock.sleep_ms(limits.PULL_DELAY_ON_ERROR_MS)
                continue
            began_ms = self._clock.now_ms()
            try:
                result = await self._pull(queue, subscription, next_offset)
            except BolideError as error:
                await self._clock.sleep_ms(self._error_delay_ms(queue, error))
                continue
            self.pull_count += 1
            if _dropped(process_queue):
                return  # rebalanced away while the pull was parked: the result is not ours
            next_offset = self.next_offsets[queue] = result.next_begin_offset
            if result.status is PullStatus.FOUND:
                found = self._found(queue, process_queue, subscription, result)
                self._record_pull(queue, began_ms, found)
                if found:
                    # The consume workers woken by the sink run first, then the next pull is
                    # built (Java too hands the next pull to another thread): the listener
                    # does not wait for it, and the pull's write waits for the turn's end anyway.
                    await asyncio.sleep(0)
                continue
            self._record_pull(queue, began_ms, 0)
            if result.status is PullStatus.OFFSET_ILLEGAL:
                self._offset_illegal(queue, process_queue, result)
                return
            if not process_queue.message_count:
                # Nothing cached: what was skipped (filtered, or nothing new) is consumed.
                self._skipped(queue, process_queue, next_offset)

    def _record_pull(self, queue: MessageQueue, began_ms: int, found: int) -> None:
        now_ms = self._clock.now_ms()
        self.rates.record(queue.topic, found, 0, now_ms - began_ms, now_ms)

    def _commit_skipped(
        self, queue: MessageQueue, process_queue: ProcessQueue, offset: int
    ) -> None:
        self._offset_store.update_offset(queue, offset, increase_only=True)

    def _delay_before_pull(self, queue: MessageQueue, process_queue: ProcessQueue) -> int:
        held_ms = self._hold(queue)
        if held_ms > 0:
            return held_ms
        if is_flow_blocked(process_queue, self.settings):
            return limits.PULL_DELAY_ON_FLOW_CONTROL_MS
        return 0

    async def _pull(
        self, queue: MessageQueue, subscription: SubscriptionData, next_offset: int
    ) -> PullResult:
        commit_offset = 0
        if self.settings.commit_offset_enabled:
            commit_offset = max(
                0, await self._offset_store.read_offset(queue, ReadOffsetType.READ_FROM_MEMORY)
            )
        header = PullMessageRequestHeader(
            consumer_group=self.group,
            topic=queue.topic,
            queue_id=queue.queue_id,
            queue_offset=next_offset,
            max_messages=self.settings.batch_size,
            sys_flag=build_pull_sys_flag(
                commit_offset=commit_offset > 0,
                suspend=True,
                subscription=self.settings.send_subscription,
            ),
            commit_offset=commit_offset,
            suspend_timeout_ms=self.settings.suspend_timeout_ms,
            sub_version=subscription.sub_version,
            subscription=subscription.sub_string,
            expression_type=subscription.expression_type,
        )
        return await self._client.pull_message(queue, header, self.settings.rpc_timeout_ms)

    def _error_delay_ms(self, queue: MessageQueue, error: BolideError) -> int:
        if isinstance(error, RemoteError) and error.code == ResponseCode.FLOW_CONTROL:
            return limits.PULL_DELAY_ON_BROKER_FLOW_CONTROL_MS
        if not is_retry_topic(queue.topic):
            _log.warning("%s: pull of %s failed: %s", self.group, queue, error)
        return limits.PULL_DELAY_ON_ERROR_MS

    def _found(
        self,
        queue: MessageQueue,
        process_queue: ProcessQueue,
        subscription: SubscriptionData,
        result: PullResult,
    ) -> int:
        """Cache and hand on what matches the subscription; how many messages that is."""
        messages = filter_by_tags(result.messages, subscription.tags_set)
        if not messages:
            # All filtered out here: like NO_MATCHED_MSG (Java waits for the next pull's
            # answer, which may be a 15 s long poll, to move the offset).
            if not process_queue.message_count:
                self._skipped(queue, process_queue, result.next_begin_offset)
            return 0
        process_queue.put_messages(messages)
        self.found_count += len(messages)
        self._sink(messages, process_queue, queue)
        return len(messages)

    def _offset_illegal(
        self, queue: MessageQueue, process_queue: ProcessQueue, result: PullResult
    ) -> None:
        _log.warning(
            "%s: offset of %s is illegal (queue holds %d..%d); moving to %d",
            self.group,
            queue,
            result.min_offset,
            result.max_offset,
            result.next_begin_offset,
        )
        process_queue.dropped = True

        async def fix_up() -> None:
            await self._clock.sleep_ms(limits.PULL_OFFSET_ILLEGAL_FIX_DELAY_MS)
            await self._fix_offset(queue, process_queue, result.next_begin_offset)

        task = asyncio.get_running_loop().create_task(fix_up(), name=f"offset-fix-{queue}")
        self._fixups.add(task)
        task.add_done_callback(self._fixups.discard)
