"""Client registration: HEART_BEAT (34) and UNREGISTER_CLIENT (35) (docs/protocol.md §2.5,
RocketMQ's rebalancing).

A heartbeat carries the client's producer and consumer groups. For each consumer group the
broker finds (or auto-creates) its subscription group, creates the group's retry topic
``%RETRY%<group>`` (retryQueueNums queues, perm READ|WRITE; a new topic is registered with
the name servers at once) and registers the connection with the ConsumerManager, which tells
every channel of the group (NOTIFY_CONSUMER_IDS_CHANGED) when membership or subscriptions
changed. Each producer group is registered with the ProducerManager. The answer is SUCCESS
carrying the broker's wire version, which Java clients record.

Heartbeat bodies come in Java's form (enum names) and the C++ client's (ordinals, string
subVersion, no tagsSet/codeSet); both parse, and tag codes are recomputed from the expression.
"""

from __future__ import annotations

import logging

import orjson

from bolide.broker.channels import ClientChannelInfo
from bolide.broker.context import BrokerContext, RefusedError
from bolide.broker.property_filter import check_subscription
from bolide.protocol.bodies import (
    EXPRESSION_TYPE_TAG,
    BodyError,
    ConsumerData,
    HeartbeatData,
    SubscriptionData,
)
from bolide.protocol.codes import LanguageCode, RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import UnregisterClientRequestHeader
from bolide.remoting import Connection, Dispatcher

__all__ = ["CLIENT_ID_ATTRIBUTE", "ClientManageHandlers"]

_log = logging.getLogger("bolide.broker.clients")

CLIENT_ID_ATTRIBUTE = "bolide.client_id"
"""Connection attribute: the client id its latest heartbeat named."""


class ClientManageHandlers:
    """HEART_BEAT and UNREGISTER_CLIENT of one broker."""

    def __init__(self, context: BrokerContext) -> None:
        self._context = context

    def install(self, dispatcher: Dispatcher) -> None:
        """Register codes 34, 35 and 46 in the ``client`` family."""
        dispatcher.register(RequestCode.HEART_BEAT, self.heart_beat, family="client")
        dispatcher.register(RequestCode.UNREGISTER_CLIENT, self.unregister_client, family="client")
        dispatcher.register(
            RequestCode.CHECK_CLIENT_CONFIG, self.check_client_config, family="client"
        )

    async def check_client_config(
        self, connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """CHECK_CLIENT_CONFIG (46): ext ``clientId``, ``group``; body one SubscriptionData.
        Java consumers with a non-TAG subscription ask it at start and fail when refused:
        SYSTEM_ERROR when property filters are off, the type is unknown or the expression
        does not compile (the remark says where), else SUCCESS."""
        del connection
        try:
            subscription = SubscriptionData.from_object(orjson.loads(request.body))
        except (orjson.JSONDecodeError, BodyError) as error:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, f"bad subscription data: {error}"
            )
        if subscription.expression_type == EXPRESSION_TYPE_TAG:
            return request.make_response(ResponseCode.SUCCESS)
        try:
            check_subscription(self._context.config, subscription)
        except RefusedError as refused:
            return request.make_response(ResponseCode.SYSTEM_ERROR, refused.remark)
        return request.make_response(ResponseCode.SUCCESS)

    async def heart_beat(self, connection: Connection, request: RemotingCommand) -> RemotingCommand:
        """Register the client's groups. Raises BodyError (answered SYSTEM_ERROR) for a body
        that does not parse, before anything is registered."""
        heartbeat = HeartbeatData.from_json(request.body)
        connection.attributes[CLIENT_ID_ATTRIBUTE] = heartbeat.client_id
        for consumer in heartbeat.consumer_data_set:
            await self._register_consumer(connection, request, heartbeat.client_id, consumer)
        producers = self._context.producers
        for producer in heartbeat.producer_data_set:
            producers.register_producer(
                producer.group_name, _channel_info(connection, request, heartbeat.client_id)
            )
        return request.make_response(ResponseCode.SUCCESS)

    async def _register_consumer(
        self,
        connection: Connection,
        request: RemotingCommand,
        client_id: str,
        consumer: ConsumerData,
    ) -> None:
        context = self._context
        group = consumer.group_name
        group_config = await context.groups.find_or_create(group)
        notify = True
        if group_config is not None:
            notify = group_config.notify_consumer_ids_changed_enable
            creation = await context.topics.create_retry_topic(
                group, group_config.retry_queue_count
            )
            if creation.created:
                context.register_soon()
        else:
            _log.warning("heartbeat from %s: subscription group %s refused", client_id, group)
        context.consumers.register_consumer(
            group,
            _channel_info(connection, request, client_id),
            consumer.consume_type,
            consumer.message_model,
            consumer.consume_from_where,
            consumer.subscription_data_set,
            is_notify_enabled=notify,
        )

    async def unregister_client(
        self, connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """Forget the connection in the named producer and consumer groups (``""`` = none);
        the consumer group's remaining channels are notified."""
        header = UnregisterClientRequestHeader.from_ext_fields(request.ext_fields)
        context = self._context
        if header.producer_group is not None:
            context.producers.unregister_producer(header.producer_group, connection)
        if header.consumer_group is not None:
            group_config = context.groups.find(header.consumer_group)
            notify = group_config is None or group_config.notify_consumer_ids_changed_enable
            context.consumers.unregister_consumer(
                header.consumer_group, connection, is_notify_enabled=notify
            )
            # A client leaving the group consumes none of its queues any more: free their
            # orderly locks now (the C++ client does not always unlock them all itself).
            context.locks.unlock_client(header.consumer_group, header.client_id)
        return request.make_response(ResponseCode.SUCCESS)


def _channel_info(
    connection: Connection, request: RemotingCommand, client_id: str
) -> ClientChannelInfo[Connection]:
    return ClientChannelInfo(
        channel=connection,
        client_id=client_id,
        language=LanguageCode(request.language),
        version=request.version,
        remote_address=connection.remote_address,
    )
