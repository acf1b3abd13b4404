"""Delayed and timer messages, send-back, %RETRY% and %DLQ% over real sockets, against an
in-process name server and broker (short custom delay levels "1s 2s").

Waits are long polls (a suspended PULL_MESSAGE answers when the message lands), never sleeps.
Where a test checks *when* a message was delivered it runs the cluster on a manual clock
(``timed`` fixture), moves it to the due millisecond and reads the timestamps the broker
stored (delivery time in the consume queue, store time of the delivered record): no stopwatch
and no bound on how late the loop woke.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import orjson
import pytest

from bolide.base.clock import ManualClock
from bolide.broker.delivery import DELIVERED_FROM, TIMER_OUT_MS
from bolide.broker.timer import TIMER_TOPIC
from bolide.protocol.bodies import SubscriptionGroupConfig
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import ConsumerSendMsgBackRequestHeader, PullSysFlag
from bolide.protocol.message import MessageExt, PropertyKey
from bolide.protocol.msgid import offset_message_id
from bolide.protocol.system_topics import SCHEDULE_TOPIC
from bolide.testing.cluster import Cluster
from tests.integration.wire import BrokerWire, batch_request, connected, pull_request, records

pytestmark = pytest.mark.timeout(120)

LEVELS = "1s 2s"
LONG_POLL = PullSysFlag.SUBSCRIPTION | PullSysFlag.SUSPEND
_SETTLE_TURNS = 50
"""Loop turns after moving the manual clock: the woken timer's put is a few awaits deep."""


@pytest.fixture
async def wired(tmp_path: Path) -> AsyncIterator[tuple[Cluster, BrokerWire]]:
    async with connected(tmp_path, settings={"messageDelayLevel": LEVELS}) as pair:
        yield pair


@pytest.fixture
async def timed(tmp_path: Path) -> AsyncIterator[tuple[Cluster, BrokerWire, ManualClock]]:
    """The cluster of ``wired`` on a manual clock, started at the system's time."""
    clock = ManualClock(start_ms=time.time_ns() // 1_000_000)
    settings = {"messageDelayLevel": LEVELS}
    async with connected(tmp_path, settings=settings, clock=clock) as (cluster, wire):
        yield cluster, wire, clock


async def _next_message(
    wire: BrokerWire, topic: str, queue_id: int = 0, offset: int = 0, group: str = "CG_WAIT"
) -> MessageExt:
    """Long-poll ``topic``/``queue_id`` from ``offset`` until a message is there."""
    for _ in range(8):  # each poll holds up to 15 s; a few rounds bound the wait
        request = pull_request(topic, queue_id, offset, group=group, sys_flag=LONG_POLL,
                               max_messages=1, suspend_timeout_ms=15_000)  # fmt: skip
        response = await wire.invoke(request, timeout_ms=30_000)
        if response.code == ResponseCode.SUCCESS:
            return records(response)[0]
        assert response.code == ResponseCode.PULL_NOT_FOUND, response.remark
    raise AssertionError(f"nothing arrived on {topic}/{queue_id} at {offset}")


async def _advance_to(clock: ManualClock, now_ms: int) -> None:
    """Move ``clock`` to ``now_ms`` and let the broker's timers run what became due (they wake
    on the clock; a few loop turns run their callbacks)."""
    clock.set_ms(now_ms)
    for _ in range(_SETTLE_TURNS):
        await asyncio.sleep(0)


def _send_back_request(offset: int, group: str, delay_level: int = 0) -> RemotingCommand:
    # The C++ client's shape: group, offset and delayLevel only.
    fields = ConsumerSendMsgBackRequestHeader(offset, group, delay_level).to_ext_fields()
    for absent in ("unitMode",):
        fields.pop(absent, None)
    return RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, fields)


async def test_a_delayed_message_lands_on_its_topic_when_its_level_is_due(
    timed: tuple[Cluster, BrokerWire, ManualClock],
) -> None:
    cluster, wire, clock = timed
    response = await wire.send(
        "delayed", b"in two seconds", tags="T", keys="k1", properties={"DELAY": "2"}
    )
    assert response.code == ResponseCode.SUCCESS, response.remark
    store = cluster.brokers[0].context.store
    ((_, _, deliver_ms),) = store.consume_queue_entries(SCHEDULE_TOPIC, 1, 0, 1)
    await _advance_to(clock, deliver_ms - 1)
    assert store.max_offset("delayed", 0) == 0  # one millisecond early: still waiting
    await _advance_to(clock, deliver_ms)
    message = await _next_message(wire, "delayed")
    assert message.body == b"in two seconds" and message.tags == "T" and message.keys == "k1"
    assert PropertyKey.DELAY not in message.properties
    assert message.properties[PropertyKey.REAL_TOPIC] == "delayed"
    assert message.properties[DELIVERED_FROM] == "L2:0"
    assert message.store_timestamp_ms == deliver_ms  # the clock stands at the due millisecond
    scheduled_at = store.store_time_at(SCHEDULE_TOPIC, 1, 0)
    assert deliver_ms == scheduled_at + 2_000


async def test_a_level_above_the_highest_waits_the_highest(
    wired: tuple[Cluster, BrokerWire],
) -> None:
    cluster, wire = wired
    response = await wire.send("clamped", b"x", properties={"DELAY": "18"})
    assert response.code == ResponseCode.SUCCESS, response.remark
    store = cluster.brokers[0].context.store
    assert store.max_offset(SCHEDULE_TOPIC, 1) == 1  # level 2 = the highest of "1s 2s"
    message = await _next_message(wire, "clamped")
    assert message.store_timestamp_ms >= store.store_time_at(SCHEDULE_TOPIC, 1, 0) + 2_000


async def test_a_timer_message_lands_at_its_millisecond(
    timed: tuple[Cluster, BrokerWire, ManualClock],
) -> None:
    cluster, wire, clock = timed
    response = await wire.send("timed", b"soon", properties={"TIMER_DELAY_MS": "1234"})
    assert response.code == ResponseCode.SUCCESS, response.remark
    store = cluster.brokers[0].context.store
    assert store.max_offset(TIMER_TOPIC, 0) == 1
    enqueued_at = store.store_time_at(TIMER_TOPIC, 0, 0)
    await _advance_to(clock, enqueued_at + 1_233)
    assert store.max_offset("timed", 0) == 0  # not before its millisecond
    await _advance_to(clock, enqueued_at + 1_234)
    message = await _next_message(wire, "timed")
    deliver_ms = int(message.properties[TIMER_OUT_MS])
    assert enqueued_at < deliver_ms <= enqueued_at + 1_234
    assert message.store_timestamp_ms == enqueued_at + 1_234  # when the clock reached it
    assert PropertyKey.TIMER_DELAY_MS not in message.properties


async def test_timer_and_delay_misuse_is_refused(wired: tuple[Cluster, BrokerWire]) -> None:
    _, wire = wired
    too_far = await wire.send("timed", b"x", properties={"TIMER_DELAY_SEC": str(4 * 86_400)})
    assert too_far.code == ResponseCode.MESSAGE_ILLEGAL
    assert too_far.ext_fields["MSG_REGION"] == "DefaultRegion"
    garbage = await wire.send("timed", b"x", properties={"TIMER_DELIVER_MS": "tomorrow"})
    assert garbage.code == ResponseCode.MESSAGE_ILLEGAL
    direct = await wire.send(TIMER_TOPIC, b"x")
    assert direct.code == ResponseCode.NO_PERMISSION
    batch = await wire.invoke(batch_request("timed", [b"a", b"b"], extra={"TIMER_DELAY_MS": "5"}))
    assert batch.code == ResponseCode.MESSAGE_ILLEGAL
    forged = await wire.send("plain", b"x", properties={DELIVERED_FROM: "L1:999999"})
    assert forged.code == ResponseCode.SUCCESS
    stored = await _next_message(wire, "plain")
    assert DELIVERED_FROM not in stored.properties  # producers cannot forge delivery markers


async def test_send_back_goes_through_retry_then_to_the_dead_letter_queue(
    wired: tuple[Cluster, BrokerWire],
) -> None:
    cluster, wire = wired
    broker = cluster.brokers[0]
    limit = SubscriptionGroupConfig("billing", retry_max_times=1, consume_orderly_enable=True)
    update = await wire.invoke(
        RemotingCommand.request(
            RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=limit.to_json()
        )
    )
    assert update.code == ResponseCode.SUCCESS, update.remark
    assert (await wire.send("orders", b"order-17", tags="paid")).code == ResponseCode.SUCCESS
    original = await _next_message(wire, "orders")

    first = await wire.invoke(_send_back_request(original.commit_log_offset, "billing"))
    assert first.code == ResponseCode.SUCCESS, first.remark
    retry = broker.context.topics.find("%RETRY%billing")
    assert retry is not None and retry.perm == 6
    retried = await _next_message(wire, "%RETRY%billing", group="billing")
    assert retried.body == b"order-17" and retried.reconsume_times == 1
    assert retried.properties[PropertyKey.RETRY_TOPIC] == "orders"
    assert retried.properties[PropertyKey.ORIGIN_MESSAGE_ID] == offset_message_id(
        ("127.0.0.1", broker.port), original.commit_log_offset
    )
    # Level 3 + 0 is clamped to the highest level (2 s).
    ((_, _, deliver_ms),) = broker.context.store.consume_queue_entries(SCHEDULE_TOPIC, 1, 0, 1)
    assert retried.store_timestamp_ms >= deliver_ms

    second = await wire.invoke(_send_back_request(retried.commit_log_offset, "billing"))
    assert second.code == ResponseCode.SUCCESS, second.remark
    dlq = broker.context.topics.find("%DLQ%billing")
    assert dlq is not None and dlq.perm == 2 and dlq.read_queue_count == 1  # write-only
    refused = await wire.pull("%DLQ%billing", 0, 0, group="billing")
    assert refused.code == ResponseCode.NO_PERMISSION
    store = broker.context.store
    (dead_view,) = store.get_message("%DLQ%billing", 0, 0, 1, 1 << 20).buffers
    (dead,) = records(RemotingCommand(0, body=bytes(dead_view)))
    assert dead.body == b"order-17" and dead.reconsume_times == 2

    groups = await wire.invoke(
        RemotingCommand.request(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
    )
    table = orjson.loads(groups.body)["subscriptionGroupTable"]
    assert table["billing"]["retryMaxTimes"] == 1
    assert table["billing"]["consumeOrderlyEnable"] is True


async def test_send_back_of_an_unknown_offset_is_a_system_error(
    wired: tuple[Cluster, BrokerWire],
) -> None:
    _, wire = wired
    response = await wire.invoke(_send_back_request(123_456_789, "billing"))
    assert response.code == ResponseCode.SYSTEM_ERROR
    assert response.remark is not None and "look message by offset failed" in response.remark


async def test_group_settings_survive_a_restart(tmp_path: Path) -> None:
    custom = SubscriptionGroupConfig(
        "custom",
        retry_max_times=3,
        retry_queue_count=2,
        consume_enable=False,
        consume_broadcast_enable=False,
        consume_orderly_enable=True,
    )
    async with connected(tmp_path) as (_, wire):
        request = RemotingCommand.request(
            RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=custom.to_json()
        )
        assert (await wire.invoke(request)).code == ResponseCode.SUCCESS
        bad = RemotingCommand.request(
            RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
            body=b'{"groupName":"x","retryQueueNums":-1}',
        )
        assert (await wire.invoke(bad)).code == ResponseCode.SYSTEM_ERROR
    async with connected(tmp_path) as (cluster, wire):
        assert cluster.brokers[0].context.groups.find("custom") == custom
        refused = await wire.pull("anything", 0, 0, group="custom")
        assert refused.code == ResponseCode.NO_PERMISSION  # consumeEnable=false


async def test_delay_offsets_are_served(wired: tuple[Cluster, BrokerWire]) -> None:
    _, wire = wired
    assert (await wire.send("delayed", b"x", properties={"DELAY": "1"})).code == 0
    await _next_message(wire, "delayed")
    response = await wire.invoke(RemotingCommand.request(RequestCode.GET_ALL_DELAY_OFFSET))
    assert response.code == ResponseCode.SUCCESS
    assert orjson.loads(response.body)["offsetTable"] == {"1": 1, "2": 0}
