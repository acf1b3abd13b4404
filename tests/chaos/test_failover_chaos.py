"""Failover chaos, CI-sized: 50 seeded fault schedules (link resets, partitions, stalled
links, SIGSTOP/SIGCONT and SIGKILL of the master) against a static SYNC_MASTER + SLAVE; then
every queue is read back and no acknowledged message may be lost, doubled, misplaced or out
of its producer's order. The harness's parts are tested on their own first."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.chaos.failover_checker import (
    FAULT_KINDS,
    Ack,
    Checker,
    Stored,
    body_for,
    schedules,
)
from tests.chaos.failover_proxy import LinkState, ProxyMesh
from tests.chaos.failover_run import run_chaos

SEED = 25
SCHEDULES = 50


def _ack(
    producer: str, sequence: int, queue_offset: int, address: str = "a", epoch: int = 1
) -> Ack:
    return Ack(producer, sequence, 0, queue_offset, "broker-a", address, 1, 0.0)


def test_checker_finds_each_kind_of_violation() -> None:
    checker = Checker()
    for sequence, offset in ((0, 0), (1, 1), (2, 2), (3, 3)):
        checker.ack(_ack("p", sequence, offset))
    checker.ack(_ack("q", 0, 5, address="b"))  # another broker wrote in epoch 1
    stored = [
        Stored(0, 0, body_for("p", 0)),
        Stored(0, 2, body_for("p", 1)),  # p:1 and p:2 swapped: out of order, misplaced
        Stored(0, 1, body_for("p", 2)),
        Stored(0, 4, body_for("q", 0)),
        Stored(0, 6, body_for("q", 0)),  # twice
    ]
    report = checker.verify(stored)
    assert report.lost == ["p:3"]
    assert report.duplicated == ["q:0"]
    assert len(report.misplaced) == 3
    assert report.out_of_order == ["p on queue 0"]
    assert report.split_brain == ["broker-a epoch 1: ['a', 'b']"]
    assert not report.ok
    clean = Checker()
    clean.ack(_ack("p", 0, 0))
    assert clean.verify([Stored(0, 0, body_for("p", 0))]).ok


def test_schedules_are_seeded_and_use_every_kind() -> None:
    first, again = schedules(SEED, 500), schedules(SEED, 500)
    assert first == again
    assert {fault.kind for fault in first} == set(FAULT_KINDS)
    assert schedules(SEED + 1, 50) != schedules(SEED, 50)


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while data := await reader.read(1024):
        writer.write(data)
        await writer.drain()
    writer.close()


async def test_proxy_forwards_holds_discards_and_resets() -> None:
    server = await asyncio.start_server(_echo, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    mesh = ProxyMesh()
    try:
        proxy = await mesh.proxy_for("client", "echo", f"127.0.0.1:{port}")
        assert await mesh.proxy_for("client", "echo", "ignored") is proxy
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        writer.write(b"one")
        assert await reader.readexactly(3) == b"one"
        proxy.pause()
        writer.write(b"two")
        read = asyncio.ensure_future(reader.readexactly(3))
        await asyncio.sleep(0)  # the held bytes must not arrive while paused
        assert not read.done()
        proxy.heal()
        assert await read == b"two"
        assert mesh.partition("echo", "client") == 1
        assert proxy.state is LinkState.BLACKHOLE
        writer.write(b"lost")
        while proxy.discarded_bytes < 4:  # until the pump swallowed it
            proxy.discarded.clear()
            await proxy.discarded.wait()
        mesh.heal_all()  # the stream lost bytes: it is reset, a new one works
        assert await reader.read(10) == b""
        writer.close()
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        writer.write(b"three")
        assert await reader.readexactly(5) == b"three"
        proxy.drop()
        assert await reader.read(10) == b""
        writer.close()
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        assert await reader.read(10) == b""  # refused while dropped
        writer.close()
    finally:
        await mesh.stop()
        server.close()
        await server.wait_closed()


@pytest.mark.slow
@pytest.mark.timeout(600)
async def test_fifty_fault_schedules_lose_nothing_acknowledged(tmp_path: Path) -> None:
    faults = schedules(SEED, SCHEDULES)
    report = await run_chaos(tmp_path / "chaos", faults, print)
    print(f"failover chaos (seed {SEED}, {SCHEDULES} schedules): {report.summary()}")
    assert report.acknowledged > SCHEDULES
    assert report.read_back == report.acknowledged
    assert report.ok, report.summary()
    assert report.failovers == sum(fault.kind != "none" for fault in faults)


@pytest.mark.slow
@pytest.mark.timeout(600)
async def test_bolide_producers_through_process_faults(tmp_path: Path) -> None:
    """The same run with Bolide's Producer (routes from the name server, as controller mode
    needs) through the faults that reach it: SIGSTOP, SIGKILL and a master-slave partition."""
    weights = {"none": 1, "partition_ha": 2, "sigstop": 2, "sigkill": 1}
    weights.update(dict.fromkeys(("drop", "blackhole", "pause_link"), 0))
    faults = schedules(SEED, 12, weights)
    report = await run_chaos(tmp_path / "chaos", faults, print, through_producer=True)
    print(f"failover chaos through producers (seed {SEED}, 12 schedules): {report.summary()}")
    assert report.acknowledged > 12
    assert report.read_back == report.acknowledged
    assert report.ok, report.summary()
