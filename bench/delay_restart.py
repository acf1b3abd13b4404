"""Exactly once across kill -9: delayed and timer messages pending while the broker is killed.

Each cycle starts ``bolide standalone`` on a fresh data directory (messageDelayLevel
"1s 2s"), sends ``--messages`` level messages (levels 1 and 2) and as many timer messages
(due 0.3 .. 2.7 s later), waits a random moment (seeded) between the first and the last due
time, kills the process with SIGKILL, starts it again on the same directory and reads every
real topic to the end. It counts messages delivered twice and messages never delivered.

    .venv/bin/python bench/delay_restart.py [--cycles 10] [--messages 200] [--seed 1]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import random
import signal
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import PullMessageRequestHeader, PullSysFlag, SendMessageRequestHeader
from bolide.protocol.message import PropertyKey
from bolide.protocol.record import decode_records, encode_properties
from bolide.remoting import ClientPool

BOLIDE = str(Path(sys.executable).parent / "bolide")
TOPICS = ("restart-levels", "restart-timers")


@contextlib.asynccontextmanager
async def _standalone(
    data_dir: Path, conf: Path
) -> AsyncIterator[tuple[asyncio.subprocess.Process, str]]:
    process = await asyncio.create_subprocess_exec(
        BOLIDE, "standalone", "--namesrv-port", "0", "--broker-port", "0",
        "--no-proxy", "--no-metrics", "--no-dashboard",
        "--data-dir", str(data_dir), "-c", str(conf),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    assert process.stdout is not None
    try:
        line = (await asyncio.wait_for(process.stdout.readline(), 60)).decode()
        yield process, dict(part.split("=", 1) for part in line.split()[2:])["broker"]
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
        await asyncio.wait_for(process.wait(), 60)


async def _send(pool: ClientPool, address: str, topic: str, properties: dict[str, str]) -> None:
    header = SendMessageRequestHeader(
        producer_group="PG_RESTART", topic=topic, default_topic="TBW102",
        default_topic_queue_count=1, queue_id=0, sys_flag=0,
        born_timestamp_ms=time.time_ns() // 1_000_000, flag=0,
        properties=encode_properties(properties),
    )  # fmt: skip
    request = RemotingCommand.request(RequestCode.SEND_MESSAGE, header.to_ext_fields(), b"x")
    response = await pool.invoke(address, request, 10_000)
    if response.code != ResponseCode.SUCCESS:
        raise RuntimeError(f"send: {response.code} {response.remark}")


async def _keys(pool: ClientPool, address: str, topic: str, expected: int) -> list[str]:
    keys: list[str] = []
    while True:
        suspend_ms = 15_000 if len(keys) < expected else 3_000
        header = PullMessageRequestHeader(
            consumer_group="CG_RESTART", topic=topic, queue_id=0, queue_offset=len(keys),
            max_messages=32, sys_flag=PullSysFlag.SUBSCRIPTION | PullSysFlag.SUSPEND,
            commit_offset=0, suspend_timeout_ms=suspend_ms, sub_version=0, subscription="*",
        )  # fmt: skip
        request = RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext_fields())
        response = await pool.invoke(address, request, 30_000)
        if response.code == ResponseCode.SUCCESS:
            keys += [m.properties[PropertyKey.UNIQ_KEY] for m in decode_records(response.body)]
        elif len(keys) >= expected:
            return keys


async def _cycle(root: Path, conf: Path, count: int, rng: random.Random) -> tuple[int, int, int]:
    """(delivered before the kill, duplicates, missing)."""
    data_dir = root / f"cycle-{rng.randrange(1 << 30)}"
    pool = ClientPool()
    try:
        async with _standalone(data_dir, conf) as (process, address):
            for number in range(count):
                await _send(pool, address, TOPICS[0],
                            {"DELAY": str(1 + number % 2), "UNIQ_KEY": f"L{number}"})  # fmt: skip
                await _send(pool, address, TOPICS[1], {
                    "TIMER_DELAY_MS": str(300 + 2_400 * number // count), "UNIQ_KEY": f"T{number}"
                })  # fmt: skip
            await asyncio.sleep(0.3 + rng.random() * 2.4)  # a random moment mid-delivery
            process.send_signal(signal.SIGKILL)
            await process.wait()
        await pool.close()
        pool = ClientPool()
        duplicates = missing = 0
        async with _standalone(data_dir, conf) as (_, address):
            for topic, prefix in zip(TOPICS, "LT", strict=True):
                counts = collections.Counter(await _keys(pool, address, topic, count))
                duplicates += sum(c - 1 for c in counts.values() if c > 1)
                missing += len({f"{prefix}{n}" for n in range(count)} - set(counts))
        return 2 * count, duplicates, missing
    finally:
        await pool.close()


async def _run(options: argparse.Namespace) -> None:
    rng = random.Random(options.seed)
    with tempfile.TemporaryDirectory(prefix="bolide-bench-restart-") as directory:
        root = Path(directory)
        conf = root / "broker.conf"
        conf.write_text("messageDelayLevel=1s 2s\n")
        totals = [0, 0, 0]
        for cycle in range(options.cycles):
            sent, duplicates, missing = await _cycle(root, conf, options.messages, rng)
            print(f"cycle {cycle}: {sent} sent (pending or in delivery at the kill), "
                  f"{duplicates} duplicates, {missing} missing")  # fmt: skip
            for index, value in enumerate((sent, duplicates, missing)):
                totals[index] += value
    print(f"command: {' '.join([Path(sys.executable).name, *sys.argv])}")
    print(f"total: {totals[0]} messages over {options.cycles} kill -9 cycles, "
          f"{totals[1]} delivered twice, {totals[2]} never delivered")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=10)
    parser.add_argument("--messages", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    asyncio.run(_run(parser.parse_args()))


if __name__ == "__main__":
    main()
