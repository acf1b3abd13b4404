"""An ACK_MESSAGE is answered only once its record is on disk (issue 30).

The POP log's fsync is held (a gate around ``os.fsync`` for that one file, in the worker
thread that runs it) while the ack waits: the broker answers another request meanwhile, yet
not the ack; released, the ack is answered. An ack answered before its fsync would let a
crash deliver an acknowledged message again.
"""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

import pytest

from bolide.base.clock import ManualClock
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.testing.waiting import until
from tests.broker.test_pop import _ack, _pop
from tests.integration.wire import connected, records

GUARD_S = 60.0
"""Hang guard of the held fsync: the test releases it long before."""


async def test_an_ack_is_answered_only_after_its_record_is_fsynced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with connected(tmp_path, clock=ManualClock()) as (cluster, wire):
        await wire.send("Durable", b"m0", queue_id=0)
        (message,) = records(await _pop(wire, "Durable", invisible_ms=60_000))
        pop = cluster.brokers[0].context.pop
        assert pop is not None
        log_path = pop.log.path
        size_before_ack = log_path.stat().st_size
        held = threading.Event()
        release = threading.Event()
        durable_sizes: list[int] = []
        real_fsync = os.fsync

        def gated_fsync(fd: int) -> None:
            if os.fstat(fd).st_ino == log_path.stat().st_ino:
                durable_sizes.append(os.fstat(fd).st_size)
                held.set()
                release.wait(GUARD_S)
            real_fsync(fd)

        monkeypatch.setattr(os, "fsync", gated_fsync)
        acking = asyncio.create_task(_ack(wire, message))
        try:
            await until(held.is_set)
            assert durable_sizes[-1] > size_before_ack  # the ack's record is being synced
            other = RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO)
            assert (await wire.invoke(other)).code == ResponseCode.SUCCESS
            assert not acking.done()  # answered the later request, not the unsynced ack
        finally:
            release.set()
        assert (await acking).code == ResponseCode.SUCCESS
