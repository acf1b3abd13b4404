"""Wait for a condition by yielding to the event loop, never by sleeping on the wall clock."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from bolide.base.errors import InvariantViolationError

_MAX_SPINS = 100_000


async def until(predicate: Callable[[], bool], *, max_spins: int = _MAX_SPINS) -> None:
    """Yield to the loop until ``predicate()`` holds; fail after ``max_spins`` yields."""
    for _ in range(max_spins):
        if predicate():
            return
        await asyncio.sleep(0)
    raise InvariantViolationError(f"condition not reached after {max_spins} loop turns")
