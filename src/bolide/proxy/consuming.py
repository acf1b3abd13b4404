"""ReceiveMessage, AckMessage, ChangeInvisibleDuration, ForwardMessageToDeadLetterQueue over
the brokers' POP codes.

* Receive pops from the broker the request names (queue id -1 for a concurrent group, the
  queue itself for an orderly one, which pops with ``order=true``). The invisible time is
  mandatory unless ``auto_renew`` (then 60 s); it must lie in [min, 12 h] or the answer is
  ILLEGAL_INVISIBLE_TIME. The long-polling time is clamped to [0, 20 s] and to the call's
  deadline. The stream is ``status``, the messages, then ``delivery_timestamp``.
* Ack / change / forward take the broker from the receipt handle; a handle that does not
  parse is INVALID_RECEIPT_HANDLE, and so is a change of a handle that is no longer current.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from dataclasses import dataclass

from bolide.base import limits
from bolide.base.errors import BolideError, ProtocolError, RemoteError
from bolide.client.rpc.pop import ack_message, change_invisible_time, pop_message_raw
from bolide.client.rpc.send import send_message_back
from bolide.protocol.codes import ResponseCode
from bolide.protocol.headers import ConsumerSendMsgBackRequestHeader, HeaderError
from bolide.protocol.headers.pop import (
    POP_CK_PROPERTY,
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ConsumeInitMode,
    PopMessageRequestHeader,
    ReceiptHandle,
)
from bolide.protocol.message import MessageExt
from bolide.protocol.record import decode_pulled_records
from bolide.proxy.brokers import BrokerDirectory, BrokerQueues
from bolide.proxy.messages import to_proto_message
from bolide.proxy.proto import definition_pb2 as pb
from bolide.proxy.proto import service_pb2 as spb
from bolide.proxy.registration import ConsumerRegistration, PoolFactory
from bolide.proxy.renewal import AutoRenewal
from bolide.proxy.status import ProxyError, code_of_error, code_of_response, status

__all__ = ["Consuming", "ReceiveOutcome"]

_log = logging.getLogger("bolide.proxy.consuming")

_EXPRESSION_TYPES = {pb.TAG: "TAG", pb.SQL: "SQL92"}


@dataclass(frozen=True, slots=True)
class ReceiveOutcome:
    status: pb.Status
    messages: list[pb.Message]


def parse_handle(text: str) -> ReceiptHandle:
    try:
        return ReceiptHandle.decode(text)
    except HeaderError as error:
        raise ProxyError(
            pb.INVALID_RECEIPT_HANDLE, f"receipt handle is illegal: {text!r}"
        ) from error


class Consuming:
    def __init__(
        self,
        directory: BrokerDirectory,
        *,
        min_invisible_time_ms: int,
        auto_renew_invisible_time_ms: int = limits.PROXY_DEFAULT_INVISIBLE_TIME_MS,
        renew_ahead_ms: int = limits.PROXY_AUTO_RENEW_AHEAD_MS,
        pool_factory: PoolFactory | None = None,
    ) -> None:
        self._directory = directory
        self._min_invisible_time_ms = min_invisible_time_ms
        self._attempts: dict[tuple[str, str, str, int, str], tuple[float, list[pb.Message]]] = {}
        """An orderly receive's attempt id -> (until when, what it got): a retried receive
        (same id, after a lost answer) gets the same batch, as Apache's attemptId (an orderly
        queue stays blocked by a batch nobody holds otherwise)."""
        self.registration = ConsumerRegistration(directory, pool_factory)
        """Push and simple consumers registered with the brokers of their topics."""
        self.renewal = AutoRenewal(
            self.change_handle,
            invisible_time_ms=auto_renew_invisible_time_ms,
            renew_ahead_ms=renew_ahead_ms,
        )

    def _invisible_ms(self, request: spb.ReceiveMessageRequest) -> int:
        if request.auto_renew and not request.HasField("invisible_duration"):
            return self.renewal.invisible_time_ms
        if not request.HasField("invisible_duration"):
            raise ProxyError(pb.ILLEGAL_INVISIBLE_TIME, "invisible_duration is required")
        invisible_ms = request.invisible_duration.ToMilliseconds()
        _check_invisible(invisible_ms, self._min_invisible_time_ms)
        return invisible_ms

    async def receive(
        self, request: spb.ReceiveMessageRequest, deadline_left_s: float | None, client_id: str = ""
    ) -> ReceiveOutcome:
        topic, group = request.message_queue.topic.name, request.group.name
        if not group:
            raise ProxyError(pb.ILLEGAL_CONSUMER_GROUP, "consumer group is empty")
        if not 0 < request.batch_size <= limits.POP_BATCH_MAX_MESSAGES:
            raise ProxyError(
                pb.BAD_REQUEST,
                f"batch_size {request.batch_size} is not in [1, {limits.POP_BATCH_MAX_MESSAGES}]",
            )
        invisible_ms = self._invisible_ms(request)
        poll_ms = request.long_polling_timeout.ToMilliseconds()
        poll_ms = max(0, min(poll_ms, limits.PROXY_LONG_POLLING_MAX_MS))
        if deadline_left_s is not None:  # answer before the client gives up
            poll_ms = max(0, min(poll_ms, int(deadline_left_s * 1000) - 500))
        config = await self._directory.group_config(topic, group)
        fifo = config is not None and config.consume_orderly_enable
        broker = await self._broker(topic, request.message_queue.broker.name)
        queue_id = request.message_queue.id if fifo and request.message_queue.id >= 0 else -1
        attempt_key = (group, topic, broker.broker_name, queue_id, request.attempt_id)
        if fifo and request.attempt_id:
            repeated = self._attempts.get(attempt_key)
            if repeated is not None and repeated[0] > time.time() * 1000:
                return ReceiveOutcome(status(pb.OK), repeated[1])  # a retried receive
        header = _pop_header(request, queue_id, invisible_ms, poll_ms, fifo)
        try:
            timeout_ms = poll_ms + limits.PROXY_RPC_TIMEOUT_MS
            body = await pop_message_raw(self._directory.pool, broker.address, header, timeout_ms)
        except RemoteError as refused:
            answer = status(code_of_response(refused.code), refused.remark or "pop failed")
            return ReceiveOutcome(answer, [])
        if body is None:
            return ReceiveOutcome(status(pb.MESSAGE_NOT_FOUND, "no new message"), [])
        try:
            records = decode_pulled_records(body)
        except ProtocolError as error:
            raise ProxyError(
                pb.MESSAGE_CORRUPTED, f"broker answered bad records: {error}"
            ) from error
        messages = await self._deliverable(topic, group, records)
        if fifo and request.attempt_id:
            self._remember_attempt(attempt_key, messages, invisible_ms)
        if request.auto_renew and not request.HasField("invisible_duration"):
            for message in messages:
                handle = message.system_properties.receipt_handle
                self.renewal.track(client_id, topic, group, handle)
        return ReceiveOutcome(status(pb.OK), messages)

    async def _deliverable(
        self, topic: str, group: str, records: list[MessageExt]
    ) -> list[pb.Message]:
        """The popped messages in their 5.x form; one whose body does not decode (unknown
        compression, a body that does not inflate) is moved to the group's DLQ on its own,
        and the others are delivered."""
        messages: list[pb.Message] = []
        for record in records:
            if record.body_error is None:
                messages.append(to_proto_message(record, topic=topic))  # retry copies too
                continue
            _log.error(
                "receive of %s on %s: the message at %s/%d does not decode (%s): moved to "
                "the DLQ", group, topic, record.topic, record.queue_offset, record.body_error,
            )  # fmt: skip
            handle = record.properties.get(POP_CK_PROPERTY, "")
            try:
                await self._dead_letter(topic, group, parse_handle(handle), handle, None)
            except (ProxyError, BolideError, OSError) as error:
                _log.error("the undecodable message stays on %s: %s", topic, error)
        return messages

    async def _broker(self, topic: str, wanted: str) -> BrokerQueues:
        """The broker the receive names, else the first holding the topic."""
        brokers = await self._directory.brokers(topic)
        broker = next((b for b in brokers if b.broker_name == wanted), None)
        if broker is not None:
            return broker
        if not brokers:
            raise ProxyError(pb.TOPIC_NOT_FOUND, f"topic {topic} has no broker")
        return brokers[0]

    def _remember_attempt(
        self,
        key: tuple[str, str, str, int, str],
        messages: list[pb.Message],
        invisible_ms: int,
    ) -> None:
        now_ms = time.time() * 1000
        if len(self._attempts) >= limits.PROXY_RECEIVE_ATTEMPT_CACHE_MAX_ENTRIES:
            for stale in [k for k, (until, _) in self._attempts.items() if until <= now_ms]:
                del self._attempts[stale]
            if len(self._attempts) >= limits.PROXY_RECEIVE_ATTEMPT_CACHE_MAX_ENTRIES:
                self._attempts.pop(next(iter(self._attempts)))
        self._attempts[key] = (now_ms + invisible_ms, messages)

    async def ack(self, request: spb.AckMessageRequest) -> spb.AckMessageResponse:
        """Ack every entry; the entries go to the brokers at once, so one fsync of the POP log
        covers the whole batch."""
        topic, group = request.topic.name, request.group.name
        results = await asyncio.gather(
            *(self._ack_one(topic, group, entry) for entry in request.entries)
        )
        response = spb.AckMessageResponse(entries=results)
        response.status.CopyFrom(_overall({result.status.code for result in results}))
        return response

    async def _ack_one(
        self, topic: str, group: str, entry: spb.AckMessageEntry
    ) -> spb.AckMessageResultEntry:
        result = spb.AckMessageResultEntry(
            message_id=entry.message_id, receipt_handle=entry.receipt_handle
        )
        try:
            current = self.renewal.current(entry.receipt_handle)
            handle = parse_handle(current)
            address = await self._directory.broker_address(topic, handle.broker_name)
            header = AckMessageRequestHeader(
                group, topic, handle.queue_id, current, handle.queue_offset
            )
            await ack_message(self._directory.pool, address, header, limits.PROXY_RPC_TIMEOUT_MS)
            result.status.CopyFrom(status(pb.OK))
            self.renewal.forget(entry.receipt_handle)
        except RemoteError as refused:
            answer = status(code_of_response(refused.code), refused.remark or "OK")
            result.status.CopyFrom(answer)
        except (ProxyError, BolideError, OSError) as error:
            result.status.CopyFrom(status(code_of_error(error), str(error)))
        return result

    async def change_invisible_duration(
        self, request: spb.ChangeInvisibleDurationRequest
    ) -> spb.ChangeInvisibleDurationResponse:
        topic, group = request.topic.name, request.group.name
        handle = parse_handle(self.renewal.current(request.receipt_handle))
        invisible_ms = request.invisible_duration.ToMilliseconds()
        _check_invisible(invisible_ms, 0)
        new_handle = await self.change_handle(topic, group, handle, invisible_ms)
        if new_handle is None:
            raise ProxyError(pb.INVALID_RECEIPT_HANDLE, "receipt handle is expired")
        self.renewal.forget(request.receipt_handle)  # the client manages it from now on
        return spb.ChangeInvisibleDurationResponse(
            status=status(pb.OK), receipt_handle=new_handle.encode()
        )

    async def change_handle(
        self, topic: str, group: str, handle: ReceiptHandle, invisible_ms: int
    ) -> ReceiptHandle | None:
        """CHANGE_MESSAGE_INVISIBLETIME; the new handle, None when ``handle`` is stale.
        Raises ProxyError for other refusals, BolideError for transport failures."""
        address = await self._directory.broker_address(topic, handle.broker_name)
        header = ChangeInvisibleTimeRequestHeader(
            group, topic, handle.queue_id, handle.encode(), handle.queue_offset, invisible_ms
        )
        try:
            fields = await change_invisible_time(
                self._directory.pool, address, header, limits.PROXY_RPC_TIMEOUT_MS
            )
        except RemoteError as refused:
            if refused.code == ResponseCode.NO_MESSAGE:
                return None
            code = code_of_response(refused.code)
            raise ProxyError(code, refused.remark or "change failed") from refused
        return dataclasses.replace(
            handle, pop_time_ms=fields.pop_time_ms, invisible_time_ms=fields.invisible_time_ms
        )

    async def forward_to_dead_letter_queue(
        self, request: spb.ForwardMessageToDeadLetterQueueRequest
    ) -> spb.ForwardMessageToDeadLetterQueueResponse:
        topic, group = request.topic.name, request.group.name
        current = self.renewal.current(request.receipt_handle)
        handle = parse_handle(current)
        await self._dead_letter(topic, group, handle, current, request.message_id or None)
        self.renewal.forget(request.receipt_handle)
        return spb.ForwardMessageToDeadLetterQueueResponse(status=status(pb.OK))

    async def _dead_letter(
        self,
        topic: str,
        group: str,
        handle: ReceiptHandle,
        encoded_handle: str,
        message_id: str | None,
    ) -> None:
        """Move the message of ``handle`` to %DLQ%group (a send-back with no retries left),
        then ack it. Raises ProxyError when the broker refuses, BolideError on transport."""
        if handle.commit_log_offset < 0:
            raise ProxyError(pb.INVALID_RECEIPT_HANDLE, "receipt handle lacks the message offset")
        address = await self._directory.broker_address(topic, handle.broker_name)
        back = ConsumerSendMsgBackRequestHeader(
            handle.commit_log_offset,
            group,
            -1,
            origin_msg_id=message_id,
            origin_topic=topic,
            max_reconsume_times=0,
        )
        pool, timeout_ms = self._directory.pool, limits.PROXY_RPC_TIMEOUT_MS
        try:
            await send_message_back(pool, address, back, timeout_ms)
        except RemoteError as refused:
            code = code_of_response(refused.code)
            raise ProxyError(code, refused.remark or "send back failed") from refused
        ack = AckMessageRequestHeader(
            group, topic, handle.queue_id, encoded_handle, handle.queue_offset
        )
        with contextlib.suppress(
            RemoteError
        ):  # as before: the copy is in the DLQ, a refused ack is not an error
            await ack_message(pool, address, ack, timeout_ms)


def _pop_header(
    request: spb.ReceiveMessageRequest, queue_id: int, invisible_ms: int, poll_ms: int, fifo: bool
) -> PopMessageRequestHeader:
    expression = request.filter_expression
    if expression.type == pb.SQL and not expression.expression.strip():
        raise ProxyError(pb.ILLEGAL_FILTER_EXPRESSION, "the SQL92 filter expression is empty")
    return PopMessageRequestHeader(
        request.group.name,
        request.message_queue.topic.name,
        queue_id,
        request.batch_size,
        invisible_ms,
        poll_ms,
        int(time.time() * 1000),
        ConsumeInitMode.MAX,
        _EXPRESSION_TYPES.get(expression.type, "TAG"),
        expression.expression or "*",
        fifo,
        request.attempt_id or None,
    )


def _check_invisible(invisible_ms: int, minimum_ms: int) -> None:
    if invisible_ms < minimum_ms:
        raise ProxyError(
            pb.ILLEGAL_INVISIBLE_TIME,
            f"the invisible time {invisible_ms} ms is shorter than {minimum_ms} ms",
        )
    if invisible_ms > limits.POP_INVISIBLE_TIME_MAX_MS:
        raise ProxyError(
            pb.ILLEGAL_INVISIBLE_TIME,
            f"the invisible time {invisible_ms} ms is longer than "
            f"{limits.POP_INVISIBLE_TIME_MAX_MS} ms",
        )


def _overall(codes: set[int]) -> pb.Status:
    if not codes or codes == {pb.OK}:
        return status(pb.OK)
    if len(codes) == 1:
        return status(next(iter(codes)), "failed")
    return status(pb.MULTIPLE_RESULTS, "some entries failed")
