import asyncio

import pytest

from bolide.base.clock import ManualClock, SystemClock


async def test_manual_clock_wakes_sleepers_in_deadline_order() -> None:
    clock = ManualClock(start_ms=1_000)
    woke: list[str] = []

    async def sleeper(name: str, duration_ms: int) -> None:
        await clock.sleep_ms(duration_ms)
        woke.append(name)

    tasks = [asyncio.create_task(sleeper("late", 300)), asyncio.create_task(sleeper("early", 100))]
    await asyncio.sleep(0)
    assert clock.sleeper_count == 2
    clock.advance_ms(99)
    await asyncio.sleep(0)
    assert woke == []
    clock.advance_ms(1)
    await asyncio.sleep(0)
    assert woke == ["early"]
    clock.advance_ms(1_000)
    await asyncio.gather(*tasks)
    assert woke == ["early", "late"]
    assert clock.now_ms() == 2_100
    assert clock.monotonic_ms() == 1_100


def test_manual_clock_never_goes_backwards() -> None:
    clock = ManualClock()
    with pytest.raises(ValueError):
        clock.advance_ms(-1)


async def test_cancelled_sleeper_is_not_counted() -> None:
    clock = ManualClock()
    task = asyncio.create_task(clock.sleep_ms(50))
    await asyncio.sleep(0)
    task.cancel()
    await asyncio.sleep(0)
    assert clock.sleeper_count == 0
    clock.advance_ms(100)


def test_system_clock_readings_move_forward() -> None:
    clock = SystemClock()
    first = clock.monotonic_ms()
    assert clock.monotonic_ms() >= first
    assert clock.now_ms() > 1_600_000_000_000
