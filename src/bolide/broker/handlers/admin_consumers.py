"""Admin requests that reach the consumers of a group (docs/protocol.md §2.10, §2.11, §5.2;
RocketMQ's consumption progress):

* INVOKE_BROKER_TO_RESET_OFFSET (222): header ``topic``, ``group``, ``timestamp`` (ms; -1 =
  the max offset, "latest"), ``isForce``. For every queue of the topic on this broker the new
  offset is the first one stored at or after ``timestamp`` (the min offset when the timestamp
  precedes everything, the max offset when it follows everything). Without ``isForce`` a
  queue only moves backwards; a queue with no committed offset takes the new one either way.

  Unlike the Java broker, the new offsets are **written to the broker's offset table** (and
  consumerOffset.json) before anything else, so a group that is offline resumes from them
  when it starts, and a consumer that misses the notice still finds them. Then every online
  consumer of the group gets RESET_CONSUMER_CLIENT_OFFSET (220, oneway) in the body its
  language reads — upstream bug #1159 is the Java broker sending the Java form to everyone:

  ========  =====================================================================
  language  body
  ========  =====================================================================
  CPP       ``{"offsetTable":[{"brokerName":…,"offset":…,"queueId":…,"topic":…}]}``
            (ResetOffsetBodyForC), header ``isForce`` "1"/"0" (read with atoi)
  PYTHON    the same list form: it is standard JSON that any parser reads, and the
            Bolide client reads both forms
  others    ``{"offsetTable":{{"brokerName":…,"queueId":…,"topic":…}:offset}}``
            (the Java form, fastjson object keys), header ``isForce`` "true"/"false"
  ========  =====================================================================

  Clients older than V3_0_7_SNAPSHOT (28) are skipped, as the Java broker does. The answer
  is SUCCESS with the Java-form ResetOffsetBody of the new offsets, online group or not (the
  Java broker answers CONSUMER_NOT_ONLINE for an offline group and changes nothing).
  Unknown topic: TOPIC_NOT_EXIST; unknown group: SUBSCRIPTION_GROUP_NOT_EXIST.
* CONSUME_MESSAGE_DIRECTLY (309): header ``consumerGroup``, ``clientId``, ``msgId`` (an
  offset message id of this broker). The stored record becomes the body and the request goes
  to that client, whose listener consumes it; its ConsumeMessageDirectlyResult is returned as
  is. Unknown or unreadable id: SYSTEM_ERROR; client offline: SYSTEM_ERROR; no verdict within
  CONSUME_DIRECTLY_TIMEOUT_MS: CONSUME_MSG_TIMEOUT.
* INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223): header ``topic``, ``group``, ``clientAddr``
  (a client id; empty: every client). Each online client of the group (or the named one) is
  asked with GET_CONSUMER_STATUS_FROM_CLIENT (221) for its committed offsets of the topic,
  within BROKER_CALL_CONSUMER_TIMEOUT_MS; the answer is a GetConsumerStatusBody whose
  ``consumerTable`` maps each client that answered to its offsets (one that fails or does
  not answer is logged and left out, as in Java). No client online: SYSTEM_ERROR "No Any
  Consumer online in the consumer group: [G]"; a client older than V3_0_7_SNAPSHOT:
  SYSTEM_ERROR, as Java.
* GET_CONSUMER_RUNNING_INFO (307): header ``consumerGroup``, ``clientId``, ``jstackEnable``;
  forwarded to that client over its own connection and its answer returned as is. Client
  not online: SYSTEM_ERROR; no answer within BROKER_CALL_CONSUMER_TIMEOUT_MS:
  CONSUME_MSG_TIMEOUT.
"""

from __future__ import annotations

import asyncio
import logging

from bolide.base import limits
from bolide.base.errors import (
    BackpressureError,
    BolideError,
    ProtocolError,
    RequestTimeoutError,
)
from bolide.broker.channels import ClientChannelInfo
from bolide.broker.context import BrokerContext
from bolide.broker.handlers.admin_groups import flush_offsets, is_group_known
from bolide.broker.outbound import (
    consume_message_directly_request,
    consumer_running_info_request,
    consumer_status_request,
    reset_offset_request,
)
from bolide.protocol.bodies import MessageQueue, ResetOffsetBody
from bolide.protocol.bodies.consumer_status import GetConsumerStatusBody
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import (
    ConsumeMessageDirectlyResultRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetConsumerStatusRequestHeader,
    ResetOffsetRequestHeader,
)
from bolide.protocol.msgid import decode_offset_message_id
from bolide.remoting import Connection, Dispatcher

__all__ = ["RESET_MIN_CLIENT_VERSION", "AdminConsumerHandlers"]

_log = logging.getLogger("bolide.broker.admin")

RESET_TO_MAX_OFFSET = -1
"""The ``timestamp`` that means "to the max offset" (latest)."""
RESET_MIN_CLIENT_VERSION = 28
"""V3_0_7_SNAPSHOT: older clients do not know RESET_CONSUMER_CLIENT_OFFSET."""


class AdminConsumerHandlers:
    """Reset a group's offsets (and tell its consumers), ask a consumer for its state."""

    def __init__(self, context: BrokerContext) -> None:
        self._context = context
        self._sends: set[asyncio.Task[None]] = set()

    def install(self, dispatcher: Dispatcher) -> None:
        """Register codes 222, 223, 307 and 309 in the ``admin`` family."""
        dispatcher.register(
            RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, self.reset_offset, family="admin"
        )
        dispatcher.register(
            RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS, self.consumer_status, family="admin"
        )
        dispatcher.register(
            RequestCode.GET_CONSUMER_RUNNING_INFO, self.consumer_running_info, family="admin"
        )
        dispatcher.register(
            RequestCode.CONSUME_MESSAGE_DIRECTLY, self.consume_message_directly, family="admin"
        )

    async def reset_offset(
        self, connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """Compute, store and push the new offsets of (group, topic)."""
        header = ResetOffsetRequestHeader.from_ext_fields(request.ext_fields)
        context = self._context
        if context.topics.find(header.topic) is None:
            return request.make_response(
                ResponseCode.TOPIC_NOT_EXIST, f"topic {header.topic} does not exist on this broker"
            )
        if not is_group_known(context, header.group):
            return request.make_response(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"the consumer group {header.group} does not exist on this broker",
            )
        offsets = self._new_offsets(header)
        try:
            context.offsets.set_queue_offsets(
                header.group, header.topic, {queue.queue_id: o for queue, o in offsets.items()}
            )
        except BackpressureError as error:
            return request.make_response(ResponseCode.SYSTEM_ERROR, str(error))
        if context.pop is not None:  # POP consumers of the group start again there too
            context.pop.reset(
                header.group, header.topic, {queue.queue_id: o for queue, o in offsets.items()}
            )
        await flush_offsets(context)
        notified = self._notify_consumers(header, offsets)
        _log.info(
            "offsets of %s on %s reset to %s (timestamp %d, force %s) by %s; %d consumer(s) told",
            header.group,
            header.topic,
            {queue.queue_id: offset for queue, offset in offsets.items()},
            header.timestamp_ms,
            header.is_force,
            connection.remote_address,
            notified,
        )
        return request.make_response(ResponseCode.SUCCESS, body=ResetOffsetBody(offsets).to_json())

    def _new_offsets(self, header: ResetOffsetRequestHeader) -> dict[MessageQueue, int]:
        context = self._context
        config = context.topics.find(header.topic)
        if config is None:
            return {}
        store, topic = context.store, header.topic
        offsets: dict[MessageQueue, int] = {}
        for queue_id in range(max(config.read_queue_count, config.write_queue_count)):
            if header.timestamp_ms == RESET_TO_MAX_OFFSET:
                target = store.max_offset(topic, queue_id)
            else:
                target = store.offset_for_timestamp(topic, queue_id, header.timestamp_ms)
            target = max(0, target)
            current = context.offsets.query_offset(header.group, topic, queue_id)
            moves = header.is_force or current < 0 or target < current
            offsets[MessageQueue(topic, context.config.broker_name, queue_id)] = (
                target if moves else current
            )
        return offsets

    def _notify_consumers(
        self, header: ResetOffsetRequestHeader, offsets: dict[MessageQueue, int]
    ) -> int:
        info = self._context.consumers.get_consumer_group_info(header.group)
        if info is None:
            return 0
        told = 0
        for channel_info in list(info.channels.values()):
            if channel_info.version < RESET_MIN_CLIENT_VERSION:
                _log.warning(
                    "consumer %s (version %d) too old for a reset offset notice",
                    channel_info.client_id,
                    channel_info.version,
                )
                continue
            request = reset_offset_request(header, offsets, channel_info.language)
            task = asyncio.ensure_future(self._send_reset(channel_info, request, header.topic))
            self._sends.add(task)
            task.add_done_callback(self._sends.discard)
            told += 1
        return told

    async def _send_reset(
        self, channel_info: ClientChannelInfo[Connection], request: RemotingCommand, topic: str
    ) -> None:
        try:
            await channel_info.channel.invoke_oneway(request, limits.RESET_OFFSET_NOTIFY_TIMEOUT_MS)
        except BolideError as error:
            # The offsets are on the broker already: the consumer finds them when it restarts.
            _log.warning(
                "reset offset notice to %s (%s) not sent: %s",
                channel_info.client_id,
                channel_info.remote_address,
                error,
            )
            return
        # The notice is written first, then the consumer's parked pulls of the topic end, so
        # it drops them and pulls from the new offsets at once instead of after its hold.
        self._context.long_polling.release(channel_info.channel, topic)

    async def consumer_status(
        self, connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """Ask the group's clients for their offsets of the topic (module docstring)."""
        del connection
        header = GetConsumerStatusRequestHeader.from_ext_fields(request.ext_fields)
        info = self._context.consumers.get_consumer_group_info(header.group)
        channels = [] if info is None else list(info.channels.values())
        if not channels:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR,
                f"No Any Consumer online in the consumer group: [{header.group}]",
            )
        wanted = header.client_addr or None
        asked = [c for c in channels if wanted is None or c.client_id == wanted]
        too_old = next((c for c in asked if c.version < RESET_MIN_CLIENT_VERSION), None)
        if too_old is not None:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR,
                f"the client does not support this feature. version={too_old.version}",
            )
        ask = GetConsumerStatusRequestHeader(header.topic, header.group)
        answers = await asyncio.gather(*(self._client_status(c, ask) for c in asked))
        table = {
            channel_info.client_id: answer
            for channel_info, answer in zip(asked, answers, strict=True)
            if answer is not None
        }
        body = GetConsumerStatusBody(consumer_table=table)
        return request.make_response(ResponseCode.SUCCESS, body=body.to_json())

    async def _client_status(
        self, channel_info: ClientChannelInfo[Connection], header: GetConsumerStatusRequestHeader
    ) -> dict[MessageQueue, int] | None:
        ask = consumer_status_request(header)
        try:
            answer = await channel_info.channel.invoke(ask, limits.BROKER_CALL_CONSUMER_TIMEOUT_MS)
            if answer.code != ResponseCode.SUCCESS:
                raise ProtocolError(f"answered {answer.code}: {answer.remark}")
            return GetConsumerStatusBody.from_json(bytes(answer.body)).message_queue_table
        except BolideError as error:
            _log.warning(
                "consumer status of %s (group %s): %s", channel_info.client_id, header.group, error
            )
            return None

    async def consumer_running_info(
        self, connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """Ask the named consumer for its running info; return its answer as is."""
        del connection
        header = GetConsumerRunningInfoRequestHeader.from_ext_fields(request.ext_fields)
        forward = consumer_running_info_request(header)
        return await self._forward(
            request,
            forward,
            header.consumer_group,
            header.client_id,
            limits.BROKER_CALL_CONSUMER_TIMEOUT_MS,
        )

    async def consume_message_directly(
        self, connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """Hand a stored message to one consumer's listener; return its verdict."""
        del connection
        header = ConsumeMessageDirectlyResultRequestHeader.from_ext_fields(request.ext_fields)
        if header.client_id is None or header.msg_id is None:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, "clientId and msgId are required"
            )
        try:
            _, commit_log_offset = decode_offset_message_id(header.msg_id)
        except ProtocolError as error:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, f"msgId {header.msg_id} is not an offset id: {error}"
            )
        record = self._context.store.read_record(commit_log_offset)
        if record is None:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, f"no message {header.msg_id} on this broker"
            )
        forward = consume_message_directly_request(header, bytes(record))
        return await self._forward(
            request,
            forward,
            header.consumer_group,
            header.client_id,
            limits.CONSUME_DIRECTLY_TIMEOUT_MS,
        )

    async def _forward(
        self,
        request: RemotingCommand,
        forward: RemotingCommand,
        group: str,
        client_id: str,
        timeout_ms: int,
    ) -> RemotingCommand:
        found = self._context.consumers.find_channel(group, client_id)
        if found is None or found.channel.is_closed:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR,
                f"the consumer {client_id} of group {group} is not online",
            )
        header_client = client_id
        try:
            answer = await found.channel.invoke(forward, timeout_ms)
        except RequestTimeoutError:
            return request.make_response(
                ResponseCode.CONSUME_MSG_TIMEOUT,
                f"the consumer {header_client} did not answer within {timeout_ms} ms",
            )
        except BolideError as error:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, f"cannot reach the consumer {header_client}: {error}"
            )
        return request.make_response(
            answer.code, answer.remark, answer.ext_fields, bytes(answer.body)
        )
