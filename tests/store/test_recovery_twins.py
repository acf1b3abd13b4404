"""Recovery's compiled scan (``_recovery_scan.pyx``) against its pure-Python twin.

Generated stores (topics, queues, KEYS, TAGS, delay levels, transaction halves, batches)
are crashed, damaged (a flipped byte, a cut) and recovered twice, once with each
``SegmentScanner``: the reports and every consume-queue and index byte must be the same.
The scanner is also driven directly over queues that already hold entries (skipped), an empty
queue (restarted at the record's offset) and a queue with a hole (logged, counted). Runs in
both modes (it imports the extension itself); skips where the extension was not built.
"""

from __future__ import annotations

import asyncio
import importlib
import random
import shutil
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bolide.base import compiled
from bolide.base.clock import ManualClock
from bolide.protocol.message import MessageSysFlag
from bolide.protocol.record import BatchEntry
from bolide.protocol.system_topics import SCHEDULE_TOPIC
from bolide.store import recovery
from bolide.store.api import BatchPutRequest, PutRequest
from bolide.store.commit_log import CommitLog
from bolide.store.config import StoreConfig
from bolide.store.consume_queue import ConsumeQueueTable
from bolide.store.file_ops import FileOps
from bolide.store.file_store import FileMessageStore
from bolide.store.index_file import KeyIndex

from .conftest import BORN_HOST, STORE_HOST, ControlledFileOps, copy_store_files, tiny_config

PURE: Any = compiled.pure_twin("bolide.store.recovery_scan", "SegmentScanner")


@pytest.fixture(scope="module")
def fast() -> ModuleType:
    try:
        return importlib.import_module("bolide.store._compiled")
    except ImportError:  # pragma: no cover - a build without a C compiler
        pytest.skip("the compiled recovery scan was not built (pure-Python install)")


_MESSAGE = st.fixed_dictionaries(
    {
        "topic": st.sampled_from(["orders", "audit", SCHEDULE_TOPIC]),
        "queue_id": st.integers(0, 3),
        "body": st.binary(max_size=300),
        "keys": st.sampled_from([None, "", "k1", "k1 k2", "k2 k2 k3"]),
        "tags": st.sampled_from([None, "", "TagA", "TagB"]),
        "delay": st.sampled_from([None, "0", "1", "3", "99", "x"]),
        "sys_flag": st.sampled_from([0, 0, 0, int(MessageSysFlag.TRANSACTION_PREPARED)]),
        "batch": st.integers(0, 3),
    }
)


def _put(message: dict[str, Any], number: int) -> PutRequest | BatchPutRequest:
    properties = {"UNIQ_KEY": f"{number:032X}"}
    for name, key in (("KEYS", "keys"), ("TAGS", "tags"), ("DELAY", "delay")):
        if message[key] is not None:
            properties[name] = message[key]
    if message["batch"] and message["topic"] != SCHEDULE_TOPIC and not message["sys_flag"]:
        text = "\x02".join(f"{name}\x01{value}" for name, value in properties.items())
        entries = [BatchEntry(0, message["body"], text) for _ in range(message["batch"])]
        return BatchPutRequest(message["topic"], message["queue_id"], entries, born_host=BORN_HOST)
    put = PutRequest(
        topic=message["topic"],
        queue_id=message["queue_id"],
        body=message["body"],
        properties=properties,
        born_timestamp_ms=1_700_000_000_123 + number,
        born_host=BORN_HOST,
    )
    put.sys_flag = message["sys_flag"]
    return put


async def _write(
    config: StoreConfig, messages: list[dict[str, Any]], flush_after: int, crashed: Path
) -> None:
    """Store ``messages``, then copy the directory to ``crashed`` as a crash leaves it (the
    mapped writes are in the page cache) before shutting down."""
    clock = ManualClock()
    store = FileMessageStore(
        config, clock=clock, store_host=STORE_HOST, file_ops=ControlledFileOps(sync=False)
    )
    await store.start()
    for number, message in enumerate(messages):
        if number == flush_after:
            await store.flush()
        clock.advance_ms(7)
        put = _put(message, number)
        if isinstance(put, BatchPutRequest):
            assert (await store.put_messages(put)).ok
        else:
            assert (await store.put_message(put)).ok
    copy_store_files(config.store_path_root_dir, crashed)
    await store.shutdown()


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file() and ("consumequeue" in path.parts or "index" in path.parts)
    }


async def _recover(config: StoreConfig) -> tuple[Any, dict[str, bytes]]:
    store = FileMessageStore(
        config, clock=ManualClock(), store_host=STORE_HOST, file_ops=ControlledFileOps(sync=False)
    )
    report = await store.start()
    await store.shutdown()
    return report, _files(config.store_path_root_dir)


def _damage(commit_log: Path, seed: int, kind: str) -> None:
    segments = sorted(commit_log.iterdir())
    rng = random.Random(seed)
    path = segments[rng.randrange(len(segments))]
    data = bytearray(path.read_bytes())
    used = len(data.rstrip(b"\0"))
    if not used:
        return
    where = rng.randrange(used)
    if kind == "flip":
        data[where] ^= 1 << rng.randrange(8)
    else:  # a torn tail: zeros from ``where`` on
        data[where:] = bytes(len(data) - where)
    path.write_bytes(bytes(data))


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    messages=st.lists(_MESSAGE, min_size=1, max_size=40),
    flush_at=st.integers(0, 40),
    damage=st.sampled_from(["none", "flip", "cut"]),
    seed=st.integers(0, 2**16),
)
def test_both_scanners_recover_the_same_bytes(
    fast: ModuleType,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    messages: list[dict[str, Any]],
    flush_at: int,
    damage: str,
    seed: int,
) -> None:
    root = tmp_path_factory.mktemp("twins")
    live = tiny_config(root / "live")
    crashed = tiny_config(root / "crashed")
    asyncio.run(_write(live, messages, flush_at, crashed.store_path_root_dir))
    if damage != "none":
        _damage(crashed.commit_log_dir, seed, damage)
    answers = []
    for scanner in (fast.SegmentScanner, PURE):
        copy = root / scanner.__module__
        shutil.copytree(crashed.store_path_root_dir, copy / "store")
        monkeypatch.setattr(recovery, "SegmentScanner", scanner)
        answers.append(asyncio.run(_recover(tiny_config(copy))))
    (fast_report, fast_files), (pure_report, pure_files) = answers
    assert fast_report == pure_report
    assert fast_files.keys() == pure_files.keys()
    for name in fast_files:
        assert fast_files[name] == pure_files[name], name
    assert fast_report.records_scanned > 0 or damage != "none"


def _parts(root: Path) -> tuple[CommitLog, ConsumeQueueTable, KeyIndex]:
    config = tiny_config(root)
    commit_log = CommitLog(config.commit_log_dir, config.commit_log_segment_bytes, FileOps())
    commit_log.load()
    queues = ConsumeQueueTable(
        config.consume_queue_dir, config.consume_queue_file_entries, FileOps()
    )
    queues.load()
    index = KeyIndex(
        config.index_dir, config.index_hash_slots, config.index_file_max_entries, FileOps()
    )
    index.load()
    return commit_log, queues, index


@pytest.mark.parametrize("kind", ["compiled", "pure"])
def test_the_scanner_skips_restarts_and_counts_holes(
    fast: ModuleType, tmp_path: Path, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    live = tiny_config(tmp_path / "live")
    messages = [
        {"topic": "orders", "queue_id": n % 2, "body": bytes(50), "keys": None, "tags": "T",
         "delay": None, "sys_flag": 0, "batch": 0}
        for n in range(12)
    ]  # fmt: skip
    asyncio.run(_write(live, messages, 99, tmp_path / "crashed" / "store"))
    crashed = tiny_config(tmp_path / "crashed")
    shutil.rmtree(crashed.consume_queue_dir)
    shutil.rmtree(crashed.index_dir)
    commit_log, queues, index = _parts(tmp_path / "crashed")
    # Queue 0 already holds its first two entries; queue 1 will be empty from record 4 on.
    first = commit_log.segments[0]
    record_sizes = []
    position = 0
    for _ in range(12):
        size = int.from_bytes(first.view[position : position + 4], "big")
        record_sizes.append((position, size))
        position += size
    queue = queues.get_or_create("orders", 0)
    queue.prepare_append(2)
    queue.append_many([(record_sizes[0][0], record_sizes[0][1], 0)] * 2)
    scanner = (fast.SegmentScanner if kind == "compiled" else PURE)(queues, index, (1000,))
    start = record_sizes[4][0]  # records 4.. : queue 0 offsets 2.., queue 1 offsets 2..
    end, reason, go_on = scanner.scan(first.view, first.size_bytes, start, start)
    assert (reason, go_on) == (None, False)  # the data ends in this segment
    assert end == record_sizes[-1][0] + record_sizes[-1][1]
    assert scanner.records == 8
    assert queues.get("orders", 0) is not None
    assert (queue.min_offset, queue.max_offset) == (0, 6)  # 2 kept, 4 appended after them
    other = queues.get_or_create("orders", 1)
    assert (other.min_offset, other.max_offset) == (2, 6)  # empty: restarted at offset 2
    assert scanner.gaps == 0
    # Again from record 8 over the same queues: queue 0 now holds 0..5, so records 8..11
    # (its offsets 4, 5 skipped, then 6...) append; truncating queue 1 to 1 entry makes a hole.
    other.truncate(3)
    scanner = (fast.SegmentScanner if kind == "compiled" else PURE)(queues, index, (1000,))
    start = record_sizes[8][0]
    with caplog.at_level("ERROR", logger="bolide.store.recovery"):
        scanner.scan(first.view, first.size_bytes, start, start)
    assert queue.max_offset == 6
    assert scanner.gaps == 2  # queue 1 offsets 4 and 5 after its entry 2: two holes logged
    assert other.max_offset == 5
    assert "misses entries" in caplog.text
    assert scanner.queue_entries == 2


@pytest.mark.parametrize("scanner_name", ["compiled", "pure"])
def test_records_indexed_before_a_crash_are_not_indexed_again(
    fast: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scanner_name: str
) -> None:
    """The index is not trimmed to the checkpoint: the scan from there must skip the records
    it already holds. Indexing them again filled the newest index file with copies and then
    tried to create a file by a name that existed ("index file ... exists already")."""
    live, crashed = tiny_config(tmp_path / "live"), tiny_config(tmp_path / "crashed")
    messages = [
        {"topic": "orders", "queue_id": 0, "body": b"x", "tags": None, "keys": f"k{n}",
         "delay": None, "sys_flag": 0, "batch": 0}
        for n in range(100)
    ]  # fmt: skip
    asyncio.run(_write(live, messages, 1, crashed.store_path_root_dir))
    assert len(list(crashed.index_dir.glob("0*"))) >= 2  # the keys fill more than one file
    scanner = fast.SegmentScanner if scanner_name == "compiled" else PURE
    monkeypatch.setattr(recovery, "SegmentScanner", scanner)
    report, _ = asyncio.run(_recover(crashed))
    assert report.records_scanned == 99  # everything after the checkpoint, re-dispatched
    # only the keys of the last puts, whose index writes the crash lost, are indexed again
    assert 0 <= report.index_entries_rebuilt < 99
