"""Fast convergence after a failover: the client refreshes a topic's route at once after a
connection error or a not-master answer (bounded per topic), not at its 30 s poll.

The producers here run on a manual clock that never advances, so their 30 s route poll never
runs: only the immediate refresh can find the new master.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bolide.base import limits
from bolide.base.clock import ManualClock
from bolide.base.errors import ConnectionClosedError, RemoteError, RequestTimeoutError
from bolide.client.message import Message
from bolide.client.producer.producer import Producer
from bolide.client.route import suggests_stale_route
from bolide.protocol.codes import ResponseCode
from bolide.testing.cluster import Cluster
from tests.client.conftest import create_topic, eventually

pytestmark = pytest.mark.timeout(60)


def test_which_failures_suggest_a_stale_route() -> None:
    assert suggests_stale_route(ConnectionClosedError("refused"))
    assert suggests_stale_route(RequestTimeoutError("silent"))
    # a slave (or a deposed master turned slave) refuses a send with SERVICE_NOT_AVAILABLE
    assert suggests_stale_route(RemoteError(ResponseCode.SERVICE_NOT_AVAILABLE, "slave"))
    assert not suggests_stale_route(RemoteError(ResponseCode.MESSAGE_ILLEGAL, "bad"))
    assert not suggests_stale_route(RemoteError(ResponseCode.FLUSH_SLAVE_TIMEOUT, "slow"))


async def _replace_master(cluster: Cluster, tmp_path: Path, producer: Producer) -> str:
    """Stop broker-a and start a new broker-a master elsewhere; returns its address once the
    name server routes the topic to it (the producer's stored route still names the old)."""
    old = cluster.broker("broker-a")
    await old.stop()
    cluster.brokers.remove(old)
    new = await cluster.add_broker("broker-a", store_path_root_dir=tmp_path / "new" / "store")
    await create_topic(producer.instance, new.address, "failover")

    async def routed_to_new() -> bool:
        data = await producer.instance.fetch_route("failover")
        return any(b.broker_addrs.get(0) == new.address for b in data.broker_datas)

    await eventually(routed_to_new)
    assert producer.instance.routes.master_address("broker-a") == old.address
    return new.address


async def test_a_send_after_the_master_moved_reaches_the_new_master(tmp_path: Path) -> None:
    clock = ManualClock()
    async with (
        Cluster(tmp_path) as cluster,
        Producer("pg", namesrv=cluster.namesrv_address, clock=clock) as producer,
    ):
        await create_topic(producer.instance, cluster.broker("broker-a").address, "failover")
        await eventually(lambda: _has_route(producer))
        first = await producer.send(Message("failover", b"before"))
        assert first.queue.broker_name == "broker-a"
        new_address = await _replace_master(cluster, tmp_path, producer)
        result = await producer.send(Message("failover", b"after"))
        assert result.status.name == "SEND_OK"
        assert producer.instance.routes.master_address("broker-a") == new_address
        assert producer.instance.urgent_route_refreshes == 1


async def _has_route(producer: Producer) -> bool:
    route = await producer.instance.update_route("failover")
    return route is not None and bool(route.publish_queues)


async def test_refreshes_are_bounded_per_topic(tmp_path: Path) -> None:
    clock = ManualClock()
    async with (
        Cluster(tmp_path) as cluster,
        Producer("pg", namesrv=cluster.namesrv_address, clock=clock) as producer,
    ):
        instance = producer.instance
        await create_topic(instance, cluster.broker("broker-a").address, "failover")
        await eventually(lambda: _has_route(producer))
        old_address = instance.routes.master_address("broker-a")
        await instance.refresh_route_after_failure("failover")  # fetch 1, route unchanged
        new_address = await _replace_master(cluster, tmp_path, producer)
        # within the interval a second failure does not ask the name server again
        clock.advance_ms(limits.ROUTE_REFRESH_MIN_INTERVAL_MS - 1)
        await instance.refresh_route_after_failure("failover")
        assert instance.routes.master_address("broker-a") == old_address
        clock.advance_ms(1)
        await instance.refresh_route_after_failure("failover")
        assert instance.routes.master_address("broker-a") == new_address
