"""The pure POP state and its checkpoint log: replaying the log (or its compacted snapshot)
rebuilds the same state; a torn or corrupt tail is cut, never misread."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bolide.broker.pop.log import PopLog
from bolide.broker.pop.state import PopState

KEY = ("T", "G", 0)


def _summary(state: PopState) -> dict[Any, Any]:
    return {
        key: (
            queue.pop_offset,
            sorted(
                (o, e.pop_time_ms, e.invisible_time_ms, e.attempts)
                for o, e in queue.in_flight.items()
            ),
            sorted(queue.came_back.items()),
            queue.committed_offset,
        )
        for key, queue in state.queues.items()
    }


def _history(state: PopState) -> list[dict[str, Any]]:
    records = [state.popped(KEY, [(0, 1, 100), (1, 1, 200), (2, 1, 300)], 3, 1_000, 5_000)]
    records.append(state.acked(KEY, 1, 1_000) or {})
    records.append(state.changed(KEY, 2, 1_000, 2_000, 60_000) or {})
    for key, offset, _ in state.due(6_000):
        state.bring_back(key, offset)
    records.append(state.popped(("T", "G", 1), [(7, 1, 700)], 8, 1_500, 100_000))
    return records


def test_replay_rebuilds_the_state() -> None:
    state = PopState()
    records = _history(state)
    assert state.acked(KEY, 0, 999) is None  # a stale handle changes nothing
    replayed = PopState()
    for record in records:
        replayed.apply(record)
    for key, offset, _ in replayed.due(6_000):
        replayed.bring_back(key, offset)
    assert _summary(replayed) == _summary(state)
    assert state.queues[KEY].committed_offset == 0  # offset 0 came back, not yet acked


def test_a_snapshot_rebuilds_the_state_once_revived() -> None:
    state = PopState()
    _history(state)
    rebuilt = PopState()
    for record in state.snapshot():
        rebuilt.apply(record)
    for key, offset, _ in rebuilt.due(6_000):
        rebuilt.bring_back(key, offset)
    assert _summary(rebuilt) == _summary(state)


def test_the_log_cuts_a_torn_or_corrupt_tail(tmp_path: Path) -> None:
    path = tmp_path / "pop" / "popCheckpoint.log"
    log = PopLog(path)
    assert log.open() == []
    state = PopState()
    records = _history(state)
    for record in records:
        log.append(record)
    log.close()
    good_size = path.stat().st_size
    with path.open("ab") as file:
        file.write(b'deadbeef {"t":"ack","k":["T","G",0],"o":2,"p":2000}\n')  # bad CRC
        file.write(b"0000")  # and a torn line
    reopened = PopLog(path)
    assert reopened.open() == records
    assert path.stat().st_size == good_size
    reopened.rewrite(state.snapshot())
    reopened.close()
    again = PopLog(path)
    assert again.open() == state.snapshot()
    again.close()
