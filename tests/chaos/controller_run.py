"""The failover chaos runner in controller mode: etcd, ``bolide controller``, ``bolide
namesrv`` and two brokers of broker-a with ``enableControllerMode=true``, all processes.

Each broker reaches the controller through its own :class:`FaultProxy`, so the master can be
cut from the controller. Bolide's producers (routes from the name server, no retries) send
rounds; a seeded schedule of faults hits the current master: SIGKILL (restarted on its data
once the other broker leads, so it rejoins as a slave), SIGSTOP/SIGCONT, a master-controller
partition, and SIGKILL of the Raft leader of the three-member etcd (restarted on its data
when the fault heals). After each fault the run waits until a send is acknowledged and both
brokers are back in the SyncStateSet; at the end every queue is read back from the master and
from the slave and judged by :class:`Checker`. Elections are counted from the master storing
broker changing; each acknowledgement names the broker that stored it (the offset message
id's store host) and, at the end, the epoch whose stretch of the master's final epoch list
holds its commit-log offset, so the split-brain check is per epoch. The time from each
SIGKILL to the first acknowledged send on the new master is kept apart
(:attr:`ControllerRunner.kill_to_ack_ms`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import random
import signal
import time
from collections.abc import Callable
from pathlib import Path

from bolide.base.errors import BolideError
from bolide.client.message import Message, SendStatus
from bolide.client.producer.producer import Producer
from bolide.protocol.bodies import KVTable
from bolide.protocol.bodies.controller import BrokerReplicasInfo, broker_names_to_json
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import CreateTopicRequestHeader
from bolide.protocol.msgid import decode_offset_message_id
from bolide.remoting import ClientPool
from bolide.store.epoch_file import EpochEntry
from bolide.testing.etcd import EtcdCluster, free_port
from tests.chaos.failover_checker import Ack, Checker, Fault, Report, Stored, body_for
from tests.chaos.failover_proxy import FaultProxy
from tests.chaos.replication_support import ServerProcess, spawn
from tests.integration.wire import pull_request, records

CONTROLLER_FAULT_KINDS = ("none", "sigkill", "sigstop", "partition_controller", "kill_etcd_leader")
TOPIC = "ControllerChaos"
QUEUES = 2
PRODUCERS = ("p0", "p1")
SEND_TIMEOUT_MS = 1_000
RECOVERY_S = 90.0
"""Guard on each wait for a send, an election or the SyncStateSet (a failing run pays it)."""
ETCD_MEMBERS = 3
"""etcd runs as three members, so killing its Raft leader leaves a quorum."""
HEARTBEAT_TIMEOUT_MS = 2_000
"""controllerHeartBeatTimeoutMills: a silent master is replaced after this long."""


def controller_schedules(seed: int, count: int) -> list[Fault]:
    """``count`` seeded faults over :data:`CONTROLLER_FAULT_KINDS` (every kind equally)."""
    rng = random.Random(seed)
    return [
        Fault(rng.choice(CONTROLLER_FAULT_KINDS), rng.randint(1, 2), rng.randint(1, 2))
        for _ in range(count)
    ]


class ControllerRunner:
    """One seeded run (see the module docstring)."""

    def __init__(self, root: Path, log: Callable[[str], None] = lambda _: None) -> None:
        self.root = root
        self.etcd = EtcdCluster(root / "etcd", members=ETCD_MEMBERS)
        self._etcd_killed: int | None = None
        self.pool = ClientPool()
        self.checker = Checker()
        self.kill_to_ack_ms: list[float] = []
        self._log = log
        self._controller: ServerProcess | None = None
        self._namesrv: ServerProcess | None = None
        self._brokers: dict[str, ServerProcess | None] = {"a": None, "b": None}
        self._ports = {name: (free_port(), free_port()) for name in self._brokers}
        self._controller_proxies: dict[str, FaultProxy] = {}
        self._producers: dict[str, Producer] = {}
        self._sequences = dict.fromkeys(PRODUCERS, 0)
        self._commit_offsets: dict[tuple[str, int], int] = {}
        self._last_master = ""
        self._killed_at: float | None = None

    # --- processes ---------------------------------------------------------------------------

    def address(self, name: str) -> str:
        return f"127.0.0.1:{self._ports[name][0]}"

    async def start(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "etcd").mkdir(exist_ok=True)
        await self.etcd.start()
        self._controller = await spawn(
            "controller", "--etcd", self.etcd.endpoints, "--port", "0",
            "--data-dir", str(self.root / "ctl"), cwd=self.root,
            log_path=self.root / "controller.log",
        )  # fmt: skip
        self._namesrv = await spawn(
            "namesrv", "--port", "0", "--data-dir", str(self.root / "ns"), cwd=self.root
        )
        for name in self._brokers:
            proxy = FaultProxy(self._controller.address)
            await proxy.start()
            self._controller_proxies[name] = proxy
        await self.start_broker("a")
        await self._wait(lambda: self._master_is(self.address("a")), "a leads")
        await self.start_broker("b")
        await self._create_topic()
        await self._wait(self._both_in_sync, "b joined the SyncStateSet")
        for name in PRODUCERS:
            producer = Producer(
                f"PG_{name}", namesrv=self._namesrv.address, instance_name=name,
                send_timeout_ms=SEND_TIMEOUT_MS, retry_count=0,
            )  # fmt: skip
            await producer.start()
            self._producers[name] = producer

    async def start_broker(self, name: str) -> None:
        assert self._namesrv is not None
        port, ha_port = self._ports[name]
        conf = self.root / f"{name}.conf"
        lines = {
            "brokerClusterName": "ChaosCluster",
            "brokerName": "broker-a",
            "namesrvAddr": self._namesrv.address,
            "listenPort": port,
            "haListenPort": ha_port,
            "brokerId": -1,
            "brokerRole": "SLAVE",
            "enableControllerMode": "true",
            "controllerAddr": self._controller_proxies[name].address,
            "allAckInSyncStateSet": "true",
            "controllerHeartBeatTimeoutMills": HEARTBEAT_TIMEOUT_MS,
            "haMaxTimeSlaveNotCatchup": 3_000,
            "checkSyncStateSetPeriod": 500,
            "syncBrokerMetadataPeriod": 500,
            "slaveReadEnable": "true",
            "vipChannelEnabled": "false",
        }
        conf.write_text("".join(f"{key}={value}\n" for key, value in lines.items()))
        self._brokers[name] = await spawn(
            "broker", "-c", str(conf), "--data-dir", str(self.root / name), cwd=self.root,
            log_path=self.root / f"{name}.log",
        )  # fmt: skip

    async def stop(self) -> None:
        for producer in self._producers.values():
            await producer.shutdown()
        for server in (*self._brokers.values(), self._namesrv, self._controller):
            if server is not None:
                if server.process.returncode is None:
                    server.process.send_signal(signal.SIGCONT)
                await server.stop()
        for proxy in self._controller_proxies.values():
            await proxy.stop()
        await self.pool.close()
        await self.etcd.stop()

    # --- what the cluster says ---------------------------------------------------------------

    async def _invoke(self, address: str, command: RemotingCommand) -> RemotingCommand:
        return await self.pool.invoke(address, command, 3_000)

    async def in_sync(self) -> list[int]:
        assert self._controller is not None
        with contextlib.suppress(BolideError, OSError):
            answer = await self._invoke(
                self._controller.address,
                RemotingCommand.request(
                    RequestCode.CONTROLLER_GET_SYNC_STATE_DATA,
                    body=broker_names_to_json(["broker-a"]),
                ),
            )
            if answer.code == ResponseCode.SUCCESS:
                table = BrokerReplicasInfo.from_json(answer.body).replicas_info_table
                info = table.get("broker-a")
                if info is not None:
                    return sorted(r.broker_id for r in info.in_sync_replicas)
        return []

    async def _both_in_sync(self) -> bool:
        return len(await self.in_sync()) == 2

    async def runtime(self, address: str) -> dict[str, str]:
        answer = await self._invoke(
            address, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO)
        )
        return dict(KVTable.from_json(answer.body).table) if answer.body else {}

    async def _master_is(self, address: str) -> bool:
        with contextlib.suppress(BolideError, OSError):
            runtime = await self.runtime(address)
            return runtime.get("brokerRole", "").endswith("MASTER")
        return False

    async def master_name(self) -> str:
        for name in self._brokers:
            if self._brokers[name] is not None and await self._master_is(self.address(name)):
                return name
        return ""

    async def _wait(self, check: Callable[[], object], what: str) -> None:
        deadline = time.monotonic() + RECOVERY_S
        while time.monotonic() < deadline:
            if await check():  # type: ignore[misc]
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"not reached in {RECOVERY_S} s: {what}")

    async def _create_topic(self) -> None:
        header = CreateTopicRequestHeader(TOPIC, "TBW102", QUEUES, QUEUES, 6)
        request = RemotingCommand.request(
            RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext_fields()
        )
        answer = await self._invoke(self.address("a"), request)
        assert answer.code == ResponseCode.SUCCESS, answer.remark

        async def b_knows() -> bool:
            with contextlib.suppress(BolideError, OSError):
                answer = await self._invoke(
                    self.address("b"), RemotingCommand.request(RequestCode.GET_ALL_TOPIC_CONFIG)
                )
                return TOPIC.encode() in answer.body
            return False

        await self._wait(b_knows, "the replica copied the topic")

    # --- sends -------------------------------------------------------------------------------

    async def _send(self, name: str) -> bool:
        sequence = self._sequences[name]
        self._sequences[name] = sequence + 1
        producer = self._producers[name]
        try:
            result = await producer.send(Message(TOPIC, body_for(name, sequence)))
        except BolideError:
            return False
        if result.status is not SendStatus.SEND_OK:
            return False
        acked_at = time.monotonic()
        (host, port), commit_offset = decode_offset_message_id(result.offset_msg_id)
        address = f"{host}:{port}"  # the broker that stored it (its store host)
        self._commit_offsets[(name, sequence)] = commit_offset
        if address != self._last_master:
            if self._last_master:
                self.checker.election()
            self._last_master = address
        if self._killed_at is not None:
            self.kill_to_ack_ms.append((acked_at - self._killed_at) * 1000)
            self._killed_at = None
        self.checker.ack(
            Ack(name, sequence, result.queue.queue_id, result.queue_offset,
                result.queue.broker_name, address, 0, acked_at)
        )  # fmt: skip
        return True

    async def _round(self) -> int:
        return sum(await asyncio.gather(*(self._send(name) for name in PRODUCERS)))

    # --- faults ------------------------------------------------------------------------------

    async def run(self, faults: list[Fault]) -> None:
        for number, fault in enumerate(faults):
            for _ in range(fault.before_sends):
                await self._round()
            master = await self.master_name()
            if not master:
                raise AssertionError(f"schedule {number}: no master before {fault}")
            await self._inject(fault, master)
            for _ in range(fault.hold_sends):
                await self._round()
            await self._heal(fault, master)
            await self._wait(self._round, f"schedule {number} ({fault}): an acknowledged send")
            await self._wait(self._both_in_sync, f"schedule {number}: SyncStateSet whole again")
            self._log(f"schedule {number} {fault.kind}: master {master} -> "
                      f"{await self.master_name()}")  # fmt: skip

    async def _inject(self, fault: Fault, master: str) -> None:
        process = self._brokers[master]
        assert process is not None
        if fault.kind != "none":
            self.checker.fault_started()
        if fault.kind == "sigkill":
            await process.kill()
            self._killed_at = time.monotonic()
            self._brokers[master] = None
        elif fault.kind == "sigstop":
            process.process.send_signal(signal.SIGSTOP)
        elif fault.kind == "partition_controller":
            self._controller_proxies[master].blackhole()
        elif fault.kind == "kill_etcd_leader":
            leader = await self.etcd.leader_index()
            if leader is None:
                raise AssertionError("no etcd member says it leads")
            self.etcd.kill(leader)
            self._etcd_killed = leader

    async def _heal(self, fault: Fault, master: str) -> None:
        if fault.kind == "sigkill":
            other = "b" if master == "a" else "a"
            await self._wait(lambda: self._master_is(self.address(other)), "the other leads")
            # The first acknowledged send on the new master before the old one restarts:
            # the kill-to-ack figure once counted this process start (1-9 s under load).
            await self._wait(self._round, "an acknowledged send on the new master")
            await self.start_broker(master)  # on its data: it rejoins as a slave
        elif fault.kind == "sigstop":
            process = self._brokers[master]
            assert process is not None
            process.process.send_signal(signal.SIGCONT)
        elif fault.kind == "partition_controller":
            self._controller_proxies[master].heal()
        elif fault.kind == "kill_etcd_leader" and self._etcd_killed is not None:
            await self.etcd.restart(self._etcd_killed)  # on its data: it rejoins
            self._etcd_killed = None

    # --- read back ---------------------------------------------------------------------------

    async def read_back(self, address: str) -> list[Stored]:
        stored: list[Stored] = []
        for queue_id in range(QUEUES):
            offset = 0
            while True:
                request = pull_request(
                    TOPIC, queue_id, offset, group="CG_CHAOS_READBACK", max_messages=32
                )
                response = await self.pool.invoke(address, request, 10_000)
                if response.code != ResponseCode.SUCCESS:
                    break
                for message in records(response):
                    stored.append(Stored(queue_id, message.queue_offset, message.body))
                offset = int(response.ext_fields["nextBeginOffset"])
        return stored

    async def verify(self) -> tuple[Report, Report]:
        """The checker's verdict on the master's queues and on the slave's (caught up)."""
        master = await self.master_name()
        slave = "b" if master == "a" else "a"
        on_master = await self.read_back(self.address(master))

        async def slave_caught_up() -> bool:
            with contextlib.suppress(BolideError, OSError):
                return len(await self.read_back(self.address(slave))) >= len(on_master)
            return False

        await self._wait(slave_caught_up, "the slave caught up")
        await self._tag_epochs(self.address(master))
        on_slave = await self.read_back(self.address(slave))
        return self.checker.verify(on_master), self.checker.verify(on_slave)

    async def _tag_epochs(self, master_address: str) -> None:
        """Each ack's epoch: the entry of the master's final epoch list whose stretch holds
        the commit-log offset it was stored at (every surviving write lies on that list)."""
        text = (await self.runtime(master_address))["haEpochEntries"]
        entries = [EpochEntry(*(int(part) for part in item.split("-"))) for item in text.split(",")]
        epochs = EpochList(entries)
        for key, ack in list(self.checker.acks.items()):
            entry = epochs.entry_for(self._commit_offsets[key])
            self.checker.acks[key] = dataclasses.replace(ack, epoch=entry.epoch if entry else 0)


class EpochList:
    """An epoch list read from runtime info (:meth:`entry_for` as the epoch file's)."""

    def __init__(self, entries: list[EpochEntry]) -> None:
        self._entries = entries

    def entry_for(self, offset: int) -> EpochEntry | None:
        found: EpochEntry | None = None
        for entry in self._entries:
            if entry.start_offset > offset:
                break
            found = entry
        return found


def kill_summary(kill_to_ack_ms: list[float]) -> str:
    """SIGKILL of the master to the first acknowledged send on the new one, p50/p99/max."""
    figures = Report(unavailability_ms=kill_to_ack_ms)
    return (
        f"kill->ack n={len(kill_to_ack_ms)} p50={figures.percentile_ms(0.5):.0f} ms "
        f"p99={figures.percentile_ms(0.99):.0f} ms max={max(kill_to_ack_ms, default=0):.0f} ms"
    )


async def run_controller_chaos(
    root: Path, faults: list[Fault], log: Callable[[str], None]
) -> tuple[Report, list[float]]:
    """Run ``faults`` against a fresh controller-mode cluster under ``root``; returns the
    master's report and the SIGKILL-to-first-ack times (ms). Raises AssertionError when the
    slave disagrees on an acknowledged message."""
    runner = ControllerRunner(root, log)
    try:
        await runner.start()
        await runner.run(faults)
        on_master, on_slave = await runner.verify()
    finally:
        await runner.stop()
    if on_master.split_brain:
        log(f"split brain: {on_master.split_brain}")
    if on_master.lost:  # the brokers' and the controller's logs are under root
        log(f"lost: {on_master.lost[:20]}")
    log(f"master: {on_master.summary()}")
    log(f"slave:  {on_slave.summary()}")
    if on_slave.lost or on_slave.duplicated:
        raise AssertionError(f"the slave disagrees: {on_slave.summary()}")
    return on_master, runner.kill_to_ack_ms
