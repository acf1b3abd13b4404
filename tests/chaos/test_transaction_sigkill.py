"""kill -9 of a broker between half messages and their end: after a restart every undecided
transaction is checked again and settled, every committed message is delivered exactly
once, every rolled-back one never.

A real ``bolide standalone`` child process serves phase 1 (no checks: a one-hour interval);
the parent, speaking the wire as a Java producer, stores halves and commits a third, rolls
back a third, leaves a third undecided, and sends a few commits oneway just before the kill.
Phase 2 restarts on the same data directory with a 200 ms check interval; the parent answers
the checks and then reads the topic back.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bolide.protocol.bodies.transaction import HalfMessageList
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.message import PropertyKey
from bolide.protocol.record import decode_records
from tests.broker.transaction_support import COMMIT, ROLLBACK, Half, WireProducer
from tests.integration.wire import pull_request

pytestmark = pytest.mark.timeout(180)

BOLIDE = str(Path(sys.executable).parent / "bolide")
READY_TIMEOUT_S = 60.0
SETTLE_TIMEOUT_S = 60.0
TOPIC = "chaos-tx"
GROUP = "chaos-tx-producers"
HALVES = 30
ONEWAY_COMMITS = 5


@contextlib.asynccontextmanager
async def standalone(
    data: Path, conf: Path
) -> AsyncIterator[tuple[asyncio.subprocess.Process, str]]:
    """A ``bolide standalone`` child on free ports; yields it and its broker address. The
    test kills it (or it is killed here on the way out)."""
    process = await asyncio.create_subprocess_exec(
        BOLIDE, "standalone", "--namesrv-port", "0", "--broker-port", "0", "--proxy-port", "0",
        "--no-metrics", "--no-dashboard",
        "--data-dir", str(data), "-c", str(conf),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    assert process.stdout is not None
    try:
        line = (await asyncio.wait_for(process.stdout.readline(), READY_TIMEOUT_S)).decode()
        assert line.startswith("bolide ready "), line
        fields = dict(part.split("=", 1) for part in line.split()[2:])
        yield process, fields["broker"]
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def pending(producer: WireProducer) -> int:
    request = RemotingCommand.request(RequestCode.BOLIDE_QUERY_HALF_MESSAGES)
    response = await producer.invoke(request)
    assert response.code == ResponseCode.SUCCESS
    return HalfMessageList.from_json(response.body).pending_count


async def delivered_keys(producer: WireProducer) -> Counter[str]:
    """UNIQ_KEY -> how often a consumer reading every queue of the topic sees it."""
    seen: Counter[str] = Counter()
    for queue_id in range(4):
        offset = 0
        while True:
            response = await producer.invoke(pull_request(TOPIC, queue_id, offset))
            if response.code != ResponseCode.SUCCESS:
                break
            messages = decode_records(response.body)
            seen.update(message.properties[PropertyKey.UNIQ_KEY] for message in messages)
            offset = int(response.ext_fields["nextBeginOffset"])
    return seen


async def test_undecided_transactions_are_settled_after_kill_9(tmp_path: Path) -> None:
    data = tmp_path / "data"
    quiet, checking = tmp_path / "quiet.conf", tmp_path / "checking.conf"
    quiet.write_text("transactionCheckInterval=3600000\n")
    checking.write_text("transactionCheckInterval=200\ntransactionTimeOut=0\n")
    committed: set[str] = set()
    rolled_back: set[str] = set()
    undecided: set[str] = set()

    async with standalone(data, quiet) as (process, address):
        producer = WireProducer(address, GROUP, "10.0.0.9@chaos")
        try:
            await producer.heartbeat()
            for index in range(HALVES):
                half = await producer.send_half(TOPIC, f"order-{index}".encode())
                if index % 3 == 0:
                    assert (await producer.end(half, COMMIT)).code == ResponseCode.SUCCESS
                    committed.add(half.unique_key)
                elif index % 3 == 1:
                    assert (await producer.end(half, ROLLBACK)).code == ResponseCode.SUCCESS
                    rolled_back.add(half.unique_key)
                else:
                    undecided.add(half.unique_key)
            last: list[Half] = [
                await producer.send_half(TOPIC, f"last-{index}".encode())
                for index in range(ONEWAY_COMMITS)
            ]
            for half in last:  # oneway, as clients send it: the kill may land before any
                await producer.pool.invoke_oneway(
                    address, producer.end_request(half, COMMIT, oneway=True), 1_000
                )
            process.send_signal(signal.SIGKILL)
            assert await asyncio.wait_for(process.wait(), READY_TIMEOUT_S) == -signal.SIGKILL
        finally:
            await producer.close()
    to_commit = undecided | {half.unique_key for half in last}

    async with standalone(data, checking) as (process, address):
        producer = WireProducer(address, GROUP, "10.0.0.9@chaos")
        try:
            await producer.heartbeat()
            asked: set[str] = set()
            async with asyncio.timeout(SETTLE_TIMEOUT_S):
                while await pending(producer) > 0:
                    check = await producer.next_check()
                    key = check.message.properties[PropertyKey.UNIQ_KEY]
                    assert key in to_commit, f"{key} was decided before the kill"
                    asked.add(key)
                    await producer.answer(check, COMMIT)
            assert undecided <= asked
            seen = await delivered_keys(producer)
            assert set(seen) == committed | to_commit
            assert all(count == 1 for count in seen.values()), seen
            assert not rolled_back & set(seen)
        finally:
            await producer.close()
        process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(process.wait(), READY_TIMEOUT_S) == 0
