"""``until``: loop-only conditions within the spin budget, thread-made ones within the deadline."""

from __future__ import annotations

import threading

import pytest

from bolide.base.errors import InvariantViolationError
from bolide.testing.waiting import until


async def test_a_condition_a_thread_makes_true_after_the_spins_is_still_awaited() -> None:
    spins_over = threading.Event()
    done = threading.Event()
    calls = 0

    def predicate() -> bool:
        nonlocal calls
        calls += 1
        if calls > 10:
            spins_over.set()  # the spin budget is used up: only the deadline is left
        return done.is_set()

    def finish_after_the_spins() -> None:
        if spins_over.wait(30):
            done.set()

    worker = threading.Thread(target=finish_after_the_spins)
    worker.start()
    try:
        await until(predicate, max_spins=10, deadline_s=60)
    finally:
        spins_over.set()
        worker.join()
    assert done.is_set() and calls > 10


async def test_a_condition_that_never_holds_fails_once_spins_and_deadline_are_used_up() -> None:
    calls = 0

    def never() -> bool:
        nonlocal calls
        calls += 1
        return False

    with pytest.raises(InvariantViolationError, match="5 loop turns and 0 s"):
        await until(never, max_spins=5, deadline_s=0)
    assert calls == 6  # each spin, then the last look once the deadline has passed
