"""POP_MESSAGE (200050), ACK_MESSAGE (200051), CHANGE_MESSAGE_INVISIBLETIME (200053): POP
consumption over remoting (the engine is :mod:`bolide.broker.pop.service`).

==========================================  ==============================================
request                                     response
==========================================  ==============================================
pop, messages found                         SUCCESS, body = records with POP_CK
pop, nothing within pollTime                PULL_NOT_FOUND "no new message"
pop, too many pops waiting                  SYSTEM_BUSY "polling full"
topic unknown                               TOPIC_NOT_EXIST
queueId outside the read queues             SYSTEM_ERROR "queueId[..] is illegal"
group unknown, not auto-created             SUBSCRIPTION_GROUP_NOT_EXIST
tag or SQL92 expression does not parse      SUBSCRIPTION_PARSE_FAILED "parse the consumer's
                                            subscription failed: <where>"
SQL92 with enablePropertyFilter=false       SYSTEM_ERROR (set enablePropertyFilter=true)
broker / topic / group not readable         NO_PERMISSION
invisibleTime outside [0, 12 h]             SYSTEM_ERROR
bad header field or receipt handle          SYSTEM_ERROR naming it
ack of a stale handle                       SUCCESS (nothing changes: Java does the same)
change of a stale handle                    NO_MESSAGE "the receipt handle is expired"
==========================================  ==============================================
"""

from __future__ import annotations

import logging
from typing import TypeVar

from bolide.base import limits
from bolide.broker.config import BrokerConfig
from bolide.broker.context import BrokerContext, RefusedError, find_group_or_refuse
from bolide.broker.pop.filter import MATCH_ALL, PopFilter
from bolide.broker.pop.service import PopRequest, PopService
from bolide.broker.property_filter import check_subscription
from bolide.broker.topics import is_readable
from bolide.protocol.bodies import EXPRESSION_TYPE_TAG, BodyError, SubscriptionData
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import HeaderError
from bolide.protocol.headers.pop import (
    ORDER_REVIVE_QUEUE_ID,
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
    PopTopicType,
    ReceiptHandle,
)
from bolide.protocol.system_topics import pop_retry_topic
from bolide.remoting import Connection, Dispatcher

__all__ = ["PARSE_FAILED_REMARK", "PopHandlers"]

_log = logging.getLogger("bolide.broker.pop")

_H = TypeVar("_H", AckMessageRequestHeader, ChangeInvisibleTimeRequestHeader)

PARSE_FAILED_REMARK = "parse the consumer's subscription failed"
"""Java's remark on a POP whose expression does not parse (Bolide adds where, after it)."""


class PopHandlers:
    """The POP handlers of one broker."""

    def __init__(self, context: BrokerContext, service: PopService) -> None:
        self._context = context
        self._service = service
        self._rotation = 0

    def install(self, dispatcher: Dispatcher) -> None:
        """Pops wait like pulls (family ``pull``); acks and changes are quick (``send``)."""
        dispatcher.register(RequestCode.POP_MESSAGE, self.pop_message, family="pull")
        dispatcher.register(RequestCode.ACK_MESSAGE, self.ack_message, family="send")
        dispatcher.register(
            RequestCode.CHANGE_MESSAGE_INVISIBLETIME, self.change_invisible_time, family="send"
        )

    async def pop_message(
        self, connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        del connection
        try:
            header = PopMessageRequestHeader.from_ext_fields(request.ext_fields)
            pop = await self._check(header)
        except HeaderError as error:
            return request.make_response(ResponseCode.SYSTEM_ERROR, str(error))
        except RefusedError as refused:
            return request.make_response(refused.code, refused.remark)
        batch = await self._service.pop(pop)
        fields = PopMessageResponseHeader(
            batch.pop_time_ms,
            header.invisible_time_ms,
            ORDER_REVIVE_QUEUE_ID if header.order else 0,
            batch.rest_count,
            batch.start_offset_info,
            batch.message_offset_info,
        ).to_ext_fields()
        if batch.polling_full:
            return request.make_response(ResponseCode.SYSTEM_BUSY, "polling full", fields)
        if not batch.records:
            self._context.stats.record_get_miss()
            return request.make_response(ResponseCode.PULL_NOT_FOUND, "no new message", fields)
        self._context.stats.record_get(
            len(batch.records),
            sum(len(r) for r in batch.records),
            topic=header.topic,
            group=header.consumer_group,
        )
        if self._context.trace is not None:
            self._context.trace.delivered(header.consumer_group, batch.records, popped=True)
        return request.make_response(
            ResponseCode.SUCCESS, None, fields, body_parts=tuple(batch.records)
        )

    async def _check(self, header: PopMessageRequestHeader) -> PopRequest:
        context = self._context
        if not is_readable(context.config.broker_permission):
            raise RefusedError(
                ResponseCode.NO_PERMISSION,
                f"the broker[{context.config.broker_address}] popping message is forbidden",
            )
        topic = context.topics.find(header.topic)
        if topic is None:
            raise RefusedError(ResponseCode.TOPIC_NOT_EXIST, f"topic[{header.topic}] not exist")
        if not is_readable(topic.perm):
            raise RefusedError(
                ResponseCode.NO_PERMISSION,
                f"the topic[{header.topic}] peeking message is forbidden",
            )
        if header.queue_id >= topic.read_queue_count or header.queue_id < -1:
            raise RefusedError(
                ResponseCode.SYSTEM_ERROR,
                f"queueId[{header.queue_id}] is illegal, topic:[{header.topic}] "
                f"topicConfig.readQueueNums:[{topic.read_queue_count}]",
            )
        _check_invisible_time(header.invisible_time_ms)
        if not 0 < header.max_messages <= limits.POP_BATCH_MAX_MESSAGES:
            raise RefusedError(
                ResponseCode.SYSTEM_ERROR,
                f"the broker restricts max msg nums to {limits.POP_BATCH_MAX_MESSAGES}",
            )
        group = await find_group_or_refuse(
            context.groups,
            header.consumer_group,
            missing_remark=f"subscription group [{header.consumer_group}] does not exist",
        )
        if not group.consume_enable:
            raise RefusedError(
                ResponseCode.NO_PERMISSION,
                f"subscription group no permission, {header.consumer_group}",
            )
        return PopRequest(
            group=header.consumer_group,
            topic=header.topic,
            queue_ids=self._queue_ids(header.queue_id, topic.read_queue_count),
            max_messages=header.max_messages,
            invisible_time_ms=header.invisible_time_ms,
            poll_time_ms=max(0, min(header.poll_time_ms, limits.POP_POLL_TIME_MAX_MS)),
            filter=_pop_filter(context.config, header),
            init_mode=header.init_mode,
            order=header.order,
        )

    def _queue_ids(self, queue_id: int, read_queue_count: int) -> list[int]:
        if queue_id >= 0:
            return [queue_id]
        self._rotation = (self._rotation + 1) % max(1, read_queue_count)
        ids = list(range(read_queue_count))
        return ids[self._rotation :] + ids[: self._rotation]

    async def ack_message(
        self, connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        del connection
        try:
            header, handle = self._receipt(request, AckMessageRequestHeader)
        except RefusedError as refused:
            return request.make_response(refused.code, refused.remark)
        try:
            acked = await self._service.ack(header.consumer_group, header.topic, handle)
        except OSError as error:
            return request.make_response(ResponseCode.SYSTEM_ERROR, f"ack not recorded: {error}")
        if acked and self._context.trace is not None:
            self._context.trace.pop_acked(*_traced(header.consumer_group, header.topic, handle))
        return request.make_response(ResponseCode.SUCCESS)

    def _receipt(self, request: RemotingCommand, header_type: type[_H]) -> tuple[_H, ReceiptHandle]:
        """The header of an ack or a change and its decoded receipt handle.

        Raises:
            RefusedError: SYSTEM_ERROR naming a bad header field or handle; TOPIC_NOT_EXIST.
        """
        try:
            header = header_type.from_ext_fields(request.ext_fields)
            handle = ReceiptHandle.decode(header.extra_info)
        except HeaderError as error:
            raise RefusedError(ResponseCode.SYSTEM_ERROR, str(error)) from error
        if self._context.topics.find(header.topic) is None:
            raise RefusedError(ResponseCode.TOPIC_NOT_EXIST, f"topic[{header.topic}] not exist")
        return header, handle

    async def change_invisible_time(
        self, connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        del connection
        try:
            header, handle = self._receipt(request, ChangeInvisibleTimeRequestHeader)
            _check_invisible_time(header.invisible_time_ms)
        except RefusedError as refused:
            return request.make_response(refused.code, refused.remark)
        try:
            new_handle = await self._service.change_invisible_time(
                header.consumer_group, header.topic, handle, header.invisible_time_ms
            )
        except OSError as error:
            return request.make_response(ResponseCode.SYSTEM_ERROR, f"change not recorded: {error}")
        if new_handle is None:
            return request.make_response(ResponseCode.NO_MESSAGE, "the receipt handle is expired")
        if self._context.trace is not None:
            self._context.trace.pop_changed(*_traced(header.consumer_group, header.topic, handle))
        fields = ChangeInvisibleTimeResponseHeader(
            new_handle.pop_time_ms, new_handle.invisible_time_ms, new_handle.revive_queue_id
        ).to_ext_fields()
        return request.make_response(ResponseCode.SUCCESS, None, fields)


def _check_invisible_time(invisible_time_ms: int) -> None:
    """Raises RefusedError (SYSTEM_ERROR) outside [0, POP_INVISIBLE_TIME_MAX_MS]."""
    if not 0 <= invisible_time_ms <= limits.POP_INVISIBLE_TIME_MAX_MS:
        raise RefusedError(
            ResponseCode.SYSTEM_ERROR, f"invisibleTime {invisible_time_ms} is illegal"
        )


def _traced(group: str, topic: str, handle: ReceiptHandle) -> tuple[str, str, int, int]:
    """(group, popped topic, queue id, queue offset) of a handle, for the broker's trace: the
    group's POP retry topic for a retry handle (the request names the normal topic)."""
    if handle.topic_type == PopTopicType.RETRY:
        topic = pop_retry_topic(group, topic)
    return group, topic, handle.queue_id, handle.queue_offset


def _pop_filter(config: BrokerConfig, header: PopMessageRequestHeader) -> PopFilter:
    """The request's filter (Java builds its SubscriptionData): tags, or SQL92 compiled.

    Raises:
        RefusedError: SUBSCRIPTION_PARSE_FAILED when the expression does not parse (Java's
            remark, then where), SYSTEM_ERROR when a SQL92 filter meets
            ``enablePropertyFilter=false`` or the type is unknown.
    """
    expression_type = header.expression_type or EXPRESSION_TYPE_TAG
    try:
        subscription = SubscriptionData.from_expression(
            header.topic, header.expression or "*", 0, expression_type
        )
    except BodyError as error:
        raise RefusedError(
            ResponseCode.SUBSCRIPTION_PARSE_FAILED, f"{PARSE_FAILED_REMARK}: {error}"
        ) from error
    if expression_type != EXPRESSION_TYPE_TAG:
        try:
            return PopFilter(sql=check_subscription(config, subscription))
        except RefusedError as refused:
            if refused.code != ResponseCode.SUBSCRIPTION_PARSE_FAILED:
                raise
            remark = f"{PARSE_FAILED_REMARK}: {refused.remark}"
            raise RefusedError(ResponseCode.SUBSCRIPTION_PARSE_FAILED, remark) from refused
    if subscription.is_all:
        return MATCH_ALL
    return PopFilter(frozenset(subscription.code_set), frozenset(subscription.tags_set))
