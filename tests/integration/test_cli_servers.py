"""`bolide standalone`, `bolide namesrv` and `bolide broker` as real processes: the ready line,
real ports for port 0, requests served, and a clean stop on SIGTERM / SIGINT that leaves
offsets, tables and the store checkpoint on disk."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import orjson
import pytest

from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import UpdateConsumerOffsetRequestHeader
from bolide.remoting import ClientPool
from tests.broker.metrics.http_get import http_get
from tests.integration.wire import BrokerWire

pytestmark = pytest.mark.timeout(120)

BOLIDE = str(Path(sys.executable).parent / "bolide")
READY_TIMEOUT_S = 60.0
"""Guard on a process start or stop: fails a hung test instead of blocking it."""


class Server:
    """A bolide server process whose stdout ready line has been read."""

    def __init__(self, process: asyncio.subprocess.Process, ready: str) -> None:
        self.process = process
        self.ready = ready

    def address(self, role: str) -> str:
        fields = dict(part.split("=", 1) for part in self.ready.split()[2:])
        return fields[role]

    async def stop(self, signal_number: int = signal.SIGTERM) -> int:
        if self.process.returncode is None:
            self.process.send_signal(signal_number)
        return await asyncio.wait_for(self.process.wait(), READY_TIMEOUT_S)


@contextlib.asynccontextmanager
async def running(*arguments: str, cwd: Path) -> AsyncIterator[Server]:
    process = await asyncio.create_subprocess_exec(
        BOLIDE,
        *arguments,
        cwd=cwd,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    assert process.stdout is not None
    try:
        line = await asyncio.wait_for(process.stdout.readline(), READY_TIMEOUT_S)
        yield Server(process, line.decode().strip())
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT], ids=["TERM", "INT"])
async def test_standalone_serves_and_stops_cleanly(tmp_path: Path, stop_signal: int) -> None:
    data = tmp_path / "data"
    arguments = (
        "standalone", "--namesrv-port", "0", "--broker-port", "0", "--proxy-port", "0",
        "--metrics-port", "0", "--dashboard-port", "0",
        "--data-dir", str(data),
    )  # fmt: skip
    async with running(*arguments, cwd=tmp_path) as server:
        assert server.ready.startswith("bolide ready namesrv=127.0.0.1:")
        assert server.ready.split()[2].startswith("namesrv=")
        assert server.ready.split()[3].startswith("broker=127.0.0.1:")
        assert server.ready.split()[4].startswith("proxy=127.0.0.1:")
        namesrv, broker = server.address("namesrv"), server.address("broker")
        assert not namesrv.endswith(":0") and not broker.endswith(":0")
        assert server.ready.split()[5].startswith("metrics=127.0.0.1:")
        assert server.ready.split()[6].startswith("dashboard=127.0.0.1:")
        status, _, page = await http_get(server.address("dashboard"), "/")
        assert status == 200 and b"Cluster" in page
        status, _, exposition = await http_get(server.address("metrics"), "/metrics")
        assert status == 200 and b"rocketmq_brokeruntime_msg_put_total_today_now" in exposition
        pool = ClientPool()
        try:
            route = await pool.invoke(
                namesrv,
                RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"}),
            )
            assert route.code == ResponseCode.SUCCESS
            assert orjson.loads(route.body)["brokerDatas"][0]["brokerAddrs"]["0"] == broker
            wire = BrokerWire(pool, broker)
            assert (await wire.send("CliTopic", b"hello")).code == ResponseCode.SUCCESS
            commit = UpdateConsumerOffsetRequestHeader("CliGroup", "CliTopic", 0, 1)
            update = RemotingCommand.request(
                RequestCode.UPDATE_CONSUMER_OFFSET, commit.to_ext_fields()
            )
            assert (await wire.invoke(update)).code == ResponseCode.SUCCESS
        finally:
            await pool.close()
        assert await server.stop(stop_signal) == 0
    store = data / "store"
    assert (store / "checkpoint").exists()
    assert not (store / "abort").exists()
    offsets = orjson.loads((store / "config" / "consumerOffset.json").read_bytes())
    assert offsets["offsetTable"]["CliTopic@CliGroup"] == {"0": 1}
    assert (
        "CliTopic"
        in orjson.loads((store / "config" / "topics.json").read_bytes())["topicConfigTable"]
    )
    log = (data / "logs" / "bolide.log").read_text()
    assert "stopped cleanly" in log


async def test_namesrv_and_broker_run_apart_with_a_config_file(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(
        "# a RocketMQ broker.conf\n"
        "brokerClusterName = ClusterZ\n"
        "brokerName=broker-z\n"
        "autoCreateTopicEnable=true\n"
        "defaultTopicQueueNums=6\n"
        "metricsExporterType=PROM\n"
        "metricsPromExporterHost=127.0.0.1\n"
        "metricsPromExporterPort=0\n"
    )
    async with running(
        "namesrv", "--port", "0", "--data-dir", str(tmp_path / "ns"), cwd=tmp_path
    ) as namesrv:
        namesrv_address = namesrv.address("namesrv")
        broker_arguments = (
            "broker", "-c", str(conf), "--namesrv", namesrv_address, "--port", "0",
            "--data-dir", str(tmp_path / "broker"), "--json",
        )  # fmt: skip
        async with running(*broker_arguments, cwd=tmp_path) as broker:
            broker_address = orjson.loads(broker.ready)["broker"]
            metrics_address = orjson.loads(broker.ready)["metrics"]  # metricsExporterType=PROM
            status, _, exposition = await http_get(metrics_address, "/metrics")
            assert status == 200
            assert (
                b'rocketmq_broker_tps{broker="broker-z",brokerIP="127.0.0.1",cluster="ClusterZ"}'
                in (exposition)
            )
            pool = ClientPool()
            try:
                info = await pool.invoke(
                    namesrv_address, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO)
                )
                cluster = orjson.loads(info.body)
                assert cluster["clusterAddrTable"] == {"ClusterZ": ["broker-z"]}
                assert cluster["brokerAddrTable"]["broker-z"]["brokerAddrs"]["0"] == broker_address
                route = await pool.invoke(
                    namesrv_address,
                    RemotingCommand.request(
                        RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"}
                    ),
                )
                assert orjson.loads(route.body)["queueDatas"][0]["writeQueueNums"] == 6
            finally:
                await pool.close()
            assert await broker.stop() == 0
        assert await namesrv.stop() == 0
    assert (tmp_path / "broker" / "store" / "checkpoint").exists()


async def test_a_bad_config_value_is_refused(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("listenPort=not-a-number\n")
    process = await asyncio.create_subprocess_exec(
        BOLIDE, "standalone", "-c", str(conf), "--data-dir", str(tmp_path / "d"), "--no-proxy",
        "--no-metrics", "--no-dashboard",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, stderr = await asyncio.wait_for(process.communicate(), READY_TIMEOUT_S)
    assert process.returncode == 2
    assert b"listenPort" in stderr


async def test_a_busy_proxy_port_is_named(tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        process = await asyncio.create_subprocess_exec(
            BOLIDE, "standalone", "--namesrv-port", "0", "--broker-port", "0",
            "--proxy-port", str(port), "--no-metrics", "--no-dashboard",
            "--data-dir", str(tmp_path / "d"),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=tmp_path,
        )  # fmt: skip
        stdout, stderr = await asyncio.wait_for(process.communicate(), READY_TIMEOUT_S)
    assert process.returncode == 1
    assert b"bolide ready" not in stdout
    assert f"5.x gRPC proxy cannot listen on 127.0.0.1:{port}".encode() in stderr
