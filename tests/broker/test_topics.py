"""TopicConfigManager: system topics, auto-creation (§2.2 step 3), validation, persistence."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from bolide.base.clock import ManualClock
from bolide.base.errors import ConfigError, CorruptDataError
from bolide.base.fileio import backup_path
from bolide.broker.config import BrokerConfig
from bolide.broker.topics import (
    PermName,
    TopicConfig,
    TopicConfigManager,
    TopicValidationCode,
    is_inherited,
    is_readable,
    is_writeable,
    perm_to_text,
    validate_topic,
)
from bolide.protocol.system_topics import (
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    OFFSET_MOVED_EVENT,
    SCHEDULE_TOPIC,
    SELF_TEST_TOPIC,
    dlq_topic,
    is_send_forbidden_topic,
    retry_topic,
)

TBW102 = AUTO_CREATE_TOPIC_KEY_TOPIC


def _manager(
    tmp_path: Path, clock: ManualClock | None = None, **settings: object
) -> TopicConfigManager:
    config = BrokerConfig(store_path_root_dir=tmp_path).replace(**settings)
    manager = TopicConfigManager(
        config, config.config_dir / "topics.json", clock or ManualClock(), max_topics=50
    )
    manager.load()
    return manager


def test_tbw102_exists_with_perm_7_when_auto_create_is_on(tmp_path: Path) -> None:
    topics = _manager(tmp_path)
    tbw = topics.find(TBW102)
    assert tbw is not None
    assert tbw.perm == 7 == PermName.READ | PermName.WRITE | PermName.INHERIT
    assert (tbw.read_queue_count, tbw.write_queue_count) == (8, 8)


def test_tbw102_is_absent_when_auto_create_is_off(tmp_path: Path) -> None:
    topics = _manager(tmp_path, auto_create_topic_enable=False)
    assert topics.find(TBW102) is None
    assert TBW102 not in topics


def test_system_topics_follow_rocketmq_defaults(tmp_path: Path) -> None:
    topics = _manager(tmp_path, broker_name="broker-x", broker_cluster_name="ClusterX")

    def shape(name: str) -> tuple[int, int, int]:
        config = topics.find(name)
        assert config is not None, name
        return config.read_queue_count, config.write_queue_count, config.perm

    assert shape(SELF_TEST_TOPIC) == (1, 1, 6)
    assert shape(OFFSET_MOVED_EVENT) == (1, 1, 6)
    assert shape(SCHEDULE_TOPIC) == (18, 18, 6)
    assert shape("ClusterX") == (16, 16, 7)
    assert shape("broker-x") == (1, 1, 7)
    assert shape("ClusterX_REPLY_TOPIC") == (1, 1, 6)
    assert topics.find("RMQ_SYS_TRACE_TOPIC") is None
    for name in (TBW102, SCHEDULE_TOPIC, "ClusterX", "broker-x", "rmq_sys_anything"):
        assert topics.is_system_topic(name), name
    assert not topics.is_system_topic("orders")

    quiet = _manager(
        tmp_path / "2",
        cluster_topic_enable=False,
        broker_topic_enable=False,
        trace_topic_enable=True,
    )
    assert quiet.find("DefaultCluster") == TopicConfig("DefaultCluster", 16, 16, 1)
    assert quiet.find("broker-a") == TopicConfig("broker-a", 1, 1, 1)
    assert quiet.find("RMQ_SYS_TRACE_TOPIC") == TopicConfig("RMQ_SYS_TRACE_TOPIC", 1, 1, 6)


async def test_auto_create_takes_min_of_requested_and_default_queues(tmp_path: Path) -> None:
    topics = _manager(tmp_path)
    version_before = topics.data_version.counter
    creation = await topics.create_topic_in_send("orders", TBW102, 4)
    assert creation.created
    assert creation.config == TopicConfig("orders", 4, 4, 6)
    assert topics.data_version.counter == version_before + 1
    again = await topics.create_topic_in_send("orders", TBW102, 4)
    assert not again.created
    assert again.config == creation.config
    assert topics.data_version.counter == version_before + 1

    wide = await topics.create_topic_in_send("wide", TBW102, 16, topic_sys_flag=1)
    assert wide.config == TopicConfig("wide", 8, 8, 6, topic_sys_flag=1)


async def test_auto_create_is_refused_without_inherit_or_without_default(tmp_path: Path) -> None:
    topics = _manager(tmp_path)
    await topics.update_topic_config(TopicConfig("plain", 8, 8, 6))
    refused = await topics.create_topic_in_send("orders", "plain", 4)
    assert refused.config is None and not refused.created
    assert "INHERIT" in refused.reason
    missing = await topics.create_topic_in_send("orders", "no-such-template", 4)
    assert missing.config is None
    assert "does not exist" in missing.reason
    assert topics.find("orders") is None

    off = _manager(tmp_path / "off", auto_create_topic_enable=False)
    assert (await off.create_topic_in_send("orders", TBW102, 4)).config is None


async def test_user_template_with_inherit_passes_its_perm_without_inherit(tmp_path: Path) -> None:
    topics = _manager(tmp_path)
    await topics.update_topic_config(TopicConfig("read-only-template", 2, 2, 5))
    creation = await topics.create_topic_in_send("child", "read-only-template", 4)
    assert creation.config == TopicConfig("child", 2, 2, 4)


async def test_retry_topic_falls_back_to_one_queue_read_write(tmp_path: Path) -> None:
    topics = _manager(tmp_path, auto_create_topic_enable=False)
    creation = await topics.create_topic_in_send("%RETRY%billing", TBW102, 4)
    assert creation.created
    assert creation.config == TopicConfig("%RETRY%billing", 1, 1, 6)


async def test_retry_and_dlq_topics(tmp_path: Path) -> None:
    topics = _manager(tmp_path)
    retry = await topics.create_retry_topic("billing", 1)
    assert retry.created and retry.config == TopicConfig(retry_topic("billing"), 1, 1, 6)
    assert retry_topic("billing") == "%RETRY%billing"
    dlq = await topics.create_dlq_topic("billing")
    assert dlq.created and dlq.config == TopicConfig(dlq_topic("billing"), 1, 1, 2)  # write-only
    assert dlq_topic("billing") == "%DLQ%billing"
    assert not (await topics.create_dlq_topic("billing")).created
    assert (await topics.create_retry_topic("bad group", 1)).config is None
    assert (await topics.create_retry_topic("none", 0)).config is None


async def test_concurrent_creations_of_one_topic_create_it_once(tmp_path: Path) -> None:
    topics = _manager(tmp_path)
    results = await asyncio.gather(
        *(topics.create_topic_in_send("orders", TBW102, 4) for _ in range(5))
    )
    assert sum(result.created for result in results) == 1
    assert {result.config for result in results} == {TopicConfig("orders", 4, 4, 6)}


async def test_table_is_bounded(tmp_path: Path) -> None:
    topics = _manager(tmp_path)
    room = 50 - len(topics)
    for index in range(room):
        assert (await topics.create_topic_in_send(f"t{index}", TBW102, 1)).created
    full = await topics.create_topic_in_send("one-too-many", TBW102, 1)
    assert full.config is None and "50 topics" in full.reason
    with pytest.raises(ConfigError):
        await topics.update_topic_config(TopicConfig("admin-too-many", 1, 1))


@pytest.mark.parametrize(
    ("topic", "code"),
    [
        ("orders", TopicValidationCode.VALID),
        ("%RETRY%billing", TopicValidationCode.VALID),
        ("a|b_c-D9", TopicValidationCode.VALID),
        ("x" * 127, TopicValidationCode.VALID),
        ("", TopicValidationCode.BLANK),
        ("   ", TopicValidationCode.BLANK),
        ("has space", TopicValidationCode.ILLEGAL_CHARACTERS),
        ("dot.ted", TopicValidationCode.ILLEGAL_CHARACTERS),
        ("orders\n", TopicValidationCode.ILLEGAL_CHARACTERS),
        ("caf\u00e9", TopicValidationCode.ILLEGAL_CHARACTERS),
        ("x" * 128, TopicValidationCode.TOO_LONG),
    ],
)
def test_validation_codes(topic: str, code: TopicValidationCode) -> None:
    validation = validate_topic(topic)
    assert validation.code is code
    assert validation.ok is (code is TopicValidationCode.VALID)
    assert bool(validation.reason) is not validation.ok


def test_permissions_and_send_forbidden_topics() -> None:
    assert is_readable(6) and is_writeable(6) and not is_inherited(6)
    assert is_inherited(7)
    assert not is_writeable(4) and not is_readable(2)
    assert perm_to_text(7) == "RWX"
    assert perm_to_text(6) == "RW-"
    assert perm_to_text(4) == "R--"
    for topic in (SCHEDULE_TOPIC, SELF_TEST_TOPIC, OFFSET_MOVED_EVENT, "RMQ_SYS_TRANS_HALF_TOPIC"):
        assert is_send_forbidden_topic(topic)
    assert not is_send_forbidden_topic(TBW102)
    assert not is_send_forbidden_topic("orders")


async def test_admin_update_and_delete(tmp_path: Path) -> None:
    topics = _manager(tmp_path)
    assert await topics.update_topic_config(TopicConfig("orders", 8, 8, 6, order=True))
    assert topics.is_order_topic("orders")
    assert not await topics.update_topic_config(TopicConfig("orders", 8, 4, 6))
    assert topics.find("orders") == TopicConfig("orders", 8, 4, 6)
    assert not topics.is_order_topic("orders")
    for bad in (
        TopicConfig("bad name", 1, 1),
        TopicConfig(SCHEDULE_TOPIC, 1, 1),
        TopicConfig(TBW102, 4, 4, 7),
        TopicConfig("too-many", 1025, 1),
        TopicConfig("perm", 1, 1, 16),
        TopicConfig("filter", 1, 1, topic_filter_type="REGEX"),
    ):
        with pytest.raises(ConfigError):
            await topics.update_topic_config(bad)
    assert await topics.delete_topic("orders")
    assert not await topics.delete_topic("orders")
    with pytest.raises(ConfigError):
        await topics.delete_topic(SCHEDULE_TOPIC)
    assert "orders" not in topics.topic_names()


async def test_persistence_round_trip_with_data_version(tmp_path: Path) -> None:
    clock = ManualClock()
    topics = _manager(tmp_path, clock)
    clock.advance_ms(1_234)
    await topics.create_topic_in_send("orders", TBW102, 4)
    await topics.update_topic_config(TopicConfig("payments", 2, 2, 6, "MULTI_TAG", 0, True))
    document = json.loads(topics.path.read_bytes())
    assert document["dataVersion"] == {
        "counter": topics.data_version.counter,
        "timestamp": clock.now_ms(),
    }
    assert document["topicConfigTable"]["orders"] == {
        "order": False,
        "perm": 6,
        "readQueueNums": 4,
        "topicFilterType": "SINGLE_TAG",
        "topicName": "orders",
        "topicSysFlag": 0,
        "writeQueueNums": 4,
    }
    reloaded = _manager(tmp_path, clock)
    assert reloaded.topic_config_table() == topics.topic_config_table()
    assert reloaded.data_version == topics.data_version
    assert reloaded.wrapper().to_json() == topics.encode()


async def test_damaged_topics_json_falls_back_to_bak(tmp_path: Path) -> None:
    topics = _manager(tmp_path)
    await topics.create_topic_in_send("first", TBW102, 4)
    await topics.create_topic_in_send("second", TBW102, 4)
    topics.path.write_bytes(b'{"dataVersion":{"counter":3,"timest')
    reloaded = _manager(tmp_path)
    assert reloaded.find("first") is not None
    assert reloaded.find("second") is None  # the .bak holds the state before the last write
    backup_path(topics.path).write_bytes(b"\x00\x00")
    with pytest.raises(CorruptDataError):
        _manager(tmp_path)


async def test_stored_tbw102_is_dropped_when_auto_create_is_turned_off(tmp_path: Path) -> None:
    topics = _manager(tmp_path)
    await topics.create_topic_in_send("orders", TBW102, 4)
    assert TBW102 in json.loads(topics.path.read_bytes())["topicConfigTable"]
    off = _manager(tmp_path, auto_create_topic_enable=False)
    assert off.find(TBW102) is None
    assert off.find("orders") is not None
    assert off.data_version.counter == topics.data_version.counter + 1
    assert await off.persist()
    assert TBW102 not in json.loads(off.path.read_bytes())["topicConfigTable"]


def test_java_topics_json_loads_and_stored_system_topics_are_kept(tmp_path: Path) -> None:
    path = tmp_path / "config" / "topics.json"
    path.parent.mkdir(parents=True)
    path.write_text(
        '{"dataVersion":{"counter":5,"timestamp":1700000000000},"topicConfigTable":{'
        '"T":{"order":false,"perm":6,"readQueueNums":4,"topicFilterType":"SINGLE_TAG",'
        '"topicName":"T","topicSysFlag":0,"writeQueueNums":4},'
        '"TBW102":{"order":false,"perm":7,"readQueueNums":2,"topicFilterType":"SINGLE_TAG",'
        '"topicName":"TBW102","topicSysFlag":0,"writeQueueNums":2}}}'
    )
    topics = _manager(tmp_path)
    assert topics.find("T") == TopicConfig("T", 4, 4, 6)
    assert topics.find(TBW102) == TopicConfig(TBW102, 2, 2, 7)  # the stored one wins
    assert topics.data_version.counter == 6  # system topics were added on load
    assert topics.find(SCHEDULE_TOPIC) is not None


async def test_registration_announces_broker_permission_when_restricted(tmp_path: Path) -> None:
    topics = _manager(tmp_path)
    await topics.update_topic_config(TopicConfig("orders", 4, 2, 6, order=True))
    normal = topics.registration_wrapper(6)
    assert normal.topic_config_table["orders"] == TopicConfig("orders", 4, 2, 6, order=True)
    assert normal.data_version == topics.data_version
    read_only = topics.registration_wrapper(4)
    assert read_only.topic_config_table["orders"] == TopicConfig("orders", 4, 2, 4)
    assert {config.perm for config in read_only.topic_config_table.values()} == {4}
    assert topics.find("orders") == TopicConfig("orders", 4, 2, 6, order=True)
