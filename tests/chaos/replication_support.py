"""A name server, a master and a slave as separate ``bolide`` processes on loopback.

Each process is started by :class:`HaGroup` and stopped by it, by pid (SIGKILL for the
master's crashes, SIGTERM otherwise). Every process first listens on port 0 (the system picks);
the group then keeps the ports each broker was given, so a master restarted on its data comes
back where its slave and clients look for it.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

import orjson

from bolide.base.children import child_environment
from bolide.base.errors import BolideError
from bolide.protocol.bodies import KVTable
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import CreateTopicRequestHeader
from bolide.remoting import ClientPool
from tests.integration.wire import records

BOLIDE = str(Path(sys.executable).parent / "bolide")
READY_TIMEOUT_S = 60.0
"""Guard on a process start: fails a hung test instead of blocking it."""
SEGMENT_BYTES = 4 * 1024 * 1024
"""Small commit-log segments: a test directory stays small."""


class ServerProcess:
    """One bolide server process whose ready line was read."""

    def __init__(self, process: asyncio.subprocess.Process, ready: str) -> None:
        self.process = process
        self.ready = ready

    @property
    def address(self) -> str:
        return self.ready.split()[-1].split("=", 1)[1]

    async def kill(self) -> None:
        """SIGKILL: no shutdown at all (a dead machine's process, its page cache kept)."""
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGKILL)
        await asyncio.wait_for(self.process.wait(), READY_TIMEOUT_S)

    async def stop(self) -> None:
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(self.process.wait(), READY_TIMEOUT_S)
        except TimeoutError:
            await self.kill()


async def spawn(*arguments: str, cwd: Path, log_path: Path | None = None) -> ServerProcess:
    """Start ``bolide <arguments>`` and wait for its ready line; its log (stderr) goes to
    ``log_path`` (appended: a restarted broker continues it) or nowhere."""
    log = log_path.open("ab") if log_path is not None else None
    process = await asyncio.create_subprocess_exec(
        BOLIDE,
        *arguments,
        cwd=cwd,
        stdout=asyncio.subprocess.PIPE,
        stderr=log if log is not None else asyncio.subprocess.DEVNULL,
        env=child_environment(),  # a killed pytest leaves no server behind (issue 30)
    )
    if log is not None:
        log.close()  # the child keeps its own descriptor
    assert process.stdout is not None
    try:
        line = await asyncio.wait_for(process.stdout.readline(), READY_TIMEOUT_S)
    except BaseException:
        process.kill()
        await process.wait()
        raise
    ready = line.decode().strip()
    if not ready.startswith("bolide ready"):
        process.kill()
        await process.wait()
        raise AssertionError(f"bolide {arguments[0]} did not start: {ready!r}")
    return ServerProcess(process, ready)


def _broker_port(server: ServerProcess) -> int:
    """The broker's port, from its ready line (``... broker=127.0.0.1:<port> ...``)."""
    for word in server.ready.split():
        if word.startswith("broker="):
            return int(word.rsplit(":", 1)[1])
    raise AssertionError(f"no broker address in the ready line {server.ready!r}")


class HaGroup:
    """``bolide namesrv`` + a master (``role``) + a SLAVE of broker-a, under ``root``."""

    def __init__(self, root: Path, role: str = "SYNC_MASTER") -> None:
        self.root = root
        self.role = role
        # 0 until a broker's first start tells the port the system gave it.
        self.master_port = 0
        self.master_ha_port = 0
        self.slave_port = 0
        self.namesrv: ServerProcess | None = None
        self.master: ServerProcess | None = None
        self.slave: ServerProcess | None = None
        self.pool = ClientPool()

    @property
    def namesrv_address(self) -> str:
        assert self.namesrv is not None
        return self.namesrv.address

    @property
    def master_address(self) -> str:
        return f"127.0.0.1:{self.master_port}"

    @property
    def slave_address(self) -> str:
        return f"127.0.0.1:{self.slave_port}"

    def _conf(self, name: str, lines: dict[str, object]) -> Path:
        path = self.root / f"{name}.conf"
        common = {
            "brokerClusterName": "HaCluster",
            "brokerName": "broker-a",
            "namesrvAddr": self.namesrv_address,
            "storePathRootDir": self.root / name / "store",
            "mapedFileSizeCommitLog": SEGMENT_BYTES,
            # the VIP channel would listen on listenPort - 2, a port nobody probed free: another
            # process may hold it, and a fixed listenPort makes that fail the start
            "vipChannelEnabled": "false",
        }
        path.write_text("".join(f"{k}={v}\n" for k, v in {**common, **lines}.items()))
        return path

    async def start(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.namesrv = await spawn(
            "namesrv", "--port", "0", "--data-dir", str(self.root / "namesrv"), cwd=self.root
        )
        await self.start_master()
        await self.start_slave()

    async def start_slave(self) -> None:
        conf = self._conf(
            "slave",
            {
                "brokerId": 1,
                "brokerRole": "SLAVE",
                "listenPort": self.slave_port,
                "slaveReadEnable": "true",
            },
        )
        self.slave = await spawn(
            "broker", "-c", str(conf), "--data-dir", str(self.root / "slave"), cwd=self.root
        )
        self.slave_port = _broker_port(self.slave)

    async def kill_slave(self) -> None:
        assert self.slave is not None
        await self.slave.kill()
        self.slave = None

    async def start_master(self) -> None:
        conf = self._conf(
            "master",
            {
                "brokerId": 0,
                "brokerRole": self.role,
                "listenPort": self.master_port,
                "haListenPort": self.master_ha_port,
            },
        )
        self.master = await spawn(
            "broker", "-c", str(conf), "--data-dir", str(self.root / "master"), cwd=self.root
        )
        self.master_port = _broker_port(self.master)
        if self.master_ha_port == 0:
            self.master_ha_port = int((await self.runtime(self.master_address))["haListenPort"])

    async def kill_master(self) -> None:
        assert self.master is not None
        await self.master.kill()
        self.master = None

    async def stop(self) -> None:
        await self.pool.close()
        for server in (self.slave, self.master, self.namesrv):
            if server is not None:
                await server.stop()
        self.slave = self.master = self.namesrv = None

    # --- requests -------------------------------------------------------------------------

    async def invoke(
        self, address: str, code: int, fields: dict[str, str] | None = None
    ) -> RemotingCommand:
        return await self.pool.invoke(address, RemotingCommand.request(code, fields), 10_000)

    async def runtime(self, address: str) -> dict[str, str]:
        response = await self.invoke(address, RequestCode.GET_BROKER_RUNTIME_INFO)
        assert response.code == ResponseCode.SUCCESS
        return dict(KVTable.from_json(response.body).table)

    async def wait_until(self, predicate_coro: object, timeout_s: float = 60.0) -> None:
        """Poll an async predicate (a zero-argument coroutine function) until it is true;
        bounded by ``timeout_s``."""
        async with asyncio.timeout(timeout_s):
            # Remote state (another process): poll it, bounded by the timeout.
            while not await predicate_coro():  # type: ignore[operator]  # noqa: ASYNC110
                await asyncio.sleep(0.05)

    async def slave_in_sync(self) -> bool:
        """The master counts one HA connection; False while it cannot be reached (an
        unexpected answer fails the test: only the connection's errors mean "not yet")."""
        try:
            runtime = await self.runtime(self.master_address)
        except BolideError:
            return False
        return runtime.get("haConnectionCount") == "1"

    async def create_topic(self, topic: str, queues: int) -> None:
        header = CreateTopicRequestHeader(topic, "TBW102", queues, queues, 6)
        response = await self.invoke(
            self.master_address, RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext_fields()
        )
        assert response.code == ResponseCode.SUCCESS

        async def slave_knows() -> bool:
            answer = await self.invoke(self.slave_address, RequestCode.GET_ALL_TOPIC_CONFIG)
            return topic in orjson.loads(answer.body)["topicConfigTable"]

        await self.wait_until(slave_knows)  # the slave copies topics every 10 s

    async def read_all(self, address: str, topic: str, queues: int) -> list[bytes]:
        """Every body of ``topic`` on the broker at ``address`` (raw pulls from offset 0)."""
        from tests.integration.wire import pull_request

        bodies: list[bytes] = []
        for queue_id in range(queues):
            offset = 0
            while True:
                response = await self.pool.invoke(
                    address,
                    pull_request(topic, queue_id, offset, group="CG_READBACK", max_messages=32),
                    10_000,
                )
                if response.code != ResponseCode.SUCCESS:
                    break
                found = records(response)
                bodies += [m.body for m in found]
                offset = int(response.ext_fields["nextBeginOffset"])
        return bodies
