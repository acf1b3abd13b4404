"""RECALL_MESSAGE (370): cancel a not-yet-due timer message (the timer service stores a
recall marker that comes due first).

=============================================  ==============================================
case                                           response
=============================================  ==============================================
recalled                                       SUCCESS, header msgId
handle not base64 / not v1 / other topic       MESSAGE_ILLEGAL "recall handle is invalid"
handle of another broker                       SYSTEM_ERROR "broker name not match"
due now or already delivered                   SYSTEM_ERROR "recall failed, ... delivered"
the broker has no timer service                SYSTEM_ERROR
=============================================  ==============================================

Every answer carries MSG_REGION and TRACE_ON, as a send's (Java's recall trace hook writes a
``Recall`` record only when MSG_REGION is there). With broker-side trace on, every recall of a
decodable handle is recorded as a ``Recall`` record (success = whether it was recalled).
"""

from __future__ import annotations

from bolide.broker.context import BrokerContext
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import HeaderError
from bolide.protocol.headers.recall import (
    RecallHandle,
    RecallMessageRequestHeader,
    RecallMessageResponseHeader,
)
from bolide.protocol.message import PropertyKey
from bolide.remoting import Connection, Dispatcher

__all__ = ["RecallHandlers"]


class RecallHandlers:
    def __init__(self, context: BrokerContext) -> None:
        self._context = context

    def install(self, dispatcher: Dispatcher) -> None:
        dispatcher.register(RequestCode.RECALL_MESSAGE, self.recall_message, family="send")

    async def recall_message(
        self, connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        del connection
        try:
            header = RecallMessageRequestHeader.from_ext_fields(request.ext_fields)
            handle = RecallHandle.decode(header.recall_handle)
        except HeaderError as error:
            return request.make_response(
                ResponseCode.MESSAGE_ILLEGAL, f"recall handle is invalid: {error}"
            )
        code, remark = await self._recall(header, handle)
        fields = {
            PropertyKey.MSG_REGION: self._context.config.region_id,
            PropertyKey.TRACE_ON: "true" if self._context.config.trace_on else "false",
        }
        if code == ResponseCode.SUCCESS:
            fields |= RecallMessageResponseHeader(handle.message_id).to_ext_fields()
        trace = self._context.trace
        if trace is not None:
            trace.recalled(header.producer_group or "", header.topic, handle.message_id,
                           success=code == ResponseCode.SUCCESS)  # fmt: skip
        return request.make_response(code, remark, fields)

    async def _recall(
        self, header: RecallMessageRequestHeader, handle: RecallHandle
    ) -> tuple[int, str | None]:
        """(response code, remark) of the recall (see the module's table)."""
        context = self._context
        if handle.topic != header.topic:
            return ResponseCode.MESSAGE_ILLEGAL, "recall handle is invalid: topic not match"
        if handle.broker_name != context.config.broker_name:
            return ResponseCode.SYSTEM_ERROR, "broker name not match"
        if context.timer is None:
            return ResponseCode.SYSTEM_ERROR, "timer messages are off"
        result = await context.timer.recall(handle.topic, handle.message_id, handle.deliver_ms)
        if result is None:
            return (
                ResponseCode.SYSTEM_ERROR,
                "recall failed, the message is due or already delivered",
            )
        if not result.ok:
            return ResponseCode.SYSTEM_ERROR, f"recall failed: {result.status.name}"
        return ResponseCode.SUCCESS, None
