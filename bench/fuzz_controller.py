"""Fuzz the controller port (controller mode, 5.x; issue 30).

A real ``bolide controller`` child process keeps its state in a real one-member etcd
(:class:`bolide.testing.etcd.EtcdCluster`, started in the run's directory). Once it leads,
the fuzzer walks a broker set through the valid requests a broker and an admin send (apply an
id, register, heartbeat, elect, alter the SyncStateSet, read replica info, sync state data,
metadata and config, update the config, clean broker data, ask the next id: 904 and
1001–1013), and those become the seeds: their header fields dropped, set to edge values or
swapped between requests, their code swapped for another controller code (or any code),
their JSON bodies (SyncStateSet, broker name lists) mutated value by value, their properties
bodies (1009) given real keys with edge values; headers sent as JSON or in the ROCKETMQ
binary form; plus byte-mutated frames, pipelined bursts, raw garbage and slow or cut writes.

The liveness check asks 1005 (metadata) and, as the leader must answer it, 1012 (next broker
id) for a set the fuzzer never names; leadership lost under load (a lease not renewed in
time) is won back within the campaign interval, so 1012 is asked again until
``LEADER_TIMEOUT_S``.

    .venv/bin/python bench/fuzz_controller.py [--seconds 60] [--seed 1] [--requests N]
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
import time
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import orjson
from prometheus_client.parser import text_string_to_metric_families

from bench.fuzz_support import (
    INTERESTING_INTS,
    Fuzzer,
    Mutator,
    ServerUnderTest,
    main,
    remoting_round,
    run_bounded,
)
from bolide.base import limits
from bolide.protocol.bodies.controller import SyncStateSet, broker_names_to_json
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import FLAG_ONEWAY, RemotingCommand
from bolide.protocol.frame import SerializeType
from bolide.protocol.headers.controller import (
    AlterSyncStateSetRequestHeader,
    ApplyBrokerIdRequestHeader,
    BrokerHeartbeatRequestHeader,
    CleanBrokerDataRequestHeader,
    ElectMasterRequestHeader,
    GetMetadataInfoResponseHeader,
    GetNextBrokerIdRequestHeader,
    GetReplicaInfoRequestHeader,
    RegisterBrokerToControllerRequestHeader,
)
from bolide.remoting import ClientPool
from bolide.testing.etcd import EtcdCluster

__all__ = ["FUZZER", "ControllerUnderTest", "attack", "liveness", "prepare"]

CONCURRENT_EXCHANGES = 48
"""Connections the fuzzer keeps busy at once."""
LEADER_TIMEOUT_S = 60.0
"""How long the controller gets to win (or win back) the etcd leader key: a campaign every
few seconds, slower on a loaded machine."""
LEADER_POLL_S = 0.2
"""Between two leadership probes while waiting for it."""
CLUSTER, BROKER_SET, LIVENESS_SET = "FuzzCluster", "FuzzSet", "FuzzLivenessSet"
BROKER_ADDRESS = "127.0.0.1:30911"
CONTROLLER_CODES = (904, *range(1001, 1014))
CODES = tuple(int(code) for code in RequestCode)
PROPERTY_KEYS = (
    "enableElectUncleanMaster", "notifyBrokerRoleChanged", "scanNotActiveBrokerInterval",
    "configBlackList", "configStorePath", "unknownKey", "",
)  # fmt: skip

_seeds: list[RemotingCommand] = []
_field_names: set[str] = set()


class ControllerUnderTest(ServerUnderTest):
    """``bolide controller`` on a fresh one-member etcd, both children of the run."""

    etcd: EtcdCluster | None = None

    async def start_async(self) -> None:
        etcd_dir = self.root / "etcd"
        etcd_dir.mkdir(parents=True, exist_ok=True)
        self.etcd = EtcdCluster(etcd_dir, members=1)
        await self.etcd.start()
        bolide = str(Path(sys.executable).parent / "bolide")
        try:
            self.launch(
                [bolide, "controller", "--json", "--etcd", self.etcd.endpoints,
                 "--host", "127.0.0.1", "--port", "0", "--metrics-port", "0",
                 "--data-dir", str(self.root / "data")]
            )  # fmt: skip
        except BaseException:
            await self.etcd.stop()
            raise

    async def stop_async(self) -> None:
        try:
            self.stop()
        finally:
            if self.etcd is not None:
                await self.etcd.stop()


def _request(code: int, header: Any = None, body: bytes = b"") -> RemotingCommand:
    fields = {} if header is None else header.to_ext_fields()
    return RemotingCommand.request(code, fields, body)


def _seed_requests() -> list[RemotingCommand]:
    """The valid requests, in the order a broker set comes to life."""
    check_code = f"{BROKER_ADDRESS};fuzz-check-code"
    in_sync = SyncStateSet(frozenset({1}), 1).to_json()
    return [
        _request(1012, GetNextBrokerIdRequestHeader(CLUSTER, BROKER_SET)),
        _request(1013, ApplyBrokerIdRequestHeader(CLUSTER, BROKER_SET, 1, check_code)),
        _request(1003, RegisterBrokerToControllerRequestHeader(
            CLUSTER, BROKER_SET, 1, BROKER_ADDRESS, int(time.time() * 1000))),
        _request(904, BrokerHeartbeatRequestHeader(
            CLUSTER, BROKER_ADDRESS, BROKER_SET, 1, 0, 1024, 1024, 10_000, 1)),
        _request(1002, ElectMasterRequestHeader(CLUSTER, BROKER_SET, 1, False)),
        _request(1004, GetReplicaInfoRequestHeader(BROKER_SET)),
        _request(1001, AlterSyncStateSetRequestHeader(BROKER_SET, 1, 1), in_sync),
        _request(1006, None, broker_names_to_json([BROKER_SET])),
        _request(1006),
        _request(1005),
        _request(1010),
        _request(1009, None, b"scanNotActiveBrokerInterval=5000\nnotifyBrokerRoleChanged=true\n"),
        _request(1011, CleanBrokerDataRequestHeader(BROKER_SET, CLUSTER, "2;3", False)),
        _request(1002, ElectMasterRequestHeader(CLUSTER, BROKER_SET, 1, True)),
    ]  # fmt: skip


async def _wait_leading(server: ServerUnderTest) -> bool:
    """True once the controller answers 1012 as the leader (``LEADER_TIMEOUT_S`` at most)."""
    deadline = time.monotonic() + LEADER_TIMEOUT_S
    pool = ClientPool()
    try:
        while time.monotonic() < deadline:
            try:
                request = _request(1012, GetNextBrokerIdRequestHeader(CLUSTER, LIVENESS_SET))
                answer = await pool.invoke(server.listeners["controller"], request)
                if answer.code == ResponseCode.SUCCESS:
                    return True
                if answer.code != ResponseCode.CONTROLLER_NOT_LEADER:
                    return False
            except Exception:  # not answering is "not leading yet"; the deadline decides
                pass
            await asyncio.sleep(LEADER_POLL_S)  # another process campaigns: poll, bounded
    finally:
        await pool.close()
    return False


async def prepare(server: ServerUnderTest) -> None:
    """Wait for leadership, then send every seed once, valid (the set exists after)."""
    if not await _wait_leading(server):
        raise RuntimeError(f"the controller did not lead in time: {server.log_tail()}")
    _seeds.clear()
    _seeds.extend(_seed_requests())
    pool = ClientPool()
    try:
        for seed in _seeds:
            if seed.code == 904:  # oneway in Java; ours answers too
                await pool.invoke_oneway(server.listeners["controller"], seed)
            else:
                await pool.invoke(server.listeners["controller"], seed)
    finally:
        await pool.close()
    for seed in _seeds:
        _field_names.update(seed.ext_fields)


def _mutated_json(value: Any, rng: random.Random, mutator: Mutator) -> Any:
    """``value`` with some leaves replaced by edge values of any JSON type."""
    if isinstance(value, dict):
        return {k: _mutated_json(v, rng, mutator) for k, v in value.items() if rng.random() > 0.1}
    if isinstance(value, list):
        items = [_mutated_json(item, rng, mutator) for item in value]
        if rng.random() < 0.3:
            items.append(rng.choice(INTERESTING_INTS))
        return items
    roll = rng.random()
    if roll < 0.3:
        return rng.choice(INTERESTING_INTS)
    if roll < 0.4:
        return mutator.text(str(value))
    if roll < 0.5:
        return rng.choice((None, True, [], {}, 1.5, "1"))
    return value


def _mutated_body(body: bytes, code: int, mutator: Mutator) -> bytes:
    rng = mutator.rng
    roll = rng.random()
    if roll < 0.3 and body.startswith((b"{", b"[")):
        mutated = _mutated_json(orjson.loads(body), rng, mutator)
        return json.dumps(mutated).encode()  # not orjson: edge ints past 64 bits go out too
    if roll < 0.45 and code == 1009:
        lines = [
            f"{rng.choice(PROPERTY_KEYS)}={mutator.text(str(rng.choice(INTERESTING_INTS)))}"
            for _ in range(rng.randint(1, 4))
        ]
        return "\n".join(lines).encode("utf-8", "surrogatepass")
    if roll < 0.55 and body:
        return mutator.bytes(body)
    if roll < 0.6:
        return mutator.garbage(1024)
    return body


def _mutated_command(mutator: Mutator) -> RemotingCommand:
    rng = mutator.rng
    seed = rng.choice(_seeds)
    fields = dict(seed.ext_fields)
    for key in list(fields):
        roll = rng.random()
        if roll < 0.1:
            del fields[key]
        elif roll < 0.4:
            fields[key] = mutator.text(fields[key])
    if _field_names and rng.random() < 0.3:
        fields[rng.choice(sorted(_field_names))] = mutator.text("1")
    roll = rng.random()
    code = seed.code
    if roll < 0.25:
        code = rng.choice(CONTROLLER_CODES)
    elif roll < 0.3:
        code = rng.choice(CODES)
    return RemotingCommand(
        code=code,
        opaque=rng.randrange(2**31),
        flag=FLAG_ONEWAY if rng.random() < 0.05 else 0,
        remark=mutator.text("") if rng.random() < 0.1 else None,
        ext_fields=fields,
        body=_mutated_body(seed.body, code, mutator),
        serialize_type=SerializeType.ROCKETMQ if rng.random() < 0.2 else SerializeType.JSON,
    )


async def attack(server: ServerUnderTest, rng: random.Random, budget: int) -> int:
    mutator = Mutator(rng)
    address = server.address("controller")

    def one() -> Awaitable[int]:
        return remoting_round(
            rng,
            mutator,
            lambda: (None, _mutated_command(mutator)),
            lambda _: address,
            lambda: None,
        )

    return await run_bounded(budget, CONCURRENT_EXCHANGES, one)


async def liveness(server: ServerUnderTest) -> bool:
    """1005 answered SUCCESS, 1012 answered by a leader (within ``LEADER_TIMEOUT_S``), and the
    heartbeat table (its /metrics) within its bound after the random 904s."""
    pool = ClientPool()
    try:
        answer = await pool.invoke(server.listeners["controller"], _request(1005))
        GetMetadataInfoResponseHeader.from_ext_fields(answer.ext_fields)
        entries = await _heartbeat_table_entries(server.listeners["metrics"])
    except Exception:  # any failure to answer means "not serving"; the report says so
        return False
    finally:
        await pool.close()
    if entries > limits.CONTROLLER_HEARTBEAT_TABLE_MAX_ENTRIES:
        return False
    return answer.code == ResponseCode.SUCCESS and await _wait_leading(server)


async def _heartbeat_table_entries(metrics_address: str) -> float:
    """``bolide_controller_heartbeat_table_entries`` as the controller's /metrics says."""
    host, port = metrics_address.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(b"GET /metrics HTTP/1.1\r\nHost: fuzz\r\n\r\n")
        await writer.drain()
        body = (await reader.read()).partition(b"\r\n\r\n")[2].decode()
    finally:
        writer.close()
    for family in text_string_to_metric_families(body):
        if family.name == "bolide_controller_heartbeat_table_entries":
            return float(family.samples[0].value)
    raise LookupError("no bolide_controller_heartbeat_table_entries on /metrics")


FUZZER = Fuzzer("controller", attack, liveness, prepare, ControllerUnderTest)
"""What ``python bench/fuzz_controller.py`` and tests/fuzz/ run."""

if __name__ == "__main__":
    sys.exit(main(FUZZER))
