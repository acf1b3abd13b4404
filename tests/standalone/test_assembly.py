"""bolide.standalone.assembly: name servers then brokers start; brokers then name servers stop."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from bolide.base import limits
from bolide.broker.broker import Broker
from bolide.broker.config import BrokerConfig
from bolide.namesrv.namesrv import NameServer
from bolide.standalone.assembly import Assembly
from bolide.testing.cluster import LOOPBACK, TEST_BROKER_SETTINGS


def _broker(root: Path, name: str, namesrv: NameServer) -> Broker:
    overrides: dict[str, object] = {
        **TEST_BROKER_SETTINGS,
        "broker_name": name,
        "broker_ip1": LOOPBACK,
        "listen_port": 0,
        "namesrv_addresses": (namesrv.address,),
        "store_path_root_dir": root / name / "store",
    }
    return Broker(BrokerConfig.from_mapping({}, overrides), host=LOOPBACK)


def _record_stops(server: NameServer | Broker, label: str, order: list[str]) -> None:
    original = server.stop

    async def stop(timeout_ms: int = limits.REMOTING_STOP_GRACE_MS) -> None:
        order.append(label)
        await original(timeout_ms)

    setattr(server, "stop", stop)  # noqa: B010 - an instance attribute shadows the method


async def test_stop_takes_brokers_newest_first_then_name_servers(tmp_path: Path) -> None:
    assembly = Assembly()
    order: list[str] = []
    try:
        namesrv = await assembly.start_name_server(NameServer(LOOPBACK, 0))
        first = await assembly.start_broker(_broker(tmp_path, "broker-a", namesrv))
        second = await assembly.start_broker(_broker(tmp_path, "broker-b", namesrv))
        assert assembly.namesrvs == [namesrv]
        assert assembly.brokers == [first, second]
        _record_stops(namesrv, "namesrv", order)
        _record_stops(first, "broker-a", order)
        _record_stops(second, "broker-b", order)
    finally:
        await assembly.stop()
    assert order == ["broker-b", "broker-a", "namesrv"]
    assert assembly.brokers == [] and assembly.namesrvs == []
    await assembly.stop()  # idempotent: nothing is stopped twice
    assert order == ["broker-b", "broker-a", "namesrv"]


async def test_a_server_whose_start_failed_is_not_held() -> None:
    with socket.socket() as taken:
        taken.bind((LOOPBACK, 0))
        taken.listen()
        port = taken.getsockname()[1]
        assembly = Assembly()
        with pytest.raises(OSError):
            await assembly.start_name_server(NameServer(LOOPBACK, port))
        assert assembly.namesrvs == []
        await assembly.stop()
