"""Controller mode's readUnCommitted=false on the file store (real files): with a confirm
offset set, a read sees a queue only up to the last record that ends at or before it, a
caught-up reader is told so (OFFSET_OVERFLOW_ONE) instead of reading past it, and the rest
appears as the confirm offset moves."""

from __future__ import annotations

from pathlib import Path

from bolide.base.clock import ManualClock
from bolide.store.api import GetStatus
from bolide.store.file_store import FileMessageStore
from bolide.store.queue_reads import confirmed_max_offset
from tests.store.conftest import STORE_HOST, ControlledFileOps, request, tiny_config

RECORDS = 40


async def test_reads_stop_at_the_confirm_offset_and_follow_it(tmp_path: Path) -> None:
    store = FileMessageStore(
        tiny_config(tmp_path), clock=ManualClock(), store_host=STORE_HOST,
        file_ops=ControlledFileOps(sync=False),
    )  # fmt: skip
    await store.start()
    try:
        ends = []
        for index in range(RECORDS):
            result = await store.put_message(request("orders", index % 2, f"m{index}".encode()))
            ends.append(result.commit_log_offset + result.wrote_bytes)
        confirm = ends[9]  # records 0..9 are on every in-sync replica
        store.confirm_offset = lambda: confirm
        seen = store.get_message("orders", 1, 0, 64, 1 << 20)
        assert seen.status is GetStatus.FOUND
        assert seen.message_count == 5 and seen.max_offset == 5  # queue 1 holds 1, 3, .., 9
        assert seen.next_begin_offset == 5
        caught_up = store.get_message("orders", 1, 5, 64, 1 << 20)
        assert caught_up.status is GetStatus.OFFSET_OVERFLOW_ONE
        assert caught_up.message_count == 0 and caught_up.next_begin_offset == 5
        confirm = ends[10] - 1  # record 10 (queue 0) only partly confirmed: still hidden
        assert store.get_message("orders", 0, 0, 64, 1 << 20).message_count == 5
        confirm = ends[-1]
        assert store.get_message("orders", 1, 5, 64, 1 << 20).message_count == RECORDS // 2 - 5
        store.confirm_offset = None
        assert store.get_message("orders", 0, 0, 64, 1 << 20).message_count == RECORDS // 2
    finally:
        await store.shutdown()


def test_the_confirmed_max_offset_is_the_first_entry_ending_past_it() -> None:
    entries = {offset: (offset * 100, 100, 0) for offset in range(10)}
    for confirm, expected in ((0, 0), (99, 0), (100, 1), (550, 5), (1000, 10), (5000, 10)):
        assert confirmed_max_offset(entries.get, 0, 10, confirm) == expected
    assert confirmed_max_offset(entries.get, 7, 10, 300) == 7  # never below where it reads
    assert confirmed_max_offset(entries.get, 10, 10, 0) == 10  # nothing to hide past max
