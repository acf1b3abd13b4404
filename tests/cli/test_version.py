"""``bolide version --json`` and the broker's start line say whether the hot path is compiled."""

from __future__ import annotations

import importlib
import os
import signal
import subprocess
from pathlib import Path

import pytest

from bolide.base import compiled
from tests.cli.conftest import BOLIDE, PROCESS_GUARD_S, _read_ready_line, run_bolide


def _extensions_built() -> bool:
    try:
        for name in compiled.EXTENSION_MODULES:
            importlib.import_module(name)
    except ImportError:
        return False
    return True


def test_version_json_reports_the_compiled_hot_path() -> None:
    result = run_bolide("version", "--json", namesrv=None, env={"BOLIDE_PURE_PYTHON": "0"})
    assert result.code == 0, result.stderr
    report = result.json()
    assert report["version"] and report["pure_python_forced"] is False
    assert report["compiled"] is _extensions_built()
    if report["compiled"]:
        assert sorted(report["compiled_modules"]) == list(compiled.EXTENSION_MODULES)


def test_the_switch_forces_the_pure_twins() -> None:
    result = run_bolide("version", "--json", namesrv=None, env={"BOLIDE_PURE_PYTHON": "1"})
    assert result.code == 0, result.stderr
    report = result.json()
    assert report["compiled"] is False and report["pure_python_forced"] is True
    assert report["compiled_modules"] == []
    assert report["hot_path"] == "pure Python (BOLIDE_PURE_PYTHON=1)"


def test_every_twin_module_is_known_to_the_switch() -> None:
    status = compiled.status()
    assert status.pure_forced is compiled.pure_python_forced()
    assert set(compiled.TWIN_MODULES) <= set(compiled._PURE_TWINS)


@pytest.mark.parametrize("pure", ["1", "0"])
def test_the_broker_says_at_start_which_hot_path_runs(tmp_path: Path, pure: str) -> None:
    process = subprocess.Popen(
        [BOLIDE, "standalone", "--namesrv-port", "0", "--broker-port", "0", "--no-proxy",
         "--no-metrics", "--no-dashboard", "--data-dir", str(tmp_path / "data")],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "BOLIDE_PURE_PYTHON": pure},
    )  # fmt: skip
    try:
        assert _read_ready_line(process).startswith("bolide ready")
    finally:
        process.send_signal(signal.SIGTERM)
        _, errors = process.communicate(timeout=PROCESS_GUARD_S)
    lines = [line for line in errors.decode().splitlines() if "broker hot path:" in line]
    assert len(lines) == 1
    if pure == "1":
        assert lines[0].endswith("pure Python (BOLIDE_PURE_PYTHON=1)")
    elif _extensions_built():
        assert "broker hot path: compiled (" in lines[0]
