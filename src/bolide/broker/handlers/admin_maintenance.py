"""Store maintenance an admin asks of one broker, and the correction offsets of a topic
(docs/protocol.md §2.11; RocketMQ's mqadmin cleanExpiredCQ, cleanUnusedTopic,
deleteExpiredCommitLog and the offset-correction query):

* CLEAN_EXPIRED_CONSUMEQUEUE (306): no header. The consume queues of every topic but the
  system ones whose messages are all gone from the commit log (a history, nothing left to
  read) are destroyed, as Java's ``cleanExpiredConsumerQueue``. Java does it per queue, Bolide
  per topic (a topic with one live queue keeps all its queues). The committed offsets stay:
  a consumer past the new queue's end is corrected as for any illegal offset. SUCCESS, with
  the topics named in the remark (Java's remark is empty).
* CLEAN_UNUSED_TOPIC (316): no header. The consume queues of topics the broker no longer
  has a configuration for are destroyed (system, retry and dead-letter topics kept). SUCCESS,
  the topics named in the remark.
* DELETE_EXPIRED_COMMITLOG (329): no header. Retention runs now with its age rule whatever
  the hour (Java's ``executeDeleteFilesManually`` ignores deleteWhen too): commit-log
  segments older than fileReservedTime go. SUCCESS, the count in the remark.
* QUERY_CORRECTION_OFFSET (308): header ``topic``, ``compareGroup``, ``filterGroups``
  (comma-separated, optional). Per queue of the topic the lowest committed offset over its
  groups but the filtered ones (offsets below the queue's min offset ignored); where that
  lowest offset is above ``compareGroup``'s, Long.MAX_VALUE instead. Body
  ``{"correctionOffsets":{0:12,1:9223372036854775807}}``. Java also *deletes* the filtered
  groups' offsets of every topic while answering; Bolide leaves them (a query must not
  change anything).
"""

from __future__ import annotations

import logging

from bolide.base.errors import BolideError
from bolide.broker.context import BrokerContext
from bolide.protocol.bodies.consumer_status import QueryCorrectionOffsetBody
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import QueryCorrectionOffsetHeader
from bolide.protocol.system_topics import is_dlq_topic, is_retry_topic, is_system_topic
from bolide.remoting import Connection, Dispatcher

__all__ = ["JAVA_LONG_MAX", "AdminMaintenanceHandlers"]

_log = logging.getLogger("bolide.broker.admin")

JAVA_LONG_MAX = (1 << 63) - 1
"""Java's Long.MAX_VALUE: the correction offset of a queue the compared group is behind on."""


class AdminMaintenanceHandlers:
    """Clean expired consume queues and unused topics, delete expired commit log on request,
    answer the correction offsets of a topic."""

    def __init__(self, context: BrokerContext) -> None:
        self._context = context

    def install(self, dispatcher: Dispatcher) -> None:
        """Register codes 306, 308, 316 and 329 in the ``admin`` family."""
        for code, handler in (
            (RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE, self.clean_expired_consume_queues),
            (RequestCode.CLEAN_UNUSED_TOPIC, self.clean_unused_topics),
            (RequestCode.DELETE_EXPIRED_COMMITLOG, self.delete_expired_commit_log),
            (RequestCode.QUERY_CORRECTION_OFFSET, self.correction_offsets),
        ):
            dispatcher.register(code, handler, family="admin")

    def _is_kept(self, topic: str) -> bool:
        return is_system_topic(topic) or self._context.topics.is_system_topic(topic)

    def _destroy(self, request: RemotingCommand, topics: list[str], why: str) -> RemotingCommand:
        store = self._context.store
        try:
            for topic in topics:
                store.delete_topic(topic)
        except BolideError as error:
            return request.make_response(ResponseCode.SYSTEM_ERROR, str(error))
        if topics:
            _log.warning("%s: consume queues of %s destroyed", why, ", ".join(topics))
        return request.make_response(
            ResponseCode.SUCCESS, f"{why}: {len(topics)} topic(s) {' '.join(topics)}".rstrip()
        )

    async def clean_expired_consume_queues(
        self, connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """Destroy the consume queues whose messages are all expired (module docstring)."""
        del connection
        store = self._context.store
        expired = [
            topic
            for topic, queue_ids in sorted(store.topics_and_queues().items())
            if not self._is_kept(topic)
            and all(
                0 < store.max_offset(topic, queue_id) == store.min_offset(topic, queue_id)
                for queue_id in queue_ids
            )
        ]
        return self._destroy(request, expired, "expired consume queues")

    async def clean_unused_topics(
        self, connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """Destroy the consume queues of unconfigured topics (module docstring)."""
        del connection
        configured = set(self._context.topics.topic_names())
        unused = [
            topic
            for topic in sorted(self._context.store.topics_and_queues())
            if topic not in configured
            and not self._is_kept(topic)
            and not is_retry_topic(topic)
            and not is_dlq_topic(topic)
        ]
        return self._destroy(request, unused, "unused topics")

    async def delete_expired_commit_log(
        self, connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """Run retention's age rule now (module docstring)."""
        del connection
        try:
            deleted = await self._context.store.run_retention_once(manual=True)
        except BolideError as error:
            return request.make_response(ResponseCode.SYSTEM_ERROR, str(error))
        return request.make_response(
            ResponseCode.SUCCESS, f"{deleted} expired commit-log segment(s) deleted"
        )

    async def correction_offsets(
        self, connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """The lowest committed offsets of the topic's groups (module docstring)."""
        del connection
        header = QueryCorrectionOffsetHeader.from_ext_fields(request.ext_fields)
        filtered = {group for group in (header.filter_groups or "").split(",") if group}
        offsets, store = self._context.offsets, self._context.store
        lowest: dict[int, int] = {}
        for group in offsets.groups_of_topic(header.topic):
            if group in filtered:
                continue
            for queue_id, offset in offsets.queue_offsets(group, header.topic).items():
                if offset >= store.min_offset(header.topic, queue_id):
                    lowest[queue_id] = min(offset, lowest.get(queue_id, offset))
        compared = offsets.queue_offsets(header.compare_group, header.topic)
        for queue_id, offset in compared.items():
            if queue_id in lowest and lowest[queue_id] > offset:
                lowest[queue_id] = JAVA_LONG_MAX
        body = QueryCorrectionOffsetBody(lowest)
        return request.make_response(ResponseCode.SUCCESS, body=body.to_json())
