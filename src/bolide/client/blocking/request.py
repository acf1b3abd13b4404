"""``bolide.RequestProducer``: the blocking facade of
:class:`bolide.client.producer.request.RequestProducer` (request-reply, RocketMQ 4.7+).

``request`` blocks until the reply arrives or the timeout passes; ``request_async`` returns a
:class:`concurrent.futures.Future` at once (Java's request with a callback).
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Iterable
from typing import Any

from bolide.client.blocking.loop import ClientFacade
from bolide.client.message import Message, SendResult
from bolide.client.producer.request import RequestProducer as AsyncRequestProducer

__all__ = ["RequestProducer"]


class RequestProducer(ClientFacade[AsyncRequestProducer]):
    """``bolide.RequestProducer("quote-requesters", namesrv="127.0.0.1:9876")``; options as
    :class:`bolide.aio.Producer`. ``with RequestProducer(...) as producer:`` starts and shuts
    it down."""

    def __init__(self, group: str, namesrv: str | Iterable[str], **options: Any) -> None:
        core = AsyncRequestProducer(group, namesrv, **options)
        super().__init__(core, f"bolide-request-producer-{group}")

    @property
    def client_id(self) -> str:
        return self._core.instance.client_id

    def request(self, message: Message, timeout_ms: int) -> Message:
        """Send ``message`` and return its reply; raises ReplyTimeoutError after
        ``timeout_ms`` (see the async ``request``)."""
        return self._run(self._core.request(message, timeout_ms))

    def request_async(
        self, message: Message, timeout_ms: int
    ) -> concurrent.futures.Future[Message]:
        """Start a request and return at once; the future holds the reply or the error."""
        return self._runner.submit(self._core.request(message, timeout_ms))

    def send(self, message: Message, *, timeout_ms: int | None = None) -> SendResult:
        """A plain send (replies included: see bolide.client.reply.create_reply_message)."""
        return self._run(self._core.send(message, timeout_ms=timeout_ms))
