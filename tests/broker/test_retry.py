"""Send-back: the pure plan, then the service against real managers, a store and the delay
levels on a manual clock — %RETRY% with growing delays, then %DLQ% after the maximum."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from bolide.base.clock import ManualClock
from bolide.broker.config import BrokerConfig
from bolide.broker.delivery import DELIVERED_FROM
from bolide.broker.retry import (
    SendBackService,
    SendBackStatus,
    max_reconsume_times,
    plan_send_back,
)
from bolide.broker.schedule import DelayLevels, ScheduleMessageService
from bolide.broker.subscription_groups import SubscriptionGroupConfig, SubscriptionGroupManager
from bolide.broker.topics import TopicConfigManager
from bolide.protocol.headers import ConsumerSendMsgBackRequestHeader
from bolide.protocol.message import MessageExt, PropertyKey
from bolide.protocol.msgid import offset_message_id
from bolide.protocol.system_topics import SCHEDULE_TOPIC
from bolide.store.api import MessageStore
from bolide.testing.waiting import until

from .delay_support import SEGMENT_BYTES, STORE_HOST, put_request, read_queue, started_store

# 18 levels as RocketMQ's default count, but short, so a test walks all of them quickly.
LEVELS_MS = tuple(100 * level for level in range(1, 19))


def _original(**changes: object) -> MessageExt:
    message = MessageExt(
        "orders",
        b"body",
        flag=3,
        properties={"TAGS": "paid", "UNIQ_KEY": "U1", DELIVERED_FROM: "L2:7"},
        commit_log_offset=4_096,
        store_host=STORE_HOST,
        reconsume_times=0,
    )
    for name, value in changes.items():
        setattr(message, name, value)
    return message


# --- the plan ---------------------------------------------------------------------------------


def test_first_failure_goes_to_retry_at_level_three() -> None:
    plan = plan_send_back(_original(), requested_delay_level=0, max_times=16)
    assert not plan.to_dlq
    assert plan.delay_level == 3 and plan.reconsume_times == 1
    assert plan.properties[PropertyKey.RETRY_TOPIC] == "orders"
    assert plan.properties[PropertyKey.ORIGIN_MESSAGE_ID] == offset_message_id(STORE_HOST, 4_096)
    assert plan.properties[PropertyKey.DELAY] == "3"
    assert plan.properties[PropertyKey.WAIT] == "false"
    assert DELIVERED_FROM not in plan.properties


def test_later_failures_keep_the_first_topic_and_id_and_wait_longer() -> None:
    again = _original(
        topic="%RETRY%billing",
        reconsume_times=4,
        properties={"RETRY_TOPIC": "orders", "ORIGIN_MESSAGE_ID": "ORIGINAL", "TIMER_OUT_MS": "5"},
    )
    plan = plan_send_back(again, requested_delay_level=0, max_times=16)
    assert plan.delay_level == 7 and plan.reconsume_times == 5
    assert plan.properties["RETRY_TOPIC"] == "orders"
    assert plan.properties["ORIGIN_MESSAGE_ID"] == "ORIGINAL"
    assert "TIMER_OUT_MS" not in plan.properties
    assert plan_send_back(again, requested_delay_level=2, max_times=16).delay_level == 2


def test_dead_letter_after_the_maximum_or_on_negative_level() -> None:
    tired = _original(reconsume_times=16, properties={"DELAY": "3"})
    plan = plan_send_back(tired, requested_delay_level=0, max_times=16)
    assert plan.to_dlq and plan.reconsume_times == 17 and "DELAY" not in plan.properties
    assert plan_send_back(_original(), requested_delay_level=-1, max_times=16).to_dlq


def test_max_reconsume_times_comes_from_new_clients_only() -> None:
    group = SubscriptionGroupConfig("g", retry_max_times=5)
    assert max_reconsume_times(group, None, 121) == 5
    assert max_reconsume_times(group, 3, 120) == 5  # old clients: the group decides
    assert max_reconsume_times(group, 3, 121) == 3


# --- the service ------------------------------------------------------------------------------


@dataclass
class Setup:
    clock: ManualClock
    store: MessageStore
    topics: TopicConfigManager
    groups: SubscriptionGroupManager
    service: SendBackService
    schedule: ScheduleMessageService
    registrations: list[str]

    async def settle(self) -> None:
        await until(lambda: self.clock.sleeper_count >= len(LEVELS_MS) + 1)

    async def send_back(
        self,
        offset: int,
        *,
        delay_level: int = 0,
        version: int = 63,
        max_times: int | None = None,
        group: str = "billing",
    ) -> SendBackStatus:
        header = ConsumerSendMsgBackRequestHeader(
            offset, group, delay_level, max_reconsume_times=max_times
        )
        return (await self.service.send_back(header, version)).status


@pytest.fixture
async def setup(tmp_path: Path) -> AsyncIterator[Setup]:
    clock = ManualClock()
    store = await started_store("memory", tmp_path, clock, levels_ms=LEVELS_MS)
    config = BrokerConfig(store_path_root_dir=tmp_path / "store", message_delay_levels_ms=LEVELS_MS)
    topics = TopicConfigManager(config, tmp_path / "topics.json", clock)
    groups = SubscriptionGroupManager(config, tmp_path / "subscriptionGroup.json", clock)
    topics.load()
    groups.load()
    levels = DelayLevels(LEVELS_MS)
    registrations: list[str] = []
    service = SendBackService(
        store, topics, groups, levels,
        register_soon=lambda: registrations.append("now"), rng=random.Random(7),
    )  # fmt: skip
    schedule = ScheduleMessageService(
        store, levels, tmp_path / "delayOffset.json", clock, segment_bytes=SEGMENT_BYTES
    )
    schedule.load()
    await schedule.start()
    yield Setup(clock, store, topics, groups, service, schedule, registrations)
    await schedule.stop()
    await store.shutdown()


async def _consumed(setup: Setup, body: bytes = b"order-17") -> int:
    result = await setup.store.put_message(
        put_request("orders", 0, body, {"TAGS": "paid", "UNIQ_KEY": "U17", "KEYS": "k"})
    )
    return result.commit_log_offset


async def test_send_back_stores_a_delayed_retry_that_arrives_on_the_retry_topic(
    setup: Setup,
) -> None:
    offset = await _consumed(setup)
    assert await setup.send_back(offset) is SendBackStatus.STORED
    retry = setup.topics.find("%RETRY%billing")
    assert retry is not None and retry.perm == 6 and retry.write_queue_count == 1
    assert setup.groups.find("billing") is not None  # auto-created
    assert setup.registrations == ["now"]
    (waiting,) = read_queue(setup.store, SCHEDULE_TOPIC, 2)  # level 3 -> queue 2
    assert waiting.properties[PropertyKey.REAL_TOPIC] == "%RETRY%billing"
    assert waiting.reconsume_times == 1
    await setup.settle()
    setup.clock.advance_ms(299)
    await setup.settle()
    assert setup.store.max_offset("%RETRY%billing", 0) == 0
    setup.clock.advance_ms(1)
    await until(lambda: setup.store.max_offset("%RETRY%billing", 0) == 1)
    (retried,) = read_queue(setup.store, "%RETRY%billing")
    assert retried.body == b"order-17" and retried.reconsume_times == 1
    assert retried.properties[PropertyKey.RETRY_TOPIC] == "orders"
    assert retried.properties[PropertyKey.ORIGIN_MESSAGE_ID] == offset_message_id(
        STORE_HOST, offset
    )
    assert retried.properties["UNIQ_KEY"] == "U17"
    assert retried.properties["TAGS"] == "paid"


async def test_sixteen_failures_end_in_the_write_only_dead_letter_queue(setup: Setup) -> None:
    offset = await _consumed(setup)
    for attempt in range(16):
        assert await setup.send_back(offset) is SendBackStatus.STORED
        level = min(3 + attempt, len(LEVELS_MS))
        await setup.settle()
        setup.clock.advance_ms(LEVELS_MS[level - 1])
        await until(lambda: setup.store.max_offset("%RETRY%billing", 0) > attempt)  # noqa: B023
        retried = read_queue(setup.store, "%RETRY%billing")[attempt]
        assert retried.reconsume_times == attempt + 1
        assert (
            retried.store_timestamp_ms
            - read_queue(setup.store, SCHEDULE_TOPIC, level - 1)[-1].store_timestamp_ms
            == LEVELS_MS[level - 1]
        )
        offset = retried.commit_log_offset  # the consumer fails the retried message again
    assert setup.topics.find("%DLQ%billing") is None
    assert await setup.send_back(offset) is SendBackStatus.STORED
    dlq = setup.topics.find("%DLQ%billing")
    assert dlq is not None and dlq.perm == 2 and dlq.write_queue_count == 1
    (dead,) = read_queue(setup.store, "%DLQ%billing")
    assert dead.body == b"order-17" and dead.reconsume_times == 17
    assert PropertyKey.DELAY not in dead.properties
    assert dead.properties[PropertyKey.RETRY_TOPIC] == "orders"


async def test_a_group_limit_and_a_client_limit(setup: Setup) -> None:
    await setup.groups.update(SubscriptionGroupConfig("strict", retry_max_times=0))
    offset = await _consumed(setup)
    assert await setup.send_back(offset, group="strict") is SendBackStatus.STORED
    assert setup.store.max_offset("%DLQ%strict", 0) == 1
    # A new client's maxReconsumeTimes overrides the group's 16.
    assert await setup.send_back(offset, version=121, max_times=0) is SendBackStatus.STORED
    assert setup.store.max_offset("%DLQ%billing", 0) == 1
    assert await setup.send_back(offset, version=63, max_times=0) is SendBackStatus.STORED
    assert setup.store.max_offset("%DLQ%billing", 0) == 1  # old client: the group's 16


async def test_negative_level_goes_straight_to_the_dead_letters(setup: Setup) -> None:
    offset = await _consumed(setup)
    assert await setup.send_back(offset, delay_level=-1) is SendBackStatus.STORED
    assert setup.store.max_offset("%DLQ%billing", 0) == 1


async def test_requested_level_is_used_and_clamped(setup: Setup) -> None:
    offset = await _consumed(setup)
    assert await setup.send_back(offset, delay_level=99) is SendBackStatus.STORED
    assert setup.store.max_offset(SCHEDULE_TOPIC, len(LEVELS_MS) - 1) == 1


async def test_retry_queue_count_of_the_group(setup: Setup) -> None:
    await setup.groups.update(SubscriptionGroupConfig("wide", retry_queue_count=4))
    await setup.groups.update(SubscriptionGroupConfig("none", retry_queue_count=0))
    offset = await _consumed(setup)
    assert await setup.send_back(offset, group="wide") is SendBackStatus.STORED
    wide = setup.topics.find("%RETRY%wide")
    assert wide is not None and wide.read_queue_count == 4
    assert await setup.send_back(offset, group="none") is SendBackStatus.SKIPPED
    assert setup.topics.find("%RETRY%none") is None


async def test_unknown_offset_and_unknown_group(setup: Setup, tmp_path: Path) -> None:
    assert await setup.send_back(987_654) is SendBackStatus.FAILED
    config = BrokerConfig(store_path_root_dir=tmp_path, auto_create_subscription_group=False)
    closed = SubscriptionGroupManager(config, tmp_path / "closed.json", setup.clock)
    closed.load()
    service = SendBackService(
        setup.store, setup.topics, closed, DelayLevels(LEVELS_MS), register_soon=lambda: None
    )
    header = ConsumerSendMsgBackRequestHeader(await _consumed(setup), "stranger", 0)
    assert (await service.send_back(header, 63)).status is SendBackStatus.NO_GROUP
