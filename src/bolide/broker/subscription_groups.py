"""The broker's consumer-group settings: retry queues, retry limit, consume switches.

:class:`SubscriptionGroupManager` keeps one :class:`SubscriptionGroupConfig` per group,
persisted to ``subscriptionGroup.json`` (atomic, with ``.bak``) with a :class:`DataVersion`
bumped on every change (docs/protocol.md §2.11, §4.4). A group unknown to the broker is created
with RocketMQ's defaults the first time a consumer of it shows up, when
autoCreateSubscriptionGroup is on (the default). Changes are ``async`` and return after the
file is written in a worker thread, as in :mod:`bolide.broker.topics`.

subscriptionGroup.json::

    {"dataVersion": {"counter": 3, "timestamp": 1700000000000},
     "subscriptionGroupTable": {"G": {"brokerId": 0, "consumeBroadcastEnable": true,
        "consumeEnable": true, "consumeFromMinEnable": true, "groupName": "G",
        "notifyConsumerIdsChangedEnable": true, "retryMaxTimes": 16, "retryQueueNums": 1,
        "whichBrokerWhenConsumeSlowly": 1}, ...}}
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

from bolide.base import limits
from bolide.base.clock import Clock
from bolide.base.errors import ConfigError
from bolide.base.fileio import read_with_backup
from bolide.broker.config import BrokerConfig
from bolide.broker.config_table import ConfigTable
from bolide.broker.topics import TopicValidation, validate_name
from bolide.protocol.bodies.config import SubscriptionGroupConfig, SubscriptionGroupWrapper
from bolide.protocol.bodies.fastjson import BodyError
from bolide.protocol.system_topics import SYSTEM_GROUPS, is_system_consumer_group

__all__ = [
    "SubscriptionGroupConfig",
    "SubscriptionGroupManager",
    "validate_group",
]

_log = logging.getLogger("bolide.broker.subscription_groups")


_JAVA_INT_MAX = 2**31 - 1  # the group's numeric settings are Java ints


def validate_group(group: str) -> TopicValidation:
    """Check a group name: ``^[%|a-zA-Z0-9_-]+$``, at most ``GROUP_NAME_MAX_CHARS`` characters."""
    return validate_name("group", group, limits.GROUP_NAME_MAX_CHARS)


class SubscriptionGroupManager(ConfigTable[SubscriptionGroupConfig]):
    """The subscription groups of one broker, persisted to ``path`` (subscriptionGroup.json).

    ``config`` decides auto-creation; ``clock`` stamps the data version. Holds at most
    ``max_groups`` groups. Use it from the event loop thread only.
    """

    def __init__(
        self,
        config: BrokerConfig,
        path: Path,
        clock: Clock,
        *,
        max_groups: int = limits.SUBSCRIPTION_GROUPS_MAX_COUNT,
    ) -> None:
        self._auto_create = config.auto_create_subscription_group
        self._max_groups = max_groups
        super().__init__(path, clock)

    # --- state and persistence ----------------------------------------------------------------

    def load(self) -> None:
        """Read subscriptionGroup.json (``.bak`` if the main file is damaged), then add the
        system groups the file lacks (stored ones keep their settings).

        Raises :class:`CorruptDataError` when both files exist and neither parses.
        """
        wrapper = read_with_backup(self.path, _decode_groups)
        self._loaded(
            None if wrapper is None else (wrapper.subscription_group_table, wrapper.data_version)
        )
        missing = [group for group in SYSTEM_GROUPS if group not in self._table]
        for group in missing:
            self._table[group] = SubscriptionGroupConfig(group)
        if missing:
            self._changed()

    def encode(self) -> bytes:
        """subscriptionGroup.json bytes (also the GET_ALL_SUBSCRIPTIONGROUP_CONFIG body)."""
        return self.wrapper().to_json()

    def wrapper(self) -> SubscriptionGroupWrapper:
        return SubscriptionGroupWrapper(dict(sorted(self._table.items())), self._data_version)

    # --- lookups ------------------------------------------------------------------------------

    def group_names(self) -> list[str]:
        return sorted(self._table)

    def subscription_group_table(self) -> dict[str, SubscriptionGroupConfig]:
        """A copy of the table (configs are immutable)."""
        return dict(self._table)

    # --- changes ------------------------------------------------------------------------------

    async def find_or_create(self, group: str) -> SubscriptionGroupConfig | None:
        """The settings of ``group``, created with RocketMQ's defaults if it is new.

        Creation happens when autoCreateSubscriptionGroup is on or the group is a system
        consumer group (``CID_RMQ_SYS_*``). Returns None (the caller answers
        SUBSCRIPTION_GROUP_NOT_EXIST) when it is off, the name is invalid, or the table is
        full. Returns after the file is written when the group was created; raises OSError
        if it cannot be.
        """
        existing = self._table.get(group)
        if existing is not None:
            return existing
        if not (self._auto_create or is_system_consumer_group(group)):
            return None
        validation = validate_group(group)
        if not validation.ok:
            _log.warning("not creating subscription group %r: %s", group, validation.reason)
            return None
        if len(self._table) >= self._max_groups:
            _log.warning("not creating subscription group %r: table full", group)
            return None
        created = self._table[group] = SubscriptionGroupConfig(group)
        self._changed()
        _log.info("subscription group created on demand: %s", group)
        await self.persist()
        return created

    async def update(self, config: SubscriptionGroupConfig) -> bool:
        """Create or replace a group (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP); True if new.

        Raises :class:`ConfigError` for an invalid name, a negative or out-of-range setting
        (retryQueueNums above TOPIC_QUEUE_NUMS_MAX_COUNT) or a full table; OSError if the
        file cannot be written.
        """
        _check_group_config(config)
        created = config.group_name not in self._table
        if created and len(self._table) >= self._max_groups:
            raise ConfigError(f"the broker holds {self._max_groups} groups: no room for more")
        if self._table.get(config.group_name) != config:
            self._table[config.group_name] = config
            self._changed()
            _log.info("subscription group %s: %s", "created" if created else "updated", config)
        await self.persist()
        return created

    async def delete(self, group: str) -> bool:
        """Remove ``group`` (DELETE_SUBSCRIPTIONGROUP); True if it existed. The caller removes
        its offsets if asked to. Raises OSError if the file cannot be written."""
        existed = self._table.pop(group, None) is not None
        if existed:
            self._changed()
            _log.info("subscription group deleted: %s", group)
        await self.persist()
        return existed

    async def disable_consume(self, group: str) -> bool:
        """Set consumeEnable=false on ``group`` (pulls are then refused); True if it exists."""
        existing = self._table.get(group)
        if existing is None:
            return False
        if existing.consume_enable:
            self._table[group] = dataclasses.replace(existing, consume_enable=False)
            self._changed()
        await self.persist()
        return True


def _decode_groups(raw: bytes) -> SubscriptionGroupWrapper:
    try:
        return SubscriptionGroupWrapper.from_json(raw)
    except BodyError as error:
        raise ValueError(f"subscriptionGroup.json: {error}") from error


def _check_group_config(config: SubscriptionGroupConfig) -> None:
    validation = validate_group(config.group_name)
    if not validation.ok:
        raise ConfigError(validation.reason)
    bounds = (
        ("retryQueueNums", config.retry_queue_count, limits.TOPIC_QUEUE_NUMS_MAX_COUNT),
        ("retryMaxTimes", config.retry_max_times, _JAVA_INT_MAX),
        ("brokerId", config.broker_id, 2**63 - 1),
        ("whichBrokerWhenConsumeSlowly", config.which_broker_when_consume_slowly, 2**63 - 1),
    )
    for key, value, highest in bounds:
        if not 0 <= value <= highest:
            raise ConfigError(f"subscription group {key}={value} is outside 0..{highest}")
