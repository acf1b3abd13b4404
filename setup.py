"""Builds Bolide's compiled hot path (Cython extensions) during the ordinary install.

Everything else is in pyproject.toml. Each ``*.pyx`` listed in ``EXTENSIONS`` is compiled
from its source with the machine's C compiler; nothing prebuilt is fetched. When Cython is
missing or the compiler fails (try ``CC=false pip install .``), the install goes on without
the extensions and prints one warning: every compiled module has a pure-Python twin that is
used instead (see src/bolide/base/compiled.py), so Bolide runs either way.
"""

from __future__ import annotations

import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

EXTENSIONS = [
    ("bolide.protocol._wire_c", "src/bolide/protocol/_wire_c.pyx"),
    ("bolide.protocol._frame_c", "src/bolide/protocol/_frame_c.pyx"),
    ("bolide.store._index_c", "src/bolide/store/_index_c.pyx"),
    ("bolide.store._put_c", "src/bolide/store/_put_c.pyx"),
    ("bolide.store._recovery_c", "src/bolide/store/_recovery_c.pyx"),
    ("bolide.protocol._batch_c", "src/bolide/protocol/_batch_c.pyx"),
    ("bolide.client.producer._results_c", "src/bolide/client/producer/_results_c.pyx"),
    ("bolide.spark._sink_c", "src/bolide/spark/_sink_c.pyx"),
]
"""(module, source) of every compiled twin."""

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


def _extensions() -> list[Extension]:
    try:
        from Cython.Build import cythonize
    except ImportError:
        _warn("Cython is not installed")
        return []
    extensions = [
        Extension(name, [source], extra_compile_args=["-O2"]) for name, source in EXTENSIONS
    ]
    try:
        return list(cythonize(extensions, language_level=3, quiet=True))
    except Exception as error:
        _warn(f"cythonize failed: {error}")
        return []


setup(ext_modules=_extensions(), cmdclass={"build_ext": OptionalBuildExt})
