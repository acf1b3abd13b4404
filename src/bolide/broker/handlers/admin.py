"""The broker's admin requests (docs/protocol.md §2.11). This module serves the three below and
installs the rest, which live beside it: :mod:`.admin_topics` (215 delete topic, 202 topic
stats, 300 who consumes a topic), :mod:`.admin_groups` (203/204 connection lists, 207 delete
group, 208 consume stats, 314 clone offsets), :mod:`.admin_consumers` (222 reset offset,
223 consumer status, 307 running info and 309 consume directly, forwarded to the client),
:mod:`.admin_stats` (315 stats windows, 25/26 broker config, 303 consume time span, 321
consume queue) and :mod:`.admin_maintenance` (306, 316, 329 store maintenance, 308
correction offsets).
Subscription groups (200, 201) are :mod:`.subscription_group`'s.

* UPDATE_AND_CREATE_TOPIC (17): create or update a topic, then register with the name servers
  before answering, so the route exists when the admin tool gets SUCCESS. An invalid or system
  topic is SYSTEM_ERROR.
* GET_ALL_TOPIC_CONFIG (21): the topics.json document.
* GET_BROKER_RUNTIME_INFO (28): a KVTable of string counters (brokerVersion,
  msgPutTotalTodayNow, msgGetTotalTodayNow, ... and the store's figures).
"""

from __future__ import annotations

from bolide.base.errors import ConfigError
from bolide.broker.context import BrokerContext
from bolide.broker.handlers.admin_consumers import AdminConsumerHandlers
from bolide.broker.handlers.admin_groups import AdminGroupHandlers
from bolide.broker.handlers.admin_maintenance import AdminMaintenanceHandlers
from bolide.broker.handlers.admin_stats import AdminStatsHandlers
from bolide.broker.handlers.admin_topics import AdminTopicHandlers
from bolide.broker.metrics.runtime import runtime_table
from bolide.protocol.bodies import BodyError, KVTable, TopicConfig
from bolide.protocol.bodies.topic import MESSAGE_TYPE_ATTRIBUTE, MESSAGE_TYPES, parse_attributes
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import CreateTopicRequestHeader
from bolide.remoting import Connection, Dispatcher

__all__ = ["AdminHandlers"]


class AdminHandlers:
    """Topic creation and runtime information of one broker."""

    def __init__(self, context: BrokerContext) -> None:
        self._context = context

    def install(self, dispatcher: Dispatcher) -> None:
        """Register codes 17, 21 and 28 and those of the admin_* modules in the ``admin``
        family."""
        dispatcher.register(RequestCode.UPDATE_AND_CREATE_TOPIC, self.create_topic, family="admin")
        dispatcher.register(
            RequestCode.GET_ALL_TOPIC_CONFIG, self.get_all_topic_config, family="admin"
        )
        dispatcher.register(
            RequestCode.GET_BROKER_RUNTIME_INFO, self.get_runtime_info, family="admin"
        )
        for handlers in (
            AdminTopicHandlers(self._context),
            AdminGroupHandlers(self._context),
            AdminConsumerHandlers(self._context),
            AdminStatsHandlers(self._context),
            AdminMaintenanceHandlers(self._context),
        ):
            handlers.install(dispatcher)

    async def create_topic(
        self, connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """Create or update the topic of the header; SYSTEM_ERROR naming the problem when the
        configuration is refused."""
        del connection
        header = CreateTopicRequestHeader.from_ext_fields(request.ext_fields)
        try:
            attributes = parse_attributes(header.attributes)
        except BodyError as error:
            return request.make_response(ResponseCode.SYSTEM_ERROR, str(error))
        message_type = dict(attributes).get(MESSAGE_TYPE_ATTRIBUTE)
        if message_type is not None and message_type.upper() not in MESSAGE_TYPES:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR,
                f"value {message_type!r} of attribute message.type is not one of "
                f"{', '.join(MESSAGE_TYPES)}",
            )
        config = TopicConfig(
            topic_name=header.topic,
            read_queue_count=header.read_queue_count,
            write_queue_count=header.write_queue_count,
            perm=header.perm,
            topic_filter_type=header.topic_filter_type,
            topic_sys_flag=header.topic_sys_flag or 0,
            order=header.order,
            attributes=attributes,
        )
        try:
            await self._context.topics.update_topic_config(config)
        except ConfigError as error:
            return request.make_response(ResponseCode.SYSTEM_ERROR, str(error))
        # warm start: the queues' first files are made while the clients learn the route
        self._context.store.prepare_queues(config.topic_name, config.write_queue_count)
        await self._context.register_now()
        return request.make_response(ResponseCode.SUCCESS)

    async def get_all_topic_config(
        self, connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        del connection
        return request.make_response(ResponseCode.SUCCESS, body=self._context.topics.encode())

    async def get_runtime_info(
        self, connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        del connection
        context = self._context
        table = runtime_table(context)
        if context.replication is not None:
            table.update(context.replication.runtime_info())
        return request.make_response(ResponseCode.SUCCESS, body=KVTable(table).to_json())
