"""Concurrent consumption: hand pulled messages to the listener, then commit or send back
(RocketMQ's offset management and consumption progress; Java ConsumeMessageConcurrentlyService).

Pulled messages are cut into batches of ``batch_max_size`` and queued; ``thread_max``
workers take batches and call the listener (a plain function runs in a thread pool of the
same size, a coroutine function on the loop). Before the call, each message of the group's
retry topic gets its original topic back (RETRY_TOPIC property) and CONSUME_START_TIME is
stamped (for the consume timeout).

After the call (``processConsumeResult``):

* ``SUCCESS`` consumes messages ``[0 .. ack_index]``; ``RECONSUME_LATER`` or an exception
  consumes none. The rest failed.
* Broadcasting: failed messages are logged and dropped.
* Clustering: each failed message is sent back (CONSUMER_SEND_MSG_BACK to its broker; if that
  fails, re-sent to ``%RETRY%<group>`` as a new message — see :class:`SendBackClient`). A
  message that cannot be sent back either way stays in the process queue (so the committed
  offset cannot pass it) and is handed to the listener again 5 s later, reconsume times + 1.
* The consumed and sent-back messages leave the process queue; the smallest offset still
  cached (or one past the last) becomes the queue's offset in the store — increase-only, and
  only while the queue is still ours (not dropped).

Consume timeout (Java ``cleanExpireMsg``): every ``consume_timeout_ms`` the oldest cached
message of each queue whose consumption started more than ``consume_timeout_ms`` ago is sent
back with delay level 3 and removed, so one stuck listener call cannot pin the committed
offset forever (up to 16 messages per queue and run).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Protocol

from bolide.base import limits
from bolide.base.clock import Clock
from bolide.base.errors import BolideError, invariant
from bolide.base.service import Service
from bolide.client import otel
from bolide.client.consumer.consume_rates import ConsumeRates
from bolide.client.consumer.listener import AdaptedListener, ConsumeContext, ConsumeResult
from bolide.client.consumer.offset_store import OffsetStore
from bolide.client.consumer.process_queue import ProcessQueue
from bolide.client.namespace import without_namespace
from bolide.client.trace import TraceDispatcher
from bolide.protocol.bodies import MessageModel, MessageQueue
from bolide.protocol.bodies.stats import CMResult, ConsumeMessageDirectlyResult
from bolide.protocol.message import Message, MessageExt, PropertyKey
from bolide.protocol.system_topics import retry_topic

__all__ = [
    "ConcurrentConsumeService",
    "ConsumeStats",
    "SendBackClient",
    "ack_index_for",
    "retry_message",
]

_log = logging.getLogger("bolide.client.consume")

CONSUME_TIMEOUT_SEND_BACK_DELAY_LEVEL = 3
"""Delay level a timed-out message is sent back with (Java: 3, i.e. 10 s)."""


class SendBackClient(Protocol):
    """The two ways a failed message goes back to the broker."""

    async def send_back(
        self, message: MessageExt, broker_name: str, delay_level: int, max_reconsume_times: int
    ) -> None:
        """CONSUMER_SEND_MSG_BACK to the master of ``broker_name`` (the store host when the
        broker is unknown). Raises :class:`BolideError` on any failure."""
        ...

    async def send_to_retry_topic(self, message: Message) -> None:
        """Send ``message`` (already addressed to ``%RETRY%<group>``) like a producer.
        Raises :class:`BolideError` on any failure."""
        ...


def ack_index_for(result: ConsumeResult | None, ack_index: int, batch_size: int) -> int:
    """The index of the last consumed message of a batch: ``ack_index`` clamped to the
    batch for SUCCESS; -1 (nothing consumed) for RECONSUME_LATER or no result."""
    if result is ConsumeResult.SUCCESS:
        return min(ack_index, batch_size - 1)
    return -1


def retry_message(message: MessageExt, group: str, max_reconsume_times: int) -> Message:
    """The message a consumer re-sends to ``%RETRY%<group>`` when the broker's send-back
    failed (Java ``sendMessageBack`` fallback): same body, flag and properties, plus
    RETRY_TOPIC (the original topic), ORIGIN_MESSAGE_ID, RECONSUME_TIME (n + 1),
    MAX_RECONSUME_TIMES and DELAY (3 + n) — the broker's own send-back rule."""
    properties = dict(message.properties)
    properties.pop(PropertyKey.TRAN_MSG, None)
    properties[PropertyKey.RETRY_TOPIC] = message.topic
    if not properties.get(PropertyKey.ORIGIN_MESSAGE_ID):
        properties[PropertyKey.ORIGIN_MESSAGE_ID] = message.msg_id
    properties[PropertyKey.RECONSUME_TIME] = str(message.reconsume_times + 1)
    properties[PropertyKey.MAX_RECONSUME_TIMES] = str(max_reconsume_times)
    properties[PropertyKey.DELAY] = str(
        CONSUME_TIMEOUT_SEND_BACK_DELAY_LEVEL + message.reconsume_times
    )
    return Message(retry_topic(group), message.body, message.flag, properties)


@dataclass(slots=True)
class ConsumeStats:
    """Counters for GET_CONSUMER_RUNNING_INFO and tests."""

    consumed_ok: int = 0
    consumed_failed: int = 0
    sent_back: int = 0
    send_back_failed: int = 0
    timed_out: int = 0
    consume_time_total_ms: int = 0
    per_topic_ok: dict[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class _Request:
    messages: list[MessageExt]
    process_queue: ProcessQueue
    queue: MessageQueue


class ConcurrentConsumeService:
    """Runs the listener over pulled messages (module docstring).

    ``batch_max_size`` messages per call (default 1); ``thread_max`` calls at once (default
    20); ``max_reconsume_times`` goes with every send-back (16); ``retry_later_delay_ms`` is
    the wait before a message that could not be sent back is consumed again (5 s);
    ``owned_queues`` returns the process-queue table (for the consume-timeout sweep).
    """

    def __init__(
        self,
        group: str,
        listener: AdaptedListener,
        *,
        message_model: MessageModel,
        offset_store: OffsetStore,
        send_back: SendBackClient,
        clock: Clock,
        owned_queues: Callable[[], Mapping[MessageQueue, ProcessQueue]],
        batch_max_size: int = limits.CONSUME_BATCH_MAX_MESSAGES,
        thread_max: int = limits.CONSUME_THREAD_MAX_COUNT,
        max_reconsume_times: int = limits.RECONSUME_DEFAULT_MAX_TIMES,
        consume_timeout_ms: int = limits.CONSUME_TIMEOUT_MS,
        retry_later_delay_ms: int = limits.CONSUME_RETRY_LATER_DELAY_MS,
        namespace: str | None = None,
    ) -> None:
        invariant(batch_max_size > 0 and thread_max > 0, "positive batch size and workers")
        invariant(consume_timeout_ms > 0 and retry_later_delay_ms >= 0, "valid delays")
        self.group = group
        self.namespace = namespace
        """The consumer's namespace: the listener sees topics without it (Java's
        resetRetryAndNamespace); the send-back client wraps them again."""
        self.stats = ConsumeStats()
        self._listener = listener
        self._message_model = message_model
        self._offset_store = offset_store
        self._send_back = send_back
        self._clock = clock
        self.rates = ConsumeRates()
        self.trace: TraceDispatcher | None = None
        """Told of every listener call of the flow (the consumer's client trace)."""
        """Measured OK/failed TPS and listener RT per topic (GET_CONSUMER_RUNNING_INFO)."""
        self._owned_queues = owned_queues
        self._batch_max_size = batch_max_size
        self._thread_max = thread_max
        self._max_reconsume_times = max_reconsume_times
        self._consume_timeout_ms = consume_timeout_ms
        self._retry_later_delay_ms = retry_later_delay_ms
        self._requests: asyncio.Queue[_Request] = asyncio.Queue()
        self._workers: list[asyncio.Task[None]] = []
        self._delayed: set[asyncio.Task[None]] = set()
        self._executor: ThreadPoolExecutor | None = None
        self._timeout_sweeper: Service | None = None
        self._accepting = False
        self._in_flight = 0

    @property
    def in_flight(self) -> int:
        """Listener calls running now."""
        return self._in_flight

    @property
    def queued(self) -> int:
        """Batches waiting for a worker."""
        return self._requests.qsize()

    def start(self) -> None:
        """Start the workers and the consume-timeout sweep (on the running loop)."""
        invariant(not self._workers, "consume service started twice")
        if not self._listener.is_async:
            self._executor = ThreadPoolExecutor(
                self._thread_max, thread_name_prefix=f"bolide-consume-{self.group}"
            )
        loop = asyncio.get_running_loop()
        self._workers = [
            loop.create_task(self._worker_loop(), name=f"consume-{self.group}-{index}")
            for index in range(self._thread_max)
        ]
        self._timeout_sweeper = Service(
            f"consume-timeout-{self.group}",
            self._sweep_expired,
            interval_ms=self._consume_timeout_ms,
            clock=self._clock,
        )
        self._timeout_sweeper.start()
        self._accepting = True

    def submit(
        self, messages: Sequence[MessageExt], process_queue: ProcessQueue, queue: MessageQueue
    ) -> None:
        """Queue ``messages`` (already in ``process_queue``) for the listener, in batches."""
        if not self._accepting:
            return
        size = self._batch_max_size
        for start in range(0, len(messages), size):
            self._requests.put_nowait(
                _Request(list(messages[start : start + size]), process_queue, queue)
            )

    async def shutdown(self, timeout_ms: int = limits.CONSUME_SHUTDOWN_GRACE_MS) -> None:
        """Stop taking batches; let listener calls in progress finish (``timeout_ms`` at most),
        then stop the workers. Queued batches are dropped: they are still in their process
        queues, so their offsets were never committed and another consumer gets them."""
        self._accepting = False
        while not self._requests.empty():
            self._requests.get_nowait()
        for task in self._delayed:
            task.cancel()
        if self._timeout_sweeper is not None:
            await self._timeout_sweeper.stop(timeout_ms)
        for _ in self._workers:
            self._requests.put_nowait(_Request([], ProcessQueue(), _STOP_QUEUE))
        if self._workers:
            _, unfinished = await asyncio.wait(self._workers, timeout=timeout_ms / 1000)
            for task in unfinished:
                task.cancel()
            for task in unfinished:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if self._executor is not None:
            # Threads still inside a listener keep running, but nothing waits for them.
            self._executor.shutdown(wait=False, cancel_futures=True)

    # ---- the work ----------------------------------------------------------------------------

    async def _worker_loop(self) -> None:
        while True:
            request = await self._requests.get()
            if request.queue is _STOP_QUEUE:
                return
            if request.process_queue.dropped:
                continue  # the queue went to another consumer: it consumes these
            self._in_flight += 1
            try:
                await self._consume(request)
            except Exception:  # a bug here must not kill the worker
                _log.exception("%s: consuming a batch of %s failed", self.group, request.queue)
            finally:
                self._in_flight -= 1

    async def _consume(self, request: _Request) -> None:
        group_retry_topic = retry_topic(self.group)
        started_ms = self._clock.now_ms()
        started_text = str(started_ms)
        for message in request.messages:
            properties = message.properties
            original_topic = properties.get(PropertyKey.RETRY_TOPIC)
            if original_topic and message.topic == group_retry_topic:
                message.topic = original_topic
            message.topic = without_namespace(self.namespace, message.topic)
            properties[PropertyKey.CONSUME_START_TIME] = started_text
        queue = request.queue
        context = ConsumeContext(
            without_namespace(self.namespace, queue.topic),
            queue.broker_name,
            queue.queue_id,
            len(request.messages) - 1,
        )
        if otel.active():
            with otel.consume_spans(self.group, request.messages) as spans:
                result = await self._call_listener(request.messages, context)
                otel.end_consume(spans, result is ConsumeResult.SUCCESS)
        else:
            result = await self._call_listener(request.messages, context)
        now_ms = self._clock.now_ms()
        self.stats.consume_time_total_ms += now_ms - started_ms
        if request.process_queue.dropped:
            _log.info("%s: %s was dropped while consuming; result ignored", self.group, queue)
            return
        last_ok = ack_index_for(result, context.ack_index, len(request.messages))
        if self.trace is not None:
            self.trace.consumed(request.messages, started_ms=started_ms, ended_ms=now_ms,
                                success=last_ok == len(request.messages) - 1)  # fmt: skip
        self.rates.record(
            queue.topic,
            last_ok + 1,
            len(request.messages) - last_ok - 1,
            now_ms - started_ms,
            now_ms,
        )
        await self._process_result(request, result, context)

    async def consume_directly(
        self, message: MessageExt, broker_name: str
    ) -> ConsumeMessageDirectlyResult:
        """CONSUME_MESSAGE_DIRECTLY: run the listener on ``message`` alone; offsets, retries
        and the process queues are untouched (the message is consumed outside the flow)."""
        message.topic = without_namespace(self.namespace, message.topic)
        context = ConsumeContext(message.topic, broker_name, message.queue_id, 0)
        started_ms = self._clock.now_ms()
        try:
            if self._listener.is_async:
                result = await self._listener.call([message], context)
            else:
                loop = asyncio.get_running_loop()
                result = await loop.run_in_executor(
                    self._executor, self._listener.call, [message], context
                )
        except Exception as error:
            return ConsumeMessageDirectlyResult(
                CMResult.CR_THROW_EXCEPTION,
                remark=f"{type(error).__name__}: {error}",
                spent_time_ms=self._clock.now_ms() - started_ms,
            )
        if result is ConsumeResult.SUCCESS:
            verdict = CMResult.CR_SUCCESS
        elif result is ConsumeResult.RECONSUME_LATER:
            verdict = CMResult.CR_LATER
        else:
            verdict = CMResult.CR_RETURN_NULL
        return ConsumeMessageDirectlyResult(
            verdict, spent_time_ms=self._clock.now_ms() - started_ms
        )

    async def _call_listener(
        self, messages: list[MessageExt], context: ConsumeContext
    ) -> ConsumeResult | None:
        try:
            if self._listener.is_async:
                result = await self._listener.call(messages, context)
            else:
                loop = asyncio.get_running_loop()
                result = await loop.run_in_executor(
                    self._executor, self._listener.call, messages, context
                )
        except Exception:
            _log.exception("%s: the listener raised; the batch will be consumed again", self.group)
            return None
        if not isinstance(result, ConsumeResult):
            _log.warning("%s: the listener returned %r, not a ConsumeResult", self.group, result)
            return None
        return result

    async def _process_result(
        self, request: _Request, result: ConsumeResult | None, context: ConsumeContext
    ) -> None:
        messages = request.messages
        last_ok = ack_index_for(result, context.ack_index, len(messages))
        self.stats.consumed_ok += last_ok + 1
        self.stats.consumed_failed += len(messages) - last_ok - 1
        topic = request.queue.topic
        self.stats.per_topic_ok[topic] = self.stats.per_topic_ok.get(topic, 0) + last_ok + 1
        failed = messages[last_ok + 1 :]
        kept: list[MessageExt] = []
        if self._message_model is MessageModel.BROADCASTING:
            for message in failed:
                _log.warning("%s: broadcast message %s failed; dropped", self.group, message.msg_id)
        else:
            delay_level = context.delay_level_when_next_consume
            for message in failed:
                if not await self._send_message_back(message, request.queue, delay_level):
                    message.reconsume_times += 1
                    kept.append(message)
        done = messages
        if kept:  # only messages that could not be sent back stay cached
            kept_ids = {id(message) for message in kept}
            done = [message for message in messages if id(message) not in kept_ids]
        offset = request.process_queue.remove_messages(done, self._clock.now_ms())
        if offset >= 0 and not request.process_queue.dropped:
            self._offset_store.update_offset(request.queue, offset, increase_only=True)
        if kept:
            self._retry_later(kept, request.process_queue, request.queue)

    async def _send_message_back(
        self, message: MessageExt, queue: MessageQueue, delay_level: int
    ) -> bool:
        """Broker send-back, then the re-send fallback; False when both failed."""
        try:
            await self._send_back.send_back(
                message, queue.broker_name, delay_level, self._max_reconsume_times
            )
        except BolideError as error:
            _log.info(
                "%s: send-back of %s failed (%s); re-sending", self.group, message.msg_id, error
            )
        else:
            self.stats.sent_back += 1
            return True
        try:
            await self._send_back.send_to_retry_topic(
                retry_message(message, self.group, self._max_reconsume_times)
            )
        except BolideError as error:
            self.stats.send_back_failed += 1
            _log.warning(
                "%s: cannot send %s back (%s); consuming it again locally later",
                self.group,
                message.msg_id,
                error,
            )
            return False
        self.stats.sent_back += 1
        return True

    def _retry_later(
        self, messages: list[MessageExt], process_queue: ProcessQueue, queue: MessageQueue
    ) -> None:
        async def later() -> None:
            await self._clock.sleep_ms(self._retry_later_delay_ms)
            self.submit(messages, process_queue, queue)

        task = asyncio.get_running_loop().create_task(later(), name=f"consume-later-{queue}")
        self._delayed.add(task)
        task.add_done_callback(self._delayed.discard)

    async def _sweep_expired(self) -> None:
        """The consume-timeout sweep (module docstring). Broadcasting consumers have no retry
        topic: their timed-out messages are logged and dropped, like their failures."""
        for queue, process_queue in list(self._owned_queues().items()):
            for _ in range(limits.CONSUME_TIMEOUT_SWEEP_MAX_MESSAGES):
                if process_queue.dropped:
                    break
                message = process_queue.first_expired_message(
                    self._clock.now_ms(), self._consume_timeout_ms
                )
                if message is None:
                    break
                self.stats.timed_out += 1
                _log.warning("%s: consuming %s timed out", self.group, message.msg_id)
                if self._message_model is MessageModel.CLUSTERING and not (
                    await self._send_message_back(
                        message, queue, CONSUME_TIMEOUT_SEND_BACK_DELAY_LEVEL
                    )
                ):
                    break
                if process_queue.min_offset != message.queue_offset:
                    break  # the listener finished it while it was being sent back
                offset = process_queue.remove_messages([message], self._clock.now_ms())
                # Java leaves the committed offset where it was until another batch ends;
                # the message is safely in %RETRY% now, so progress may pass it at once.
                if offset >= 0 and not process_queue.dropped:
                    self._offset_store.update_offset(queue, offset, increase_only=True)


_STOP_QUEUE = MessageQueue("", "", -1)
"""Marks the batch that tells a worker to stop."""
