"""freeze_startup_objects: startup garbage collected, survivors out of the collector's scans."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from bolide.base.gc_pause import freeze_startup_objects


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


@pytest.fixture
def unfrozen_after() -> Iterator[None]:
    try:
        yield
    finally:
        gc.unfreeze()  # give the test process its collector back


def test_survivors_leave_the_scans_and_startup_garbage_is_collected_first(
    unfrozen_after: None,
) -> None:
    kept = _Node()
    garbage = _Node()
    garbage.other = _Node()
    garbage.other.other = garbage  # a cycle only the collector can free
    gone = weakref.ref(garbage)
    del garbage
    frozen = freeze_startup_objects()
    assert gone() is None  # collected before the freeze, not kept forever
    assert frozen == gc.get_freeze_count() > 0
    tracked = {id(candidate) for candidate in gc.get_objects()}
    assert id(kept) not in tracked  # in the permanent generation: never scanned again
    later = _Node()
    assert id(later) in {id(candidate) for candidate in gc.get_objects()}
