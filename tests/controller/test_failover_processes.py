"""Controller mode end to end, every part a real process: etcd, `bolide controller`,
`bolide namesrv`, two `bolide broker -c broker.conf` in controller mode. A replica that lags
leaves the SyncStateSet and rejoins it; a SIGKILLed master is replaced, the name server lists
the new one as brokerId 0, and Bolide's producer sends again; the old master restarted
follows the new one, catches up and rejoins the SyncStateSet. The unavailability (kill →
first acknowledged send) is printed, not asserted."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from bolide.client.producer.producer import Producer
from bolide.protocol.bodies.controller import BrokerReplicasInfo, broker_names_to_json
from bolide.protocol.bodies.route import ClusterInfo
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.message import Message
from bolide.remoting import ClientPool
from bolide.testing.etcd import EtcdCluster, free_port

pytestmark = pytest.mark.timeout(240)

BOLIDE = str(Path(sys.executable).parent / "bolide")
READY_TIMEOUT_S = 60.0
WAIT_S = 90.0
"""Guard on each convergence wait (a failing test pays it once)."""
TOPIC = "FailoverTopic"
SOURCE = str(Path(__file__).resolve().parents[2] / "src")


class Process:
    def __init__(self, process: asyncio.subprocess.Process, ready: str) -> None:
        self.process = process
        self.ready = ready

    def address(self, role: str) -> str:
        fields = dict(part.split("=", 1) for part in self.ready.split()[2:])
        return fields[role]


@contextlib.asynccontextmanager
async def running(*arguments: str, cwd: Path) -> AsyncIterator[Process]:
    log = (cwd / f"{arguments[0]}-{time.monotonic_ns()}.log").open("wb")
    process = await asyncio.create_subprocess_exec(
        BOLIDE, *arguments, cwd=cwd, env={**os.environ, "PYTHONPATH": SOURCE},
        stdout=asyncio.subprocess.PIPE, stderr=log,
    )  # fmt: skip
    assert process.stdout is not None
    try:
        line = await asyncio.wait_for(process.stdout.readline(), READY_TIMEOUT_S)
        assert line.startswith(b"bolide ready"), line
        yield Process(process, line.decode().strip())
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGCONT)
            process.kill()
        await process.wait()
        log.close()


@contextlib.asynccontextmanager
async def controller_and_name_server(
    etcd_endpoints: str, root: Path, *controller_options: str
) -> AsyncIterator[tuple[str, str]]:
    """`bolide controller` on etcd and `bolide namesrv`, real processes under ``root``:
    yields their addresses (controller, name server)."""
    async with (
        running("controller", "--etcd", etcd_endpoints, "--port", "0",
                "--data-dir", str(root / "ctl"), *controller_options, cwd=root) as controller,
        running("namesrv", "--port", "0", "--data-dir", str(root / "ns"), cwd=root) as namesrv,
    ):  # fmt: skip
        yield controller.address("controller"), namesrv.address("namesrv")


def broker_conf(directory: Path, namesrv: str, controller: str) -> Path:
    directory.mkdir(parents=True)
    port = free_port()
    conf = directory / "broker.conf"
    conf.write_text(
        "\n".join(
            [
                "brokerClusterName=DefaultCluster",
                "brokerName=broker-a",
                f"listenPort={port}",
                f"haListenPort={free_port()}",
                f"namesrvAddr={namesrv}",
                "brokerId=-1",
                "brokerRole=SLAVE",
                "enableControllerMode=true",
                f"controllerAddr={controller}",
                "allAckInSyncStateSet=true",
                "haMaxTimeSlaveNotCatchup=3000",
                "checkSyncStateSetPeriod=1000",
                "syncBrokerMetadataPeriod=1000",
                "vipChannelEnabled=false",
            ]
        )
        + "\n"
    )
    return conf


async def cluster_masters(pool: ClientPool, namesrv: str) -> dict[int, str]:
    """broker-a's addresses by broker id, as the name server lists them."""
    answer = await pool.invoke(
        namesrv, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO)
    )
    info = ClusterInfo.from_json(answer.body) if answer.body else ClusterInfo()
    data = info.broker_addr_table.get("broker-a")
    return {} if data is None else dict(data.broker_addrs)


async def in_sync_ids(pool: ClientPool, controller: str) -> list[int]:
    """broker-a's SyncStateSet ids, as the controller answers 1006 ([] when it cannot)."""
    answer = await pool.invoke(
        controller,
        RemotingCommand.request(
            RequestCode.CONTROLLER_GET_SYNC_STATE_DATA, body=broker_names_to_json(["broker-a"])
        ),
    )
    if answer.code != ResponseCode.SUCCESS:
        return []
    info = BrokerReplicasInfo.from_json(answer.body).replicas_info_table.get("broker-a")
    return [] if info is None else [r.broker_id for r in info.in_sync_replicas]


async def until_true(check: object, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if await check():  # type: ignore[operator]
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"not reached in {WAIT_S} s: {what}")


async def test_lagging_replica_and_master_failover(etcd: EtcdCluster, tmp_path: Path) -> None:
    pool = ClientPool()
    async with controller_and_name_server(etcd.endpoints, tmp_path) as (ctl, ns):

        async def masters() -> dict[int, str]:
            return await cluster_masters(pool, ns)

        async def in_sync() -> list[int]:
            return await in_sync_ids(pool, ctl)

        conf_a = broker_conf(tmp_path / "a", ns, ctl)
        conf_b = broker_conf(tmp_path / "b", ns, ctl)
        async with running("broker", "-c", str(conf_a), "--data-dir", str(tmp_path / "a"),
                           cwd=tmp_path) as first:  # fmt: skip
            first_address = first.address("broker")

            async def first_is_master() -> bool:
                return (await masters()).get(0) == first_address

            await until_true(first_is_master, "the first broker registered as brokerId 0")
            async with running("broker", "-c", str(conf_b), "--data-dir", str(tmp_path / "b"),
                               cwd=tmp_path) as second:  # fmt: skip
                second_address = second.address("broker")
                async with Producer("failover-producers", namesrv=ns) as producer:
                    await send_until_acked(producer, "before")

                    async def both_in_sync() -> bool:
                        return await in_sync() == [1, 2]

                    await until_true(both_in_sync, "the replica joined the SyncStateSet")
                    second.process.send_signal(signal.SIGSTOP)  # it lags from now on
                    await send_until_acked(producer, "while-lagging")

                    async def master_alone() -> bool:
                        return await in_sync() == [1]

                    await until_true(master_alone, "the lagging replica left the SyncStateSet")
                    second.process.send_signal(signal.SIGCONT)
                    await send_until_acked(producer, "after-resume")
                    await until_true(both_in_sync, "the replica rejoined once caught up")

                    async def second_is_master() -> bool:
                        return (await masters()).get(0) == second_address

                    first.process.send_signal(signal.SIGKILL)
                    killed_at = time.monotonic()
                    await first.process.wait()
                    route_s: list[float] = []

                    async def routed_at() -> None:
                        await until_true(second_is_master, "the new master is brokerId 0")
                        route_s.append(time.monotonic() - killed_at)

                    routed = asyncio.create_task(routed_at())
                    await send_until_acked(producer, "after-failover")
                    unavailable_s = time.monotonic() - killed_at
                    await routed
                    status = await ha_status(ctl, tmp_path)
                    broker_a = status["brokerSets"]["broker-a"]
                    assert status["leader"] == ctl
                    assert (broker_a["masterBrokerId"], broker_a["masterEpoch"]) == (2, 2)
                    assert [r["brokerId"] for r in broker_a["inSyncReplicas"]] == [2]
                    assert [r["alive"] for r in broker_a["notInSyncReplicas"]] == [False]
                    print(f"\nunavailability kill -> first acked send: {unavailable_s:.2f} s")
                    print(f"kill -> name server lists the new master: {route_s[0]:.2f} s")
                    # the deposed master comes back: it follows, catches up and rejoins
                    async with running("broker", "-c", str(conf_a), "--data-dir",
                                       str(tmp_path / "a"), cwd=tmp_path):  # fmt: skip

                        async def old_master_follows() -> bool:
                            return await masters() == {0: second_address, 1: first_address}

                        await until_true(old_master_follows, "the old master listed as id 1")
                        await send_until_acked(producer, "after-return")
                        await until_true(both_in_sync, "the old master rejoined the set")
    await pool.close()


async def ha_status(controller: str, cwd: Path) -> dict[str, Any]:
    """`bolide ha status --json` as a process."""
    process = await asyncio.create_subprocess_exec(
        BOLIDE, "ha", "status", "--controller", controller, "--json", cwd=cwd,
        env={**os.environ, "PYTHONPATH": SOURCE}, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    stdout, _ = await asyncio.wait_for(process.communicate(), READY_TIMEOUT_S)
    assert process.returncode == 0
    status: dict[str, Any] = orjson.loads(stdout)
    return status


async def send_until_acked(producer: Producer, text: str) -> None:
    deadline = time.monotonic() + WAIT_S
    last_error: BaseException | None = None
    while time.monotonic() < deadline:
        try:
            result = await producer.send(Message(TOPIC, text.encode()), timeout_ms=3_000)
        except Exception as error:
            last_error = error
            await asyncio.sleep(0.05)
            continue
        if result.status.name == "SEND_OK":
            return
        last_error = AssertionError(f"send answered {result.status}")
        await asyncio.sleep(0.05)
    raise AssertionError(f"no acknowledged send in {WAIT_S} s: {last_error}")
