"""Which broker of a name a consumer pulls from: the last suggestion (suggestWhichBrokerId),
the slave when the master cannot be reached, and no committed offset on pulls to a slave."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from bolide.base.clock import ManualClock
from bolide.base.errors import ConnectionClosedError
from bolide.client import rpc
from bolide.client.consumer.instance_ports import InstancePullClient
from bolide.client.rpc import PullResult, PullStatus
from bolide.protocol.bodies import MessageQueue
from bolide.protocol.headers import PullMessageRequestHeader, PullSysFlag

MASTER, SLAVE = "10.0.0.1:10911", "10.0.0.2:10911"
QUEUE = MessageQueue("orders", "broker-a", 0)


class FakeBrokers:
    """Answers pulls per address: the suggestion to give, or unreachable."""

    def __init__(self) -> None:
        self.suggest = {MASTER: 0, SLAVE: 0}
        self.down: set[str] = set()
        self.pulls: list[tuple[str, int]] = []

    async def pull_message(
        self, pool: Any, address: str, header: PullMessageRequestHeader, timeout_ms: int
    ) -> PullResult:
        if address in self.down:
            raise ConnectionClosedError(f"cannot connect to {address}")
        self.pulls.append((address, header.sys_flag))
        return PullResult(PullStatus.NO_NEW_MSG, 0, 0, 0, self.suggest[address])


@pytest.fixture
def brokers(monkeypatch: pytest.MonkeyPatch) -> FakeBrokers:
    fake = FakeBrokers()
    monkeypatch.setattr(rpc, "pull_message", fake.pull_message)
    return fake


def _client(clock: ManualClock) -> InstancePullClient:
    routes = SimpleNamespace(brokers={"broker-a": {0: MASTER, 1: SLAVE}})
    instance = SimpleNamespace(routes=routes, clock=clock, pool=None)
    return InstancePullClient(instance)  # type: ignore[arg-type]


def _header() -> PullMessageRequestHeader:
    flags = PullSysFlag.COMMIT_OFFSET | PullSysFlag.SUSPEND
    return PullMessageRequestHeader(
        consumer_group="billing",
        topic="orders",
        queue_id=0,
        queue_offset=0,
        max_messages=32,
        sys_flag=int(flags),
        commit_offset=12,
        suspend_timeout_ms=15_000,
        sub_version=0,
    )


async def test_the_suggestion_is_followed_and_a_slave_gets_no_commit_offset(
    brokers: FakeBrokers,
) -> None:
    client = _client(ManualClock())
    await client.pull_message(QUEUE, _header(), 1_000)
    brokers.suggest[MASTER] = 1  # far behind: read from the slave
    await client.pull_message(QUEUE, _header(), 1_000)
    await client.pull_message(QUEUE, _header(), 1_000)  # the slave suggests 0 back
    await client.pull_message(QUEUE, _header(), 1_000)
    addresses = [address for address, _ in brokers.pulls]
    assert addresses == [MASTER, MASTER, SLAVE, MASTER]
    commit = int(PullSysFlag.COMMIT_OFFSET)
    assert [bool(flags & commit) for _, flags in brokers.pulls] == [True, True, False, True]


async def test_an_unreachable_master_sends_pulls_to_the_slave_for_a_while(
    brokers: FakeBrokers,
) -> None:
    clock = ManualClock()
    client = _client(clock)
    brokers.down.add(MASTER)
    await client.pull_message(QUEUE, _header(), 1_000)  # retried on the slave at once
    await client.pull_message(QUEUE, _header(), 1_000)  # the master is avoided
    assert [address for address, _ in brokers.pulls] == [SLAVE, SLAVE]
    brokers.down.clear()
    clock.advance_ms(10_001)
    await client.pull_message(QUEUE, _header(), 1_000)
    assert brokers.pulls[-1][0] == MASTER


async def test_with_no_other_address_the_error_reaches_the_pull_loop(
    brokers: FakeBrokers,
) -> None:
    client = _client(ManualClock())
    brokers.down.update({MASTER, SLAVE})
    with pytest.raises(ConnectionClosedError):
        await client.pull_message(QUEUE, _header(), 1_000)
