"""CONSUMER_SEND_MSG_BACK (36): a consumer hands back a message it failed (docs/protocol.md §2.8).

The decisions are in :mod:`bolide.broker.retry`; this module checks the request, runs the
send-back and maps its outcome to the answer Java gives:

==========================================  =========================================
outcome                                     response
==========================================  =========================================
stored on %RETRY% or %DLQ%                  SUCCESS, no header
retryQueueNums 0                            SUCCESS (nothing stored)
broker not writable                         NO_PERMISSION
group unknown and not auto-created          SUBSCRIPTION_GROUP_NOT_EXIST
retry / DLQ topic not writable              NO_PERMISSION
message not found by offset                 SYSTEM_ERROR "look message by offset failed, …"
store refused the put                       SYSTEM_ERROR, remark = the store status name
bad header field                            SYSTEM_ERROR naming the field
==========================================  =========================================
"""

from __future__ import annotations

import logging

from bolide.base.errors import ProtocolError
from bolide.broker.context import BrokerContext
from bolide.broker.retry import SendBackService, SendBackStatus
from bolide.broker.topics import is_writeable
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import ConsumerSendMsgBackRequestHeader, HeaderError
from bolide.remoting import Connection, Dispatcher

__all__ = ["SendBackHandlers"]

_log = logging.getLogger("bolide.broker.send_back")

_CODES = {
    SendBackStatus.STORED: ResponseCode.SUCCESS,
    SendBackStatus.SKIPPED: ResponseCode.SUCCESS,
    SendBackStatus.NO_GROUP: ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
    SendBackStatus.NO_PERMISSION: ResponseCode.NO_PERMISSION,
    SendBackStatus.FAILED: ResponseCode.SYSTEM_ERROR,
}


class SendBackHandlers:
    """The consumer send-back handler of one broker."""

    def __init__(self, context: BrokerContext, service: SendBackService) -> None:
        self._context = context
        self._service = service

    def install(self, dispatcher: Dispatcher) -> None:
        """Register code 36 in the ``send`` family (Java serves it with the send processor)."""
        dispatcher.register(RequestCode.CONSUMER_SEND_MSG_BACK, self.send_back, family="send")

    async def send_back(self, connection: Connection, request: RemotingCommand) -> RemotingCommand:
        """Re-store the failed message on %RETRY%group or %DLQ%group; see the module table."""
        del connection
        context = self._context
        try:
            header = ConsumerSendMsgBackRequestHeader.from_ext_fields(request.ext_fields)
        except HeaderError as error:
            return request.make_response(ResponseCode.SYSTEM_ERROR, str(error))
        if not is_writeable(context.config.broker_permission):
            return request.make_response(
                ResponseCode.NO_PERMISSION,
                f"the broker[{context.config.broker_address}] sending message is forbidden",
            )
        try:
            outcome = await self._service.send_back(header, request.version)
        except (OSError, ProtocolError) as error:
            _log.error("send-back of offset %d failed: %s", header.commit_log_offset, error)
            return request.make_response(ResponseCode.SYSTEM_ERROR, f"send back failed: {error}")
        result = outcome.result
        if outcome.status is SendBackStatus.STORED and result is not None:
            context.stats.record_put(result.message_count, result.wrote_bytes)
            context.stats.record_send_back(header.origin_topic or "", header.group)
        elif outcome.status is SendBackStatus.FAILED:
            context.stats.record_put_failure()
        return request.make_response(_CODES[outcome.status], outcome.remark or None)
