"""The blocking producer (``bolide.Producer``): the async core run on a private loop thread
(:mod:`bolide.client.blocking.loop`)."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Iterable, Sequence

from bolide.base import limits
from bolide.client.blocking.loop import ClientFacade, SendCallback
from bolide.client.message import SendResult
from bolide.client.producer.producer import Producer as AsyncProducer
from bolide.client.route import DEFAULT_TOPIC
from bolide.protocol.bodies import MessageQueue
from bolide.protocol.compression import CompressionType
from bolide.protocol.message import Message
from bolide.protocol.system_topics import DEFAULT_TRACE_TOPIC
from bolide.remoting.tls import TlsClientSettings

__all__ = ["Producer"]


class Producer(ClientFacade[AsyncProducer]):
    """The blocking producer: ``bolide.Producer("order-producers", namesrv="127.0.0.1:9876")``.

    Same options, errors and behaviour as :class:`bolide.aio.Producer` (see
    :class:`bolide.client.producer.producer.Producer`); each call blocks until the async core
    is done. ``send_async`` returns a :class:`concurrent.futures.Future` instead; sends made
    with ``send_async`` (or from several threads) batch naturally under ``auto_batch``.
    ``with Producer(...) as producer:`` starts and shuts it down.
    """

    def __init__(
        self,
        group: str,
        namesrv: str | Iterable[str],
        *,
        instance_name: str | None = None,
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
        namespace: str | None = None,
    ) -> None:
        core = AsyncProducer(
            group,
            namesrv,
            instance_name=instance_name,
            send_timeout_ms=send_timeout_ms,
            retry_count=retry_count,
            compress_over_bytes=compress_over_bytes,
            max_message_bytes=max_message_bytes,
            latency_avoidance=latency_avoidance,
            default_topic=default_topic,
            default_topic_queue_count=default_topic_queue_count,
            access_key=access_key,
            secret_key=secret_key,
            tls=tls,
            auto_batch=auto_batch,
            compress_type=compress_type,
            enable_trace=enable_trace,
            trace_topic=trace_topic,
            namespace=namespace,
        )
        super().__init__(core, f"bolide-producer-{group}")

    @property
    def client_id(self) -> str:
        return self._core.instance.client_id

    def send(
        self,
        message: Message,
        *,
        queue: MessageQueue | None = None,
        sharding_key: str | None = None,
        timeout_ms: int | None = None,
    ) -> SendResult:
        """Send and wait for the broker (see the async ``send``; ``sharding_key`` sends in
        order to the key's queue)."""
        coroutine = self._core.send(
            message, queue=queue, sharding_key=sharding_key, timeout_ms=timeout_ms
        )
        return self._runner.run(coroutine)

    def send_async(
        self,
        message: Message,
        callback: SendCallback | None = None,
        *,
        queue: MessageQueue | None = None,
        sharding_key: str | None = None,
        timeout_ms: int | None = None,
    ) -> concurrent.futures.Future[SendResult]:
        """Start a send and return at once; the future holds the result or the error."""
        future = self._runner.submit(
            self._core.send(message, queue=queue, sharding_key=sharding_key, timeout_ms=timeout_ms)
        )
        if callback is not None:
            future.add_done_callback(callback)
        return future

    def send_batch(
        self,
        messages: Sequence[Message],
        *,
        queue: MessageQueue | None = None,
        timeout_ms: int | None = None,
    ) -> SendResult:
        """Send one batch (see the async ``send_batch``)."""
        coroutine = self._core.send_batch(messages, queue=queue, timeout_ms=timeout_ms)
        return self._runner.run(coroutine)

    def send_orderly(
        self, message: Message, sharding_key: str, *, timeout_ms: int | None = None
    ) -> SendResult:
        """Send to the queue of ``sharding_key`` (see the async ``send_orderly``)."""
        coroutine = self._core.send_orderly(message, sharding_key, timeout_ms=timeout_ms)
        return self._runner.run(coroutine)

    def recall_message(
        self, topic: str, recall_handle: str, *, timeout_ms: int | None = None
    ) -> str:
        """Cancel a delayed message before it is due (see the async ``recall_message``)."""
        coroutine = self._core.recall_message(topic, recall_handle, timeout_ms=timeout_ms)
        return self._runner.run(coroutine)

    def send_oneway(self, message: Message, *, queue: MessageQueue | None = None) -> None:
        """Send without waiting for the broker (see the async ``send_oneway``)."""
        self._runner.run(self._core.send_oneway(message, queue=queue))
