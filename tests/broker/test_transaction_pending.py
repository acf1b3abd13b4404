"""The pending table's pure rules: which transactions are due, and the checker's offsets."""

from __future__ import annotations

from bolide.broker.transactions.pending import PendingHalf, PendingTable
from bolide.broker.transactions.records import HalfRecord, immunity_ms


def record(queue_offset: int, origin: int | None = None, immunity: int | None = None) -> HalfRecord:
    return HalfRecord(
        queue_offset=queue_offset,
        commit_log_offset=queue_offset * 100,
        origin_queue_offset=queue_offset if origin is None else origin,
        producer_group="pg",
        real_topic="t",
        real_queue_id=0,
        unique_key=f"U{queue_offset}",
        check_times=0,
        immunity_ms=immunity,
        born_timestamp_ms=0,
        store_timestamp_ms=0,
        tags=None,
        keys=None,
        body_length=1,
    )


def test_due_after_the_timeout_or_the_immunity_time() -> None:
    plain = PendingHalf(record(0), first_store_ms=1_000)
    assert not plain.due(6_999, 6_000)
    assert plain.due(7_000, 6_000)
    immune = PendingHalf(record(1, immunity=60_000), first_store_ms=1_000)
    assert not immune.due(7_000, 6_000)
    assert immune.due(61_000, 6_000)
    assert immunity_ms({"CHECK_IMMUNITY_TIME_IN_SECONDS": "60"}) == 60_000
    assert immunity_ms({"CHECK_IMMUNITY_TIME_IN_SECONDS": "-1"}) is None
    assert immunity_ms({"CHECK_IMMUNITY_TIME_IN_SECONDS": "soon"}) is None


def test_half_offset_follows_the_oldest_latest_copy() -> None:
    table = PendingTable()
    assert table.half_offset(10) == 10  # nothing pending: the queue's end
    first, second = PendingHalf(record(3), 0), PendingHalf(record(5), 0)
    table.add(first)
    table.add(second)
    assert table.half_offset(10) == 3
    first.record = record(11, origin=3)  # re-appended for a check
    assert table.half_offset(12) == 5
    assert [pending.origin for pending in table] == [3, 5]
    assert table.remove(second)
    assert not table.remove(second)
    assert table.half_offset(12) == 11


def test_op_offset_keeps_ops_of_halves_still_scanned() -> None:
    table = PendingTable()
    table.record_op(0, 2)  # op 0 decides half 2
    table.record_op(1, 9)
    table.record_op(2, 4)
    assert table.op_offset(3, half_offset=2) == 0
    assert table.op_offset(3, half_offset=3) == 1  # op 0 no longer matters
    assert table.op_offset(3, half_offset=10) == 3  # every op below: the op queue's end


def test_remembered_ops_are_bounded() -> None:
    table = PendingTable(op_memory_max_count=2)
    for op_offset in range(5):
        table.record_op(op_offset, 100 + op_offset)
    assert table.op_offset(5, half_offset=0) == 3
