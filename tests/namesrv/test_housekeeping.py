"""The expiry scan runs on the injected clock and closes expired brokers' connections."""

from __future__ import annotations

from bolide.base.clock import ManualClock
from bolide.base.limits import BROKER_EXPIRY_MS, NAMESRV_SCAN_INTERVAL_MS
from bolide.base.types import Address, BrokerName, ClusterName, Topic
from bolide.namesrv.housekeeping import BrokerHousekeeping
from bolide.namesrv.routes import BrokerRegistration, RouteTables
from bolide.protocol.bodies import DataVersion, TopicConfig
from bolide.testing.waiting import until

ORDERS = Topic("orders")


def _register(tables: RouteTables, address: str, connection: object) -> None:
    tables.register_broker(
        BrokerRegistration(
            cluster_name=ClusterName("DefaultCluster"),
            broker_name=BrokerName(f"broker-{address}"),
            broker_addr=Address(address),
            broker_id=0,
            ha_server_addr="",
            data_version=DataVersion(1, 1),
            topic_configs={ORDERS: TopicConfig(ORDERS, 4, 4, 6)},
            connection_key=connection,
        )
    )


async def _advance_one_scan(clock: ManualClock, housekeeping: BrokerHousekeeping) -> None:
    target_steps = housekeeping.service.step_count + 1
    clock.advance_ms(NAMESRV_SCAN_INTERVAL_MS)
    await until(lambda: housekeeping.service.step_count == target_steps)


async def test_scan_expires_silent_brokers_and_closes_their_connections() -> None:
    clock = ManualClock()
    tables = RouteTables(clock)
    closed: list[object] = []
    housekeeping = BrokerHousekeeping(tables, clock, close_connection=closed.append)
    silent, chatty = object(), object()
    _register(tables, "10.0.0.1:10911", silent)
    _register(tables, "10.0.0.2:10911", chatty)
    housekeeping.start()
    try:
        # Advance one scan interval at a time, re-registering the chatty broker each time.
        for _ in range(BROKER_EXPIRY_MS // NAMESRV_SCAN_INTERVAL_MS + 1):
            await until(lambda: clock.sleeper_count == 1)
            await _advance_one_scan(clock, housekeeping)
            _register(tables, "10.0.0.2:10911", chatty)
        assert closed == [silent]
        assert tables.live_addresses() == [Address("10.0.0.2:10911")]
        route = tables.route_for_topic(ORDERS)
        assert route is not None
        assert [b.broker_addrs[0] for b in route.broker_datas] == ["10.0.0.2:10911"]
    finally:
        await housekeeping.stop()
    assert not housekeeping.service.running


def test_scan_without_close_callback_still_expires() -> None:
    clock = ManualClock()
    tables = RouteTables(clock)
    housekeeping = BrokerHousekeeping(tables, clock)
    _register(tables, "10.0.0.1:10911", object())
    clock.advance_ms(BROKER_EXPIRY_MS + 1)
    assert housekeeping.scan() == 1
    assert tables.route_for_topic(ORDERS) is None


def test_connection_close_drops_brokers_at_once() -> None:
    clock = ManualClock()
    tables = RouteTables(clock)
    housekeeping = BrokerHousekeeping(tables, clock)
    connection = object()
    _register(tables, "10.0.0.1:10911", connection)
    housekeeping.on_connection_close(connection)
    assert tables.live_addresses() == []
    assert tables.route_for_topic(ORDERS) is None
