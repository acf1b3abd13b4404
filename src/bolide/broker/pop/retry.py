"""Where a POP message comes back when its invisible time runs out: a copy in the group's POP
retry topic ``%RETRY%<group>_<topic>`` (Java's PopReviveService, V1 naming, its default), or
``%RETRY%<group>+<topic>`` when the broker's ``enableRetryTopicV2`` is on. With V2 on, pops
read the V2 topic and, while ``retrieveMessageFromPopRetryTopicV1`` is on (the default), the V1
topic too, so what was retried before the switch is still delivered.

* The copy keeps body, flag, sysFlag, born time and host and every property of the message
  (so its message id; one sent without UNIQ_KEY keeps its offset id as UNIQ_KEY), with
  reconsume times = deliveries so far, ``1ST_POP_TIME`` = when it
  was first popped (set once), and RETRY_TOPIC = the topic it was sent to. Delivery markers
  and timer requests are dropped: the copy is due at once.
* The retry topic is created on first use: 1 read and 1 write queue, perm READ|WRITE (6); a
  new group reads it from its first message. A retried message that expires again stays in
  the same retry topic.
* The original is then done for the group, so the group's offset on the normal queue moves on
  and its lag is true (before, an expired message held it back until it was acked).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from bolide.broker.delivery import DELIVERED_FROM, TIMER_OUT_MS
from bolide.broker.held_messages import put_copy
from bolide.broker.subscription_groups import SubscriptionGroupManager
from bolide.broker.timer import TIMER_TRIGGER_PROPERTIES
from bolide.broker.topics import TopicConfigManager, is_writeable
from bolide.protocol.bodies.topic import PERM_READ, PERM_WRITE
from bolide.protocol.headers.pop import FIRST_POP_TIME_PROPERTY
from bolide.protocol.message import MessageExt, PropertyKey
from bolide.protocol.system_topics import pop_retry_topic
from bolide.store.api import MessageStore

__all__ = ["POP_RETRY_QUEUE_ID", "PopRetry"]

_log = logging.getLogger("bolide.broker.pop")

POP_RETRY_QUEUE_ID = 0
"""A POP retry topic has one queue."""
_RETRY_TOPIC_QUEUE_COUNT = 1
_DROPPED = (DELIVERED_FROM, TIMER_OUT_MS, PropertyKey.DELAY, *TIMER_TRIGGER_PROPERTIES)


class PopRetry:
    """Stores retry copies; ``register_soon`` is called when a retry topic was created (name
    servers must learn it)."""

    def __init__(
        self,
        store: MessageStore,
        topics: TopicConfigManager,
        groups: SubscriptionGroupManager,
        register_soon: Callable[[], None],
        *,
        v2: bool = False,
        read_v1: bool = True,
    ) -> None:
        self._store = store
        self._topics = topics
        self._groups = groups
        self._register_soon = register_soon
        self.v2 = v2
        """enableRetryTopicV2: new retry copies go to ``%RETRY%<group>+<topic>``."""
        self.read_v1 = read_v1
        """retrieveMessageFromPopRetryTopicV1: with V2 on, the V1 topic is read too."""

    def topic(self, group: str, topic: str) -> str:
        """Where ``group``'s expired messages of ``topic`` are copied to."""
        return pop_retry_topic(group, topic, v2=self.v2)

    def read_topics(self, group: str, topic: str) -> list[str]:
        """The retry topics a pop of ``topic`` by ``group`` reads (V2 first)."""
        if not self.v2:
            return [pop_retry_topic(group, topic)]
        if not self.read_v1:
            return [pop_retry_topic(group, topic, v2=True)]
        return [pop_retry_topic(group, topic, v2=True), pop_retry_topic(group, topic)]

    def applies_to(self, group: str) -> bool:
        """Orderly groups get expired messages back in place (a copy elsewhere would break
        the queue's order; Java's FIFO pops never read retry topics)."""
        config = self._groups.subscription_group_table().get(group)
        return config is None or not config.consume_orderly_enable

    async def put(
        self, group: str, topic: str, message: MessageExt, deliveries: int, first_pop_time_ms: int
    ) -> bool:
        """Store the retry copy of ``message`` (popped from ``topic``, delivered
        ``deliveries`` times so far); False when it could not be stored (logged).

        Raises:
            OSError: topics.json could not be written.
        """
        retry_topic = self.topic(group, topic)
        creation = await self._topics.create_topic_in_send_back(
            retry_topic, _RETRY_TOPIC_QUEUE_COUNT, PERM_READ | PERM_WRITE
        )
        if creation.created:
            self._register_soon()
        if creation.config is None or not is_writeable(creation.config.perm):
            _log.error("POP retry topic %s cannot take messages: %s", retry_topic,
                       creation.reason or "not writeable")  # fmt: skip
            return False
        properties = {k: v for k, v in message.properties.items() if k not in _DROPPED}
        properties.setdefault(PropertyKey.UNIQ_KEY, message.msg_id)  # the id clients saw
        properties.setdefault(FIRST_POP_TIME_PROPERTY, str(first_pop_time_ms))
        properties.setdefault(PropertyKey.RETRY_TOPIC, topic)
        result = await self._store.put_message(
            put_copy(
                message,
                retry_topic,
                POP_RETRY_QUEUE_ID,
                properties,
                reconsume_times=message.reconsume_times + deliveries,
            )
        )
        if not result.ok:
            _log.error("POP retry copy of %s in %s not stored: %s", message.msg_id, retry_topic,
                       result.status.name)  # fmt: skip
        return result.ok
