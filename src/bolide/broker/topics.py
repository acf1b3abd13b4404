"""The broker's topic table: names, validation, permissions, system topics, auto-creation.

:class:`TopicConfigManager` holds one :class:`TopicConfig` per topic, persists the table to
``topics.json`` (atomic, with ``.bak``) and bumps its :class:`DataVersion` on every change,
which is how name servers notice a broker's topics changed (docs/protocol.md §2.2, §4.4, §4.5).

Lookups are plain methods. Changes are ``async``: the table changes at once (so a concurrent
request sees the new topic) and the call returns after topics.json has been written in a
worker thread, so an acknowledged creation survives a crash.

topics.json::

    {"dataVersion": {"counter": 5, "timestamp": 1700000000000},
     "topicConfigTable": {"T": {"order": false, "perm": 6, "readQueueNums": 4,
                                "topicFilterType": "SINGLE_TAG", "topicName": "T",
                                "topicSysFlag": 0, "writeQueueNums": 4}, ...}}
"""

from __future__ import annotations

import enum
import logging
import re
from dataclasses import dataclass
from pathlib import Path

from bolide.base import limits
from bolide.base.clock import Clock
from bolide.base.errors import ConfigError
from bolide.base.fileio import read_with_backup
from bolide.broker.config import BrokerConfig
from bolide.broker.config_table import ConfigTable
from bolide.protocol.bodies.fastjson import BodyError
from bolide.protocol.bodies.topic import (
    PERM_INHERIT,
    PERM_PRIORITY,
    PERM_READ,
    PERM_WRITE,
    TopicConfig,
    TopicConfigSerializeWrapper,
)
from bolide.protocol.system_topics import (
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    BENCHMARK_TOPIC,
    DEFAULT_TRACE_TOPIC,
    DLQ_GROUP_TOPIC_PREFIX,
    OFFSET_MOVED_EVENT,
    POP_RETRY_SEPARATOR_V2,
    REPLY_TOPIC_SUFFIX,
    RETRY_GROUP_TOPIC_PREFIX,
    SCHEDULE_TOPIC,
    SELF_TEST_TOPIC,
    SYSTEM_TOPIC_PREFIX,
    SYSTEM_TOPICS,
    TIMER_TOPIC,
    TRANS_CHECK_MAX_TIME_TOPIC,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
    dlq_topic,
    is_pop_retry_topic_v2,
    is_retry_topic,
    is_send_forbidden_topic,
    retry_topic,
)

# The system topic names live in bolide.protocol.system_topics; the re-exports below keep
# ``from bolide.broker.topics import SCHEDULE_TOPIC`` working for code written before that.
__all__ = [
    "AUTO_CREATE_TOPIC_KEY_TOPIC",
    "BENCHMARK_TOPIC",
    "DLQ_GROUP_TOPIC_PREFIX",
    "OFFSET_MOVED_EVENT",
    "REPLY_TOPIC_SUFFIX",
    "RETRY_GROUP_TOPIC_PREFIX",
    "SCHEDULE_TOPIC",
    "SELF_TEST_TOPIC",
    "SYSTEM_TOPIC_PREFIX",
    "TIMER_TOPIC",
    "TRANS_CHECK_MAX_TIME_TOPIC",
    "TRANS_HALF_TOPIC",
    "TRANS_OP_HALF_TOPIC",
    "PermName",
    "TopicConfig",
    "TopicConfigManager",
    "TopicCreation",
    "TopicValidation",
    "TopicValidationCode",
    "dlq_topic",
    "is_inherited",
    "is_readable",
    "is_retry_topic",
    "is_send_forbidden_topic",
    "is_writeable",
    "perm_to_text",
    "retry_topic",
    "validate_name",
    "validate_topic",
]

_log = logging.getLogger("bolide.broker.topics")

# System topics whatever the broker's configuration; the manager adds the cluster-, broker-,
# reply- and trace-topic names of its own configuration.
_FIXED_SYSTEM_TOPICS = SYSTEM_TOPICS - {DEFAULT_TRACE_TOPIC}

_NAME_PATTERN = re.compile(r"[%|a-zA-Z0-9_-]+", re.ASCII)
"""The characters a topic or group name may hold."""
_RETRY_QUEUE_NUMS_FALLBACK = 1
_DLQ_QUEUE_NUMS = 1
_FILTER_TYPES = ("SINGLE_TAG", "MULTI_TAG")


class PermName(enum.IntFlag):
    """Permission bits of a topic (and of a broker, brokerPermission)."""

    INHERIT = PERM_INHERIT
    """The topic may serve as a template for auto-created topics."""
    WRITE = PERM_WRITE
    READ = PERM_READ
    PRIORITY = PERM_PRIORITY


def is_readable(perm: int) -> bool:
    """Consumers may pull from a topic (or broker) with ``perm``."""
    return bool(perm & PERM_READ)


def is_writeable(perm: int) -> bool:
    """Producers may send to a topic (or broker) with ``perm``."""
    return bool(perm & PERM_WRITE)


def is_inherited(perm: int) -> bool:
    """A topic with ``perm`` may be the template of an auto-created topic."""
    return bool(perm & PERM_INHERIT)


def perm_to_text(perm: int) -> str:
    """``perm`` as ``RWX`` letters, ``-`` for a missing bit (X = inherit), as mqadmin shows it."""
    return "".join(
        letter if perm & bit else "-"
        for letter, bit in (("R", PERM_READ), ("W", PERM_WRITE), ("X", PERM_INHERIT))
    )


class TopicValidationCode(enum.Enum):
    VALID = "VALID"
    BLANK = "BLANK"
    ILLEGAL_CHARACTERS = "ILLEGAL_CHARACTERS"
    TOO_LONG = "TOO_LONG"


@dataclass(frozen=True, slots=True)
class TopicValidation:
    """Whether a topic name is acceptable, and if not, why (``reason`` is the wire remark)."""

    code: TopicValidationCode
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.code is TopicValidationCode.VALID


_VALID = TopicValidation(TopicValidationCode.VALID)


def validate_topic(topic: str) -> TopicValidation:
    """Check ``topic`` against ``^[%|a-zA-Z0-9_-]+$`` and the 127-character limit.

    The send path answers SYSTEM_ERROR with ``reason`` as the remark when this fails.
    """
    return validate_name("topic", topic, limits.TOPIC_NAME_MAX_CHARS)


def validate_name(kind: str, name: str, max_chars: int) -> TopicValidation:
    """Check the ``kind`` (topic, group) name ``name``: not blank, only characters of
    ``^[%|a-zA-Z0-9_-]+$``, at most ``max_chars`` of them; ``reason`` names the ``kind``."""
    if not name or name.isspace():
        return TopicValidation(TopicValidationCode.BLANK, f"the {kind} name is blank")
    if _NAME_PATTERN.fullmatch(name) is None:
        return TopicValidation(
            TopicValidationCode.ILLEGAL_CHARACTERS,
            f"the {kind} name {name!r} has characters outside ^[%|a-zA-Z0-9_-]+$",
        )
    if len(name) > max_chars:
        return TopicValidation(
            TopicValidationCode.TOO_LONG, f"the {kind} name is longer than {max_chars} characters"
        )
    return _VALID


@dataclass(frozen=True, slots=True)
class TopicCreation:
    """What an on-demand creation found or did.

    ``config`` is the topic's configuration (found or new), or None when the topic does not
    exist and could not be created (``reason`` says why; the send path answers
    TOPIC_NOT_EXIST). ``created`` is True when this call added the topic: the broker should
    re-register with the name servers at once so clients can route to it.
    """

    config: TopicConfig | None
    created: bool = False
    reason: str = ""


class TopicConfigManager(ConfigTable[TopicConfig]):
    """The topic table of one broker, persisted to ``path`` (topics.json).

    System topics (see :meth:`load`) follow ``config``; ``clock`` stamps the data version.
    Holds at most ``max_topics`` topics. Use it from the event loop thread only.
    """

    def __init__(
        self,
        config: BrokerConfig,
        path: Path,
        clock: Clock,
        *,
        max_topics: int = limits.TOPICS_MAX_COUNT,
    ) -> None:
        self._config = config
        self._max_topics = max_topics
        self._system_topics = _FIXED_SYSTEM_TOPICS | {
            config.broker_cluster_name,
            config.broker_name,
            config.broker_cluster_name + REPLY_TOPIC_SUFFIX,
            config.msg_trace_topic_name,
        }
        super().__init__(path, clock)

    # --- state and persistence ----------------------------------------------------------------

    def load(self) -> None:
        """Read topics.json (``.bak`` if the main file is damaged), then apply system topics.

        System topics missing from the file are added; ones in the file keep their stored
        settings (an admin may have changed them), except TBW102, which is removed when
        autoCreateTopicEnable is off (a Java broker would keep a stored TBW102 and go on
        auto-creating topics). If that changed the table, the data version moves on so name
        servers pick up the change, and the next :meth:`persist` writes it.
        Raises :class:`CorruptDataError` when both files exist and neither parses.
        """
        wrapper = read_with_backup(self.path, _decode_topics)
        self._loaded(
            None if wrapper is None else (wrapper.topic_config_table, wrapper.data_version)
        )
        changed = False
        for system_topic in self._system_topic_configs():
            if system_topic.topic_name not in self._table:
                self._table[system_topic.topic_name] = system_topic
                changed = True
        if not self._config.auto_create_topic_enable:
            changed |= self._table.pop(AUTO_CREATE_TOPIC_KEY_TOPIC, None) is not None
        if changed:
            self._changed()

    def encode(self) -> bytes:
        """topics.json bytes (also the GET_ALL_TOPIC_CONFIG body)."""
        return self.wrapper().to_json()

    def wrapper(self) -> TopicConfigSerializeWrapper:
        """The table and data version as one body (registration, GET_ALL_TOPIC_CONFIG)."""
        return TopicConfigSerializeWrapper(dict(sorted(self._table.items())), self._data_version)

    def registration_wrapper(self, broker_permission: int) -> TopicConfigSerializeWrapper:
        """The body part a REGISTER_BROKER carries: the table and data version.

        When ``broker_permission`` (brokerPermission, changeable at run time) lacks READ or
        WRITE, every topic is announced with that permission instead of its own, so clients
        stop sending to (or pulling from) a broker taken out of service, as RocketMQ does.
        """
        wrapper = self.wrapper()
        if is_readable(broker_permission) and is_writeable(broker_permission):
            return wrapper
        restricted = {
            name: TopicConfig(
                name, config.read_queue_count, config.write_queue_count, broker_permission
            )
            for name, config in wrapper.topic_config_table.items()
        }
        return TopicConfigSerializeWrapper(restricted, wrapper.data_version)

    # --- lookups ------------------------------------------------------------------------------

    def topic_config_table(self) -> dict[str, TopicConfig]:
        """A copy of the whole table (configs are immutable)."""
        return dict(self._table)

    def topic_names(self) -> list[str]:
        """Every topic, sorted."""
        return sorted(self._table)

    def is_system_topic(self, topic: str) -> bool:
        """A topic the broker owns (TBW102, SCHEDULE_TOPIC_XXXX, the cluster- and broker-name
        topics, ``rmq_sys_*``, ...): admins may not create, update or delete it."""
        return topic in self._system_topics or topic.startswith(SYSTEM_TOPIC_PREFIX)

    def is_order_topic(self, topic: str) -> bool:
        config = self._table.get(topic)
        return config is not None and config.order

    # --- on-demand creation (send, send-back, heartbeat) --------------------------------------

    async def create_topic_in_send(
        self,
        topic: str,
        default_topic: str,
        default_queue_nums: int,
        *,
        topic_sys_flag: int = 0,
    ) -> TopicCreation:
        """Find ``topic`` or auto-create it from ``default_topic`` (send path, §2.2 step 3).

        Creation needs ``default_topic`` to exist with INHERIT; the new topic gets
        ``min(default_queue_nums, default.writeQueueNums)`` read and write queues and the
        default's perm without INHERIT. If that fails and ``topic`` is a ``%RETRY%`` topic, it
        is created with 1 queue and perm READ|WRITE. Otherwise ``config`` is None and
        ``reason`` says why (answer TOPIC_NOT_EXIST). Returns after topics.json is written
        when the topic was created; raises OSError if it cannot be.
        """
        creation = self._create_from_default(
            topic, default_topic, default_queue_nums, topic_sys_flag
        )
        if creation.config is None and is_retry_topic(topic):
            creation = self._create_plain(
                topic, _RETRY_QUEUE_NUMS_FALLBACK, PERM_READ | PERM_WRITE, topic_sys_flag
            )
        if creation.config is None:
            _log.warning("cannot auto-create topic %r: %s", topic, creation.reason)
        return await self._persisted(creation)

    async def create_topic_in_send_back(
        self, topic: str, queue_nums: int, perm: int, *, topic_sys_flag: int = 0
    ) -> TopicCreation:
        """Find ``topic`` or create it with ``queue_nums`` read/write queues and ``perm``.

        Used for retry and DLQ topics (consumer send-back, heartbeat). ``config`` is None when
        the name is invalid, ``queue_nums`` < 1, or the table is full. Returns after
        topics.json is written when the topic was created; raises OSError if it cannot be.
        """
        creation = self._create_plain(topic, queue_nums, perm, topic_sys_flag)
        return await self._persisted(creation)

    async def create_retry_topic(self, group: str, queue_nums: int) -> TopicCreation:
        """Find or create ``%RETRY%<group>`` with ``queue_nums`` queues (the group's
        retryQueueNums, 1 by default), perm READ|WRITE."""
        return await self.create_topic_in_send_back(
            retry_topic(group), queue_nums, PERM_READ | PERM_WRITE
        )

    async def create_dlq_topic(self, group: str, *, perm: int = PERM_WRITE) -> TopicCreation:
        """Find or create ``%DLQ%<group>``: 1 queue, write-only by default (issue 5; RocketMQ
        before 4.9.4), so no consumer drains dead letters by accident. An admin makes it
        readable with UPDATE_AND_CREATE_TOPIC (perm 6) to inspect or replay them."""
        return await self.create_topic_in_send_back(dlq_topic(group), _DLQ_QUEUE_NUMS, perm)

    # --- administration -----------------------------------------------------------------------

    async def update_topic_config(self, config: TopicConfig) -> bool:
        """Create or replace a topic (UPDATE_AND_CREATE_TOPIC); True if it was new.

        Raises :class:`ConfigError` for an invalid name, a system topic, queue counts outside
        0..TOPIC_QUEUE_NUMS_MAX_COUNT, perm outside 0..15, an unknown topicFilterType, a
        negative topicSysFlag, or a full table; OSError if topics.json cannot be written.
        """
        _check_admin_topic_config(config)
        if self.is_system_topic(config.topic_name):
            raise ConfigError(f"topic {config.topic_name!r} is a system topic")
        created = config.topic_name not in self._table
        if created and len(self._table) >= self._max_topics:
            raise ConfigError(f"the broker holds {self._max_topics} topics: no room for more")
        if self._table.get(config.topic_name) != config:
            self._table[config.topic_name] = config
            self._changed()
            _log.info("topic %s: %s", "created" if created else "updated", config)
        await self.persist()
        return created

    async def delete_topic(self, topic: str) -> bool:
        """Remove ``topic`` (DELETE_TOPIC_IN_BROKER); True if it existed.

        Raises :class:`ConfigError` for a system topic; OSError if topics.json cannot be
        written. The caller deletes the topic's messages and offsets.
        """
        if self.is_system_topic(topic):
            raise ConfigError(f"topic {topic!r} is a system topic")
        existed = self._table.pop(topic, None) is not None
        if existed:
            self._changed()
            _log.info("topic deleted: %s", topic)
        await self.persist()
        return existed

    # --- internals ----------------------------------------------------------------------------

    def _create_from_default(
        self, topic: str, default_topic: str, default_queue_nums: int, topic_sys_flag: int
    ) -> TopicCreation:
        existing = self._table.get(topic)
        if existing is not None:
            return TopicCreation(existing)
        default = self._table.get(default_topic)
        if default is None:
            return TopicCreation(None, reason=f"default topic {default_topic!r} does not exist")
        if not is_inherited(default.perm):
            return TopicCreation(
                None, reason=f"default topic {default_topic!r} has no INHERIT permission"
            )
        queue_nums = min(default_queue_nums, default.write_queue_count)
        return self._create_plain(
            topic,
            queue_nums,
            default.perm & ~PERM_INHERIT,
            topic_sys_flag,
            topic_filter_type=default.topic_filter_type,
        )

    def _create_plain(
        self,
        topic: str,
        queue_nums: int,
        perm: int,
        topic_sys_flag: int,
        *,
        topic_filter_type: str = "SINGLE_TAG",
    ) -> TopicCreation:
        existing = self._table.get(topic)
        if existing is not None:
            return TopicCreation(existing)
        # A POP retry topic's V2 name holds '+' (Java creates it without the name check).
        checked = (
            topic.replace(POP_RETRY_SEPARATOR_V2, "_", 1) if is_pop_retry_topic_v2(topic) else topic
        )
        validation = validate_topic(checked)
        if not validation.ok:
            return TopicCreation(None, reason=validation.reason)
        if queue_nums < 1:
            return TopicCreation(None, reason=f"cannot create a topic with {queue_nums} queues")
        if len(self._table) >= self._max_topics:
            return TopicCreation(None, reason=f"the broker holds {self._max_topics} topics")
        queue_nums = min(queue_nums, limits.TOPIC_QUEUE_NUMS_MAX_COUNT)
        config = TopicConfig(
            topic, queue_nums, queue_nums, perm, topic_filter_type, topic_sys_flag, False
        )
        self._table[topic] = config
        self._changed()
        _log.info("topic created on demand: %s", config)
        return TopicCreation(config, True)

    async def _persisted(self, creation: TopicCreation) -> TopicCreation:
        if creation.created:
            await self.persist()
        return creation

    def _system_topic_configs(self) -> list[TopicConfig]:
        config = self._config
        read_write = PERM_READ | PERM_WRITE
        template = PERM_INHERIT | read_write
        queues = config.default_topic_queue_nums
        levels = len(config.message_delay_levels_ms)
        topics = [TopicConfig(SELF_TEST_TOPIC, 1, 1)]
        if config.auto_create_topic_enable:
            topics.append(TopicConfig(AUTO_CREATE_TOPIC_KEY_TOPIC, queues, queues, template))
        # As in RocketMQ, the cluster- and broker-name topics always exist; the *TopicEnable
        # switches decide whether they are readable and writable.
        cluster_perm = template if config.cluster_topic_enable else PERM_INHERIT
        topics.append(TopicConfig(config.broker_cluster_name, perm=cluster_perm))
        broker_perm = template if config.broker_topic_enable else PERM_INHERIT
        topics.append(TopicConfig(config.broker_name, 1, 1, broker_perm))
        topics.append(TopicConfig(OFFSET_MOVED_EVENT, 1, 1))
        # One queue per delay level (RocketMQ's 18 levels give its fixed 18 queues).
        topics.append(TopicConfig(SCHEDULE_TOPIC, levels, levels))
        if config.trace_topic_enable or config.trace_on_broker_enable:
            topics.append(TopicConfig(config.msg_trace_topic_name, 1, 1))
        topics.append(TopicConfig(config.broker_cluster_name + REPLY_TOPIC_SUFFIX, 1, 1))
        return topics


def _decode_topics(raw: bytes) -> TopicConfigSerializeWrapper:
    try:
        return TopicConfigSerializeWrapper.from_json(raw)
    except BodyError as error:
        raise ValueError(f"topics.json: {error}") from error


def _check_admin_topic_config(config: TopicConfig) -> None:
    validation = validate_topic(config.topic_name)
    if not validation.ok:
        raise ConfigError(validation.reason)
    maximum = limits.TOPIC_QUEUE_NUMS_MAX_COUNT
    for what, count in (("read", config.read_queue_count), ("write", config.write_queue_count)):
        if not 0 <= count <= maximum:
            raise ConfigError(f"{what} queue count {count} is outside 0..{maximum}")
    if not 0 <= config.perm <= 0xF:
        raise ConfigError(f"perm {config.perm} is outside 0..15")
    if config.topic_filter_type not in _FILTER_TYPES:
        raise ConfigError(
            f"topicFilterType {config.topic_filter_type!r} is not SINGLE_TAG/MULTI_TAG"
        )
    if config.topic_sys_flag < 0:
        raise ConfigError(f"topicSysFlag {config.topic_sys_flag} is negative")
