"""Wait for a condition by yielding to the event loop, never by sleeping on the wall clock.

A condition that only the event loop itself can make true is normally reached within a
few loop turns, so ``until`` first spins on ``asyncio.sleep(0)``. A condition that a
worker thread (an fsync in the store's executor) or another process makes true depends
on the operating system's scheduler: on a loaded 2-core CI machine the thread may not
run for seconds, far longer than the spin budget lasts. So once the spins are used up,
``until`` keeps polling at a short interval and fails only when a generous monotonic
deadline has also passed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from bolide.base.errors import InvariantViolationError

_MAX_SPINS = 100_000
# Generous on purpose: it only bounds a wait that has already outlived its spin budget,
# and a failing test (the condition never holds) pays it once.
_DEADLINE_S = 60.0
# Poll interval once the spins are used up: short next to any deadline, long enough
# that the waiting test leaves the CPU to the thread or process it waits for.
_POLL_INTERVAL_S = 0.005


async def until(
    predicate: Callable[[], bool],
    *,
    max_spins: int = _MAX_SPINS,
    deadline_s: float = _DEADLINE_S,
) -> None:
    """Yield to the loop until ``predicate()`` holds.

    Fail once ``max_spins`` loop turns are used up and ``deadline_s`` seconds (monotonic)
    have passed, whichever comes last.
    """
    started = time.monotonic()
    for _ in range(max_spins):
        if predicate():
            return
        await asyncio.sleep(0)
    while time.monotonic() - started < deadline_s:
        if predicate():
            return
        await asyncio.sleep(_POLL_INTERVAL_S)
    if predicate():
        return
    raise InvariantViolationError(
        f"condition not reached after {max_spins} loop turns and {deadline_s:g} s"
    )
