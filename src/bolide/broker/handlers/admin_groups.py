"""Consumer and producer groups for admins (docs/protocol.md §2.11; dashboard "CLIENT" and
"CONSUME DETAIL", mqadmin consumerConnection / consumerProgress / producerConnection):

* GET_CONSUMER_CONNECTION_LIST (203): header ``consumerGroup``; the group's connections
  (client id, address, language, version), subscriptions and model. Nobody of the group
  connected: CONSUMER_NOT_ONLINE.
* GET_PRODUCER_CONNECTION_LIST (204): header ``producerGroup``; its connections. None:
  SYSTEM_ERROR, as Java.
* GET_CONSUME_STATS (208): header ``consumerGroup``, ``topic`` (optional). Per read queue:
  brokerOffset (max offset), consumerOffset (committed, 0 when none) and lastTimestamp (store
  time of the last consumed message, 0 when none). Without ``topic``: every topic the group
  has offsets on or subscribes now; an online group's topics are only those it subscribes
  (Java's rule, so a topic it stopped consuming does not show as lag). A group this broker
  does not know at all (no subscription group, no connection, no offset):
  SUBSCRIPTION_GROUP_NOT_EXIST, so tools can tell "unknown" from "nothing consumed yet".
* DELETE_SUBSCRIPTIONGROUP (207): header ``groupName``, ``removeOffset``; the group's settings
  and, when asked, its offsets are dropped.
* CLONE_GROUP_OFFSET (314): header ``srcGroup``, ``destGroup``, ``topic`` (optional),
  ``offline``; the source's offsets (of the topic, or of all its topics) are copied to the
  destination. Unless ``offline``, an online source only gives the topics it subscribes.
* GET_BROKER_CONSUME_STATS (317): every group's GET_CONSUME_STATS in one answer
  (ConsumeStatsList: ``brokerAddr``, ``totalDiff``, ``consumeStatsList`` = one
  ``{group: [stats]}`` per group), plus Bolide's ``onlineClientCounts`` (group -> online
  consumers), so a dashboard lists 1,000 groups with one request per broker instead of one
  per group. With the header field ``listForm=true`` (Bolide's; Java ignores it) the queue
  tables come as plain JSON lists instead of fastjson's object keys, which Python reads
  ~20x faster. 208 and 317 fill ``consumeTps`` from the GROUP_GET_NUMS minute window.
"""

from __future__ import annotations

import logging

from bolide.base.errors import BackpressureError
from bolide.broker.context import BrokerContext
from bolide.broker.metrics.stats_items import StatsName, group_stats_key
from bolide.protocol.bodies import ConsumeStats, MessageQueue, OffsetWrapper
from bolide.protocol.bodies.stats import LIST_FORM_FIELD, ConsumeStatsList
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import (
    CloneGroupOffsetRequestHeader,
    ConsumerGroupRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    GetConsumeStatsRequestHeader,
    GetProducerConnectionListRequestHeader,
)
from bolide.remoting import Connection, Dispatcher

__all__ = ["AdminGroupHandlers", "flush_offsets", "is_group_known"]

_log = logging.getLogger("bolide.broker.admin")


def is_group_known(context: BrokerContext, group: str) -> bool:
    """Whether this broker has the consumer group: settings, a connection or an offset."""
    return (
        context.groups.find(group) is not None
        or context.consumers.get_consumer_group_info(group) is not None
        or bool(context.offsets.topics_of_group(group))
    )


async def flush_offsets(context: BrokerContext) -> None:
    """Write consumerOffset.json now after an admin change; a failure is logged (the table is
    changed in memory, and the periodic flush tries again)."""
    try:
        await context.offsets.file.flush()
    except OSError as error:
        _log.error("consumerOffset.json not written after an admin change: %s", error)


class AdminGroupHandlers:
    """Connections, progress, deletion and offset cloning of groups."""

    def __init__(self, context: BrokerContext) -> None:
        self._context = context

    def install(self, dispatcher: Dispatcher) -> None:
        """Register codes 203, 204, 207, 208, 314 and 317 in the ``admin`` family."""
        for code, handler in (
            (RequestCode.GET_CONSUMER_CONNECTION_LIST, self.consumer_connections),
            (RequestCode.GET_PRODUCER_CONNECTION_LIST, self.producer_connections),
            (RequestCode.DELETE_SUBSCRIPTIONGROUP, self.delete_group),
            (RequestCode.GET_CONSUME_STATS, self.consume_stats),
            (RequestCode.CLONE_GROUP_OFFSET, self.clone_offsets),
            (RequestCode.GET_BROKER_CONSUME_STATS, self.broker_consume_stats),
        ):
            dispatcher.register(code, handler, family="admin")

    async def consumer_connections(
        self, connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """The group's connections and registration; CONSUMER_NOT_ONLINE when none."""
        del connection
        group = ConsumerGroupRequestHeader.from_ext_fields(request.ext_fields).consumer_group
        info = self._context.consumers.get_consumer_group_info(group)
        if info is None or not info.channels:
            return request.make_response(
                ResponseCode.CONSUMER_NOT_ONLINE, f"the consumer group {group} is not online"
            )
        return request.make_response(
            ResponseCode.SUCCESS, body=info.to_consumer_connection().to_json()
        )

    async def producer_connections(
        self, connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """The producer group's connections; SYSTEM_ERROR when none (Java's answer)."""
        del connection
        header = GetProducerConnectionListRequestHeader.from_ext_fields(request.ext_fields)
        producers = self._context.producers
        if not producers.producer_connections(header.producer_group):
            return request.make_response(
                ResponseCode.SYSTEM_ERROR,
                f"the producer group {header.producer_group} has no connection",
            )
        body = producers.producer_connection(header.producer_group).to_json()
        return request.make_response(ResponseCode.SUCCESS, body=body)

    async def delete_group(
        self, connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """Drop the group's settings (and offsets when ``removeOffset``)."""
        header = DeleteSubscriptionGroupRequestHeader.from_ext_fields(request.ext_fields)
        context = self._context
        existed = await context.groups.delete(header.group_name)
        topics = context.offsets.remove_group(header.group_name) if header.remove_offset else []
        context.stats.table.forget_group(header.group_name)
        if topics:
            await flush_offsets(context)
        _log.info(
            "subscription group %s deleted by %s (existed: %s, offsets dropped on: %s)",
            header.group_name,
            connection.remote_address,
            existed,
            ", ".join(topics) or "none",
        )
        return request.make_response(ResponseCode.SUCCESS)

    async def consume_stats(
        self, connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """Per queue broker offset, committed offset and last consumed store time."""
        del connection
        header = GetConsumeStatsRequestHeader.from_ext_fields(request.ext_fields)
        context, group = self._context, header.consumer_group
        if not is_group_known(context, group):
            return request.make_response(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"the consumer group {group} does not exist on this broker",
            )
        body = self.group_consume_stats(group, header.topic)
        return request.make_response(ResponseCode.SUCCESS, body=body.to_json())

    def group_consume_stats(self, group: str, topic: str | None) -> ConsumeStats:
        """Per queue progress of ``group`` (on ``topic``, or every topic it consumes) and its
        consume rate: messages per second pulled over the last minute (GROUP_GET_NUMS)."""
        table: dict[MessageQueue, OffsetWrapper] = {}
        tps = 0.0
        stats, now_ms = self._context.stats.table, self._context.clock.now_ms()
        for each in self._stats_topics(group, topic):
            table.update(self._topic_stats(group, each))
            cell = stats.find(StatsName.GROUP_GET_NUMS, group_stats_key(each, group))
            if cell is not None:
                tps += cell.figures(cell.minute, now_ms).tps
        return ConsumeStats(table, tps)

    async def broker_consume_stats(
        self, connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """GET_BROKER_CONSUME_STATS (317): every group's consume stats in one answer."""
        del connection
        context = self._context
        groups = set(context.groups.group_names())
        groups.update(context.consumers.groups())
        groups.update(group for (_, group), _ in context.offsets.entries())
        entries: list[tuple[str, ConsumeStats]] = []
        online: dict[str, int] = {}
        for group in sorted(groups):
            entries.append((group, self.group_consume_stats(group, None)))
            info = context.consumers.get_consumer_group_info(group)
            online[group] = len(info.channels) if info is not None else 0
        body = ConsumeStatsList(context.config.broker_address, tuple(entries), online)
        list_form = request.ext_fields.get(LIST_FORM_FIELD) == "true"
        encoded = body.to_list_form_json() if list_form else body.to_json()
        return request.make_response(ResponseCode.SUCCESS, body=encoded)

    def _stats_topics(self, group: str, topic: str | None) -> list[str]:
        context = self._context
        info = context.consumers.get_consumer_group_info(group)
        if topic is not None:
            candidates = {topic}
        else:
            candidates = set(context.offsets.topics_of_group(group))
            if info is not None:
                candidates.update(info.subscriptions)
        subscribed = info.subscriptions if info is not None else {}
        return sorted(
            each
            for each in candidates
            if context.topics.find(each) is not None and (not subscribed or each in subscribed)
        )

    def _topic_stats(self, group: str, topic: str) -> dict[MessageQueue, OffsetWrapper]:
        context = self._context
        config = context.topics.find(topic)
        if config is None:
            return {}
        store, broker_name = context.store, context.config.broker_name
        committed = context.offsets.queue_offsets(group, topic)
        table: dict[MessageQueue, OffsetWrapper] = {}
        for queue_id in range(config.read_queue_count):
            consumer_offset = max(0, committed.get(queue_id, 0))
            last_ms = store.store_time_at(topic, queue_id, consumer_offset - 1)
            table[MessageQueue(topic, broker_name, queue_id)] = OffsetWrapper(
                store.max_offset(topic, queue_id),
                consumer_offset,
                max(0, last_ms) if consumer_offset else 0,
            )
        return table

    async def clone_offsets(
        self, connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """Copy the source group's offsets to the destination group."""
        header = CloneGroupOffsetRequestHeader.from_ext_fields(request.ext_fields)
        context = self._context
        topics = (
            [header.topic]
            if header.topic is not None
            else context.offsets.topics_of_group(header.src_group)
        )
        source = context.consumers.get_consumer_group_info(header.src_group)
        copied: list[str] = []
        try:
            for topic in topics:
                if context.topics.find(topic) is None:
                    continue
                subscriptions = source.subscriptions if source is not None else {}
                if not header.offline and subscriptions and topic not in subscriptions:
                    continue
                copied += context.offsets.clone_offsets(header.src_group, header.dest_group, topic)
        except BackpressureError as error:
            return request.make_response(ResponseCode.SYSTEM_ERROR, str(error))
        if copied:
            await flush_offsets(context)
        _log.info(
            "offsets of %s cloned to %s by %s: %s",
            header.src_group,
            header.dest_group,
            connection.remote_address,
            ", ".join(copied) or "nothing to copy",
        )
        return request.make_response(ResponseCode.SUCCESS)
