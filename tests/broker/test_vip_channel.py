"""The VIP channel: a second listener on listenPort - 2 with every handler but the pulls, as a
RocketMQ broker opens and clients up to 4.4.0 use by default; broker.conf turns it off."""

from __future__ import annotations

import errno
import socket
from pathlib import Path

import pytest

from bolide.base.errors import ConnectionClosedError
from bolide.broker.broker import Broker
from bolide.protocol.codes import ResponseCode
from bolide.remoting import ClientPool
from bolide.testing.cluster import Cluster
from tests.integration.wire import BrokerWire, heartbeat_request

LOOPBACK = "127.0.0.1"


def _free_port_pair() -> int:
    """A port p with p and p - 2 both free right now (the OS picks p)."""
    for _ in range(50):
        with socket.socket() as main:
            main.bind((LOOPBACK, 0))
            port: int = main.getsockname()[1]
            with socket.socket() as vip:
                try:
                    vip.bind((LOOPBACK, port - 2))
                except OSError:
                    continue
        return port
    raise AssertionError("no free port pair found")


async def _broker_on_a_free_pair(cluster: Cluster) -> Broker:
    """A broker on a port p with p - 2 free; another process may take a probed port before
    the broker binds it (tests run beside other suites), so a taken port means another pair."""
    for _ in range(20):
        port = _free_port_pair()
        try:
            return await cluster.add_broker("broker-v", listen_port=port)
        except OSError as error:
            if error.errno != errno.EADDRINUSE:
                raise
    raise AssertionError("no port pair stayed free long enough to bind")


async def test_the_vip_channel_serves_all_but_pulls(tmp_path: Path) -> None:
    async with Cluster(tmp_path, settings={"vipChannelEnabled": "true"}) as cluster:
        broker = await _broker_on_a_free_pair(cluster)
        port = broker.server.port
        assert broker.vip_server is not None and broker.vip_server.port == port - 2
        pool = ClientPool()
        try:
            vip = BrokerWire(pool, f"{LOOPBACK}:{port - 2}")
            sent = await vip.send("VipTopic", b"over the VIP channel")
            assert sent.code == ResponseCode.SUCCESS
            beat = await vip.invoke(heartbeat_request("c1", consumer_groups={"G": {"T": "*"}}))
            assert beat.code == ResponseCode.SUCCESS
            pulled = await vip.pull("VipTopic", 0, 0)
            assert pulled.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
            main = BrokerWire(pool, broker.address)
            assert (await main.pull("VipTopic", 0, 0)).code == ResponseCode.SUCCESS
        finally:
            await pool.close()


async def test_broker_conf_turns_the_vip_channel_off(tmp_path: Path) -> None:
    async with Cluster(tmp_path, settings={"vipChannelEnabled": "false"}) as cluster:
        broker = await _broker_on_a_free_pair(cluster)
        port = broker.server.port
        assert broker.vip_server is None
        pool = ClientPool()
        try:
            with pytest.raises(ConnectionClosedError):
                await BrokerWire(pool, f"{LOOPBACK}:{port - 2}").send("VipTopic", b"x")
        finally:
            await pool.close()
