"""Fixtures for tests that drive real RocketMQ clients."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bolide.testing.cluster import Cluster
from tests.compat.cpp_harness import ScratchServer


@pytest.fixture
def cpp_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private HOME: librocketmq writes its logs and broadcast offsets under $HOME."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    return home


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
