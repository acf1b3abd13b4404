"""Fixtures for tests that drive real RocketMQ clients."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Generator, Iterator
from pathlib import Path

import pytest

from bolide.testing.cluster import Cluster
from tests.compat.cpp_harness import ScratchServer, native_log_tail


@pytest.fixture
async def scratch_server() -> AsyncIterator[ScratchServer]:
    server = ScratchServer()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
async def bolide_cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    """A Bolide name server and broker ("broker-a") on this test's event loop."""
    async with Cluster(tmp_path / "cluster") as cluster:
        yield cluster


@pytest.fixture(autouse=True)
def sdk5_main_thread_event_loop(request: pytest.FixtureRequest) -> Iterator[None]:
    """The 5.x SDK builds its gRPC telemetry call on the calling thread, where grpc.aio asks
    ``asyncio.get_event_loop()``: in a script's main thread that answers, but once an async
    test of this process has ended, pytest-asyncio has left the main thread's loop unset and
    the SDK fails its start ("There is no current event loop in thread 'MainThread'", then
    "failed to receive initial settings"). The SDK's tests get the main thread a script has:
    one current, not running, event loop."""
    if not request.module.__name__.rpartition(".")[2].startswith("test_sdk5_"):
        yield
        return
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        yield
    finally:
        asyncio.set_event_loop(None)
        with contextlib.suppress(RuntimeError):
            loop.close()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A failing test's report carries librocketmq's last warnings (the C++ client folds most
    failures into one message, its log says which)."""
    report = yield
    if report.failed:
        tail = native_log_tail()
        if tail:
            report.sections.append(("librocketmq log (warnings and errors)", tail))
    return report
