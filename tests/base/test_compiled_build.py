"""A machine whose C compiler fails still builds Bolide, pure (issue 14: try ``CC=false``).

The build runs setup.py's ``build_ext`` on a copy of the extension sources with ``CC=false``:
the command must succeed, build no extension, and say so in exactly one warning line that
names every extension. A second test hides the extensions from an interpreter the way a
compiler-less install leaves them (not there) and checks what ``bolide version --json`` says.
The broker's own start line is checked in tests/cli/test_version.py. A third test makes a
broken build fail the suite (issue 30): the twin tests skip when an extension is missing, so
where a C compiler exists and ``BOLIDE_PURE_PYTHON`` is not set, every extension must load.
"""

from __future__ import annotations

import os
import runpy
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import orjson
import pytest

from bolide.base import compiled

ROOT = Path(__file__).resolve().parents[2]
WARNING_START = "WARNING: bolide's compiled hot path was not built"
PROCESS_GUARD_S = 300.0
"""Bounds each child process so a hung build fails the test (not a measurement)."""


def _extensions() -> list[tuple[str, str]]:
    """(module, source) of every compiled extension, as setup.py derives them (its
    ``extension_sources``, read without running the build)."""
    namespace = runpy.run_path(str(ROOT / "setup.py"), run_name="setup_read_by_tests")
    extensions: list[tuple[str, str]] = namespace["extension_sources"]()
    return extensions


def _copy_build_inputs(destination: Path) -> None:
    """setup.py and the Cython sources, keeping their paths; generated C files too when an
    earlier build left them (copied with their times, so Cython does not redo them)."""
    shutil.copy2(ROOT / "setup.py", destination / "setup.py")
    for pattern in ("*.pyx", "*.pxd", "*.pxi", "_compiled.c"):
        for source in (ROOT / "src").rglob(pattern):
            target = destination / source.relative_to(ROOT)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


def test_a_failing_c_compiler_builds_nothing_and_warns_once(tmp_path: Path) -> None:
    _copy_build_inputs(tmp_path)
    result = subprocess.run(
        [sys.executable, "setup.py", "build_ext", "--inplace"],
        cwd=tmp_path,
        env={**os.environ, "CC": "false"},
        capture_output=True,
        text=True,
        timeout=PROCESS_GUARD_S,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    warnings = [line for line in result.stderr.splitlines() if line.startswith(WARNING_START)]
    assert len(warnings) == 1, result.stderr[-2000:]
    assert warnings[0].endswith(
        "installing the pure-Python twins instead (slower, same behaviour)."
    )
    for module, _ in _extensions():
        assert f"{module}: CompileError" in warnings[0]
    assert sorted(tmp_path.rglob("*.so")) == []


_WITHOUT_EXTENSIONS = """
import importlib.abc, sys

class NotBuilt(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name in {names!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None

sys.meta_path.insert(0, NotBuilt())
sys.argv = ["bolide", "version", "--json"]
from bolide.cli.app import main
main()
"""


def test_without_the_extensions_version_reports_pure_python() -> None:
    modules = sorted(module for module, _ in _extensions())
    result = subprocess.run(
        [sys.executable, "-c", _WITHOUT_EXTENSIONS.format(names=set(modules))],
        env={**os.environ, "BOLIDE_PURE_PYTHON": "0"},
        capture_output=True,
        text=True,
        timeout=PROCESS_GUARD_S,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    report = orjson.loads(result.stdout)
    assert report["compiled"] is False and report["pure_python_forced"] is False
    assert report["compiled_modules"] == []
    assert sorted(report["missing_modules"]) == modules
    assert report["hot_path"] == f"pure Python (compiled modules not built: {', '.join(modules)})"


def _c_compiler() -> str:
    """The compiler setup.py would run: ``$CC`` or Python's own (sysconfig), first word."""
    command = os.environ.get("CC") or str(sysconfig.get_config_var("CC") or "cc")
    return command.split()[0]


def test_where_a_compiler_exists_every_twin_runs_compiled() -> None:
    if compiled.pure_python_forced():
        pytest.skip("BOLIDE_PURE_PYTHON=1: this run tests the pure twins on purpose")
    compiler = _c_compiler()
    if shutil.which(compiler) is None:
        pytest.skip(f"no C compiler ({compiler!r} not on PATH): a pure install is expected")

    status = compiled.status()

    assert status.missing_modules == {}, (
        f"the compiled hot path did not build although {compiler!r} exists; "
        "run `python setup.py build_ext --inplace` and read its warning"
    )
    assert sorted(status.compiled_modules) == sorted(module for module, _ in _extensions())
