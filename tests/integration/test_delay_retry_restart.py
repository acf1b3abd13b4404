"""A restart in the middle of pending delayed and timer messages delivers each exactly once:
after a clean stop (in process) and after ``kill -9`` of a ``bolide standalone`` process.

Each message carries its own UNIQ_KEY; after the restart every real topic is read to the end
and the keys are counted: none missing, none twice. The kill lands while deliveries are under
way (right after the first level-1 delivery was seen), so the progress on disk lags what was
delivered: the broker's start-up scan of the commit log keeps the duplicates at zero.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bolide.protocol.codes import ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import PullSysFlag
from bolide.protocol.message import PropertyKey
from bolide.remoting import ClientPool
from tests.integration.wire import BrokerWire, connected, pull_request, records

pytestmark = pytest.mark.timeout(180)

BOLIDE = str(Path(sys.executable).parent / "bolide")
READY_TIMEOUT_S = 60.0
LONG_POLL = PullSysFlag.SUBSCRIPTION | PullSysFlag.SUSPEND
LEVEL_TOPIC = "restart-levels"
TIMER_TOPIC_NAME = "restart-timers"
COUNT = 40


async def _send_pending(wire: BrokerWire) -> None:
    for number in range(COUNT):
        level = await wire.send(
            LEVEL_TOPIC, b"L", properties={"DELAY": str(1 + number % 2), "UNIQ_KEY": f"L{number}"}
        )
        assert level.code == ResponseCode.SUCCESS, level.remark
        delay_ms = 300 + 60 * number  # spread over ~2.7 s
        timer = await wire.send(
            TIMER_TOPIC_NAME,
            b"T",
            properties={"TIMER_DELAY_MS": str(delay_ms), "UNIQ_KEY": f"T{number}"},
        )
        assert timer.code == ResponseCode.SUCCESS, timer.remark


async def _read_all(wire: BrokerWire, topic: str, expected: int) -> list[str]:
    """Every UNIQ_KEY of ``topic`` queue 0, long-polling until ``expected`` arrived, then one
    more short poll to catch any extra delivery."""
    keys: list[str] = []
    for _ in range(expected + 10):
        suspend_ms = 15_000 if len(keys) < expected else 3_000
        request = pull_request(topic, 0, len(keys), group="CG_RESTART", sys_flag=LONG_POLL,
                               suspend_timeout_ms=suspend_ms)  # fmt: skip
        response = await wire.invoke(request, timeout_ms=30_000)
        if response.code == ResponseCode.PULL_NOT_FOUND:
            if len(keys) >= expected:
                return keys
            continue
        assert response.code == ResponseCode.SUCCESS, response.remark
        keys += [message.properties[PropertyKey.UNIQ_KEY] for message in records(response)]
    raise AssertionError(f"{topic}: {len(keys)} of {expected} after many polls")


async def _first(wire: BrokerWire, topic: str) -> RemotingCommand:
    """Long-poll ``topic`` queue 0 from offset 0 (one poll: something is due within it)."""
    request = pull_request(topic, 0, 0, group="CG_RESTART", sys_flag=LONG_POLL)
    return await wire.invoke(request, timeout_ms=30_000)


def _check_exactly_once(keys: list[str], prefix: str) -> None:
    counts = collections.Counter(keys)
    duplicates = {key: count for key, count in counts.items() if count > 1}
    missing = {f"{prefix}{n}" for n in range(COUNT)} - set(counts)
    assert not duplicates, f"delivered twice: {duplicates}"
    assert not missing, f"never delivered: {missing}"


async def test_clean_restart_delivers_each_pending_message_once(tmp_path: Path) -> None:
    settings = {"messageDelayLevel": "1s 2s"}
    async with connected(tmp_path, settings=settings) as (_, wire):
        await _send_pending(wire)
        first = await _first(wire, TIMER_TOPIC_NAME)
        assert first.code == ResponseCode.SUCCESS  # some timers delivered, most pending
    async with connected(tmp_path, settings=settings) as (_, wire):
        _check_exactly_once(await _read_all(wire, LEVEL_TOPIC, COUNT), "L")
        _check_exactly_once(await _read_all(wire, TIMER_TOPIC_NAME, COUNT), "T")


@contextlib.asynccontextmanager
async def _standalone(
    data_dir: Path, conf: Path
) -> AsyncIterator[tuple[asyncio.subprocess.Process, str]]:
    process = await asyncio.create_subprocess_exec(
        BOLIDE, "standalone", "--namesrv-port", "0", "--broker-port", "0", "--proxy-port", "0",
        "--no-metrics", "--no-dashboard",
        "--data-dir", str(data_dir), "-c", str(conf),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    assert process.stdout is not None
    try:
        line = (await asyncio.wait_for(process.stdout.readline(), READY_TIMEOUT_S)).decode()
        fields = dict(part.split("=", 1) for part in line.split()[2:])
        yield process, fields["broker"]
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
        await asyncio.wait_for(process.wait(), READY_TIMEOUT_S)


async def test_kill_9_during_delivery_delivers_each_pending_message_once(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("messageDelayLevel=1s 2s\n")
    data_dir = tmp_path / "data"
    pool = ClientPool()
    try:
        async with _standalone(data_dir, conf) as (process, address):
            wire = BrokerWire(pool, address)
            await _send_pending(wire)
            first = await _first(wire, LEVEL_TOPIC)
            assert first.code == ResponseCode.SUCCESS
            # Mid-delivery: level 1 is being delivered, level 2 and half the timers pending.
            process.send_signal(signal.SIGKILL)
            assert await asyncio.wait_for(process.wait(), READY_TIMEOUT_S) == -signal.SIGKILL
        await pool.close()
        pool = ClientPool()
        async with _standalone(data_dir, conf) as (_, address):
            wire = BrokerWire(pool, address)
            _check_exactly_once(await _read_all(wire, LEVEL_TOPIC, COUNT), "L")
            _check_exactly_once(await _read_all(wire, TIMER_TOPIC_NAME, COUNT), "T")
    finally:
        await pool.close()
