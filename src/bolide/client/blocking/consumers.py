"""The blocking consumers, ``bolide.PushConsumer`` and ``bolide.PullConsumer``: the async cores
run on a private loop thread (:class:`~bolide.client.blocking.loop.LoopThread`), as the blocking
producer does, so every behaviour lives once, in the core.

A plain-function listener of a push consumer runs on the consumer's thread pool, never on
the loop thread, so it may block (and may call a blocking producer). Options, errors and
behaviour are those of :class:`~bolide.client.consumer.push_consumer.PushConsumer` and
:class:`~bolide.client.consumer.pull_consumer.PullConsumer`; both take their tuning knobs in
one :class:`~bolide.client.consumer.options.ConsumerOptions`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from bolide.base.errors import ConfigError
from bolide.client.blocking.loop import ClientFacade
from bolide.client.consumer.pull_consumer import PullConsumer as AsyncPullConsumer
from bolide.client.consumer.push_consumer import PushConsumer as AsyncPushConsumer
from bolide.client.consumer.selector import MessageSelector
from bolide.protocol.bodies import MessageQueue
from bolide.protocol.message import MessageExt

__all__ = ["PullConsumer", "PushConsumer"]


class PushConsumer(ClientFacade[AsyncPushConsumer]):
    """``bolide.PushConsumer("billing", namesrv="127.0.0.1:9876", instance_name="worker-1",
    consume_from=bolide.ConsumeFrom.FIRST_OFFSET)``; keywords as the async core's, tuning in
    ``options=bolide.ConsumerOptions(...)``."""

    def __init__(self, group: str, namesrv: str | Iterable[str], **keywords: Any) -> None:
        super().__init__(
            AsyncPushConsumer(group, namesrv, **keywords), f"bolide-push-consumer-{group}"
        )

    @property
    def client_id(self) -> str:
        return self._core.instance.client_id

    def subscribe(self, topic: str, expression: str | MessageSelector | None = "*") -> None:
        """See the async ``subscribe``."""
        self._on_loop(self._core.subscribe, topic, expression)

    def unsubscribe(self, topic: str) -> None:
        """See the async ``unsubscribe``."""
        self._on_loop(self._core.unsubscribe, topic)

    def register_listener(self, listener: Callable[..., Any]) -> None:
        """See the async ``register_listener``."""
        self._core.register_listener(listener)


class PullConsumer(ClientFacade[AsyncPullConsumer]):
    """``bolide.PullConsumer("reports", namesrv="127.0.0.1:9876")``; ``poll()`` blocks up to
    its timeout. Keywords as the async core's, tuning in ``options=bolide.ConsumerOptions(...)``."""

    def __init__(self, group: str, namesrv: str | Iterable[str], **keywords: Any) -> None:
        super().__init__(
            AsyncPullConsumer(group, namesrv, **keywords), f"bolide-pull-consumer-{group}"
        )

    def subscribe(self, topic: str, expression: str | MessageSelector | None = "*") -> None:
        self._on_loop(self._core.subscribe, topic, expression)

    def unsubscribe(self, topic: str) -> None:
        self._on_loop(self._core.unsubscribe, topic)

    def assign(self, queues: Iterable[MessageQueue]) -> None:
        self._run(self._core.assign(list(queues)))

    def fetch_message_queues(self, topic: str) -> list[MessageQueue]:
        return self._run(self._core.fetch_message_queues(topic))

    def assignment(self) -> frozenset[MessageQueue]:
        return self._on_loop(self._core.assignment)

    def poll(self, timeout_ms: int | None = None) -> list[MessageExt]:
        return self._run(self._core.poll(timeout_ms))

    def __iter__(self) -> Iterator[MessageExt]:
        """``for message in consumer``: successive :meth:`poll` batches one message at a time,
        committing as ``poll`` does, until the consumer shuts down (ConfigError if not
        started)."""
        if not self._core.running:
            raise ConfigError(f"pull consumer {self._core.group!r} is not started")
        while self._core.running:
            yield from self.poll()

    def commit(self, offsets: Mapping[MessageQueue, int] | None = None) -> None:
        self._run(self._core.commit(offsets))

    def committed(self, queue: MessageQueue) -> int:
        return self._run(self._core.committed(queue))

    def position(self, queue: MessageQueue) -> int:
        return self._on_loop(self._core.position, queue)

    def seek(self, queue: MessageQueue, offset: int) -> None:
        self._run(self._core.seek(queue, offset))

    def seek_to_begin(self, queue: MessageQueue) -> None:
        self._run(self._core.seek_to_begin(queue))

    def seek_to_end(self, queue: MessageQueue) -> None:
        self._run(self._core.seek_to_end(queue))

    def pause(self, queues: Iterable[MessageQueue]) -> None:
        self._on_loop(self._core.pause, list(queues))

    def resume(self, queues: Iterable[MessageQueue]) -> None:
        self._on_loop(self._core.resume, list(queues))
