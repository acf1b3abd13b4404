"""Fuzz the HA listener of a master broker (haListenPort; issue 30).

Structure-aware: a slave's traffic is 8-byte big-endian offset reports; the fuzzer sends
valid reports (0, the master's end), reports at edge values (negative, past the end, inside a
record, 2**63 - 1), many reports in one write, reports cut in the middle, slow writes, and raw
garbage, over many concurrent connections posing as slaves. The liveness check is a fresh
"slave" reporting offset 0 and receiving a transfer frame that starts at 0.

    .venv/bin/python bench/fuzz_ha.py [--seconds 60] [--seed 1] [--requests N]
"""

from __future__ import annotations

import asyncio
import random
import struct
import sys

from bench.fuzz_support import INTERESTING_INTS, Fuzzer, Mutator, ServerUnderTest, exchange, main
from bolide.client.message import Message
from bolide.client.producer.producer import Producer
from bolide.protocol.bodies import KVTable
from bolide.protocol.codes import RequestCode
from bolide.protocol.command import RemotingCommand
from bolide.remoting import ClientPool

__all__ = ["FUZZER", "attack", "liveness", "prepare"]

CONCURRENT_EXCHANGES = 256
"""Connections posing as slaves at once."""
ROUND_EXCHANGES = 4_096
"""Exchanges between two liveness checks (a round waits for its slowest exchange)."""
_REPORT = struct.Struct(">q")
_FRAME_HEADER = struct.Struct(">qi")
_master_end = [0]


async def prepare(server: ServerUnderTest) -> None:
    """Store a few messages (so a transfer has bytes) and learn the HA port."""
    producer = Producer("FuzzHaProducers", server.listeners["namesrv"])
    await producer.start()
    try:
        for index in range(8):
            await producer.send(Message("FuzzHa", b"x" * (index * 100 + 1)))
    finally:
        await producer.shutdown()
    pool = ClientPool()
    try:
        request = RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO)
        response = await pool.invoke(server.listeners["broker"], request)
    finally:
        await pool.close()
    table = dict(KVTable.from_json(response.body).table)
    server.listeners["ha"] = f"127.0.0.1:{table['haListenPort']}"
    _master_end[0] = int(table.get("commitLogMaxOffset", "0") or 0)


def _payload(mutator: Mutator) -> tuple[bytes, bool]:
    rng = mutator.rng
    roll = rng.random()
    if roll < 0.3:
        offsets = [rng.choice((0, _master_end[0], rng.randrange(_master_end[0] + 1)))]
    elif roll < 0.55:
        offsets = [rng.choice(INTERESTING_INTS) for _ in range(rng.randint(1, 8))]
    elif roll < 0.7:
        offsets = [rng.randrange(-(2**63), 2**63) for _ in range(rng.randint(1, 64))]
    elif roll < 0.85:
        return mutator.garbage(256), rng.random() < 0.5
    else:
        offsets = [rng.randrange(_master_end[0] + 1)]
    payload = b"".join(_REPORT.pack(max(-(2**63), min(2**63 - 1, o))) for o in offsets)
    if rng.random() < 0.2:
        payload = payload[: rng.randrange(len(payload) + 1)]  # a report cut short
    return payload, rng.random() < 0.2


async def attack(server: ServerUnderTest, rng: random.Random, budget: int) -> int:
    mutator = Mutator(rng)
    gate = asyncio.Semaphore(CONCURRENT_EXCHANGES)
    address = server.address("ha")

    async def one() -> None:
        payload, slow = _payload(mutator)
        async with gate:
            await exchange(address, payload, slow=slow, rng=rng)

    await asyncio.gather(*(one() for _ in range(budget)))
    return budget


async def liveness(server: ServerUnderTest) -> bool:
    received = await exchange(
        server.address("ha"), _REPORT.pack(0), until=lambda data: len(data) >= _FRAME_HEADER.size
    )
    if len(received) < _FRAME_HEADER.size:
        return False
    offset, size = _FRAME_HEADER.unpack_from(received)
    return bool(offset == 0 and size > 0)


FUZZER = Fuzzer("ha", attack, liveness, prepare, round_exchanges=ROUND_EXCHANGES)
"""What ``python bench/fuzz_ha.py`` and tests/fuzz/ run."""

if __name__ == "__main__":
    sys.exit(main(FUZZER))
