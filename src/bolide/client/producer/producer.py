"""The async producer (``bolide.aio.Producer``; ``bolide.Producer`` is its blocking facade).

How a send goes (Java's sendDefaultImpl, with latency avoidance on):

1. check and prepare the message (:mod:`.prepare`);
2. find the topic's route: cached, else from a name server, else TBW102's (auto-create);
3. pick a queue (:class:`~.selection.QueueSelector`: round robin, skipping brokers that were
   slow or failing, and on a retry the broker that just failed) and send to its master;
4. on a transport error or a retriable response code (the codes table), try again on another
   broker: up to 1 + ``retry_count`` attempts within ``send_timeout_ms`` in all. The last
   error is raised with a note listing every attempt.

Orderly sends (a sharding key), sends to a chosen queue and oneway sends make one attempt:
retrying elsewhere would break the order or the "at most once" of oneway.

With ``auto_batch`` (the default) sends that wait while an earlier request of the same topic
and queue is in flight go out together as one batch request, each with its own result
(:mod:`.batching`); ``auto_batch=False`` sends one request per send.
"""

from __future__ import annotations

import dataclasses
import logging
import random
from collections.abc import Iterable, Sequence

from bolide.base import limits
from bolide.base.clock import Clock
from bolide.base.errors import (
    BolideError,
    ConfigError,
    InvalidMessageError,
    NoRouteError,
    ProtocolError,
    RemoteError,
    RequestTimeoutError,
    TopicNotFoundError,
    invariant,
)
from bolide.client import otel, rpc
from bolide.client.config import build_client_config
from bolide.client.instance import ClientInstance
from bolide.client.lifecycle import AsyncLifecycle
from bolide.client.message import SendResult
from bolide.client.namespace import check_namespace, with_namespace, without_namespace
from bolide.client.producer.batching import SendBatcher
from bolide.client.producer.prepare import (
    PreparedSend,
    SendSettings,
    prepare_batch,
    prepare_message,
    prepare_plain,
)
from bolide.client.producer.selection import QueueSelector, select_by_sharding_key
from bolide.client.route import DEFAULT_TOPIC, TopicRoute, suggests_stale_route
from bolide.client.trace import TRACE_PRODUCER_GROUP_PREFIX, TraceDispatcher
from bolide.protocol.bodies import MessageQueue
from bolide.protocol.codes import ResponseCode
from bolide.protocol.compression import CompressionType
from bolide.protocol.headers.fields import HeaderError
from bolide.protocol.headers.recall import RecallHandle, RecallMessageRequestHeader
from bolide.protocol.message import Message, PropertyKey
from bolide.protocol.msgid import UniqueKeyGenerator
from bolide.protocol.system_topics import DEFAULT_TRACE_TOPIC
from bolide.protocol.trace import DEFAULT_REGION_ID
from bolide.remoting.tls import TlsClientSettings

__all__ = ["Producer", "client_trace"]

_log = logging.getLogger("bolide.client.producer")


class Producer(AsyncLifecycle):
    """Sends messages to the topics of a RocketMQ 4.x cluster.

    ``Producer("order-producers", namesrv="127.0.0.1:9876")``; then ``await start()``, the
    sends, ``await shutdown()`` — or ``async with``. Pass ``instance`` to share a
    :class:`ClientInstance` (and its connections) with other producers and consumers;
    otherwise the producer makes its own from ``namesrv`` and ``instance_name``.

    Times are in ms: ``send_timeout_ms`` bounds a whole send, retries included (default 3 s);
    ``retry_count`` extra attempts on other brokers (default 2). Bodies of at least
    ``compress_over_bytes`` (default 4 KiB) are compressed with ``compress_type`` (zlib by
    default; ``"LZ4"`` or ``"ZSTD"`` as Java's compressType, which Java 4.9.4+, 5.x and Bolide
    consumers read, and C++ consumers through a Bolide broker); larger than
    ``max_message_bytes`` (default 4 MiB) are refused. ``latency_avoidance`` (default on)
    steers sends away from slow or failing brokers. ``auto_batch`` (default on) sends what
    waits behind a request in flight as one batch request (see :mod:`.batching`).
    ``rng`` picks the random queue the round robin starts at (as Java, so that short-lived
    producers such as ``bolide message send`` do not all write to queue 0; default: a
    ``random.Random()`` seeded by the system; pass a seeded one to repeat a run).
    ``access_key``/``secret_key`` sign every request for a broker with ACL on; ``tls``
    connects over TLS (see :mod:`bolide.client.security`); both apply to an instance the
    producer makes itself.

    Raises:
        ConfigError: neither ``namesrv`` nor ``instance`` is given, or a bad name server list.
    """

    def __init__(
        self,
        group: str,
        namesrv: str | Iterable[str] | None = None,
        *,
        instance_name: str | None = None,
        instance: ClientInstance | None = None,
        clock: Clock | None = None,
        send_timeout_ms: int = limits.PRODUCER_SEND_TIMEOUT_MS,
        retry_count: int = limits.PRODUCER_SEND_RETRY_COUNT,
        compress_over_bytes: int = limits.COMPRESS_BODY_OVER_BYTES,
        max_message_bytes: int = limits.MESSAGE_BODY_MAX_BYTES,
        latency_avoidance: bool = True,
        default_topic: str = DEFAULT_TOPIC,
        default_topic_queue_count: int = limits.PRODUCER_DEFAULT_TOPIC_QUEUE_COUNT,
        access_key: str | None = None,
        secret_key: str | None = None,
        tls: TlsClientSettings | bool | None = None,
        auto_batch: bool = True,
        compress_type: CompressionType | str = CompressionType.ZLIB,
        enable_trace: bool = False,
        trace_topic: str = DEFAULT_TRACE_TOPIC,
        rng: random.Random | None = None,
        namespace: str | None = None,
    ) -> None:
        if not group:
            raise ConfigError("a producer needs a group name")
        self.namespace = check_namespace(namespace)
        """Java's withNamespace: topics and the group go out as ``<namespace>%<name>``."""
        group = with_namespace(self.namespace, group)
        if send_timeout_ms <= 0 or retry_count < 0:
            raise ConfigError("send_timeout_ms must be positive and retry_count not negative")
        if instance is None:
            if namesrv is None:
                raise ConfigError("give the name server address (namesrv) or a client instance")
            config = build_client_config(
                namesrv, instance_name, access_key=access_key, secret_key=secret_key, tls=tls
            )
            instance = ClientInstance(config, clock=clock)
        self.group = group
        self.instance = instance
        self.send_timeout_ms = send_timeout_ms
        self.retry_count = retry_count
        self.settings = SendSettings(
            producer_group=group,
            default_topic=default_topic,
            default_topic_queue_count=default_topic_queue_count,
            compress_over_bytes=compress_over_bytes,
            max_message_bytes=max_message_bytes,
            compress_type=_compression(compress_type),
        )
        start_index = (rng or random.Random()).randrange(
            limits.PRODUCER_QUEUE_START_INDEX_SPAN_COUNT
        )
        self.selector = QueueSelector(latency_avoidance=latency_avoidance, start_index=start_index)
        self._unique_keys = _unique_key_generator(instance)
        self.batcher = SendBatcher(self._send_prepared) if auto_batch else None
        """The natural batching of sends, None with ``auto_batch=False``."""
        self._running = False
        self._shut_down = False
        self.trace = client_trace(group, instance, trace_topic) if enable_trace else None
        """With ``enable_trace``: the Pub records of this producer's sends (client/trace.py)."""

    # ---- lifecycle -------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._running

    async def start(self) -> None:
        """Start the client instance (if this is its first user) and register the group.

        Raises ConfigError when the group already runs on the instance, or after shutdown.
        """
        if self._running:
            return
        if self._shut_down:
            raise ConfigError(f"producer {self.group!r} was shut down; make a new one")
        await self.instance.acquire()
        try:
            self.instance.register_producer(self.group)
        except ConfigError:
            await self.instance.release()
            raise
        self._running = True
        if self.trace is not None:
            await self.trace.start()
        _log.info("producer %s started on client %s", self.group, self.instance.client_id)

    async def shutdown(self) -> None:
        """Unregister the group from the brokers and release the instance. Idempotent."""
        if not self._running:
            return
        self._running = False
        self._shut_down = True
        if self.batcher is not None:
            await self.batcher.wait_idle()
        if self.trace is not None:
            await self.trace.shutdown()
        await self.instance.unregister_producer(self.group)
        await self.instance.release()
        _log.info("producer %s shut down", self.group)

    async def _close(self) -> None:
        await self.shutdown()

    # ---- sends -------------------------------------------------------------------------------

    async def send(
        self,
        message: Message,
        *,
        queue: MessageQueue | None = None,
        sharding_key: str | None = None,
        timeout_ms: int | None = None,
    ) -> SendResult:
        """Send ``message`` and wait for the broker; with ``queue``, to that queue only; with
        ``sharding_key``, to the queue of that key, in order (see :meth:`send_orderly`).

        Raises:
            ConfigError: both ``queue`` and ``sharding_key`` are given.
            InvalidMessageError / MessageTooLargeError: the message is refused before sending.
            TopicNotFoundError: the topic does not exist and cannot be auto-created.
            NoRouteError: no writable queue; NameServerUnavailableError: no name server.
            RemoteError / ConnectionClosedError / RequestTimeoutError: the last attempt's
                failure (its notes list every attempt).
        """
        if otel.active():
            with otel.send_span(message.topic, self.group, message.properties) as span:
                result = await self._send_recorded(message, queue, sharding_key, timeout_ms)
                otel.set_message_id(span, result.msg_id)
                return result
        return await self._send_recorded(message, queue, sharding_key, timeout_ms)

    async def _send_recorded(
        self,
        message: Message,
        queue: MessageQueue | None,
        sharding_key: str | None,
        timeout_ms: int | None,
    ) -> SendResult:
        if self.trace is not None:
            return await self._send_traced(self.trace, message, queue, sharding_key, timeout_ms)
        return await self._send_plain(message, queue, sharding_key, timeout_ms)

    async def _send_plain(
        self,
        message: Message,
        queue: MessageQueue | None,
        sharding_key: str | None,
        timeout_ms: int | None,
    ) -> SendResult:
        if sharding_key is not None:
            if queue is not None:
                raise ConfigError("send to a queue or by a sharding key, not both")
            return await self.send_orderly(message, sharding_key, timeout_ms=timeout_ms)
        prepared = self._prepare(message)
        is_reply = message.properties.get(PropertyKey.MSG_TYPE) == "reply"
        return await self._send_request(prepared, queue, timeout_ms, may_batch=not is_reply)

    async def _send_traced(
        self,
        trace: TraceDispatcher,
        message: Message,
        queue: MessageQueue | None,
        sharding_key: str | None,
        timeout_ms: int | None,
    ) -> SendResult:
        """:meth:`send`, then its Pub record (when the reply carried MSG_REGION, as Java)."""
        clock = self.instance.clock
        started_ms, began_ms = clock.now_ms(), clock.monotonic_ms()
        result = await self._send_plain(message, queue, sharding_key, timeout_ms)
        store_host = self.instance.broker_address(result.queue.broker_name) or ""
        trace.published(
            message, result.msg_id, result.offset_msg_id, store_host,
            started_ms=started_ms, cost_ms=clock.monotonic_ms() - began_ms,
            trace_on=result.region_id is not None,
        )  # fmt: skip
        return result

    async def send_batch(
        self,
        messages: Sequence[Message],
        *,
        queue: MessageQueue | None = None,
        timeout_ms: int | None = None,
    ) -> SendResult:
        """Send ``messages`` (one topic) as one request; they get consecutive offsets.

        ``msg_id`` and ``offset_msg_id`` of the result list every message, ``,``-joined.
        Raises as :meth:`send` (InvalidMessageError also for batch rules: see prepare).
        """
        self._require_running()
        for message in messages:
            message.topic = with_namespace(self.namespace, message.topic)
        keys = [self._unique_keys.next_id() for _ in messages]
        prepared = prepare_batch(messages, keys, self.instance.clock.now_ms(), self.settings)
        # In the batcher's lane when there is one, to keep the order; it goes alone.
        return await self._send_request(prepared, queue, timeout_ms, may_batch=True)

    async def _send_request(
        self,
        prepared: PreparedSend,
        queue: MessageQueue | None,
        timeout_ms: int | None,
        *,
        may_batch: bool,
    ) -> SendResult:
        """Send one prepared request: through the batcher when there is one and ``may_batch``,
        else to ``queue`` (caller's view, namespace added here), else with retries over the
        topic's queues; the result as the caller sees it."""
        queue = self._queue_in(queue)
        if may_batch and self.batcher is not None:
            result = await self.batcher.send(prepared, queue, timeout_ms or self.send_timeout_ms)
        else:
            result = await self._send_prepared(prepared, queue, timeout_ms)
        return self._result_out(result)

    async def send_orderly(
        self, message: Message, sharding_key: str, *, timeout_ms: int | None = None
    ) -> SendResult:
        """Send ``message`` to the queue ``sharding_key`` maps to: messages with the same key
        go to the same queue, in send order, while the topic's queues stay the same.

        One attempt (another queue would break the order). Raises as :meth:`send`.
        """
        prepared = self._prepare(message)
        route = await self.instance.publish_route(
            prepared.topic,
            default_topic=self.settings.default_topic,
            default_topic_queue_count=self.settings.default_topic_queue_count,
        )
        queue = select_by_sharding_key(route.publish_queues, sharding_key)
        if self.batcher is not None:
            result = await self.batcher.send(prepared, queue, timeout_ms or self.send_timeout_ms)
        else:
            result = await self._send_to_queue(prepared, queue, timeout_ms)
        return self._result_out(result)

    async def send_oneway(self, message: Message, *, queue: MessageQueue | None = None) -> None:
        """Send without waiting for the broker (no result, no retry; it may be lost).

        Raises the checks' errors, NoRouteError, and transport errors while writing.
        """
        prepared = self._prepare(message)
        queue = self._queue_in(queue)
        if queue is None:
            route = await self._route(prepared.topic)
            now_ms = self.instance.clock.monotonic_ms()
            queue = self.selector.select(route.publish_queues, now_ms)
        address = await self._master_address(queue)
        header = prepared.header_for(queue.queue_id)
        await rpc.send_message_oneway(
            self.instance.pool, address, header, prepared.body, self.send_timeout_ms
        )

    # ---- internals ---------------------------------------------------------------------------

    async def recall_message(
        self, topic: str, recall_handle: str, *, timeout_ms: int | None = None
    ) -> str:
        """Cancel a delayed (timer) message of ``topic`` before it is due (RECALL_MESSAGE,
        RocketMQ 5.3); ``recall_handle`` is the one its send result carried. Returns the
        recalled message's id (UNIQ_KEY). With ``enable_trace``, a ``Recall`` record is
        written whether or not the broker recalled it.

        Raises:
            InvalidMessageError: ``recall_handle`` is not a v1 handle, or names another topic.
            RemoteError: the broker refused (MESSAGE_ILLEGAL for a stale handle, SYSTEM_ERROR
                when the message is due or delivered); transport errors as :meth:`send`.
        """
        self._require_running()
        topic = with_namespace(self.namespace, topic)
        try:
            handle = RecallHandle.decode(recall_handle)
        except HeaderError as error:
            raise InvalidMessageError(f"recall handle is invalid: {error}") from error
        if handle.topic != topic:
            raise InvalidMessageError(f"recall handle is for topic {handle.topic!r}, not {topic!r}")
        address = await self._master_address(MessageQueue(topic, handle.broker_name, 0))
        header = RecallMessageRequestHeader(topic, recall_handle, self.group)
        success = False
        try:
            answer = await rpc.recall_message(
                self.instance.pool, address, header, timeout_ms or self.send_timeout_ms
            )
            success = True
        finally:
            if self.trace is not None:
                now_ms = self.instance.clock.now_ms()
                self.trace.recalled(topic, handle.message_id, now_ms=now_ms, success=success)
        return answer.msg_id

    def _require_running(self) -> None:
        if not self._running:
            invariant(False, f"producer {self.group!r} is not started; call start() first")

    def _queue_in(self, queue: MessageQueue | None) -> MessageQueue | None:
        """A caller's queue with its topic in the namespace."""
        if queue is None or self.namespace is None:
            return queue
        topic = with_namespace(self.namespace, queue.topic)
        return MessageQueue(topic, queue.broker_name, queue.queue_id)

    def _result_out(self, result: SendResult) -> SendResult:
        """``result`` with the queue's topic shown without the namespace."""
        if self.namespace is None:
            return result
        queue = result.queue
        topic = without_namespace(self.namespace, queue.topic)
        return dataclasses.replace(
            result, queue=MessageQueue(topic, queue.broker_name, queue.queue_id)
        )

    def _prepare(self, message: Message) -> PreparedSend:
        self._require_running()
        if self.namespace is not None:
            message.topic = with_namespace(self.namespace, message.topic)
        now_ms = self.instance.clock.now_ms()
        unique_key = self._unique_keys.next_id(now_ms)
        prepared = prepare_plain(message, unique_key, now_ms, self.settings)
        if prepared is None:
            return prepare_message(message, unique_key, now_ms, self.settings)
        return prepared

    async def _route(self, topic: str) -> TopicRoute:
        return await self.instance.publish_route(
            topic,
            default_topic=self.settings.default_topic,
            default_topic_queue_count=self.settings.default_topic_queue_count,
        )

    async def _master_address(self, queue: MessageQueue) -> str:
        address = self.instance.routes.master_address(queue.broker_name)
        if address is None:
            await self.instance.update_route(queue.topic)
            address = self.instance.routes.master_address(queue.broker_name)
        if address is None:
            raise NoRouteError(f"broker {queue.broker_name!r} of {queue} has no master address")
        return address

    async def _send_prepared(
        self, prepared: PreparedSend, queue: MessageQueue | None, timeout_ms: int | None
    ) -> SendResult:
        """One request sent now (the batcher's, or a send without it): to ``queue``, or with
        retries to a queue picked here."""
        if queue is not None:
            return await self._send_to_queue(prepared, queue, timeout_ms)
        return await self._send_with_retries(prepared, timeout_ms)

    async def _send_to_queue(
        self, prepared: PreparedSend, queue: MessageQueue, timeout_ms: int | None
    ) -> SendResult:
        if queue.topic != prepared.topic:
            raise InvalidMessageError(
                f"queue {queue} belongs to topic {queue.topic!r}, not {prepared.topic!r}"
            )
        await self._route(prepared.topic)  # counts the topic in for route refreshes
        address = await self._master_address(queue)
        try:
            result = await self._attempt(
                prepared, queue, address, timeout_ms or self.send_timeout_ms
            )
        except BolideError as error:
            if suggests_stale_route(error):
                await self.instance.refresh_route_after_failure(prepared.topic)
            if isinstance(error, RemoteError):
                raise _clearer(error, prepared.topic) from error
            raise
        return result

    async def _fresher_route(self, topic: str, route: TopicRoute) -> TopicRoute:
        """After a dead or deposed master: the route refreshed at once (bounded), so the next
        attempt can reach a new master; the old route when the refresh brought nothing."""
        fresh = await self.instance.refresh_route_after_failure(topic)
        return fresh if fresh is not None and fresh.publish_queues else route

    async def _attempt(
        self, prepared: PreparedSend, queue: MessageQueue, address: str, timeout_ms: int
    ) -> SendResult:
        """One send; the broker's latency (or failure) is recorded for queue selection."""
        clock = self.instance.clock
        started_ms = clock.monotonic_ms()
        try:
            result = await rpc.send_message(
                self.instance.pool,
                address,
                queue.broker_name,
                prepared.header_for(queue.queue_id),
                prepared.body,
                prepared.msg_id,
                timeout_ms,
            )
        except BolideError:
            failed_ms = clock.monotonic_ms()
            self.selector.record(queue.broker_name, failed_ms - started_ms, failed_ms, failed=True)
            raise
        finished_ms = clock.monotonic_ms()
        self.selector.record(queue.broker_name, finished_ms - started_ms, finished_ms, failed=False)
        return result

    async def _send_with_retries(
        self, prepared: PreparedSend, timeout_ms: int | None
    ) -> SendResult:
        clock = self.instance.clock
        timeout_ms = timeout_ms or self.send_timeout_ms
        started_ms = clock.monotonic_ms()
        route = self.instance.stored_publish_route(prepared.topic) or await self._route(
            prepared.topic
        )
        attempts: list[str] = []
        last_broker: str | None = None
        last_error: BolideError | None = None
        for _ in range(1 + self.retry_count):
            now_ms = clock.monotonic_ms()
            remaining_ms = timeout_ms - (now_ms - started_ms)
            if remaining_ms <= 0:
                break
            queue = self.selector.select(route.publish_queues, now_ms, last_broker)
            last_broker = queue.broker_name
            try:
                address = self.instance.routes.master_address(
                    queue.broker_name
                ) or await self._master_address(queue)
                return await self._attempt(prepared, queue, address, remaining_ms)
            except BolideError as error:
                attempts.append(f"{queue.broker_name}: {error}")
                last_error = error
                if not error.retriable:
                    break
                if suggests_stale_route(error):
                    route = await self._fresher_route(prepared.topic, route)
        cost_ms = clock.monotonic_ms() - started_ms
        summary = (
            f"send to {prepared.topic!r} failed after {len(attempts)} attempt(s) in {cost_ms} ms"
        )
        if last_error is None:
            raise RequestTimeoutError(f"{summary}: the {timeout_ms} ms send timeout ran out")
        final = _clearer(last_error, prepared.topic)
        final.add_note(summary + ("; " + "; ".join(attempts) if attempts else ""))
        if final is last_error:
            raise final
        raise final from last_error


def _clearer(error: BolideError, topic: str) -> BolideError:
    """A user-facing error for a broker's answer where one is clearer than the raw code."""
    if isinstance(error, RemoteError):
        if error.code == ResponseCode.TOPIC_NOT_EXIST:
            return TopicNotFoundError(
                f"topic {topic!r} does not exist on the broker and was not created"
                f" automatically (broker said: {error})"
            )
        if error.code == ResponseCode.MESSAGE_ILLEGAL:
            return InvalidMessageError(f"the broker refused the message: {error}")
    return error


def _unique_key_generator(instance: ClientInstance) -> UniqueKeyGenerator:
    """UNIQ_KEY ids from the client's ip and pid (127.0.0.1 when the ip is not a literal)."""
    try:
        return UniqueKeyGenerator(instance.config.client_ip, instance.config.pid, instance.clock)
    except ProtocolError:
        return UniqueKeyGenerator("127.0.0.1", instance.config.pid, instance.clock)


def _compression(compress_type: CompressionType | str) -> CompressionType:
    """``compress_type`` as a CompressionType; a name (``"LZ4"``) as Java's compressType.

    Raises:
        ConfigError: a name that is not ZLIB, LZ4 or ZSTD.
    """
    if isinstance(compress_type, CompressionType):
        return compress_type
    try:
        return CompressionType[compress_type.upper()]
    except KeyError:
        names = ", ".join(member.name for member in CompressionType)
        raise ConfigError(f"compress_type {compress_type!r}: expected one of {names}") from None


def client_trace(group: str, instance: ClientInstance, trace_topic: str) -> TraceDispatcher:
    """The trace of a client of ``group`` (``enable_trace``): its records sent by an internal
    producer ``_INNER_TRACE_PRODUCER-<group>`` on the same client instance."""
    inner = Producer(TRACE_PRODUCER_GROUP_PREFIX + group, instance=instance, auto_batch=False)
    return TraceDispatcher(inner, group, trace_topic, DEFAULT_REGION_ID)
