"""Consumer progress and membership: UPDATE_CONSUMER_OFFSET (15), QUERY_CONSUMER_OFFSET (14),
GET_CONSUMER_LIST_BY_GROUP (38) (docs/protocol.md §2.5, §2.6; RocketMQ's offset management).

QUERY_CONSUMER_OFFSET for a group without a committed offset follows broker.conf's
``newGroupStartRule`` (:class:`~bolide.broker.config.NewGroupStart`). With the default, MEMORY,
it is RocketMQ's rule: when the queue still holds its very first message (min offset 0, the
record at offset 0 readable) and that message lies in the memory window (its commit-log
position within ACCESS_MESSAGE_IN_MEMORY_MAX_RATIO_PERCENT of physical memory from the commit
log's end) — or the queue holds nothing yet — the answer is SUCCESS with offset 0, so a
brand-new group reads a young queue from its start even with CONSUME_FROM_LAST_OFFSET (the
only start a C++ consumer has). Otherwise QUERY_NOT_FOUND, and the client applies its own
ConsumeFromWhere (LAST_OFFSET: the max offset). QUEUE_START drops the memory condition;
CONSUME_FROM always answers QUERY_NOT_FOUND.
"""

from __future__ import annotations

from bolide.broker.context import BrokerContext
from bolide.broker.group_start import memory_window_bytes, physical_memory_bytes, starts_at_zero
from bolide.protocol.bodies import GetConsumerListByGroupResponseBody
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import (
    GetConsumerListByGroupRequestHeader,
    OffsetResponseHeader,
    QueryConsumerOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from bolide.remoting import Connection, Dispatcher

__all__ = ["ConsumerManageHandlers", "physical_memory_bytes"]

_NOT_FOUND_REMARK = "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first"


class ConsumerManageHandlers:
    """Offsets and consumer lists of one broker."""

    def __init__(self, context: BrokerContext) -> None:
        self._context = context

    def install(self, dispatcher: Dispatcher) -> None:
        """Register codes 14, 15 and 38 in the ``consumer`` family."""
        dispatcher.register(
            RequestCode.UPDATE_CONSUMER_OFFSET, self.update_consumer_offset, family="consumer"
        )
        dispatcher.register(
            RequestCode.QUERY_CONSUMER_OFFSET, self.query_consumer_offset, family="consumer"
        )
        dispatcher.register(
            RequestCode.GET_CONSUMER_LIST_BY_GROUP, self.get_consumer_list, family="consumer"
        )

    async def update_consumer_offset(
        self, connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """Store the committed offset (no monotonic check; a backwards move is logged)."""
        header = UpdateConsumerOffsetRequestHeader.from_ext_fields(request.ext_fields)
        self._context.offsets.commit_offset(
            connection.remote_address,
            header.consumer_group,
            header.topic,
            header.queue_id,
            header.commit_offset,
        )
        return request.make_response(ResponseCode.SUCCESS)

    async def query_consumer_offset(
        self, connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """The committed offset, or 0 for a new group on a queue that still starts at 0."""
        del connection
        header = QueryConsumerOffsetRequestHeader.from_ext_fields(request.ext_fields)
        context = self._context
        offset = context.offsets.query_offset(header.consumer_group, header.topic, header.queue_id)
        if offset >= 0:
            return request.make_response(
                ResponseCode.SUCCESS, None, OffsetResponseHeader(offset).to_ext_fields()
            )
        if self._starts_at_zero(header.topic, header.queue_id):
            return request.make_response(
                ResponseCode.SUCCESS, None, OffsetResponseHeader(0).to_ext_fields()
            )
        return request.make_response(ResponseCode.QUERY_NOT_FOUND, _NOT_FOUND_REMARK)

    async def get_consumer_list(
        self, connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """The group's client ids (sorted); SYSTEM_ERROR when nobody of the group is online."""
        del connection
        header = GetConsumerListByGroupRequestHeader.from_ext_fields(request.ext_fields)
        client_ids = self._context.consumers.client_ids(header.consumer_group)
        if not client_ids:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR,
                f"no consumer for this group, {header.consumer_group}",
            )
        body = GetConsumerListByGroupResponseBody(tuple(client_ids)).to_json()
        return request.make_response(ResponseCode.SUCCESS, body=body)

    def _starts_at_zero(self, topic: str, queue_id: int) -> bool:
        context = self._context
        window_bytes = memory_window_bytes(physical_memory_bytes())
        rule = context.config.new_group_start
        return starts_at_zero(rule, context.store, topic, queue_id, window_bytes)
