"""The naming rule of the compiled twins (docs/compiled.md), checked on the source tree.

A pure module ``x.py`` with a compiled twin has exactly one piece ``_x.pyx`` beside it; each
package with pieces has one ``_compiled.pyx`` that includes all of them (and the shared
``bolide/_bytes.pxi``) and builds one extension, ``<package>._compiled``. The twin list in
``bolide.base.compiled``, every twin's ``compiled.install`` call and setup.py's extensions
must all follow from the files on disk.
"""

from __future__ import annotations

import re
import runpy
from pathlib import Path

from bolide.base import compiled

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "src"
UMBRELLA = "_compiled.pyx"
SHARED_INCLUDE = SOURCE / "bolide" / "_bytes.pxi"
INCLUDE_LINE = re.compile(r'^include "([^"]+)"$', re.MULTILINE)
INSTALL_CALL = re.compile(r'compiled\.install\(\s*globals\(\),\s*"([^"]+)"')


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(SOURCE).with_suffix("").parts)


def _pieces() -> list[Path]:
    return sorted(path for path in SOURCE.rglob("_*.pyx") if path.name != UMBRELLA)


def _twin_of(piece: Path) -> Path:
    return piece.with_name(piece.name[1:]).with_suffix(".py")


def test_every_piece_sits_beside_its_pure_twin() -> None:
    pieces = _pieces()
    assert pieces, "no compiled piece found"
    for piece in pieces:
        assert _twin_of(piece).is_file(), f"{piece.relative_to(ROOT)} has no pure twin beside it"


def test_the_twin_list_is_the_pieces() -> None:
    assert sorted(compiled.TWIN_MODULES) == sorted(_module_name(_twin_of(p)) for p in _pieces())


def test_each_package_builds_one_extension_that_includes_all_its_pieces() -> None:
    packages = {piece.parent for piece in _pieces()}
    assert sorted(SOURCE.rglob(UMBRELLA)) == sorted(package / UMBRELLA for package in packages)
    for package in packages:
        includes = INCLUDE_LINE.findall((package / UMBRELLA).read_text())
        assert includes[0] == SHARED_INCLUDE.name
        assert sorted(includes[1:]) == sorted(p.name for p in _pieces() if p.parent == package)


def test_no_other_cython_source_exists() -> None:
    others = {*SOURCE.rglob("*.pyx"), *SOURCE.rglob("*.pxi"), *SOURCE.rglob("*.pxd")}
    others -= {*_pieces(), *SOURCE.rglob(UMBRELLA), SHARED_INCLUDE}
    assert sorted(others) == []


def test_every_twin_installs_from_its_packages_extension() -> None:
    for name in compiled.TWIN_MODULES:
        text = (SOURCE / Path(*name.split("."))).with_suffix(".py").read_text()
        extensions = INSTALL_CALL.findall(text)
        assert extensions, f"{name} never calls compiled.install"
        assert set(extensions) == {compiled.extension_of(name)}, name


def test_setup_builds_exactly_the_rules_extensions() -> None:
    namespace = runpy.run_path(str(ROOT / "setup.py"), run_name="setup_read_by_tests")
    built = namespace["extension_sources"]()
    assert [module for module, _ in built] == list(compiled.EXTENSION_MODULES)
    for module, source in built:
        assert Path(ROOT / source) == SOURCE.joinpath(*module.split(".")).with_suffix(".pyx")
