"""Choosing, at import, between a compiled module and its pure-Python twin.

Bolide's hot path (record layout, properties string, frame cut, pull-body scan) is written
twice: a pure-Python module, which is the reference and the documentation, and a Cython
extension built from the piece ``_x.pyx`` beside it during the ordinary install (setup.py). A twin
module ends with one call::

    compiled.install(globals(), "bolide.protocol.record._compiled", ("decode_properties", ...))

which replaces those names in the twin's namespace by the compiled functions when the
extension is importable and allowed, and keeps the pure ones otherwise. Callers import from
the twin as usual and never know which they got.

``BOLIDE_PURE_PYTHON=1`` in the environment forces every twin to stay pure. This module is the
one place in the library that reads it (the switch must work before any
configuration is read, at import), and it reads it once.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Iterable, MutableMapping
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = [
    "EXTENSION_MODULES",
    "EXTENSION_NAME",
    "PURE_PYTHON_ENVIRONMENT_VARIABLE",
    "TWIN_MODULES",
    "CompiledStatus",
    "describe",
    "extension_of",
    "install",
    "pure_python_forced",
    "pure_twin",
    "status",
]

PURE_PYTHON_ENVIRONMENT_VARIABLE: Final = "BOLIDE_PURE_PYTHON"
"""Set to ``1`` (or ``true``/``yes``) to run every compiled module's pure-Python twin."""

_TRUE_WORDS: Final = frozenset(("1", "true", "yes", "on"))


def _read_switch() -> bool:
    value = os.environ.get(PURE_PYTHON_ENVIRONMENT_VARIABLE, "")
    return value.strip().lower() in _TRUE_WORDS


_PURE_FORCED: Final = _read_switch()


@dataclass(slots=True)
class CompiledStatus:
    """What :func:`install` decided for every twin imported so far."""

    pure_forced: bool
    compiled_modules: list[str] = field(default_factory=list)
    """Extensions in use (module names)."""
    missing_modules: dict[str, str] = field(default_factory=dict)
    """Extensions that could not be imported: module name -> the ImportError's text."""

    @property
    def compiled(self) -> bool:
        """Every twin imported so far runs its compiled extension."""
        return bool(self.compiled_modules) and not self.missing_modules and not self.pure_forced


TWIN_MODULES: Final = (
    "bolide.client.producer.results",
    "bolide.protocol.answer_frames",
    "bolide.protocol.frame",
    "bolide.protocol.record.batch",
    "bolide.protocol.record.layout",
    "bolide.protocol.record.messages",
    "bolide.protocol.record.properties",
    "bolide.protocol.record.rows",
    "bolide.protocol.send_scan",
    "bolide.spark.sink_rows",
    "bolide.store.appender",
    "bolide.store.index_file",
    "bolide.store.records",
    "bolide.store.recovery_scan",
)
"""Every module that ends with :func:`install`. The naming rule (docs/compiled.md): the twin
``package.x`` has one piece ``_x.pyx`` beside it, and each package builds one extension,
:func:`extension_of` it, from its ``_compiled.pyx``, which includes its pieces (setup.py);
``tests/base/test_twin_rule.py`` holds this list, the pieces and the builds to the rule."""

EXTENSION_NAME: Final = "_compiled"
"""The one extension of a package with compiled twins: ``<package>._compiled``."""


def extension_of(twin_module: str) -> str:
    """The extension that holds the compiled twin of ``twin_module`` (its package's one)."""
    package, _, _ = twin_module.rpartition(".")
    return f"{package}.{EXTENSION_NAME}"


EXTENSION_MODULES: Final = tuple(sorted({extension_of(name) for name in TWIN_MODULES}))
"""Every compiled extension setup.py builds, by the rule."""

_STATUS: Final = CompiledStatus(pure_forced=_PURE_FORCED)
_PURE_TWINS: Final[dict[str, dict[str, Any]]] = {}


def pure_python_forced() -> bool:
    """``BOLIDE_PURE_PYTHON`` was set when Bolide was imported."""
    return _PURE_FORCED


def install(namespace: MutableMapping[str, Any], extension: str, names: Iterable[str]) -> bool:
    """Replace ``names`` in ``namespace`` (a twin module's globals) by the same names of the
    compiled module ``extension``; returns whether it did.

    The pure functions stay reachable through :func:`pure_twin` (for the differential tests).
    Nothing is replaced when ``BOLIDE_PURE_PYTHON`` is set or the extension cannot be imported
    (no compiler at install time, or a source checkout that was never built).
    """
    names = tuple(names)
    twin_name = str(namespace.get("__name__", "?"))
    # a twin module may install from more than one extension: keep every pure function
    _PURE_TWINS.setdefault(twin_name, {}).update({name: namespace[name] for name in names})
    if _PURE_FORCED:
        return False
    try:
        module = importlib.import_module(extension)
    except ImportError as error:
        _STATUS.missing_modules[extension] = str(error)
        return False
    for name in names:
        namespace[name] = getattr(module, name)
    if extension not in _STATUS.compiled_modules:
        _STATUS.compiled_modules.append(extension)
    return True


def pure_twin(twin_module: str, name: str) -> Callable[..., Any]:
    """The pure-Python function ``name`` of ``twin_module`` whatever :func:`install` chose.

    Raises:
        KeyError: ``twin_module`` was not imported or has no such twin function.
    """
    return _PURE_TWINS[twin_module][name]  # type: ignore[no-any-return]


def status() -> CompiledStatus:
    """What was chosen for every twin module (imports those not imported yet)."""
    for name in TWIN_MODULES:
        importlib.import_module(name)
    return _STATUS


def describe() -> str:
    """One line for logs: whether the hot path runs compiled or pure, and why."""
    current = status()
    if current.pure_forced:
        return f"pure Python ({PURE_PYTHON_ENVIRONMENT_VARIABLE}=1)"
    if current.missing_modules:
        missing = ", ".join(sorted(current.missing_modules))
        return f"pure Python (compiled modules not built: {missing})"
    if current.compiled_modules:
        return f"compiled ({', '.join(current.compiled_modules)})"
    return "pure Python (no compiled module imported)"
