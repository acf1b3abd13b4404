"""Seeded chaos: a SYNC_MASTER killed with SIGKILL 20 times mid-stream, restarted on its data;
and its slave killed 4 times in the middle of transfers.

Four concurrent senders write to the master; at seeded moments the master process is killed
(sends in flight fail or were acknowledged); while it is down every message acknowledged so
far is read back from the slave alone; then it is restarted on its data directory. Every
fifth round the slave is killed instead (while the master streams to it) and restarted: it
recovers its log, resumes from its last whole record and catches up. Only
SEND_OK counts as acknowledged: under SYNC_MASTER the slave has those bytes. At the end every
acknowledged message must be on the slave (and on the restarted master), none twice.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from pathlib import Path

import pytest

from bolide.base.errors import BolideError
from bolide.protocol.codes import ResponseCode
from tests.chaos.replication_support import HaGroup
from tests.integration.wire import send_request

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

SEED = 19
KILLS = 20
SLAVE_KILL_EVERY = 5
SENDERS = 4
TOPIC = "ChaosReplicated"
QUEUES = 4


class Acks(list[bytes]):
    """Acknowledged bodies; :attr:`reached` is set once ``target`` of them arrived."""

    def __init__(self) -> None:
        super().__init__()
        self.target = 0
        self.reached = asyncio.Event()

    def add(self, body: bytes) -> None:
        self.append(body)
        if len(self) >= self.target:
            self.reached.set()


async def _sender(group: HaGroup, name: str, acked: Acks, stop: asyncio.Event) -> None:
    sequence = 0
    while not stop.is_set():
        body = f"{name}-{sequence}".encode()
        sequence += 1
        request = send_request(TOPIC, body, queue_id=sequence % QUEUES)
        try:
            response = await group.pool.invoke(group.master_address, request, 5_000)
        except BolideError:
            return  # the master died under this send: not acknowledged
        if response.code == ResponseCode.SUCCESS:
            acked.add(body)


async def _load_until(
    group: HaGroup, name: str, acked: Acks, rng: random.Random
) -> tuple[asyncio.Event, list[asyncio.Task[None]]]:
    """Start the senders; return once a seeded number more sends were acknowledged."""
    stop = asyncio.Event()
    acked.target = len(acked) + rng.randint(20, 120)
    acked.reached.clear()
    senders = [
        asyncio.create_task(_sender(group, f"{name}s{index}", acked, stop))
        for index in range(SENDERS)
    ]
    async with asyncio.timeout(60):
        await acked.reached.wait()
    return stop, senders


async def _all_on_slave(group: HaGroup, acked: Acks) -> bool:
    on_slave = Counter(await group.read_all(group.slave_address, TOPIC, QUEUES))
    return all(on_slave[body] > 0 for body in acked)


async def test_twenty_master_kills_lose_no_acknowledged_message(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    group = HaGroup(tmp_path / "ha")
    acked = Acks()
    attempts = 0
    slave_kills = 0
    try:
        await group.start()
        await group.wait_until(group.slave_in_sync)
        await group.create_topic(TOPIC, QUEUES)
        for round_number in range(KILLS):
            if round_number % SLAVE_KILL_EVERY == SLAVE_KILL_EVERY - 1:
                stop, senders = await _load_until(group, f"r{round_number}a", acked, rng)
                await group.kill_slave()  # mid-transfer: frames in flight
                stop.set()
                await asyncio.gather(*senders)
                slave_kills += 1
                await group.start_slave()
                await group.wait_until(group.slave_in_sync)
            stop, senders = await _load_until(group, f"r{round_number}", acked, rng)
            await group.kill_master()  # mid-stream: sends in flight
            stop.set()
            await asyncio.gather(*senders)
            attempts += 1
            # The master's machine is gone: what was acknowledged is read from the slave now,
            # before the master comes back (its dispatch may lag the HA bytes: bounded wait).
            await group.wait_until(lambda: _all_on_slave(group, acked))
            await group.start_master()
            await group.wait_until(group.slave_in_sync)
        on_slave = Counter(await group.read_all(group.slave_address, TOPIC, QUEUES))
        on_master = Counter(await group.read_all(group.master_address, TOPIC, QUEUES))
    finally:
        await group.stop()
    lost = [body for body in acked if on_slave[body] == 0]
    duplicated = [body for body, count in on_slave.items() if count > 1]
    print(
        f"replication chaos (seed {SEED}): master kills={attempts} slave kills={slave_kills} "
        f"acknowledged={len(acked)} "
        f"read back from the slave={sum(on_slave[b] > 0 for b in acked)} lost={len(lost)} "
        f"duplicated={len(duplicated)}"
    )
    assert attempts == KILLS
    assert lost == []
    assert duplicated == []
    assert all(on_master[body] == 1 for body in acked)
