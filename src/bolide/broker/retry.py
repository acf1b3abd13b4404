"""Consumer send-back: a message the consumer failed goes to ``%RETRY%<group>`` with a growing
delay, and after too many attempts to ``%DLQ%<group>`` (RocketMQ's delay levels and retries;
docs/protocol.md §2.8, §4.3).

Decide, then act: :func:`plan_send_back` is pure (what the new message looks like and where it
goes); :class:`SendBackService` finds the original by commit-log offset, creates the topics,
and stores the result. A C++ consumer sends only ``group``, ``offset`` and ``delayLevel=0``, to
the message's STOREHOST, so everything else comes from the stored original:

* RETRY_TOPIC = the original topic, unless the original already came from a retry;
* ORIGIN_MESSAGE_ID = the existing one, or the original's offset message id;
* reconsume times = the original's + 1; WAIT=false;
* to ``%DLQ%<group>`` (1 queue, write-only by default) when the original's reconsume times
  reached the maximum — the group's retryMaxTimes (16), or the request's maxReconsumeTimes
  from clients at wire version 121 (V3_4_9) or later — or the request's delay level is
  negative;
* otherwise to ``%RETRY%<group>`` (retryQueueNums queues, read and write, a random one) with
  delay level ``3 + reconsume times`` when the request says 0 (level 3 = 10 s by default, and
  each failure waits one level longer, up to the highest), else the requested level; the
  delay routes it through SCHEDULE_TOPIC_XXXX like any delayed message.
"""

from __future__ import annotations

import enum
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from bolide.broker.delivery import DELIVERED_FROM, TIMER_OUT_MS
from bolide.broker.held_messages import put_copy, read_message
from bolide.broker.schedule import DelayLevels, schedule_target
from bolide.broker.subscription_groups import SubscriptionGroupConfig, SubscriptionGroupManager
from bolide.broker.timer import TIMER_TRIGGER_PROPERTIES
from bolide.broker.topics import TopicConfigManager, is_writeable
from bolide.protocol.headers import ConsumerSendMsgBackRequestHeader
from bolide.protocol.message import MessageExt, PropertyKey
from bolide.protocol.record import encode_properties
from bolide.protocol.system_topics import dlq_topic, retry_topic
from bolide.store.api import MessageStore, PutResult

__all__ = [
    "SEND_BACK_DELAY_LEVEL_BASE",
    "VERSION_V3_4_9",
    "SendBackOutcome",
    "SendBackPlan",
    "SendBackService",
    "SendBackStatus",
    "max_reconsume_times",
    "plan_send_back",
]

_log = logging.getLogger("bolide.broker.retry")

SEND_BACK_DELAY_LEVEL_BASE: Final = 3
"""A first failure waits level 3 (10 s by default); each further one a level more."""
VERSION_V3_4_9: Final = 121
"""Clients at or above this wire version send a maxReconsumeTimes the broker honours."""

# Properties of the original that must not travel with the retry: its delivery marker (only a
# delivery may carry one) and timer requests (a retry waits by delay level).
_DROPPED = (DELIVERED_FROM, TIMER_OUT_MS, *TIMER_TRIGGER_PROPERTIES)


@dataclass(frozen=True, slots=True)
class SendBackPlan:
    """The message a send-back stores: ``to_dlq`` or a retry with ``delay_level`` (> 0)."""

    to_dlq: bool
    delay_level: int
    reconsume_times: int
    properties: dict[str, str]


def max_reconsume_times(
    group: SubscriptionGroupConfig, header_max: int | None, client_version: int
) -> int:
    """The limit that sends a message to the DLQ: the request's from clients >= V3_4_9 (when
    given), the group's retryMaxTimes otherwise."""
    if client_version >= VERSION_V3_4_9 and header_max is not None:
        return header_max
    return group.retry_max_times


def plan_send_back(
    original: MessageExt, *, requested_delay_level: int, max_times: int
) -> SendBackPlan:
    """What to store for ``original`` failed by a consumer (see the module docstring).

    Raises:
        ProtocolError: the original's store host cannot form an offset message id.
    """
    properties = dict(original.properties)
    for name in _DROPPED:
        properties.pop(name, None)
    properties.setdefault(PropertyKey.RETRY_TOPIC, original.topic)
    if not properties.get(PropertyKey.ORIGIN_MESSAGE_ID):
        properties[PropertyKey.ORIGIN_MESSAGE_ID] = original.offset_msg_id
    properties[PropertyKey.WAIT] = "false"
    reconsume_times = original.reconsume_times
    if reconsume_times >= max_times or requested_delay_level < 0:
        properties.pop(PropertyKey.DELAY, None)
        return SendBackPlan(True, 0, reconsume_times + 1, properties)
    delay_level = requested_delay_level or SEND_BACK_DELAY_LEVEL_BASE + reconsume_times
    properties[PropertyKey.DELAY] = str(delay_level)
    return SendBackPlan(False, delay_level, reconsume_times + 1, properties)


class SendBackStatus(enum.Enum):
    """How a send-back ended; the handler maps each to a response code."""

    STORED = "STORED"
    SKIPPED = "SKIPPED"
    """retryQueueNums is 0: nothing to do (answered SUCCESS, as Java does)."""
    NO_GROUP = "NO_GROUP"
    NO_PERMISSION = "NO_PERMISSION"
    FAILED = "FAILED"


@dataclass(frozen=True, slots=True)
class SendBackOutcome:
    status: SendBackStatus
    remark: str = ""
    topic: str = ""
    """Where the message went (``%RETRY%G`` or ``%DLQ%G``) when stored."""
    result: PutResult | None = None


class SendBackService:
    """Carries out send-backs against the broker's store and managers.

    ``register_soon`` is called after a retry or DLQ topic was created (name servers must
    learn it); ``rng`` picks the retry queue.
    """

    def __init__(
        self,
        store: MessageStore,
        topics: TopicConfigManager,
        groups: SubscriptionGroupManager,
        levels: DelayLevels,
        *,
        register_soon: Callable[[], None],
        rng: random.Random | None = None,
    ) -> None:
        self._store = store
        self._topics = topics
        self._groups = groups
        self._levels = levels
        self._register_soon = register_soon
        self._random = rng or random.Random()

    async def send_back(
        self, header: ConsumerSendMsgBackRequestHeader, client_version: int
    ) -> SendBackOutcome:
        """Store the retry (or dead letter) of the message at ``header.commit_log_offset``.

        Raises:
            OSError: topics.json or subscriptionGroup.json could not be written.
        """
        group = await self._groups.find_or_create(header.group)
        if group is None:
            return SendBackOutcome(
                SendBackStatus.NO_GROUP, f"subscription group not exist, {header.group}"
            )
        if group.retry_queue_count <= 0:
            return SendBackOutcome(SendBackStatus.SKIPPED)
        retry = await self._topics.create_retry_topic(header.group, group.retry_queue_count)
        if retry.created:
            self._register_soon()
        if retry.config is None:
            return SendBackOutcome(
                SendBackStatus.FAILED, f"topic[{retry_topic(header.group)}] not exist"
            )
        if not is_writeable(retry.config.perm):
            return SendBackOutcome(
                SendBackStatus.NO_PERMISSION,
                f"the topic[{retry.config.topic_name}] sending message is forbidden",
            )
        original = self._original(header.commit_log_offset)
        if original is None:
            return SendBackOutcome(
                SendBackStatus.FAILED,
                f"look message by offset failed, {header.commit_log_offset}",
            )
        plan = plan_send_back(
            original,
            requested_delay_level=header.delay_level,
            max_times=max_reconsume_times(group, header.max_reconsume_times, client_version),
        )
        if plan.to_dlq:
            return await self._store_dead_letter(header.group, original, plan)
        queue_id = self._random.randrange(retry.config.write_queue_count or 1)
        return await self._put(retry.config.topic_name, queue_id, original, plan)

    def _original(self, commit_log_offset: int) -> MessageExt | None:
        return read_message(self._store, commit_log_offset, log=_log, reader="send-back")

    async def _store_dead_letter(
        self, group: str, original: MessageExt, plan: SendBackPlan
    ) -> SendBackOutcome:
        dlq = await self._topics.create_dlq_topic(group)
        if dlq.created:
            self._register_soon()
        if dlq.config is None:
            return SendBackOutcome(SendBackStatus.FAILED, f"topic[{dlq_topic(group)}] not exist")
        if not is_writeable(dlq.config.perm):
            return SendBackOutcome(
                SendBackStatus.NO_PERMISSION,
                f"the topic[{dlq.config.topic_name}] sending message is forbidden",
            )
        _log.info(
            "message %s of group %s failed %d times: moved to %s",
            original.msg_id, group, original.reconsume_times, dlq.config.topic_name,
        )  # fmt: skip
        queue_id = self._random.randrange(dlq.config.write_queue_count or 1)
        return await self._put(dlq.config.topic_name, queue_id, original, plan)

    async def _put(
        self, topic: str, queue_id: int, original: MessageExt, plan: SendBackPlan
    ) -> SendBackOutcome:
        properties = plan.properties
        store_topic, store_queue_id = topic, queue_id
        if not plan.to_dlq:
            level = self._levels.clamp(plan.delay_level)
            store_topic, store_queue_id = schedule_target(properties, topic, queue_id, level)
        result = await self._store.put_message(
            put_copy(
                original,
                store_topic,
                store_queue_id,
                encode_properties(properties),
                reconsume_times=plan.reconsume_times,
            )
        )
        if not result.ok:
            return SendBackOutcome(SendBackStatus.FAILED, result.status.name, topic, result)
        return SendBackOutcome(SendBackStatus.STORED, "", topic, result)
