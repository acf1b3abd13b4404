"""Fixtures for the whole suite: a real etcd per test (bolide.testing.etcd), started on loopback
free ports in tmp_path (the controller, failover, compat and dashboard tests), a private HOME
for the real C++ client's tests, the guard that client shuts down behind
(tests/compat/native_shutdown.py), and the scheduler that keeps a crashed worker from hanging
``make unit`` (tests/suite/crash_safe_scheduling.py)."""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from xdist.remote import Producer

from bolide.store.file_ops import FileOps
from bolide.testing.etcd import EtcdCluster, etcd_binary
from tests.compat.native_shutdown import withhold_cpp_routes_while_shutting_down
from tests.suite.crash_safe_scheduling import CrashSafeLoadGroupScheduling


@pytest.fixture
async def etcd(tmp_path: Path) -> AsyncIterator[EtcdCluster]:
    if etcd_binary() is None:
        pytest.skip("etcd is not installed: `make test` installs Debian's etcd-server")
    cluster = EtcdCluster(tmp_path / "etcd")
    (tmp_path / "etcd").mkdir()
    async with cluster:
        yield cluster


@pytest.fixture
def cpp_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private HOME for a test of the real C++ client (tests/compat, tests/namesrv):
    librocketmq writes its logs and broadcast offsets under $HOME.

    Not under tmp_path, which goes when a test passes (pyproject.toml): boost.log opens its file
    once per process, under the first C++ client's HOME, and later tests read it (the harness's
    send retry and the failure reports, tests/compat/cpp_harness.py). A HOME holds a few KB.
    """
    home = tmp_path_factory.mktemp("cpp-home")
    monkeypatch.setenv("HOME", str(home))
    return home


def pytest_report_header() -> str:
    """The room left where the tests' directories go: a full disk fails tests by the hundred
    (ENOSPC when a store or etcd starts), and brokers clean their stores forcibly past 85 %."""
    directory = Path(tempfile.gettempdir())
    usage = FileOps().disk_usage(directory)
    free_gib = (usage.total_bytes - usage.used_bytes) / 2**30
    used_percent = usage.used_percent
    return f"disk: {free_gib:.1f} GiB free for tests ({directory}, {used_percent:.0f} % used)"


def pytest_xdist_make_scheduler(
    config: pytest.Config, log: Producer
) -> CrashSafeLoadGroupScheduling | None:
    """``--dist loadgroup`` (``make unit``) with xdist's hangs after a worker crash mended."""
    if config.getvalue("dist") != "loadgroup":
        return None
    return CrashSafeLoadGroupScheduling(config, log)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under pytest-xdist (``make unit`` runs two workers, ``--dist loadgroup``) the Spark
    tests stay on one worker: they share one local Spark session (a JVM) per worker."""
    for item in items:
        if item.path.parent.name == "spark":
            item.add_marker(pytest.mark.xdist_group("spark"))


@pytest.fixture(scope="session", autouse=True)
def cpp_shutdowns_without_abort() -> Iterator[None]:
    """In-process name servers refuse C++ route queries while a C++ client of this process shuts
    down: librocketmq 1.2.3 can abort its process otherwise (tests/compat/native_shutdown.py)."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        withhold_cpp_routes_while_shutting_down(monkeypatch)
        yield
