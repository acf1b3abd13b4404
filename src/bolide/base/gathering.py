"""Running many calls concurrently with a bound on how many run at once.

A dashboard page or a Spark plan asks every broker, group or queue: hundreds of requests. They
run concurrently, but at most ``max_in_flight`` at a time, so a large cluster is asked in waves
instead of all at once (each caller names its bound in ``base/limits.py``).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TypeVar

from bolide.base.errors import BolideError

__all__ = ["gather_bounded", "gather_outcomes"]

T = TypeVar("T")


async def gather_bounded(
    starts: Iterable[Callable[[], Awaitable[T]]], max_in_flight: int
) -> list[T]:
    """Call each of ``starts`` and await what it returns, at most ``max_in_flight`` at once
    (a call is only started when it may run); the results in the order of ``starts``.

    The first exception a call raises propagates, as with ``asyncio.gather`` (the calls
    already running are not cancelled).
    """
    gate = asyncio.Semaphore(max_in_flight)

    async def one(start: Callable[[], Awaitable[T]]) -> T:
        async with gate:
            return await start()

    return list(await asyncio.gather(*(one(start) for start in starts)))


async def gather_outcomes(
    calls: Sequence[Awaitable[T]], max_in_flight: int
) -> list[T | BolideError]:
    """Await ``calls`` (coroutines, not yet started), at most ``max_in_flight`` at once; each
    result is the value or the operating error (:class:`BolideError`) it raised, in the order
    of ``calls``: one broker's failure leaves the others' answers."""
    starts = [functools.partial(_outcome, call) for call in calls]
    return await gather_bounded(starts, max_in_flight)


async def _outcome(call: Awaitable[T]) -> T | BolideError:
    try:
        return await call
    except BolideError as error:
        return error
