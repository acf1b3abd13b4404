"""ConsumerOffsetManager (the topic@group table) and its flush service (RocketMQ's offset
management)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from bolide.base.clock import ManualClock
from bolide.base.errors import BackpressureError, CorruptDataError, StoreIOError
from bolide.base.fileio import backup_path
from bolide.broker.offsets import (
    ConsumerOffsetFlushService,
    ConsumerOffsetManager,
    decode_offset_table,
    encode_offset_table,
)
from bolide.testing.waiting import until

HOST = "10.0.0.5:53211"

# The file of RocketMQ's offset management, as a Java broker writes it: pretty, with unquoted
# queue-id keys.
JAVA_FILE = b"""{
\t"offsetTable":{
\t\t"TopicTest@please_rename_unique_group_name_4":{0:4,1:4,2:4,3:4,4:4,5:2,6:2,7:1,8:3,9:1,10:0
\t\t},
\t\t"%RETRY%please_rename_unique_group_name_4@please_rename_unique_group_name_4":{0:0
\t\t},
\t\t"TopicTest-1@please_rename_unique_group_name_4":{0:12,1:12,2:12,3:13
\t\t}
\t}
}"""


def _manager(tmp_path: Path, **kwargs: int) -> ConsumerOffsetManager:
    return ConsumerOffsetManager(tmp_path / "config" / "consumerOffset.json", **kwargs)


def _file_table(path: Path) -> dict[str, dict[str, int]]:
    document = json.loads(path.read_bytes())
    table: dict[str, dict[str, int]] = document["offsetTable"]
    return table


def test_commit_then_query(tmp_path: Path) -> None:
    offsets = _manager(tmp_path)
    assert offsets.query_offset("billing", "orders", 0) == -1
    offsets.commit_offset(HOST, "billing", "orders", 0, 17)
    offsets.commit_offset(HOST, "billing", "orders", 3, 5)
    assert offsets.query_offset("billing", "orders", 0) == 17
    assert offsets.query_offset("billing", "orders", 3) == 5
    assert offsets.query_offset("billing", "orders", 1) == -1
    assert offsets.query_offset("audit", "orders", 0) == -1
    assert offsets.queue_offsets("billing", "orders") == {0: 17, 3: 5}
    assert offsets.entry_count == 2


def test_backwards_commit_is_stored_and_warned(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    offsets = _manager(tmp_path)
    with caplog.at_level(logging.WARNING, logger="bolide.broker.offsets"):
        offsets.commit_offset(HOST, "billing", "orders", 1, 40)
        offsets.commit_offset(HOST, "billing", "orders", 1, 41)
        assert caplog.records == []
        offsets.commit_offset(HOST, "billing", "orders", 1, 12)
    assert offsets.query_offset("billing", "orders", 1) == 12
    [record] = caplog.records
    assert record.levelno == logging.WARNING
    assert HOST in record.getMessage()
    assert "orders@billing" in record.getMessage()
    assert "41 -> 12" in record.getMessage()


def test_java_file_with_unquoted_keys_loads(tmp_path: Path) -> None:
    offsets = _manager(tmp_path)
    offsets.path.parent.mkdir(parents=True)
    offsets.path.write_bytes(JAVA_FILE)
    offsets.load()
    group = "please_rename_unique_group_name_4"
    assert offsets.query_offset(group, "TopicTest", 10) == 0
    assert offsets.query_offset(group, "TopicTest", 8) == 3
    assert offsets.query_offset(group, f"%RETRY%{group}", 0) == 0
    assert offsets.queue_offsets(group, "TopicTest-1") == {0: 12, 1: 12, 2: 12, 3: 13}
    assert offsets.topics_of_group(group) == sorted(["TopicTest", "TopicTest-1", f"%RETRY%{group}"])
    assert offsets.entry_count == 11 + 1 + 4


def test_encode_is_standard_json_and_round_trips() -> None:
    table = {("orders", "billing"): {10: 3, 2: 7}, ("%RETRY%billing", "billing"): {0: 0}}
    raw = encode_offset_table(table)
    assert json.loads(raw) == {
        "offsetTable": {"%RETRY%billing@billing": {"0": 0}, "orders@billing": {"2": 7, "10": 3}}
    }
    assert decode_offset_table(raw) == table


def test_decode_rejects_damage_and_skips_keys_without_separator() -> None:
    with pytest.raises(ValueError):
        decode_offset_table(b'{"offsetTable":{"a@b":{0:"x"}}}')
    with pytest.raises(ValueError):
        decode_offset_table(b'{"offsetTable":')
    assert decode_offset_table(b'{"offsetTable":{"nogroup":{0:1},"t@g":{1:2}}}') == {
        ("t", "g"): {1: 2}
    }


def test_damaged_file_falls_back_to_backup_and_both_damaged_refuses(tmp_path: Path) -> None:
    offsets = _manager(tmp_path)
    offsets.commit_offset(HOST, "billing", "orders", 0, 1)
    assert offsets.persist()
    offsets.commit_offset(HOST, "billing", "orders", 0, 2)
    assert offsets.persist()
    offsets.path.write_bytes(b'{"offsetTable":{"orders@bil')  # torn main file
    reloaded = _manager(tmp_path)
    reloaded.load()
    assert reloaded.query_offset("billing", "orders", 0) == 1
    backup_path(offsets.path).write_bytes(b"garbage")
    with pytest.raises(CorruptDataError):
        _manager(tmp_path).load()


def test_missing_file_is_an_empty_table(tmp_path: Path) -> None:
    offsets = _manager(tmp_path)
    offsets.load()
    assert offsets.entry_count == 0
    assert offsets.persist() is False  # nothing changed: no write
    assert not offsets.path.exists()


def test_group_and_topic_helpers(tmp_path: Path) -> None:
    offsets = _manager(tmp_path)
    offsets.commit_offset(HOST, "billing", "orders", 0, 5)
    offsets.commit_offset(HOST, "billing", "orders", 1, 6)
    offsets.commit_offset(HOST, "billing", "%RETRY%billing", 0, 1)
    offsets.commit_offset(HOST, "audit", "orders", 0, 2)
    offsets.commit_offset(HOST, "audit", "payments", 0, 9)
    assert offsets.groups_of_topic("orders") == ["audit", "billing"]
    assert offsets.topics_of_group("billing") == ["%RETRY%billing", "orders"]
    assert offsets.offsets_of_group("audit") == {"orders": {0: 2}, "payments": {0: 9}}
    assert offsets.table_snapshot()["orders@billing"] == {0: 5, 1: 6}

    assert offsets.clone_offsets("billing", "billing-v2", "orders") == ["orders"]
    assert offsets.queue_offsets("billing-v2", "orders") == {0: 5, 1: 6}
    assert offsets.clone_offsets("audit", "audit-v2") == ["orders", "payments"]
    assert offsets.clone_offsets("nobody", "x") == []

    offsets.set_queue_offsets("billing", "orders", {1: 0, 2: 0})
    assert offsets.queue_offsets("billing", "orders") == {0: 5, 1: 0, 2: 0}

    assert offsets.remove_topic("payments") == ["audit", "audit-v2"]
    assert offsets.remove_group("billing") == ["%RETRY%billing", "orders"]
    assert offsets.remove_offsets("audit", "orders") is True
    assert offsets.remove_offsets("audit", "orders") is False
    assert offsets.table_snapshot() == {
        "orders@audit-v2": {0: 2},
        "orders@billing-v2": {0: 5, 1: 6},
    }
    assert offsets.entry_count == 3


def test_table_is_bounded(tmp_path: Path) -> None:
    offsets = _manager(tmp_path, max_entries=3)
    for queue_id in range(3):
        offsets.commit_offset(HOST, "g", "t", queue_id, 1)
    offsets.commit_offset(HOST, "g", "t", 2, 5)  # updating an existing entry is fine
    with pytest.raises(BackpressureError):
        offsets.commit_offset(HOST, "g", "t", 3, 1)
    with pytest.raises(BackpressureError):
        offsets.clone_offsets("g", "h")
    assert offsets.query_offset("h", "t", 0) == -1
    offsets.remove_group("g")
    offsets.commit_offset(HOST, "g", "t", 3, 1)
    assert offsets.entry_count == 1


async def test_flush_service_writes_every_interval_under_manual_clock(tmp_path: Path) -> None:
    clock = ManualClock()
    offsets = _manager(tmp_path)
    service = ConsumerOffsetFlushService(offsets, clock=clock)
    service.start()
    try:
        await until(lambda: clock.sleeper_count == 1)
        offsets.commit_offset(HOST, "billing", "orders", 0, 17)
        clock.advance_ms(4_999)
        await until(lambda: clock.sleeper_count == 1)
        assert not offsets.path.exists()
        clock.advance_ms(1)
        await service.wait_flushed(1)
        assert _file_table(offsets.path) == {"orders@billing": {"0": 17}}

        # An unchanged table is not rewritten; a changed one is, 5 s later.
        await until(lambda: clock.sleeper_count == 1)
        clock.advance_ms(5_000)
        await until(lambda: clock.sleeper_count == 1)
        assert service.flush_count == 1
        offsets.commit_offset(HOST, "billing", "orders", 0, 18)
        clock.advance_ms(5_000)
        await service.wait_flushed(2)
        assert _file_table(offsets.path) == {"orders@billing": {"0": 18}}
    finally:
        await service.stop()


async def test_stop_writes_what_was_committed_since_the_last_tick(tmp_path: Path) -> None:
    clock = ManualClock()
    offsets = _manager(tmp_path)
    service = ConsumerOffsetFlushService(offsets, clock=clock)
    service.start()
    offsets.commit_offset(HOST, "billing", "orders", 2, 99)
    await service.stop()
    assert not service.running
    assert _file_table(offsets.path) == {"orders@billing": {"2": 99}}
    reloaded = _manager(tmp_path)
    reloaded.load()
    assert reloaded.query_offset("billing", "orders", 2) == 99


async def test_failed_periodic_write_is_retried_and_final_failure_raises(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_bytes(b"")
    clock = ManualClock()
    offsets = ConsumerOffsetManager(blocker / "consumerOffset.json")
    service = ConsumerOffsetFlushService(offsets, clock=clock, interval_ms=1_000)
    service.start()
    offsets.commit_offset(HOST, "billing", "orders", 0, 1)
    with caplog.at_level(logging.ERROR, logger="bolide.broker.offsets"):
        await until(lambda: clock.sleeper_count == 1)
        clock.advance_ms(1_000)
        await until(lambda: "will retry" in caplog.text)
    await until(lambda: clock.sleeper_count == 1)
    assert service.running  # the loop survived the failure
    with pytest.raises(StoreIOError):
        await service.stop()
