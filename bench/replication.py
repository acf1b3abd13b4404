"""Replication cost: send throughput of a single broker, an ASYNC_MASTER and a SYNC_MASTER with
one slave, and the slave's lag under that load.

Every broker is a real ``bolide broker`` process (plus ``bolide namesrv``) on loopback, in a
temporary directory, ASYNC flush. The load is raw SEND_MESSAGE requests with 1 KiB bodies from
``--connections`` connections with ``--window`` sends in flight each (pipelined, matched by
opaque). A send counts when it answers SUCCESS (under SYNC_MASTER: once the slave has it).

While the load runs, the master's GET_BROKER_RUNTIME_INFO is sampled every 100 ms for the
replication lag it reports (``haReplicaLagBytes``, ``haReplicaLagMs``: its slave's distance
in bytes and the age of the oldest record the slave lacks). After the load, the time until the
slave has everything is the catch-up time.

    .venv/bin/python bench/replication.py [--messages 30000] [--window 32] [--connections 2]
        [--body-bytes 1024]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson

from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import CreateTopicRequestHeader, SendMessageRequestHeader
from bolide.protocol.message import PropertyKey
from bolide.protocol.record import encode_properties
from bolide.remoting import ClientPool

TOPIC = "bench-replication"
QUEUES = 8
START_TIMEOUT_S = 60.0
SAMPLE_INTERVAL_S = 0.1
BOLIDE = str(Path(sys.executable).parent / "bolide")


@dataclass(frozen=True, slots=True)
class Options:
    messages: int
    window: int
    connections: int
    body_bytes: int


@dataclass(frozen=True, slots=True)
class Result:
    setup: str
    messages_per_s: float
    p50_ms: float
    p99_ms: float
    lag_bytes_max: int | None = None
    lag_ms_max: int | None = None
    lag_ms_median: float | None = None
    catch_up_ms: float | None = None

    def row(self) -> str:
        lag = (
            f"{self.lag_bytes_max / 1024:.0f} KiB / {self.lag_ms_max} ms / "
            f"{self.lag_ms_median:.0f} ms / {self.catch_up_ms:.0f} ms"
            if self.lag_bytes_max is not None
            and self.lag_ms_median is not None
            and self.catch_up_ms is not None
            else "-"
        )
        return (
            f"| {self.setup} | {self.messages_per_s:,.0f} | {self.p50_ms:.2f} | "
            f"{self.p99_ms:.2f} | {lag} |"
        )


class Process:
    def __init__(self, process: asyncio.subprocess.Process, ready: str) -> None:
        self.process = process
        self.address = ready.split()[-1].split("=", 1)[1]

    async def stop(self) -> None:
        if self.process.returncode is None:
            self.process.terminate()
        await asyncio.wait_for(self.process.wait(), START_TIMEOUT_S)


async def _spawn(*arguments: str, cwd: Path) -> Process:
    process = await asyncio.create_subprocess_exec(
        BOLIDE, *arguments, cwd=cwd, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    assert process.stdout is not None
    line = await asyncio.wait_for(process.stdout.readline(), START_TIMEOUT_S)
    return Process(process, line.decode().strip())


async def _broker(root: Path, name: str, namesrv: str, settings: dict[str, object]) -> Process:
    conf = root / f"{name}.conf"
    lines = {"brokerName": "broker-a", "namesrvAddr": namesrv,
             "storePathRootDir": root / name / "store", **settings}  # fmt: skip
    conf.write_text("".join(f"{key}={value}\n" for key, value in lines.items()))
    return await _spawn("broker", "-c", str(conf), "--data-dir", str(root / name), cwd=root)


def _send_request(body: bytes, index: int) -> RemotingCommand:
    properties = encode_properties(
        {PropertyKey.UNIQ_KEY: f"BENCH{index:020d}", PropertyKey.WAIT: "true"}
    )
    header = SendMessageRequestHeader(
        producer_group="PG_BENCH_HA", topic=TOPIC, default_topic="TBW102",
        default_topic_queue_count=QUEUES, queue_id=index % QUEUES, sys_flag=0,
        born_timestamp_ms=int(time.time() * 1000), flag=0, properties=properties,
    )  # fmt: skip
    return RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, header.to_v2_ext_fields(), body)


async def _runtime(pool: ClientPool, address: str) -> dict[str, str]:
    request = RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO)
    response = await pool.invoke(address, request, 10_000)
    table: dict[str, str] = orjson.loads(response.body)["table"]
    return table


async def _load(address: str, options: Options) -> tuple[float, list[float]]:
    """Send ``options.messages`` over ``connections`` connections, ``window`` in flight
    on each; returns (messages per second, latencies in ms)."""
    body = b"x" * options.body_bytes
    latencies: list[float] = []
    counter = iter(range(options.messages))
    pools = [ClientPool() for _ in range(options.connections)]
    try:
        started = time.perf_counter()
        await asyncio.gather(
            *(
                _sender_on(pool, address, body, counter, latencies)
                for pool in pools
                for _ in range(options.window)
            )
        )
        elapsed = time.perf_counter() - started
    finally:
        for pool in pools:
            await pool.close()
    return options.messages / elapsed, latencies


async def _sender_on(
    pool: ClientPool, address: str, body: bytes, counter: Iterator[int], latencies: list[float]
) -> None:
    for index in counter:
        started = time.perf_counter()
        response = await pool.invoke(address, _send_request(body, index), 30_000)
        if response.code != ResponseCode.SUCCESS:
            raise RuntimeError(f"send answered {response.code}: {response.remark}")
        latencies.append((time.perf_counter() - started) * 1000)


async def _scenario(setup: str, role: str | None, options: Options) -> Result:
    with tempfile.TemporaryDirectory(prefix="bolide-bench-ha-") as directory:
        root = Path(directory)
        namesrv = await _spawn("namesrv", "--port", "0", "--data-dir", str(root / "ns"), cwd=root)
        servers = [namesrv]
        pool = ClientPool()
        try:
            # Port 0 everywhere: the ready line shows the real address, and the slave learns
            # the master's real HA address from the name server (REGISTER_BROKER answer).
            settings: dict[str, object] = {"listenPort": 0, "brokerId": 0}
            if role is not None:
                settings.update(brokerRole=role, haListenPort=0)
            master = await _broker(root, "master", namesrv.address, settings)
            servers.append(master)
            slave = None
            if role is not None:
                slave = await _broker(root, "slave", namesrv.address, {
                    "listenPort": 0, "brokerId": 1, "brokerRole": "SLAVE"})  # fmt: skip
                servers.append(slave)
                # Another process's state: polled (the bench has no event to wait on).
                while (await _runtime(pool, master.address)).get("haConnectionCount") != "1":  # noqa: ASYNC110
                    await asyncio.sleep(0.05)
            header = CreateTopicRequestHeader(TOPIC, "TBW102", QUEUES, QUEUES, 6)
            await pool.invoke(master.address, RemotingCommand.request(
                RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext_fields()))  # fmt: skip
            samples: list[tuple[int, int]] = []
            sampling = asyncio.Event()

            async def sample() -> None:
                while not sampling.is_set():
                    table = await _runtime(pool, master.address)
                    samples.append(
                        (
                            int(table.get("haReplicaLagBytes", 0)),
                            int(table.get("haReplicaLagMs", 0)),
                        )
                    )
                    await asyncio.sleep(SAMPLE_INTERVAL_S)

            sampler = asyncio.create_task(sample()) if slave is not None else None
            rate, latencies = await _load(master.address, options)
            load_end = time.perf_counter()
            sampling.set()
            if sampler is not None:
                await sampler
            catch_up_ms = None
            if slave is not None:
                master_end = (await _runtime(pool, master.address))["commitLogMaxOffset"]
                while (await _runtime(pool, slave.address))["commitLogMaxOffset"] != master_end:  # noqa: ASYNC110
                    await asyncio.sleep(0.01)
                catch_up_ms = (time.perf_counter() - load_end) * 1000
            latencies.sort()
            return Result(
                setup,
                rate,
                statistics.median(latencies),
                latencies[int(len(latencies) * 0.99) - 1],
                max((s[0] for s in samples), default=None) if slave else None,
                max((s[1] for s in samples), default=None) if slave else None,
                statistics.median(s[1] for s in samples) if slave and samples else None,
                catch_up_ms,
            )
        finally:
            await pool.close()
            for server in reversed(servers):
                await server.stop()


async def run(options: Options) -> list[Result]:
    return [
        await _scenario("single broker (no slave)", None, options),
        await _scenario("ASYNC_MASTER + slave", "ASYNC_MASTER", options),
        await _scenario("SYNC_MASTER + slave", "SYNC_MASTER", options),
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=30_000)
    parser.add_argument("--window", type=int, default=32)
    parser.add_argument("--connections", type=int, default=2)
    parser.add_argument("--body-bytes", type=int, default=1024)
    arguments = parser.parse_args(argv)
    options = Options(
        arguments.messages, arguments.window, arguments.connections, arguments.body_bytes
    )
    results = asyncio.run(run(options))
    print(
        f"bench/replication.py --messages {options.messages} --window {options.window} "
        f"--connections {options.connections} --body-bytes {options.body_bytes}"
    )
    print("| setup | msgs/s | p50 ms | p99 ms | lag: max bytes / max age / median age / catch-up |")
    print("| --- | ---: | ---: | ---: | --- |")
    for result in results:
        print(result.row())


if __name__ == "__main__":
    main()
