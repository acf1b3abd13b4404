"""Topic administration on one broker (docs/protocol.md §2.11):

* DELETE_TOPIC_IN_BROKER (215): header ``topic``. The configuration, the consume queues and
  every group's offsets on the topic are removed (a topic created again under the same name
  starts at offset 0, so old offsets would skip its first messages); the broker re-registers
  with the name servers before answering, so the route no longer lists it. A system topic is
  SYSTEM_ERROR; an unknown one is SUCCESS (deleting twice is harmless, as in Java). A name
  that is not a valid topic name (``..``, a NUL, a ``/``) is SYSTEM_ERROR before anything is
  touched: the name is a directory of the store. The commit log keeps the records until
  retention removes them.
* GET_TOPIC_STATS_INFO (202): header ``topic``; per queue the min and max offset and the store
  time (ms) of the last message (0 when empty). Unknown topic: TOPIC_NOT_EXIST.
* QUERY_TOPIC_CONSUME_BY_WHO (300): header ``topic``; the groups subscribing it now (by
  heartbeat) or holding offsets on it, sorted: ``{"groupList":["G1","G2"]}``.
"""

from __future__ import annotations

import logging

from bolide.base.errors import ConfigError
from bolide.broker.context import BrokerContext
from bolide.broker.topics import validate_topic
from bolide.protocol.bodies import GroupList, MessageQueue, TopicOffset, TopicStatsTable
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import TopicRequestHeader
from bolide.remoting import Connection, Dispatcher

__all__ = ["AdminTopicHandlers"]

_log = logging.getLogger("bolide.broker.admin")


class AdminTopicHandlers:
    """Delete a topic, its statistics, who consumes it."""

    def __init__(self, context: BrokerContext) -> None:
        self._context = context

    def install(self, dispatcher: Dispatcher) -> None:
        """Register codes 215, 202 and 300 in the ``admin`` family."""
        dispatcher.register(RequestCode.DELETE_TOPIC_IN_BROKER, self.delete_topic, family="admin")
        dispatcher.register(RequestCode.GET_TOPIC_STATS_INFO, self.topic_stats, family="admin")
        dispatcher.register(
            RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, self.consumed_by, family="admin"
        )

    async def delete_topic(
        self, connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """Forget the topic's configuration, consume queues and offsets; re-register."""
        topic = TopicRequestHeader.from_ext_fields(request.ext_fields).topic
        validation = validate_topic(topic)
        if not validation.ok:  # the name becomes a store path: never rmtree "..", "a\0b"
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, f"cannot delete topic: {validation.reason}"
            )
        context = self._context
        try:
            existed = await context.topics.delete_topic(topic)
        except ConfigError as error:
            return request.make_response(ResponseCode.SYSTEM_ERROR, str(error))
        context.store.delete_topic(topic)
        groups = context.offsets.remove_topic(topic)
        context.stats.table.forget_topic(topic)
        if existed:
            _log.info(
                "topic %s deleted by %s (offsets of %s dropped)",
                topic,
                connection.remote_address,
                ", ".join(groups) or "no group",
            )
            await context.register_now()
        return request.make_response(ResponseCode.SUCCESS)

    async def topic_stats(
        self, connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """Min/max offset and last store time of every queue of the topic."""
        del connection
        topic = TopicRequestHeader.from_ext_fields(request.ext_fields).topic
        context = self._context
        config = context.topics.find(topic)
        if config is None:
            return request.make_response(
                ResponseCode.TOPIC_NOT_EXIST, f"topic {topic} does not exist on this broker"
            )
        store, broker_name = context.store, context.config.broker_name
        table: dict[MessageQueue, TopicOffset] = {}
        # Every queue that may hold data: a shrunk write count leaves readable queues behind.
        for queue_id in range(max(config.read_queue_count, config.write_queue_count)):
            max_offset = store.max_offset(topic, queue_id)
            last_ms = store.store_time_at(topic, queue_id, max_offset - 1) if max_offset else 0
            table[MessageQueue(topic, broker_name, queue_id)] = TopicOffset(
                store.min_offset(topic, queue_id), max_offset, max(0, last_ms)
            )
        return request.make_response(ResponseCode.SUCCESS, body=TopicStatsTable(table).to_json())

    async def consumed_by(
        self, connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """The groups that consume the topic: subscribed now or holding offsets."""
        del connection
        topic = TopicRequestHeader.from_ext_fields(request.ext_fields).topic
        context = self._context
        groups = set(context.consumers.groups_by_topic(topic))
        groups.update(context.offsets.groups_of_topic(topic))
        return request.make_response(
            ResponseCode.SUCCESS, body=GroupList(tuple(sorted(groups))).to_json()
        )
