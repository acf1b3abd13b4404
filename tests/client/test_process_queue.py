"""ProcessQueue: the offset to commit is the smallest unacknowledged one; flow-control figures."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from bolide.base import limits
from bolide.client.consumer.process_queue import NO_OFFSET, ProcessQueue
from bolide.protocol.message import MessageExt, PropertyKey


def message(offset: int, size: int = 10, properties: dict[str, str] | None = None) -> MessageExt:
    return MessageExt("T", b"x" * size, properties=dict(properties or {}), queue_offset=offset)


def test_commit_offset_is_the_smallest_unacknowledged() -> None:
    queue = ProcessQueue()
    batch = [message(offset) for offset in range(10, 15)]
    queue.put_messages(batch)
    assert queue.remove_messages([batch[1], batch[3]], now_ms=1) == 10  # 10 still in flight
    assert queue.remove_messages([batch[0]], now_ms=2) == 12
    assert queue.remove_messages([batch[2], batch[4]], now_ms=3) == 15  # empty: max + 1
    assert queue.last_consume_timestamp_ms == 3


def test_removing_from_an_empty_queue_gives_no_offset() -> None:
    queue = ProcessQueue()
    assert queue.remove_messages([message(3)], now_ms=0) == NO_OFFSET


def test_removing_twice_or_unknown_messages_changes_nothing() -> None:
    queue = ProcessQueue()
    queue.put_messages([message(0), message(1)])
    assert queue.remove_messages([message(0)], now_ms=0) == 1
    assert queue.remove_messages([message(0), message(7)], now_ms=0) == 1
    assert queue.message_count == 1


def test_counts_bytes_and_span() -> None:
    queue = ProcessQueue()
    assert (queue.message_count, queue.message_bytes, queue.max_span) == (0, 0, 0)
    queue.put_messages([message(100, size=5), message(101, size=7), message(400, size=1)])
    assert (queue.message_count, queue.message_bytes, queue.max_span) == (3, 13, 300)
    assert (queue.min_offset, queue.max_offset) == (100, 400)
    queue.remove_messages([message(100, size=5)], now_ms=0)
    assert (queue.message_count, queue.message_bytes, queue.max_span) == (2, 8, 299)


def test_a_message_already_cached_is_not_counted_twice() -> None:
    queue = ProcessQueue()
    queue.put_messages([message(1), message(2)])
    queue.put_messages([message(2), message(3)])
    assert queue.message_count == 3
    assert queue.message_bytes == 30


def test_out_of_order_puts_keep_offset_order() -> None:
    queue = ProcessQueue()
    queue.put_messages([message(5), message(9)])
    queue.put_messages([message(7), message(1)])
    assert queue.min_offset == 1
    assert queue.remove_messages([message(1)], now_ms=0) == 5


def test_put_reports_the_accumulated_lag_from_max_offset() -> None:
    queue = ProcessQueue()
    queue.put_messages([message(10, properties={PropertyKey.MAX_OFFSET: "50"})])
    assert queue.accumulated_count == 40


def test_put_asks_for_one_consume_task_at_a_time() -> None:
    queue = ProcessQueue()
    assert queue.put_messages([message(0)]) is True
    assert queue.put_messages([message(1)]) is False  # a task already runs
    assert queue.put_messages([]) is False


def test_pull_and_lock_expiry() -> None:
    queue = ProcessQueue(now_ms=1_000)
    assert not queue.is_pull_expired(1_000 + limits.PULL_MAX_IDLE_MS)
    assert queue.is_pull_expired(1_001 + limits.PULL_MAX_IDLE_MS)
    assert not queue.is_lock_expired(1_000 + limits.CLIENT_LOCK_MAX_LIVE_MS)
    assert queue.is_lock_expired(1_001 + limits.CLIENT_LOCK_MAX_LIVE_MS)


def test_first_expired_message_uses_the_consume_start_time() -> None:
    queue = ProcessQueue()
    queue.put_messages(
        [message(0, properties={PropertyKey.CONSUME_START_TIME: "1000"}), message(1)]
    )
    assert queue.first_expired_message(now_ms=1_500, consume_timeout_ms=600) is None
    expired = queue.first_expired_message(now_ms=1_601, consume_timeout_ms=600)
    assert expired is not None and expired.queue_offset == 0


def test_orderly_take_commit_and_consume_again() -> None:
    queue = ProcessQueue()
    queue.put_messages([message(offset) for offset in range(5)])
    taken = queue.take_messages(3, now_ms=7)
    assert [m.queue_offset for m in taken] == [0, 1, 2]
    assert queue.message_count == 5  # taken messages still count until committed
    queue.make_messages_to_consume_again([taken[2]])
    assert [m.queue_offset for m in queue.take_messages(10, now_ms=8)] == [2, 3, 4]
    assert queue.commit() == 5
    assert (queue.message_count, queue.message_bytes) == (0, 0)
    assert queue.take_messages(1, now_ms=9) == []
    assert queue.consuming is False
    assert queue.commit() == NO_OFFSET


def test_rollback_puts_everything_back() -> None:
    queue = ProcessQueue()
    queue.put_messages([message(offset) for offset in range(3)])
    queue.take_messages(2, now_ms=0)
    queue.rollback()
    assert [m.queue_offset for m in queue.take_messages(3, now_ms=0)] == [0, 1, 2]


def test_info_reports_java_field_names() -> None:
    queue = ProcessQueue(now_ms=5)
    queue.put_messages([message(3), message(4)])
    info = queue.info(commit_offset=3)
    assert info["cachedMsgCount"] == 2
    assert (info["cachedMsgMinOffset"], info["cachedMsgMaxOffset"]) == (3, 4)
    assert info["commitOffset"] == 3 and info["droped"] is False


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(st.integers(min_value=0, max_value=60), max_size=8),
            st.one_of(
                st.lists(st.integers(min_value=0, max_value=60), max_size=3),
                st.integers(min_value=1, max_value=4),  # the oldest cached, in order
            ),
            st.booleans(),
        ),
        max_size=8,
    )
)
def test_lists_are_cached_and_removed_as_message_by_message(
    steps: list[tuple[list[int], list[int] | int, bool]],
) -> None:
    """put_messages takes a list that ascends past everything cached at once (a pull's
    answer), remove_messages a list of the oldest cached in order (a batch consumed whole);
    anything else goes message by message. Both leave the same state: the same lists given
    as plain iterables (always message by message) are the reference."""
    bulk, reference = ProcessQueue(), ProcessQueue()
    for puts, removes, take in steps:
        batch = [
            message(offset, size=offset % 7 + 1, properties=_max_offset(offset)) for offset in puts
        ]
        assert bulk.put_messages(batch) == reference.put_messages(iter(list(batch)))
        if isinstance(removes, int):
            removes = _cached_offsets(reference)[:removes]
        gone = [message(offset) for offset in removes]
        assert bulk.remove_messages(gone, now_ms=1) == reference.remove_messages(
            iter(gone), now_ms=1
        )
        if take:
            taken = bulk.take_messages(2, now_ms=2)
            assert taken == reference.take_messages(2, now_ms=2)
        assert _state(bulk) == _state(reference)


def _cached_offsets(queue: ProcessQueue) -> list[int]:
    """The cached offsets, ascending (the cache's own list: no public view gives them all)."""
    return list(queue._offsets)


def _max_offset(offset: int) -> dict[str, str]:
    return {PropertyKey.MAX_OFFSET: str(offset + 5)}


def _state(queue: ProcessQueue) -> tuple[object, ...]:
    return (
        queue.message_count,
        queue.message_bytes,
        queue.max_span,
        queue.min_offset,
        queue.max_offset,
        queue.queue_offset_max,
        queue.accumulated_count,
        queue.consuming,
        queue.has_cached_messages(),
    )
