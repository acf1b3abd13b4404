"""Queue metadata and message lookups (docs/protocol.md §2.6, §2.7):

* GET_MAX_OFFSET (30): the next queue offset to be written (exclusive), 0 for no queue;
* GET_MIN_OFFSET (31): the smallest queue offset still readable;
* SEARCH_OFFSET_BY_TIMESTAMP (29): the queue offset stored at (or right after) a time;
* GET_EARLIEST_MSG_STORETIME (32): store time of the message at the min offset (-1: none);
* VIEW_MESSAGE_BY_ID (33): one stored record by commit-log offset (the client decodes the
  offset from the offset message id); SYSTEM_ERROR when there is none;
* QUERY_MESSAGE (12): records of a topic indexed under a key (``KEYS``) or, with the extra
  field ``_UNIQUE_KEY_QUERY=true``, under a UNIQ_KEY; QUERY_NOT_FOUND when none.

Records go out as stored, zero-copy. Every response header value is a string.
"""

from __future__ import annotations

from bolide.base import limits
from bolide.broker.context import BrokerContext
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import (
    GetEarliestMsgStoretimeResponseHeader,
    OffsetResponseHeader,
    QueryMessageRequestHeader,
    QueryMessageResponseHeader,
    QueueRequestHeader,
    SearchOffsetRequestHeader,
    ViewMessageRequestHeader,
)
from bolide.remoting import Connection, Dispatcher

__all__ = ["QueryHandlers"]


class QueryHandlers:
    """Offsets of queues and lookups of messages, for one broker."""

    def __init__(self, context: BrokerContext) -> None:
        self._context = context

    def install(self, dispatcher: Dispatcher) -> None:
        """Register codes 29-33 and 12 in the ``query`` family."""
        routes = (
            (RequestCode.GET_MAX_OFFSET, self.get_queue_bound),
            (RequestCode.GET_MIN_OFFSET, self.get_queue_bound),
            (RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, self.search_offset_by_timestamp),
            (RequestCode.GET_EARLIEST_MSG_STORETIME, self.get_earliest_msg_store_time),
            (RequestCode.VIEW_MESSAGE_BY_ID, self.view_message_by_id),
            (RequestCode.QUERY_MESSAGE, self.query_message),
        )
        for code, handler in routes:
            dispatcher.register(code, handler, family="query")

    async def get_queue_bound(
        self, connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """GET_MAX_OFFSET: the next offset to be written; GET_MIN_OFFSET: the smallest readable."""
        del connection
        header = QueueRequestHeader.from_ext_fields(request.ext_fields)
        store = self._context.store
        read = store.max_offset if request.code == RequestCode.GET_MAX_OFFSET else store.min_offset
        return _offset_response(request, read(header.topic, header.queue_id))

    async def search_offset_by_timestamp(
        self, connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        del connection
        header = SearchOffsetRequestHeader.from_ext_fields(request.ext_fields)
        offset = self._context.store.offset_for_timestamp(
            header.topic, header.queue_id, header.timestamp_ms
        )
        return _offset_response(request, offset)

    async def get_earliest_msg_store_time(
        self, connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        del connection
        header = QueueRequestHeader.from_ext_fields(request.ext_fields)
        timestamp_ms = self._context.store.earliest_store_time(header.topic, header.queue_id)
        fields = GetEarliestMsgStoretimeResponseHeader(timestamp_ms).to_ext_fields()
        return request.make_response(ResponseCode.SUCCESS, None, fields)

    async def view_message_by_id(
        self, connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        del connection
        header = ViewMessageRequestHeader.from_ext_fields(request.ext_fields)
        record = self._context.store.read_record(header.commit_log_offset)
        if record is None:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR,
                f"can not find message by the offset, {header.commit_log_offset}",
            )
        return request.make_response(ResponseCode.SUCCESS, body_parts=(record,))

    async def query_message(
        self, connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        del connection
        header = QueryMessageRequestHeader.from_ext_fields(request.ext_fields)
        max_count = header.max_messages
        if header.unique_key_query:
            max_count = limits.QUERY_MESSAGE_UNIQUE_KEY_MAX_MESSAGES
        store = self._context.store
        records = store.query_by_key(
            header.topic,
            header.key,
            max(1, max_count),
            header.begin_timestamp_ms,
            header.end_timestamp_ms,
            unique=header.unique_key_query,
        )
        if not records:
            return request.make_response(
                ResponseCode.QUERY_NOT_FOUND,
                f"can not find message, maybe time range not correct (topic {header.topic},"
                f" key {header.key})",
            )
        # The index is written with every put, so it is current as of the last record stored.
        fields = QueryMessageResponseHeader(
            index_last_update_timestamp_ms=self._context.clock.now_ms(),
            index_last_update_phy_offset=store.stats().commit_log_max_offset,
        ).to_ext_fields()
        return request.make_response(ResponseCode.SUCCESS, None, fields, body_parts=tuple(records))


def _offset_response(request: RemotingCommand, offset: int) -> RemotingCommand:
    fields = OffsetResponseHeader(offset).to_ext_fields()
    return request.make_response(ResponseCode.SUCCESS, None, fields)
