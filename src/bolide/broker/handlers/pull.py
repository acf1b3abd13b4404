"""PULL_MESSAGE (11): checks, subscription, the store read, long polling (docs/protocol.md §2.4).

1. Checks in the Java broker's order: broker readable, subscription group (auto-created),
   group consumable, topic known and readable, queue id inside ``[0, readQueueNums)``.
2. The filter: with the SUBSCRIPTION bit the request's own expression (a parse failure is
   SUBSCRIPTION_PARSE_FAILED); otherwise the subscription the group registered by heartbeat
   (SUBSCRIPTION_NOT_EXIST when missing, SUBSCRIPTION_NOT_LATEST when older than the
   request's ``subVersion``, NO_PERMISSION for a broadcasting group the broker refuses). Tag
   codes always come from the expression, never from the client (C++ sends ``atoi(tag)``).
3. The store read, whose status becomes the response code::

       FOUND                                    SUCCESS (body = the stored records)
       NO_MATCHED_MESSAGE, MESSAGE_WAS_REMOVING PULL_RETRY_IMMEDIATELY
       OFFSET_OVERFLOW_ONE, OFFSET_FOUND_NULL   PULL_NOT_FOUND (long-polled)
       OFFSET_TOO_SMALL, OFFSET_OVERFLOW_BADLY  PULL_OFFSET_MOVED
       NO_MESSAGE_IN_QUEUE, NO_MATCHED_LOGIC_QUEUE  PULL_NOT_FOUND at offset 0, else MOVED

4. Long polling, only when the request has the SUSPEND bit (a pull consumer without it must be
   answered at once): a PULL_NOT_FOUND parks in the long-polling table until a matching message
   arrives on the queue or ``suspendTimeoutMillis`` (at most PULL_SUSPEND_MAX_MS) runs out, then
   the read runs again without suspension and its result answers the original request (same
   opaque). The parked pull is a callback, not a suspended task: the put that stores a
   matching message reads and writes the answer before it returns, so a woken pull costs no
   task, future or loop turn (the e2e latency of a caught-up consumer). A closed
   connection's parked pull is dropped unanswered.
5. With the COMMIT_OFFSET bit, ``commitOffset`` is stored for the group on the first pass.

Every response carries suggestWhichBrokerId, nextBeginOffset, minOffset and maxOffset as
strings: the Java client unboxes them and the C++ client fails without them. The body of a
SUCCESS is the records themselves, zero-copy views of the store written to the socket as is.
"""

from __future__ import annotations

import functools
import logging
import os
import struct
from collections.abc import Callable, Sequence

from bolide.base import limits
from bolide.base.errors import BolideError
from bolide.broker.config import BrokerRole
from bolide.broker.context import BrokerContext, RefusedError, find_group_or_refuse
from bolide.broker.long_polling import WakeReason
from bolide.broker.property_filter import check_subscription, matching_records
from bolide.broker.sql_filter import SqlFilter
from bolide.broker.topics import is_readable
from bolide.protocol.bodies import EXPRESSION_TYPE_TAG, BodyError, MessageModel, SubscriptionData
from bolide.protocol.codes import LanguageCode, RequestCode, ResponseCode
from bolide.protocol.command import FLAG_ONEWAY, FLAG_RESPONSE, RemotingCommand
from bolide.protocol.headers import (
    HeaderError,
    PullMessageRequestHeader,
    PullSysFlag,
)
from bolide.protocol.record import PHYSICAL_OFFSET_POSITION, readable_by_zlib_only_client
from bolide.remoting import Connection, Dispatcher
from bolide.store.api import GetResult, GetStatus

__all__ = ["PullHandlers"]

_log = logging.getLogger("bolide.broker.pull")

_MASTER_ID = "0"
_INT64 = struct.Struct(">q")
# Plain ints: ``int & IntFlag`` runs IntFlag.__rand__, Python code, on every pull.
_COMMIT_OFFSET = int(PullSysFlag.COMMIT_OFFSET)
_SUSPEND = int(PullSysFlag.SUSPEND)
_SUBSCRIPTION = int(PullSysFlag.SUBSCRIPTION)

_STATUS_CODES: dict[GetStatus, ResponseCode] = {
    GetStatus.FOUND: ResponseCode.SUCCESS,
    GetStatus.NO_MATCHED_MESSAGE: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetStatus.MESSAGE_WAS_REMOVING: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetStatus.OFFSET_OVERFLOW_ONE: ResponseCode.PULL_NOT_FOUND,
    GetStatus.OFFSET_FOUND_NULL: ResponseCode.PULL_NOT_FOUND,
    GetStatus.OFFSET_TOO_SMALL: ResponseCode.PULL_OFFSET_MOVED,
    GetStatus.OFFSET_OVERFLOW_BADLY: ResponseCode.PULL_OFFSET_MOVED,
}
_EMPTY_QUEUE_STATUSES = frozenset({GetStatus.NO_MESSAGE_IN_QUEUE, GetStatus.NO_MATCHED_LOGIC_QUEUE})


class PullHandlers:
    """The PULL_MESSAGE handler of one broker."""

    def __init__(
        self,
        context: BrokerContext,
        *,
        slave_read_backlog_bytes: int | None = None,
        commit_log_max_offset: Callable[[], int] | None = None,
    ) -> None:
        self._context = context
        self._commit_log_max_offset = commit_log_max_offset or (
            lambda: context.store.stats().commit_log_max_offset
        )
        self._slave_read_backlog_bytes = (
            _memory_share_bytes(context.config.access_message_in_memory_max_ratio_percent)
            if slave_read_backlog_bytes is None
            else slave_read_backlog_bytes
        )
        """Backlog past which a consumer is sent to a slave (accessMessageInMemoryMaxRatio)."""

    def install(self, dispatcher: Dispatcher) -> None:
        """Register code 11 in the ``pull`` family (sized for the long-polling table)."""
        dispatcher.register(RequestCode.PULL_MESSAGE, self.pull_message, family="pull")

    async def pull_message(
        self, connection: Connection, request: RemotingCommand
    ) -> RemotingCommand | None:
        """Answer a pull, holding it first when it may be suspended; None when its connection
        closed while it was held."""
        try:
            header = PullMessageRequestHeader.from_ext_fields(request.ext_fields)
        except HeaderError as error:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, str(error), _offset_fields(0, 0, 0)
            )
        try:
            tag_codes, sql = await self._check(header)
        except RefusedError as refused:
            return self._refusal(request, header, refused)
        context = self._context
        slave = context.role is BrokerRole.SLAVE
        if slave and not context.config.slave_read_enable:
            # Java: a slave that may not serve reads sends the consumer back to the master.
            result = self._read(header, tag_codes, sql)
            return self._response(
                request, ResponseCode.PULL_RETRY_IMMEDIATELY, result, header, _MASTER_ID
            )
        if header.sys_flag & _COMMIT_OFFSET and header.commit_offset >= 0 and not slave:
            self._commit(connection, header)
        suspend = header.sys_flag & _SUSPEND
        if suspend and self.caught_up(header):
            # A caught-up consumer's pull (the e2e case): the read would answer PULL_NOT_FOUND.
            return self._park(connection, request, header, tag_codes, sql)
        result = self._read(header, tag_codes, sql)
        code = _response_code(result, header.queue_offset)
        if code == ResponseCode.PULL_NOT_FOUND and suspend:
            return self._park(connection, request, header, tag_codes, sql)
        return self._response(request, code, result, header, self._suggest(header, result))

    def caught_up(self, header: PullMessageRequestHeader) -> bool:
        """Whether the pull asks for the queue's next offset to be written (its max offset):
        the store read then answers PULL_NOT_FOUND whatever the filter (OFFSET_OVERFLOW_ONE,
        or NO_MESSAGE_IN_QUEUE / NO_MATCHED_LOGIC_QUEUE at offset 0), so the read is skipped.
        Held to the read's answer by tests/broker/test_handlers_pull.py."""
        return header.queue_offset == self._context.store.max_offset(header.topic, header.queue_id)

    def _park(
        self,
        connection: Connection,
        request: RemotingCommand,
        header: PullMessageRequestHeader,
        tag_codes: frozenset[int] | None,
        sql: SqlFilter | None,
    ) -> RemotingCommand | None:
        """Park the pull until a matching arrival or its hold ends (:meth:`_woken` answers
        it then; None here); SYSTEM_BUSY when the long-poll table is full."""
        long_polling = self._context.long_polling
        wake = functools.partial(self._woken, connection, request, header, tag_codes, sql)
        if long_polling.park(
            header.topic,
            header.queue_id,
            header.queue_offset,
            long_polling.deadline_after(self._hold_ms(header)),
            wake,
            tag_codes=tag_codes,
            owner=connection,
        ):
            return None
        # Answering "not found" at once made clients pull again at once: a busy loop.
        # SYSTEM_BUSY is an error to them: they wait before the next pull (Java and
        # Bolide 3 s, pullTimeDelayMillsWhenException).
        remark = "[PULL_BUSY] the broker holds as many pulls as it may; pull later"
        return self._refusal(request, header, RefusedError(ResponseCode.SYSTEM_BUSY, remark))

    def _woken(
        self,
        connection: Connection,
        request: RemotingCommand,
        header: PullMessageRequestHeader,
        tag_codes: frozenset[int] | None,
        sql: SqlFilter | None,
        reason: WakeReason,
    ) -> None:
        """A parked pull woke: read again without suspension and answer it here and now.

        Called by the long-polling table on the loop's thread — inside the put whose arrival
        woke it, or from its deadline timer — so the answer leaves without a task, a future
        or a loop turn in between. A closed connection's pull (CANCELLED) is not answered.
        """
        if reason is WakeReason.CANCELLED or connection.is_closed:
            return
        try:
            result = self._read(header, tag_codes, sql)
            code = _response_code(result, header.queue_offset)
            response = self._response(request, code, result, header, self._suggest(header, result))
        except Exception as error:  # as the dispatcher answers a handler that raised
            _log.exception("answering a woken pull of %s/%d", header.topic, header.queue_id)
            response = request.make_response(
                ResponseCode.SYSTEM_ERROR, str(error) or type(error).__name__
            )
        _answer(connection, request, response)

    def _suggest(self, header: PullMessageRequestHeader, result: GetResult) -> str:
        """suggestWhichBrokerId: with slaveReadEnable, the group's whichBrokerWhenConsumeSlowly
        (default 1) when the consumer's unread backlog in the commit log exceeds 40 % of RAM,
        else the group's brokerId (0); without it, always the master."""
        context = self._context
        if not context.config.slave_read_enable:
            return _MASTER_ID
        group = context.groups.find(header.consumer_group)
        if group is None:
            return _MASTER_ID
        if result.buffers:
            (last_offset,) = _INT64.unpack_from(result.buffers[-1], PHYSICAL_OFFSET_POSITION)
            backlog = self._commit_log_max_offset() - last_offset
            if backlog > self._slave_read_backlog_bytes:
                return str(group.which_broker_when_consume_slowly)
        return str(group.broker_id)

    def _commit(self, connection: Connection, header: PullMessageRequestHeader) -> None:
        """Store the piggybacked commit offset; a refusal (table full) does not fail the pull:
        the consumer commits again with UPDATE_CONSUMER_OFFSET, which answers the error."""
        try:
            self._context.offsets.commit_offset(
                connection.remote_address,
                header.consumer_group,
                header.topic,
                header.queue_id,
                header.commit_offset,
            )
        except BolideError as error:
            _log.warning(
                "commit offset on pull from %s refused: %s", connection.remote_address, error
            )

    # --- checks -----------------------------------------------------------------------------

    async def _check(
        self, header: PullMessageRequestHeader
    ) -> tuple[frozenset[int] | None, SqlFilter | None]:
        """Run the checks of step 1 and 2; returns the tag codes to filter on (None: all) and
        the compiled SQL92 filter of a SQL92 subscription."""
        context = self._context
        group = header.consumer_group
        if not is_readable(context.config.broker_permission):
            raise RefusedError(
                ResponseCode.NO_PERMISSION,
                f"the broker {context.config.broker_address} refuses reads",
            )
        group_config = await find_group_or_refuse(
            context.groups, group, missing_remark=f"subscription group [{group}] does not exist"
        )
        if not group_config.consume_enable:
            raise RefusedError(ResponseCode.NO_PERMISSION, f"group {group} may not consume")
        topic_config = context.topics.find(header.topic)
        if topic_config is None:
            raise RefusedError(ResponseCode.TOPIC_NOT_EXIST, f"topic[{header.topic}] not exist")
        if not is_readable(topic_config.perm):
            raise RefusedError(ResponseCode.NO_PERMISSION, f"topic {header.topic} is not readable")
        if not 0 <= header.queue_id < topic_config.read_queue_count:
            raise RefusedError(
                ResponseCode.SYSTEM_ERROR,
                f"queueId[{header.queue_id}] is illegal: topic {header.topic} has "
                f"{topic_config.read_queue_count} read queues",
            )
        subscription = self._subscription(header, group_config.consume_broadcast_enable)
        if subscription.expression_type != EXPRESSION_TYPE_TAG:
            return None, check_subscription(context.config, subscription)
        return None if subscription.is_all else frozenset(subscription.code_set), None

    def _subscription(
        self, header: PullMessageRequestHeader, broadcast_enabled: bool
    ) -> SubscriptionData:
        if header.sys_flag & _SUBSCRIPTION:
            try:
                return SubscriptionData.from_expression(
                    header.topic,
                    header.subscription,
                    header.sub_version,
                    header.expression_type or EXPRESSION_TYPE_TAG,
                )
            except BodyError as error:
                raise RefusedError(ResponseCode.SUBSCRIPTION_PARSE_FAILED, str(error)) from error
        group = header.consumer_group
        group_info = self._context.consumers.get_consumer_group_info(group)
        if group_info is None:
            raise RefusedError(
                ResponseCode.SUBSCRIPTION_NOT_EXIST, f"the consumer group {group} is not online"
            )
        if group_info.message_model is MessageModel.BROADCASTING and not broadcast_enabled:
            raise RefusedError(ResponseCode.NO_PERMISSION, f"group {group} may not broadcast")
        subscription = group_info.find_subscription(header.topic)
        if subscription is None:
            raise RefusedError(
                ResponseCode.SUBSCRIPTION_NOT_EXIST,
                f"group {group} has not subscribed topic {header.topic}",
            )
        if subscription.sub_version < header.sub_version:
            raise RefusedError(
                ResponseCode.SUBSCRIPTION_NOT_LATEST,
                f"the subscription of {group} to {header.topic} is not the latest",
            )
        return subscription

    # --- reading and answering -------------------------------------------------------------

    def _read(
        self,
        header: PullMessageRequestHeader,
        tag_codes: frozenset[int] | None,
        sql: SqlFilter | None,
    ) -> GetResult:
        config = self._context.config
        result = self._context.store.get_message(
            header.topic,
            header.queue_id,
            header.queue_offset,
            max(1, min(header.max_messages, config.max_transfer_count_on_message_in_memory)),
            config.max_transfer_bytes_on_message_in_memory,
            tag_codes,
        )
        return result if sql is None else matching_records(result, sql)

    def _hold_ms(self, header: PullMessageRequestHeader) -> int:
        config = self._context.config
        if not config.long_polling_enable:
            return config.short_polling_time_ms
        return max(0, min(header.suspend_timeout_ms, limits.PULL_SUSPEND_MAX_MS))

    def _response(
        self,
        request: RemotingCommand,
        code: ResponseCode,
        result: GetResult,
        header: PullMessageRequestHeader,
        suggest: str,
    ) -> RemotingCommand:
        fields = _offset_fields(result.next_begin_offset, result.min_offset, result.max_offset)
        if suggest != _MASTER_ID:
            fields["suggestWhichBrokerId"] = suggest
        if code != ResponseCode.SUCCESS:
            self._context.stats.record_get_miss()
            return request.make_response(code, result.status.value, fields)
        self._context.stats.record_get(
            result.message_count,
            result.total_bytes,
            topic=header.topic,
            group=header.consumer_group,
        )
        if self._context.trace is not None:
            self._context.trace.delivered(header.consumer_group, result.buffers)
        buffers: Sequence[memoryview | bytes] = result.buffers
        if request.language == LanguageCode.CPP:
            # The C++ client runs zlib on every compressed body and aborts on an error: it
            # gets LZ4 and ZSTD records re-compressed as zlib (record_decoding).
            buffers = [readable_by_zlib_only_client(record) for record in result.buffers]
        return request.make_response(code, None, fields, body_parts=tuple(buffers))

    def _refusal(
        self, request: RemotingCommand, header: PullMessageRequestHeader, refused: RefusedError
    ) -> RemotingCommand:
        store = self._context.store
        min_offset = store.min_offset(header.topic, header.queue_id)
        max_offset = store.max_offset(header.topic, header.queue_id)
        fields = _offset_fields(header.queue_offset, min_offset, max_offset)
        return request.make_response(refused.code, refused.remark, fields)


def _answer(connection: Connection, request: RemotingCommand, response: RemotingCommand) -> None:
    """Send the answer of a pull parked earlier, as the dispatcher sends a handler's answer
    (the request's opaque and serialize type, the RESPONSE flag), written at once."""
    if request.flag & FLAG_ONEWAY:
        return
    response.opaque = request.opaque
    response.flag |= FLAG_RESPONSE
    response.serialize_type = request.serialize_type
    try:
        connection.send(response, at_once=True)
    except BolideError as error:  # closed meanwhile, or an unencodable answer
        _log.warning("no answer to a woken pull from %s: %s", connection.remote_address, error)


def _memory_share_bytes(percent: int) -> int:
    """``percent`` of the machine's physical memory (what the page cache may hold)."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        total = 8 * 1024**3  # a platform without sysconf: assume 8 GiB
    return total * percent // 100


def _response_code(result: GetResult, request_offset: int) -> ResponseCode:
    code = _STATUS_CODES.get(result.status)
    if code is not None:
        return code
    if result.status in _EMPTY_QUEUE_STATUSES:
        return (
            ResponseCode.PULL_NOT_FOUND if request_offset == 0 else ResponseCode.PULL_OFFSET_MOVED
        )
    _log.error("unexpected store status %s", result.status)
    return ResponseCode.SYSTEM_ERROR


def _offset_fields(next_begin_offset: int, min_offset: int, max_offset: int) -> dict[str, str]:
    # PullMessageResponseHeader.to_ext_fields(), built directly: this runs for every pull.
    return {
        "suggestWhichBrokerId": _MASTER_ID,
        "nextBeginOffset": str(next_begin_offset),
        "minOffset": str(min_offset),
        "maxOffset": str(max_offset),
    }
