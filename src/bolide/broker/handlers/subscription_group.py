"""Consumer-group settings and delay progress for admins (docs/protocol.md §2.11, §4.4):

* UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200): body = a SubscriptionGroupConfig JSON
  (retryMaxTimes, retryQueueNums, consumeEnable, consumeBroadcastEnable, consumeOrderlyEnable,
  ...; missing settings take RocketMQ's defaults); the group is created or replaced and
  subscriptionGroup.json written before SUCCESS. A bad body or setting: SYSTEM_ERROR naming it.
  Raising retryQueueNums of a group whose %RETRY% topic exists grows that topic, so
  send-backs and consumers use the new queues (it never shrinks: messages waiting in the
  dropped queues would no longer be read).
* GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201): body = subscriptionGroup.json's content.
* GET_ALL_DELAY_OFFSET (45): body = ``{"offsetTable": {level: next queue offset}}``, the live
  delivery progress of the delay levels.
"""

from __future__ import annotations

import dataclasses
import logging

from bolide.base.errors import ConfigError
from bolide.broker.context import BrokerContext
from bolide.broker.schedule import ScheduleMessageService
from bolide.protocol.bodies import SubscriptionGroupConfig
from bolide.protocol.bodies.fastjson import BodyError
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.system_topics import retry_topic
from bolide.remoting import Connection, Dispatcher

__all__ = ["SubscriptionGroupHandlers"]

_log = logging.getLogger("bolide.broker.subscription_group")


class SubscriptionGroupHandlers:
    """Admin handlers for subscription groups and the delay progress of one broker."""

    def __init__(
        self, context: BrokerContext, schedule: ScheduleMessageService | None = None
    ) -> None:
        self._context = context
        self._schedule = schedule

    def install(self, dispatcher: Dispatcher) -> None:
        """Register codes 200, 201 and 45 in the ``admin`` family."""
        dispatcher.register(
            RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, self.update_group, family="admin"
        )
        dispatcher.register(
            RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, self.get_all_groups, family="admin"
        )
        dispatcher.register(
            RequestCode.GET_ALL_DELAY_OFFSET, self.get_all_delay_offset, family="admin"
        )

    async def update_group(
        self, connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """Create or replace the group in the body; SUCCESS once it is on disk."""
        context = self._context
        try:
            config = SubscriptionGroupConfig.from_json(request.body)
            await context.groups.update(config)
        except (BodyError, ConfigError) as error:
            return request.make_response(ResponseCode.SYSTEM_ERROR, str(error))
        except OSError as error:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, f"cannot write subscriptionGroup.json: {error}"
            )
        _log.info("subscription group %s set by %s", config.group_name, connection.remote_address)
        await self._resize_retry_topic(config)
        return request.make_response(ResponseCode.SUCCESS)

    async def _resize_retry_topic(self, config: SubscriptionGroupConfig) -> None:
        topics = self._context.topics
        existing = topics.find(retry_topic(config.group_name))
        count = config.retry_queue_count
        if existing is None or count <= max(existing.read_queue_count, existing.write_queue_count):
            return
        resized = dataclasses.replace(existing, read_queue_count=count, write_queue_count=count)
        try:
            await topics.update_topic_config(resized)
        except (ConfigError, OSError) as error:
            _log.error("retry topic of %s not resized: %s", config.group_name, error)
            return
        self._context.register_soon()

    async def get_all_groups(
        self, connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """subscriptionGroup.json's content."""
        del connection
        body = self._context.groups.encode()
        return request.make_response(ResponseCode.SUCCESS, body=body)

    async def get_all_delay_offset(
        self, connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """The delivery progress per delay level."""
        del connection
        if self._schedule is None:
            return request.make_response(ResponseCode.SYSTEM_ERROR, "no schedule service")
        body = self._schedule.encode_offset_table()
        return request.make_response(ResponseCode.SUCCESS, body=body)
