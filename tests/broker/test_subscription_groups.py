"""SubscriptionGroupManager: defaults, auto-creation, admin changes, persistence."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from bolide.base.clock import ManualClock
from bolide.base.errors import ConfigError, CorruptDataError
from bolide.base.fileio import backup_path
from bolide.broker.config import BrokerConfig
from bolide.broker.subscription_groups import (
    SubscriptionGroupConfig,
    SubscriptionGroupManager,
    validate_group,
)
from bolide.broker.topics import TopicValidationCode
from bolide.protocol.system_topics import SYSTEM_GROUPS


def _manager(
    tmp_path: Path, clock: ManualClock | None = None, **settings: object
) -> SubscriptionGroupManager:
    config = BrokerConfig(store_path_root_dir=tmp_path).replace(**settings)
    manager = SubscriptionGroupManager(
        config, config.config_dir / "subscriptionGroup.json", clock or ManualClock(), max_groups=12
    )
    manager.load()
    return manager


async def test_find_or_create_uses_rocketmq_defaults(tmp_path: Path) -> None:
    groups = _manager(tmp_path)
    assert groups.find("billing") is None
    counter = groups.data_version.counter
    created = await groups.find_or_create("billing")
    assert created is not None
    assert created.group_name == "billing"
    assert created.retry_max_times == 16
    assert created.retry_queue_count == 1
    assert created.consume_enable and created.consume_broadcast_enable
    assert created.consume_from_min_enable and created.notify_consumer_ids_changed_enable
    assert created.broker_id == 0 and created.which_broker_when_consume_slowly == 1
    assert groups.data_version.counter == counter + 1
    assert await groups.find_or_create("billing") is created
    assert groups.data_version.counter == counter + 1
    stored = json.loads(groups.path.read_bytes())["subscriptionGroupTable"]["billing"]
    assert stored == {
        "brokerId": 0,
        "consumeBroadcastEnable": True,
        "consumeEnable": True,
        "consumeFromMinEnable": True,
        "consumeOrderlyEnable": False,
        "groupName": "billing",
        "notifyConsumerIdsChangedEnable": True,
        "retryMaxTimes": 16,
        "retryQueueNums": 1,
        "whichBrokerWhenConsumeSlowly": 1,
    }


async def test_auto_create_off_creates_only_system_consumer_groups(tmp_path: Path) -> None:
    groups = _manager(tmp_path, auto_create_subscription_group=False)
    assert await groups.find_or_create("billing") is None
    assert await groups.find_or_create("CID_RMQ_SYS_SOMETHING") is not None


async def test_invalid_names_and_full_table_are_not_created(tmp_path: Path) -> None:
    groups = _manager(tmp_path)
    assert await groups.find_or_create("bad group") is None
    assert await groups.find_or_create("g" * 256) is None
    for index in range(12 - len(groups)):
        assert await groups.find_or_create(f"g{index}") is not None
    assert await groups.find_or_create("one-too-many") is None
    with pytest.raises(ConfigError):
        await groups.update(SubscriptionGroupConfig("admin-too-many"))


def test_system_groups_exist_after_load(tmp_path: Path) -> None:
    groups = _manager(tmp_path)
    for group in SYSTEM_GROUPS:
        assert groups.find(group) == SubscriptionGroupConfig(group)


def test_validate_group() -> None:
    assert validate_group("CID_ONS-HTTP-PROXY").ok
    assert validate_group("g" * 255).ok
    assert validate_group("").code is TopicValidationCode.BLANK
    assert validate_group("a.b").code is TopicValidationCode.ILLEGAL_CHARACTERS
    assert validate_group("g" * 256).code is TopicValidationCode.TOO_LONG


async def test_update_disable_and_delete(tmp_path: Path) -> None:
    groups = _manager(tmp_path)
    custom = SubscriptionGroupConfig("billing", retry_queue_count=2, retry_max_times=3)
    assert await groups.update(custom)
    assert groups.find("billing") == custom
    assert not await groups.update(SubscriptionGroupConfig("billing", retry_max_times=5))
    found = groups.find("billing")
    assert found is not None and found.retry_max_times == 5
    assert await groups.disable_consume("billing")
    found = groups.find("billing")
    assert found is not None and not found.consume_enable
    assert not await groups.disable_consume("nobody")
    for bad in (
        SubscriptionGroupConfig("bad name"),
        SubscriptionGroupConfig("g", retry_queue_count=-1),
        SubscriptionGroupConfig("g", retry_queue_count=5000),
        SubscriptionGroupConfig("g", retry_max_times=-1),
    ):
        with pytest.raises(ConfigError):
            await groups.update(bad)
    assert await groups.delete("billing")
    assert not await groups.delete("billing")
    assert "billing" not in groups.group_names()


async def test_concurrent_first_consumers_create_the_group_once(tmp_path: Path) -> None:
    groups = _manager(tmp_path)
    counter = groups.data_version.counter
    results = await asyncio.gather(*(groups.find_or_create("billing") for _ in range(4)))
    assert len({id(result) for result in results}) == 1
    assert groups.data_version.counter == counter + 1


async def test_persistence_round_trip_and_bak_fallback(tmp_path: Path) -> None:
    clock = ManualClock()
    groups = _manager(tmp_path, clock)
    await groups.update(SubscriptionGroupConfig("first", retry_max_times=4))
    clock.advance_ms(10)
    await groups.update(SubscriptionGroupConfig("second"))
    reloaded = _manager(tmp_path, clock)
    assert reloaded.subscription_group_table() == groups.subscription_group_table()
    assert reloaded.data_version == groups.data_version
    assert reloaded.data_version.timestamp_ms == clock.now_ms()

    groups.path.write_bytes(b'{"subscriptionGroupTable":{"first":')
    from_backup = _manager(tmp_path, clock)
    assert from_backup.find("first") == SubscriptionGroupConfig("first", retry_max_times=4)
    assert from_backup.find("second") is None
    backup_path(groups.path).write_bytes(b"[]")
    with pytest.raises(CorruptDataError):
        _manager(tmp_path, clock)


def test_java_file_loads(tmp_path: Path) -> None:
    path = tmp_path / "config" / "subscriptionGroup.json"
    path.parent.mkdir(parents=True)
    path.write_text(
        '{"dataVersion":{"counter":3,"timestamp":1700000000000},"subscriptionGroupTable":'
        '{"G":{"brokerId":0,"consumeBroadcastEnable":true,"consumeEnable":false,'
        '"consumeFromMinEnable":true,"groupName":"G","notifyConsumerIdsChangedEnable":true,'
        '"retryMaxTimes":7,"retryQueueNums":1,"whichBrokerWhenConsumeSlowly":1}}}'
    )
    groups = _manager(tmp_path)
    assert groups.find("G") == SubscriptionGroupConfig("G", consume_enable=False, retry_max_times=7)
    assert groups.data_version.counter == 4  # the system groups were added
