import asyncio

from bolide.base.clock import ManualClock
from bolide.base.errors import ServiceCrashedError
from bolide.base.service import Service
from bolide.testing.waiting import until


async def _settle() -> None:
    for _ in range(50):
        await asyncio.sleep(0)


async def test_service_steps_on_interval_and_on_wakeup() -> None:
    clock = ManualClock()
    steps: list[int] = []

    async def step() -> None:
        steps.append(clock.monotonic_ms())

    service = Service("ticker", step, interval_ms=1_000, clock=clock)
    service.start()
    await until(lambda: clock.sleeper_count == 1)
    assert steps == []
    clock.advance_ms(1_000)
    await until(lambda: len(steps) == 1)
    assert steps == [1_000]
    await until(lambda: clock.sleeper_count == 1)
    service.wakeup()
    await until(lambda: len(steps) == 2)
    assert steps == [1_000, 1_000]
    await until(lambda: clock.sleeper_count == 1)
    clock.advance_ms(1_000)
    await until(lambda: len(steps) == 3)
    await _settle()
    assert steps == [1_000, 1_000, 2_000]
    await service.stop(timeout_ms=100)
    assert not service.running


async def test_service_reports_crash_to_owner() -> None:
    clock = ManualClock()
    reported: list[BaseException] = []

    async def step() -> None:
        raise RuntimeError("boom")

    service = Service(
        "crashy",
        step,
        interval_ms=10,
        clock=clock,
        initial_delay_ms=0,
        on_crash=lambda _service, error: reported.append(error),
    )
    service.start()
    await until(lambda: not service.running)
    assert isinstance(service.crash, RuntimeError)
    assert len(reported) == 1
    assert isinstance(reported[0], ServiceCrashedError)
    assert not service.running
    await service.stop()


async def test_stop_cancels_a_step_that_overruns_its_timeout() -> None:
    clock = ManualClock()
    started = asyncio.Event()
    never = asyncio.Event()

    async def step() -> None:
        started.set()
        await never.wait()

    service = Service("stuck", step, interval_ms=10, clock=clock, initial_delay_ms=0)
    service.start()
    await started.wait()
    await service.stop(timeout_ms=10)
    assert not service.running
