"""The delay and timer delivery loops retry operating errors but never a broken invariant:
a failed ``invariant()`` is a bug, so it propagates (the Service records the crash) instead of
being logged and retried forever."""

from __future__ import annotations

from pathlib import Path

import pytest

from bolide.base.clock import ManualClock
from bolide.base.errors import InvariantViolationError, StoreIOError
from bolide.broker.schedule import DelayLevels, ScheduleMessageService
from bolide.broker.timer import TimerMessageService
from bolide.store.memory_store import MemoryMessageStore
from bolide.store.timer_log import TimerLog, timer_log_dir

from .delay_support import SEGMENT_BYTES, STORE_HOST, store_config

RETRY_AFTER_FAILURE_MS = 7_000


def _schedule(tmp_path: Path) -> ScheduleMessageService:
    store = MemoryMessageStore(store_config(tmp_path), clock=ManualClock(), store_host=STORE_HOST)
    return ScheduleMessageService(
        store,
        DelayLevels((1_000,)),
        tmp_path / "delayOffset.json",
        ManualClock(),
        segment_bytes=SEGMENT_BYTES,
        retry_after_failure_ms=RETRY_AFTER_FAILURE_MS,
    )


def _timer(tmp_path: Path) -> TimerMessageService:
    store = MemoryMessageStore(store_config(tmp_path), clock=ManualClock(), store_host=STORE_HOST)
    return TimerMessageService(
        store,
        TimerLog(timer_log_dir(tmp_path / "store"), segment_entries=8),
        tmp_path / "timerProgress.json",
        ManualClock(),
        segment_bytes=SEGMENT_BYTES,
        max_delay_ms=86_400_000,
        retry_after_failure_ms=RETRY_AFTER_FAILURE_MS,
    )


async def _raise(error: BaseException) -> int:
    raise error


async def test_schedule_step_retries_operating_errors_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    service = _schedule(tmp_path)
    step = service._step_for(1)
    monkeypatch.setattr(service, "_deliver_due", lambda level: _raise(StoreIOError("disk")))
    assert await step() == RETRY_AFTER_FAILURE_MS
    monkeypatch.setattr(
        service, "_deliver_due", lambda level: _raise(InvariantViolationError("broken"))
    )
    with pytest.raises(InvariantViolationError):
        await step()


async def test_timer_step_retries_operating_errors_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    service = _timer(tmp_path)
    monkeypatch.setattr(service, "_deliver_due", lambda: _raise(StoreIOError("disk")))
    assert await service._step() == RETRY_AFTER_FAILURE_MS
    monkeypatch.setattr(service, "_deliver_due", lambda: _raise(InvariantViolationError("bug")))
    with pytest.raises(InvariantViolationError):
        await service._step()
