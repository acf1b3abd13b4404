"""The answers of a send (SEND_MESSAGE, SEND_MESSAGE_V2, SEND_BATCH_MESSAGE): one home for
both send paths, the general one (:mod:`bolide.broker.handlers.send`) and the fast forms
(:mod:`bolide.broker.handlers.send_fast`).

The store's status becomes the response code; every response carries extFields (MSG_REGION
and TRACE_ON, plus msgId / queueId / queueOffset when stored): the Java client reads
MSG_REGION without a null check and the C++ client dereferences the decoded header. A stored
put answered to a JSON request without a remark is the precompiled SUCCESS frame
(:mod:`bolide.protocol.answer_frames`): the same bytes without a command and its encoding.
"""

from __future__ import annotations

import time

from bolide.broker.context import BrokerContext
from bolide.broker.controller_mode.settings import IN_SYNC_REPLICAS_NOT_ENOUGH
from bolide.protocol.answer_frames import SendSuccessFrames, success_frame
from bolide.protocol.codes import ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.frame import SerializeType
from bolide.protocol.message import PropertyKey
from bolide.remoting import Connection, Dispatcher
from bolide.store.api import PutResult, PutStatus

__all__ = ["SendAnswers"]

# Store status -> (response code, remark when the store gave none).
_STATUS_CODES: dict[PutStatus, tuple[ResponseCode, str]] = {
    PutStatus.PUT_OK: (ResponseCode.SUCCESS, ""),
    PutStatus.FLUSH_DISK_TIMEOUT: (ResponseCode.FLUSH_DISK_TIMEOUT, "flush to disk timed out"),
    PutStatus.MESSAGE_ILLEGAL: (ResponseCode.MESSAGE_ILLEGAL, "the message is illegal"),
    PutStatus.PROPERTIES_SIZE_EXCEEDED: (
        ResponseCode.MESSAGE_ILLEGAL,
        "the message properties are too long",
    ),
    PutStatus.SERVICE_NOT_AVAILABLE: (
        ResponseCode.SERVICE_NOT_AVAILABLE,
        "the store is not available (shutting down, or a write failed earlier)",
    ),
    PutStatus.DISK_FULL: (
        ResponseCode.SERVICE_NOT_AVAILABLE,
        "the broker's disk is full: message refused",
    ),
    PutStatus.OS_PAGE_CACHE_BUSY: (ResponseCode.SYSTEM_ERROR, "[PC_SYNCHRONIZED] broker busy"),
    PutStatus.UNKNOWN_ERROR: (ResponseCode.SYSTEM_ERROR, "the store failed the message"),
    PutStatus.FLUSH_SLAVE_TIMEOUT: (
        ResponseCode.FLUSH_SLAVE_TIMEOUT,
        "wait for the slave timed out",
    ),
    PutStatus.SLAVE_NOT_AVAILABLE: (ResponseCode.SLAVE_NOT_AVAILABLE, "no slave is in sync"),
}

_STORED_CODES = frozenset(
    {
        ResponseCode.SUCCESS,
        ResponseCode.FLUSH_DISK_TIMEOUT,
        ResponseCode.FLUSH_SLAVE_TIMEOUT,
        ResponseCode.SLAVE_NOT_AVAILABLE,
    }
)
"""Codes under which the message was stored (the client reads the send result header)."""


class SendAnswers:
    """How a send is answered, and counted, once the store said what it did.

    ``context`` gives the broker's configuration (the extFields of every answer) and its
    statistics; the dispatcher, once :meth:`attach` gave it, sends the answers of the sends
    stored now and answered later (SYNC flush).
    """

    def __init__(self, context: BrokerContext) -> None:
        self._context = context
        config = context.config
        self.error_fields: dict[str, str] = {
            PropertyKey.MSG_REGION: config.region_id,
            PropertyKey.TRACE_ON: "true" if config.trace_on else "false",
        }
        """The extFields every answer carries (MSG_REGION, TRACE_ON)."""
        self._success_frames = SendSuccessFrames(self.error_fields)
        self._success_head, self._success_tail, self._success_end = self._success_frames.pieces
        self._dispatcher: Dispatcher | None = None

    def attach(self, dispatcher: Dispatcher) -> None:
        """Answers given later (:meth:`answer_later`) go through ``dispatcher``."""
        self._dispatcher = dispatcher

    def answer_later(
        self, connection: Connection, request: RemotingCommand, response: RemotingCommand | bytes
    ) -> None:
        """Send ``response`` to ``request`` now that its put completed (nothing before
        :meth:`attach`)."""
        dispatcher = self._dispatcher
        if dispatcher is not None:
            dispatcher.answer(connection, request, response)

    def success(self, opaque: int, message_id: str, queue_id: int, queue_offset: int) -> bytes:
        """The SUCCESS frame of a stored single send (a JSON request), uncounted."""
        return success_frame(
            self._success_head, self._success_tail, self._success_end,
            opaque, message_id, queue_id, queue_offset,
        )  # fmt: skip

    def success_later(
        self, opaque: int, message_id: str, queue_id: int, queue_offset: int
    ) -> bytes:
        """:meth:`success` for a send answered once durable (the frames' own cache)."""
        return self._success_frames.frame(opaque, message_id, queue_id, queue_offset)

    def refused(self, request: RemotingCommand, code: ResponseCode, remark: str) -> RemotingCommand:
        """A send refused before the store (counted as a put failure)."""
        self._context.stats.record_put_failure()
        return request.make_response(code, remark, self.error_fields)

    def record_single_put(self, result: PutResult, topic: str, started_ns: int) -> None:
        """Count a stored single send answered by :meth:`success`."""
        self._context.stats.record_single_put(
            result.wrote_bytes, topic, (time.perf_counter_ns() - started_ns) // 1000
        )

    def answer_frame(
        self,
        request: RemotingCommand,
        result: PutResult,
        queue_id: int,
        topic: str,
        started_ns: int,
    ) -> RemotingCommand | bytes:
        """:meth:`answer`, as the precompiled SUCCESS frame when that is what it answers (a
        stored put, no remark, a JSON request): the same bytes without a command and its
        encoding (the batch fast form; a batch's message ids are joined by commas)."""
        if (
            result.status is not PutStatus.PUT_OK
            or result.remark
            or request.serialize_type != SerializeType.JSON
        ):
            return self.answer(request, result, queue_id, topic, started_ns)
        self._count_stored(result, topic, started_ns)
        return success_frame(
            self._success_head, self._success_tail, self._success_end,
            request.opaque, ",".join(result.message_ids), queue_id, result.queue_offset,
        )  # fmt: skip

    def answer(
        self,
        request: RemotingCommand,
        result: PutResult,
        queue_id: int,
        topic: str,
        started_ns: int,
        *,
        recall_handle: str | None = None,
    ) -> RemotingCommand:
        """The response to ``request`` whose put ended with ``result``: the store's status as
        the response code, the send result header when stored (counted either way), with
        ``recallHandle`` when given (a timer message)."""
        status = result.status
        # Identity first: hashing an Enum member runs Python code, and PUT_OK is the rule.
        if status is PutStatus.PUT_OK:
            code, default_remark = ResponseCode.SUCCESS, ""
        else:
            code, default_remark = _STATUS_CODES[status]
        if code is not ResponseCode.SUCCESS and code not in _STORED_CODES:
            self._context.stats.record_put_failure()
            if result.remark == IN_SYNC_REPLICAS_NOT_ENOUGH:  # controller mode: Java's code 1
                code = ResponseCode.SYSTEM_ERROR
            return request.make_response(code, result.remark or default_remark, self.error_fields)
        self._count_stored(result, topic, started_ns)
        # The SendMessageResponseHeader fields, built directly: this runs for every send.
        fields = {
            "msgId": ",".join(result.message_ids),
            "queueId": str(queue_id),
            "queueOffset": str(result.queue_offset),
            **self.error_fields,
        }
        if recall_handle is not None:
            fields["recallHandle"] = recall_handle
        return request.make_response(code, result.remark or None, fields)

    def _count_stored(self, result: PutResult, topic: str, started_ns: int) -> None:
        """Count a stored put (both answers of a send that stored something)."""
        self._context.stats.record_put(
            result.message_count,
            result.wrote_bytes,
            topic=topic,
            elapsed_us=(time.perf_counter_ns() - started_ns) // 1000,
        )
