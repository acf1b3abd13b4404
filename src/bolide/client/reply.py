"""Request-reply on the client (RocketMQ 4.7+): the requester's table of waiting requests and
the replier's :func:`create_reply_message`.

A requester sends a request message carrying CORRELATION_ID (unique per request),
REPLY_TO_CLIENT (its client id) and TTL (its timeout, ms); the broker that stores the reply
pushes it to that client with PUSH_REPLY_MESSAGE_TO_CLIENT (326), and :class:`ReplyWaiters`
hands it to the request waiting under its correlation id.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

from bolide.base import limits
from bolide.base.errors import BolideError, ConfigError, InvalidMessageError, ProtocolError
from bolide.client.message import Message
from bolide.protocol.codes import ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.compression import decompress_body
from bolide.protocol.headers.reply import ReplyMessageRequestHeader
from bolide.protocol.message import Message as WireMessage
from bolide.protocol.message import MessageExt, MessageSysFlag, PropertyKey
from bolide.protocol.record import decode_properties
from bolide.protocol.system_topics import REPLY_TOPIC_SUFFIX

__all__ = [
    "REPLY_MESSAGE_TYPE",
    "ReplyTimeoutError",
    "ReplyWaiters",
    "answer_pushed_reply",
    "create_reply_message",
    "pushed_reply",
]

_log = logging.getLogger(__name__)

REPLY_MESSAGE_TYPE = "reply"
"""MSG_TYPE of a reply: the producer sends it as SEND_REPLY_MESSAGE_V2 (325)."""


class ReplyTimeoutError(BolideError):
    """The request was stored but no reply came back within the request's timeout."""


class ReplyWaiters:
    """Correlation id -> the future of the request waiting for its reply (one client)."""

    def __init__(self, max_pending: int = limits.REQUEST_REPLY_PENDING_MAX_COUNT) -> None:
        self._max_pending = max_pending
        self._waiting: dict[str, asyncio.Future[Message]] = {}

    def __len__(self) -> int:
        return len(self._waiting)

    def expect(self, correlation_id: str) -> asyncio.Future[Message]:
        """A future the reply with ``correlation_id`` resolves; call :meth:`forget` after.

        Raises ConfigError when ``max_pending`` requests already wait or the id is taken.
        """
        if len(self._waiting) >= self._max_pending:
            raise ConfigError(f"{self._max_pending} requests already wait for their replies")
        if correlation_id in self._waiting:
            raise ConfigError(f"a request with correlation id {correlation_id} already waits")
        future: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
        self._waiting[correlation_id] = future
        return future

    def forget(self, correlation_id: str) -> None:
        """Stop waiting for ``correlation_id`` (answered, timed out or cancelled)."""
        self._waiting.pop(correlation_id, None)

    def deliver(self, reply: Message) -> bool:
        """Hand ``reply`` to the request it answers; False when none waits for it (late)."""
        correlation_id = reply.properties.get(PropertyKey.CORRELATION_ID)
        future = None if correlation_id is None else self._waiting.get(correlation_id)
        if future is None or future.done():
            return False
        future.set_result(reply)
        return True


def create_reply_message(
    request: WireMessage | MessageExt, body: bytes, properties: Mapping[str, str] | None = None
) -> Message:
    """The reply to ``request`` (a received request message) carrying ``body``: on
    ``<cluster>_REPLY_TOPIC`` of the cluster that stored the request, with its
    CORRELATION_ID, REPLY_TO_CLIENT and TTL, and MSG_TYPE ``reply`` (Java's
    ``MessageUtil.createReplyMessage``). ``properties`` are extra user properties.

    Raises InvalidMessageError when ``request`` is no request message (no CLUSTER, no
    REPLY_TO_CLIENT or no CORRELATION_ID property).
    """
    received = request.properties
    cluster = received.get(PropertyKey.CLUSTER)
    reply_to = received.get(PropertyKey.REPLY_TO_CLIENT)
    correlation_id = received.get(PropertyKey.CORRELATION_ID)
    if not cluster or not reply_to or not correlation_id:
        raise InvalidMessageError(
            "create reply message fail: the request lacks the property "
            f"{PropertyKey.CLUSTER}, {PropertyKey.REPLY_TO_CLIENT} or "
            f"{PropertyKey.CORRELATION_ID} (not sent by a request producer?)"
        )
    reply = Message(cluster + REPLY_TOPIC_SUFFIX, body, properties=properties)
    reply.properties[PropertyKey.MSG_TYPE] = REPLY_MESSAGE_TYPE
    reply.properties[PropertyKey.CORRELATION_ID] = correlation_id
    reply.properties[PropertyKey.REPLY_TO_CLIENT] = reply_to
    ttl = received.get(PropertyKey.TTL)
    if ttl is not None:
        reply.properties[PropertyKey.TTL] = ttl
    return reply


def pushed_reply(request: RemotingCommand) -> Message:
    """The reply a PUSH_REPLY_MESSAGE_TO_CLIENT (326) request carries, body inflated.

    Raises ProtocolError (HeaderError) for a bad header or body.
    """
    header = ReplyMessageRequestHeader.from_ext_fields(request.ext_fields)
    body = request.body
    if header.sys_flag & MessageSysFlag.COMPRESSED:
        body = decompress_body(body, header.sys_flag)
    properties = decode_properties(header.properties or "")
    return Message(header.topic, bytes(body), header.flag, properties)


async def answer_pushed_reply(waiters: ReplyWaiters, request: RemotingCommand) -> RemotingCommand:
    """The client's answer to 326: SUCCESS once handed over (or late, logged), SYSTEM_ERROR
    when the push cannot be read."""
    try:
        reply = pushed_reply(request)
    except ProtocolError as error:
        return request.make_response(ResponseCode.SYSTEM_ERROR, f"bad reply push: {error}")
    if not waiters.deliver(reply):
        _log.warning(
            "reply %s arrived after its request stopped waiting; dropped",
            reply.properties.get(PropertyKey.CORRELATION_ID),
        )
    return request.make_response(ResponseCode.SUCCESS)
