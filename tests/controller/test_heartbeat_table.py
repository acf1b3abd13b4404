"""The controller's heartbeat table is bounded: a peer inventing broker ids cannot grow it past
its limit, while replicas already tracked keep beating and timed-out ones make room."""

from __future__ import annotations

from bolide.base import limits
from bolide.base.clock import ManualClock
from bolide.controller.heartbeats import BrokerLiveInfo, HeartbeatTable


def _beat(broker_id: int, timeout_ms: int = 10_000) -> BrokerLiveInfo:
    return BrokerLiveInfo(
        "DefaultCluster", "broker-a", broker_id, f"127.0.0.1:{20_000 + broker_id}",
        0, timeout_ms, 1, 0, 0, 1, None,
    )  # fmt: skip


def test_a_full_table_refuses_new_replicas_and_keeps_the_tracked_ones() -> None:
    clock = ManualClock()
    table = HeartbeatTable(clock, max_entries=3)
    assert all(table.beat(_beat(broker_id)) for broker_id in (1, 2, 3))
    assert not table.beat(_beat(4))
    assert table.get("broker-a", 4) is None and len(table) == 3
    clock.advance_ms(5_000)
    assert table.beat(_beat(2))  # a tracked replica always beats
    clock.advance_ms(6_000)  # 1 and 3 timed out; 2 is alive
    assert table.beat(_beat(4))
    gone = table.expire()  # what the controller's scan does: 1 and 3 become inactive
    assert sorted(info.broker_id for info in gone) == [1, 3]
    assert table.beat(_beat(5))
    assert not table.beat(_beat(6))
    assert sorted(info.broker_id for info in table.alive_in("broker-a")) == [2, 4, 5]


def test_the_default_bound_is_the_named_limit() -> None:
    assert (
        HeartbeatTable(ManualClock()).max_entries == limits.CONTROLLER_HEARTBEAT_TABLE_MAX_ENTRIES
    )
