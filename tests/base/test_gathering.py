"""gather_bounded: every call runs, never more than the bound at once, results in order;
gather_outcomes: the same, with an operating error as its call's result."""

from __future__ import annotations

import asyncio
import functools

import pytest

from bolide.base.errors import BolideError, RequestTimeoutError
from bolide.base.gathering import gather_bounded, gather_outcomes
from bolide.testing.waiting import until


async def test_at_most_the_bound_run_at_once_and_results_keep_their_order() -> None:
    release = asyncio.Event()
    started: list[int] = []
    running = 0
    most_running = 0

    async def call(index: int) -> int:
        nonlocal running, most_running
        started.append(index)
        running += 1
        most_running = max(most_running, running)
        await release.wait()
        running -= 1
        return index * 10

    starts = [functools.partial(call, index) for index in range(7)]
    gathering = asyncio.ensure_future(gather_bounded(starts, 3))
    await until(lambda: len(started) == 3)
    for _ in range(20):
        await asyncio.sleep(0)
    assert sorted(started) == [0, 1, 2]  # the others are not even started yet
    release.set()
    assert await gathering == [0, 10, 20, 30, 40, 50, 60]
    assert most_running == 3
    assert sorted(started) == list(range(7))


async def test_a_failure_propagates() -> None:
    async def call(index: int) -> int:
        if index == 3:
            raise ValueError("call 3 failed")
        return index

    starts = [functools.partial(call, index) for index in range(4)]  # the last one fails
    with pytest.raises(ValueError, match="call 3 failed"):
        await gather_bounded(starts, 2)


async def test_no_calls_is_no_results() -> None:
    assert await gather_bounded([], 4) == []


async def test_an_operating_error_is_its_calls_result_and_others_still_answer() -> None:
    async def call(index: int) -> int:
        if index == 1:
            raise RequestTimeoutError("broker 1 did not answer")
        return index

    results: list[int | BolideError] = await gather_outcomes([call(i) for i in range(3)], 2)
    assert results[0] == 0 and results[2] == 2
    assert isinstance(results[1], RequestTimeoutError)


async def test_a_bug_is_not_an_outcome() -> None:
    async def broken() -> int:
        raise KeyError("a bug, not a broker's failure")

    with pytest.raises(KeyError):
        await gather_outcomes([broken()], 2)
