"""Builds Bolide's compiled hot path (Cython extensions) during the ordinary install.

Everything else is in pyproject.toml. Each package's ``_compiled.pyx`` (which includes the
package's pieces, ``_x.pyx`` beside each twin ``x.py``) is compiled with the machine's C
compiler; nothing prebuilt is fetched. When Cython is missing or the compiler fails (try
``CC=false pip install .``), the install goes on without the extensions and prints one
warning: every compiled module has a pure-Python twin that is used instead (see
src/bolide/base/compiled.py), so Bolide runs either way.

The 5.x gRPC proxy's protobuf modules are generated here too, from the descriptors the
official 5.x SDK ships (tools/generate_proto.py; the SDK and grpcio-tools are build
requirements). Unlike the hot path this step has no fallback: without it the proxy cannot
start, so a failure stops the install with its reason.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

PROJECT_ROOT = Path(__file__).resolve().parent
UMBRELLA_NAME = "_compiled.pyx"
SHARED_INCLUDE_DIRECTORY = "src/bolide"
"""Where ``_bytes.pxi``, the byte helpers every extension includes, lives."""


def extension_sources() -> list[tuple[str, str]]:
    """(module, source) of every compiled extension, by the naming rule (docs/compiled.md): a
    package whose pure modules ``x.py`` have compiled twins holds one piece ``_x.pyx`` each
    and one ``_compiled.pyx`` that includes them; it builds one extension,
    ``<package>._compiled``."""
    found = []
    for umbrella in sorted((PROJECT_ROOT / "src").glob(f"bolide/**/{UMBRELLA_NAME}")):
        package = ".".join(umbrella.parent.relative_to(PROJECT_ROOT / "src").parts)
        found.append((f"{package}._compiled", umbrella.relative_to(PROJECT_ROOT).as_posix()))
    return found


_WARNING = (
    "WARNING: bolide's compiled hot path was not built ({reason}); installing the "
    "pure-Python twins instead (slower, same behaviour)."
)


def _warn(reason: str) -> None:
    sys.stderr.write(_WARNING.format(reason=reason) + "\n")


class OptionalBuildExt(build_ext):
    """build_ext that falls back to pure Python, with one warning, when compiling fails."""

    def run(self) -> None:
        self._failures: list[str] = []
        try:
            super().run()
        except Exception as error:  # any build failure means "pure"
            self._failures.append(f"{type(error).__name__}: {error}")
        if self._failures:
            _warn("; ".join(self._failures))

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as error:
            # An extension left in build/ by an earlier build must not ship as this one.
            Path(self.get_ext_fullpath(ext.name)).unlink(missing_ok=True)
            self._failures.append(f"{ext.name}: {type(error).__name__}: {str(error)[:200]}")


class GenerateProtocolBuildPy(build_py):
    """build_py that first writes the 5.x protocol modules into the source tree (as the editable
    install needs them there), so that the ordinary copy then ships them in a wheel."""

    def run(self) -> None:
        generator = _load_module(PROJECT_ROOT / "tools" / "generate_proto.py")
        for path in generator.write():
            print(f"generated {path.relative_to(PROJECT_ROOT)}")
        super().run()


def _load_module(path: Path) -> Any:
    """The Python file at ``path`` as a module (tools/ is no package of the install)."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _extensions() -> list[Extension]:
    try:
        from Cython.Build import cythonize
    except ImportError:
        _warn("Cython is not installed")
        return []
    extensions = [
        Extension(name, [source], extra_compile_args=["-O2"])
        for name, source in extension_sources()
    ]
    try:
        return list(
            cythonize(
                extensions,
                language_level=3,
                quiet=True,
                include_path=[SHARED_INCLUDE_DIRECTORY],
            )
        )
    except Exception as error:
        _warn(f"cythonize failed: {error}")
        return []


# Guarded so that tests/base/test_twin_rule.py can read extension_sources(); pip's build backend
# and ``python setup.py`` both run this file as __main__.
if __name__ == "__main__":
    setup(
        ext_modules=_extensions(),
        cmdclass={"build_ext": OptionalBuildExt, "build_py": GenerateProtocolBuildPy},
    )
