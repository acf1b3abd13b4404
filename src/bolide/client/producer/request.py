"""RequestProducer: request-reply over the 4.x protocol (RocketMQ 4.7+ ``request()``).

``await producer.request(Message("quotes", b"AAPL"), timeout_ms=3_000)`` sends the message
with a fresh CORRELATION_ID, its client id as REPLY_TO_CLIENT and the timeout as TTL, then
waits for the reply a consumer sends with :func:`bolide.client.reply.create_reply_message`:
the broker storing the reply pushes it to this client (PUSH_REPLY_MESSAGE_TO_CLIENT). The
first request to a topic fetches its route and heartbeats every broker at once, so the
brokers know this client's connection before the reply comes back, as Java does.
"""

from __future__ import annotations

import asyncio
import uuid

from bolide.base.errors import ConfigError
from bolide.client.message import Message
from bolide.client.producer.producer import Producer
from bolide.client.reply import ReplyTimeoutError
from bolide.protocol.message import PropertyKey

__all__ = ["RequestProducer"]


class RequestProducer(Producer):
    """A :class:`Producer` that can also wait for replies (same options)."""

    async def request(self, message: Message, timeout_ms: int) -> Message:
        """Send ``message`` and return the reply to it (topic ``<cluster>_REPLY_TOPIC``,
        the replier's body and properties).

        Raises:
            ConfigError: ``timeout_ms`` is not positive, or too many requests wait.
            ReplyTimeoutError: the request was stored but no reply came within ``timeout_ms``.
            The errors of :meth:`Producer.send` when the request itself is not stored.
        """
        if timeout_ms <= 0:
            raise ConfigError(f"timeout_ms must be positive, not {timeout_ms}")
        correlation_id = str(uuid.uuid4())
        message.properties[PropertyKey.CORRELATION_ID] = correlation_id
        message.properties[PropertyKey.REPLY_TO_CLIENT] = self.instance.client_id
        message.properties[PropertyKey.TTL] = str(timeout_ms)
        waiters = self.instance.replies
        reply = waiters.expect(correlation_id)
        try:
            async with asyncio.timeout(timeout_ms / 1000):
                if self.instance.routes.get(message.topic) is None:
                    await self._route(message.topic)
                    await self.instance.send_heartbeat_to_all_brokers()
                await self.send(message, timeout_ms=timeout_ms)
                return await reply
        except TimeoutError:
            raise ReplyTimeoutError(
                f"request to {message.topic} (correlation id {correlation_id}) got no reply "
                f"within {timeout_ms} ms"
            ) from None
        finally:
            waiters.forget(correlation_id)
