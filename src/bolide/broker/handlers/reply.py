"""Request-reply on the broker (RocketMQ 4.7+): SEND_REPLY_MESSAGE (324) and
SEND_REPLY_MESSAGE_V2 (325).

A replier answers a request message with a reply message on ``<cluster>_REPLY_TOPIC`` that
carries the request's CORRELATION_ID and REPLY_TO_CLIENT (the requester's client id). Like
Java's ReplyMessageProcessor the broker

1. pushes the reply to the requester: PUSH_REPLY_MESSAGE_TO_CLIENT (326, header
   :class:`~bolide.protocol.headers.reply.ReplyMessageRequestHeader`, body = the reply's body)
   on the connection of the producer whose heartbeat named that client id, waiting
   ``REPLY_PUSH_TIMEOUT_MS`` for its answer;
2. stores the reply on its topic as a send would (the reply topic is a system topic every
   broker creates at start), so it stays readable by id or key.

The answer is the send's answer; a push that failed (no such client connected, or the
client refused or timed out) answers SYSTEM_ERROR with the reason, after storing: the
replier learns that nobody received its reply (Java lets a later store result overwrite it).
"""

from __future__ import annotations

import dataclasses
import logging

from bolide.base import limits
from bolide.base.errors import BolideError
from bolide.broker.context import BrokerContext, born_host_of
from bolide.broker.handlers.send import SendHandlers
from bolide.broker.outbound import push_reply_request
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import HeaderError, SendMessageRequestHeader
from bolide.protocol.headers.reply import ReplyMessageRequestHeader
from bolide.protocol.message import PropertyKey
from bolide.protocol.record import decode_properties, encode_properties
from bolide.remoting import Connection, Dispatcher

__all__ = ["ReplyHandlers"]

_log = logging.getLogger(__name__)

_SEND_CODE_OF: dict[int, int] = {
    RequestCode.SEND_REPLY_MESSAGE: RequestCode.SEND_MESSAGE,
    RequestCode.SEND_REPLY_MESSAGE_V2: RequestCode.SEND_MESSAGE_V2,
}
"""The plain send code whose header each reply code carries."""


class ReplyHandlers:
    """Codes 324 and 325 of one broker; stores through ``send`` (the one send path)."""

    def __init__(self, context: BrokerContext, send: SendHandlers) -> None:
        self._context = context
        self._send = send
        self.pushed_count = 0
        """Replies the requesting client accepted."""

    def install(self, dispatcher: Dispatcher) -> None:
        """Register 324 and 325 in the ``send`` family."""
        for code in _SEND_CODE_OF:
            dispatcher.register(code, self.send_reply, family="send")

    async def send_reply(self, connection: Connection, request: RemotingCommand) -> RemotingCommand:
        """Push the reply of ``request`` to its requester, then store it (module docstring)."""
        send_code = _SEND_CODE_OF[request.code]
        try:
            if send_code == RequestCode.SEND_MESSAGE:
                header = SendMessageRequestHeader.from_ext_fields(request.ext_fields)
            else:
                header = SendMessageRequestHeader.from_v2_ext_fields(request.ext_fields)
        except HeaderError as error:
            return request.make_response(ResponseCode.SYSTEM_ERROR, str(error))
        push_failure = await self._push(connection, header, request.body)
        stored = await self._send.send_message(
            connection, dataclasses.replace(request, code=send_code)
        )
        if push_failure is not None and stored.code == ResponseCode.SUCCESS:
            stored.code = ResponseCode.SYSTEM_ERROR
            stored.remark = push_failure
        return stored

    async def _push(
        self, connection: Connection, header: SendMessageRequestHeader, body: bytes
    ) -> str | None:
        """Send the reply to its requester; None when it accepted it, else the reason."""
        context = self._context
        properties = decode_properties(header.properties or "")
        client_id = properties.get(PropertyKey.REPLY_TO_CLIENT)
        if not client_id:
            return f"reply message lacks the property {PropertyKey.REPLY_TO_CLIENT}"
        info = context.producers.find_channel_by_client_id(client_id)
        if info is None or info.channel.is_closed:
            return f"push reply message fail, channel of <{client_id}> not found"
        properties[PropertyKey.CLUSTER] = context.config.broker_cluster_name
        properties[PropertyKey.PUSH_REPLY_TIME] = str(context.clock.now_ms())
        born_ip, born_port = born_host_of(connection)
        push_header = ReplyMessageRequestHeader(
            producer_group=header.producer_group,
            topic=header.topic,
            default_topic=header.default_topic,
            default_topic_queue_count=header.default_topic_queue_count,
            queue_id=header.queue_id,
            sys_flag=header.sys_flag,
            born_timestamp_ms=header.born_timestamp_ms,
            flag=header.flag,
            born_host=f"{born_ip}:{born_port}",
            store_host=context.config.broker_address,
            store_timestamp_ms=context.clock.now_ms(),
            properties=encode_properties(properties),
            reconsume_times=header.reconsume_times,
            unit_mode=header.unit_mode,
        )
        push = push_reply_request(push_header.to_ext_fields(), body)
        try:
            answer = await info.channel.invoke(push, limits.REPLY_PUSH_TIMEOUT_MS)
        except BolideError as error:
            _log.warning("reply to %s not pushed: %s", client_id, error)
            return f"push reply message to {client_id} fail: {error}"
        if answer.code != ResponseCode.SUCCESS:
            return f"push reply message to {client_id} fail: {answer.remark}"
        self.pushed_count += 1
        return None
