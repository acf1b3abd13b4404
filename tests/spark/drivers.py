"""Local Spark sessions, and Spark drivers run as processes of their own.

Every Spark process of the suite (the session fixture, ``exactly_once_driver``, ``pop_driver``)
builds its session with :func:`local_session`; the tests that SIGKILL a driver mid-batch
start it with :func:`start_driver` (a session of its own, so its JVM and Python workers die
with it) and kill it with :func:`kill_driver`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from pyspark.sql import SparkSession

from bolide.spark import BolideDataSource

LOOPBACK = "127.0.0.1"
ROOT = Path(__file__).resolve().parents[2]
DRIVER_EXIT_TIMEOUT_S = 60.0
"""How long a SIGKILLed driver gets to be reaped (a loaded 2-core machine is slow to)."""


def local_session(
    app_name: str, cores: int, settings: Mapping[str, str] | None = None
) -> SparkSession:
    """A ``local[cores]`` session on loopback, without UI, logging at ERROR, with the Bolide
    data source registered. Sets PYSPARK_PYTHON (this interpreter) and SPARK_LOCAL_IP."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = LOOPBACK
    builder = (
        SparkSession.builder.master(f"local[{cores}]")
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", LOOPBACK)
        .config("spark.driver.bindAddress", LOOPBACK)
    )
    for key, value in (settings or {}).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    session.dataSource.register(BolideDataSource)
    return session


def start_driver(
    module: str,
    arguments: Sequence[str],
    log: Path,
    *,
    first_on_path: Path | None = None,
    environment: Mapping[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """``python -m module arguments`` from the repository's root, output appended to ``log``,
    in a session of its own. ``first_on_path`` goes before the sources on PYTHONPATH (a
    ``sitecustomize`` that injects faults); ``environment`` adds variables."""
    path = f"{ROOT / 'src'}:{ROOT}"
    if first_on_path is not None:
        path = f"{first_on_path}:{path}"
    variables = {**os.environ, **(environment or {}), "PYTHONPATH": path}
    with log.open("ab") as output:
        return subprocess.Popen(
            [sys.executable, "-m", module, *arguments], cwd=ROOT, env=variables, stdout=output,
            stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip


def start_exactly_once_driver(
    namesrv: str, checkpoint: Path, log: Path, per_trigger: int, *,
    first_on_path: Path | None = None, environment: Mapping[str, str] | None = None,
) -> subprocess.Popen[bytes]:  # fmt: skip
    """``exactly_once_driver`` copying ``eo-in`` to ``eo-out`` from ``checkpoint`` (see
    :func:`start_driver` for the keywords)."""
    arguments = ["--namesrv", namesrv, "--source", "eo-in", "--target", "eo-out",
                 "--checkpoint", str(checkpoint), "--per-trigger", str(per_trigger)]  # fmt: skip
    return start_driver(
        "tests.spark.exactly_once_driver", arguments, log,
        first_on_path=first_on_path, environment=environment,
    )  # fmt: skip


def kill_driver(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL a driver and everything it started (its JVM, its Python workers), and reap it."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=DRIVER_EXIT_TIMEOUT_S)
    with contextlib.suppress(ProcessLookupError):  # workers may outlive the leader
        os.killpg(process.pid, signal.SIGKILL)
