"""The controller's heartbeat table is bounded and every entry expires (issue 25): a sender of
904 with random broker ids cannot grow it past CONTROLLER_HEARTBEAT_TABLE_MAX_ENTRIES, and a
huge heartbeatTimeoutMills is clamped so its entry still expires."""

from __future__ import annotations

import random

import pytest

from bolide.base import limits
from bolide.base.clock import ManualClock
from bolide.controller.heartbeats import BrokerLiveInfo, HeartbeatTable
from bolide.controller.settings import ControllerSettings
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers.controller import BrokerHeartbeatRequestHeader
from bolide.testing.etcd import EtcdCluster
from bolide.testing.waiting import until
from tests.controller.support import CLUSTER, FakeBroker, running_controller, wait_leader

pytestmark = pytest.mark.timeout(120)

INT_MAX = 2**31 - 1


def _info(broker_name: str, broker_id: int, timeout_ms: int) -> BrokerLiveInfo:
    return BrokerLiveInfo(
        CLUSTER, broker_name, broker_id, f"127.0.0.1:{10_000 + broker_id}",
        0, timeout_ms, 0, 0, 0, 0, None,
    )  # fmt: skip


def test_full_table_refuses_new_replicas_but_keeps_known_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(limits, "CONTROLLER_HEARTBEAT_TABLE_MAX_ENTRIES", 8)
    clock = ManualClock()
    table = HeartbeatTable(clock)
    for broker_id in range(8):
        assert table.beat(_info("broker-a", broker_id, 1_000))
    assert not table.beat(_info("broker-a", 99, 1_000))
    assert not table.beat(_info("broker-z", 0, 1_000))
    assert len(table) == 8 and not table.is_alive("broker-a", 99)
    assert table.beat(_info("broker-a", 3, 5_000))  # a known replica still beats
    clock.advance_ms(2_000)
    gone = table.expire()
    assert sorted(info.broker_id for info in gone) == [0, 1, 2, 4, 5, 6, 7]
    assert table.beat(_info("broker-a", 99, 1_000))  # room again once entries expired
    assert len(table) == 2


def test_huge_timeout_is_clamped_so_the_entry_expires() -> None:
    clock = ManualClock()
    table = HeartbeatTable(clock)
    assert table.beat(_info("broker-a", 1, INT_MAX))
    info = table.get("broker-a", 1)
    assert info is not None
    assert info.heartbeat_timeout_ms == limits.CONTROLLER_BROKER_HEARTBEAT_TIMEOUT_MAX_MS
    clock.advance_ms(limits.CONTROLLER_BROKER_HEARTBEAT_TIMEOUT_MAX_MS + 1)
    assert [i.broker_id for i in table.expire()] == [1]
    assert len(table) == 0


async def test_random_broker_ids_over_the_port_stay_bounded(
    etcd: EtcdCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(limits, "CONTROLLER_HEARTBEAT_TABLE_MAX_ENTRIES", 16)
    settings = ControllerSettings(scan_not_active_broker_interval_ms=100)
    rng = random.Random(25)
    async with running_controller(etcd.endpoints, settings) as controller:
        await wait_leader(controller)
        fuzzer = FakeBroker(controller.address, "fuzz", "127.0.0.1:1")
        broker = FakeBroker(controller.address, "broker-a", "127.0.0.1:20001")
        try:
            codes = []
            for index in range(64):
                header = BrokerHeartbeatRequestHeader(
                    CLUSTER, "127.0.0.1:1", f"fuzz-{rng.randrange(1 << 30)}",
                    rng.randrange(1 << 62), heartbeat_timeout_ms=1 if index % 2 else INT_MAX,
                )  # fmt: skip
                request = RemotingCommand.request(
                    RequestCode.BROKER_HEARTBEAT, header.to_ext_fields()
                )
                codes.append((await fuzzer.call(request.code, request.ext_fields)).code)
                assert len(controller.heartbeats) <= 16
            assert codes.count(ResponseCode.SUCCESS) == 16
            assert ResponseCode.SYSTEM_BUSY in codes
            assert controller.heartbeats_refused == 48
            await until(lambda: len(controller.heartbeats) == 8)  # the 1 ms ones expired
            assert all(
                info.heartbeat_timeout_ms == limits.CONTROLLER_BROKER_HEARTBEAT_TIMEOUT_MAX_MS
                for info in controller.heartbeats.entries()
            )
            await fuzzer.die()  # its connection closes: every entry it made is dropped
            await until(lambda: len(controller.heartbeats) == 0)
            assert await broker.join() == 1  # a real replica is admitted again
            await broker.seen_by(controller)
        finally:
            await fuzzer.die()
            await broker.die()
