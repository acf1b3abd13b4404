"""The compiled put path (``_records.pyx``, ``_appender.pyx``, ``_properties.pyx``) vs its twins.

For generated messages (properties strings with the four store properties, repeated names,
odd separators, non-ASCII and lone surrogates, NUL endings, bad flags, big bodies) the compiled
``build_record`` and the pure one must give records with the same fields or the same refusal
(status and remark), and leave the same tags-code memo; ``store_properties`` must give the
same four values. Then two file stores, one on each twin, fed the same puts under the same
clock must leave the same commit-log, consume-queue and index files. Skips where not built.
"""

from __future__ import annotations

import asyncio
import importlib
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bolide.base import compiled
from bolide.base.clock import ManualClock, SystemClock
from bolide.protocol import record as door
from bolide.protocol.message import MessageSysFlag, tags_code
from bolide.protocol.record import BatchEntry
from bolide.protocol.system_topics import SCHEDULE_TOPIC
from bolide.store import appender, records
from bolide.store.api import BatchPutRequest, PutRequest, PutResult, PutStatus
from bolide.store.file_store import FileMessageStore
from bolide.store.index_file import index_key_seed
from bolide.store.records import RejectedError, TopicFacts

from .conftest import BORN_HOST, STORE_HOST, tiny_config


@pytest.fixture(scope="module")
def fast() -> ModuleType:
    try:
        return importlib.import_module("bolide.store._compiled")
    except ImportError:  # pragma: no cover - a build without a C compiler
        pytest.skip("the compiled put path was not built (pure-Python install)")


@pytest.fixture(scope="module")
def fast_wire() -> ModuleType:
    try:
        return importlib.import_module("bolide.protocol.record._compiled")
    except ImportError:  # pragma: no cover - a build without a C compiler
        pytest.skip("the compiled wire codec was not built (pure-Python install)")


_NAMES = st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "DELAY", "TAG", "XTAGS", "", "a\x01b"])
_VALUES = st.text(
    alphabet=st.sampled_from(["a", "B", "7", " ", "é", "中", "\x01", "\x00", "\ud800", "😀"]),
    max_size=6,
)
_PAIR = st.tuples(_NAMES, _VALUES).map(lambda pair: f"{pair[0]}\x01{pair[1]}")
_TEXT = st.one_of(
    st.lists(_PAIR, max_size=6).map("\x02".join),
    st.text(alphabet=st.sampled_from(["\x01", "\x02", "T", "A", "G", "S", "x"]), max_size=20),
)


def _view(record: Any) -> tuple[Any, ...]:
    return (
        bytes(record.body),
        record.flag,
        record.properties_bytes,
        record.size,
        record.tags,
        record.tags_code,
        record.delay,
        list(record.hashes),
        record.body_crc,
    )


def _build(build: Any, topic: TopicFacts, body: bytes, flag: int, text: str) -> Any:
    memo: dict[str, int] = {}
    try:
        record = build(topic, body, flag, text, 12, 64, 3, memo)
    except RejectedError as rejected:
        return ("refused", rejected.status, rejected.remark)
    return _view(record), memo


@settings(max_examples=400)
@given(
    _TEXT,
    st.binary(max_size=80),
    st.sampled_from([0, 7, -(2**31), 2**31 - 1, 2**31, -(2**31) - 1]),
    st.sampled_from(["orders", SCHEDULE_TOPIC, "话题"]),
)
def test_records_are_built_alike(
    fast: ModuleType, text: str, body: bytes, flag: int, topic_name: str
) -> None:
    topic = TopicFacts(topic_name, topic_name.encode())
    pure = compiled.pure_twin("bolide.store.records", "build_record")
    assert _build(fast.build_record, topic, body, flag, text) == _build(
        pure, topic, body, flag, text
    )


def test_the_refusals_are_the_same(fast: ModuleType) -> None:
    topic = TopicFacts("orders", b"orders")
    pure = compiled.pure_twin("bolide.store.records", "build_record")
    for body, flag, text in (
        (b"x" * 65, 0, ""),  # body above the limit of 64
        (b"x", 2**31, ""),
        (b"x", 0, "TAGS\x01a\x00"),
        (b"x", 0, "TAGS\x01\ud800"),
        (b"x", 0, "K\x01" + "v" * 40_000),
    ):
        compiled_answer = _build(fast.build_record, topic, body, flag, text)
        assert compiled_answer[0] == "refused"
        assert compiled_answer == _build(pure, topic, body, flag, text)


def test_the_record_fields_are_those_the_store_reads(fast: ModuleType) -> None:
    topic = TopicFacts("orders", b"orders")
    text = "TAGS\x01t1\x02KEYS\x01k1 k2\x02UNIQ_KEY\x01u\x02DELAY\x013\x02TAGS\x01t2"
    record = fast.build_record(topic, b"body", 5, text, 0, 64, 8, {})
    assert (record.tags, record.tags_code, record.delay) == ("t2", tags_code("t2"), None)
    seed = index_key_seed("orders")
    assert len(record.hashes) == 3 and record.size == door.RECORD_OVERHEAD_BYTES + 4 + 6 + len(text)
    assert (
        record.hashes
        == compiled.pure_twin("bolide.store.records", "build_record")(
            topic, b"body", 5, text, 0, 64, 8, {}
        ).hashes
    )
    assert seed == topic.key_seed


@settings(max_examples=400)
@given(_TEXT)
def test_store_properties_are_read_alike(fast_wire: ModuleType, text: str) -> None:
    pure = compiled.pure_twin("bolide.protocol.record.properties", "store_properties")
    padded = "\x02" + text
    expected = tuple(
        door.property_value(padded, mark)
        for mark in (door.TAGS_MARK, door.KEYS_MARK, door.UNIQ_KEY_MARK, door.DELAY_MARK)
    )
    assert fast_wire.store_properties(text) == pure(text) == expected


_ENTRY = st.tuples(st.integers(-(2**31), 2**31), st.binary(max_size=70), _TEXT)


@settings(max_examples=300)
@given(st.lists(_ENTRY, max_size=5), _TEXT, st.sampled_from(["orders", SCHEDULE_TOPIC]))
def test_batches_are_built_alike(
    fast: ModuleType, entries: list[tuple[int, bytes, str]], extra: str, topic_name: str
) -> None:
    topic = TopicFacts(topic_name, topic_name.encode())
    batch = [BatchEntry(flag, body, text) for flag, body, text in entries]
    answers: list[Any] = []
    for build in (fast.build_records, compiled.pure_twin("bolide.store.records", "build_records")):
        memo: dict[str, int] = {}
        try:
            answers.append(([_view(r) for r in build(topic, batch, extra, 0, 64, 3, memo)], memo))
        except RejectedError as rejected:
            answers.append(("refused", rejected.status, rejected.remark))
    assert answers[0] == answers[1]


@given(
    st.lists(st.tuples(st.integers(1, 5000), st.lists(st.integers(0, 2**32 - 1), max_size=3))),
    st.integers(0, 2**63 - 2**40),
    st.integers(0, 2**42),
)
def test_batch_entries_are_laid_out_alike(
    fast: ModuleType, shapes: list[tuple[int, list[int]]], base_offset: int, store_ms: int
) -> None:
    pure_build = compiled.pure_twin("bolide.store.records", "PreparedRecord")
    answers = []
    for make, lay in (
        (fast.PreparedRecord, fast.batch_entries),
        (pure_build, compiled.pure_twin("bolide.store.appender", "batch_entries")),
        (pure_build, fast.batch_entries),  # the compiled one reads a pure record too
    ):
        batch = [make(b"", 0, b"", size, None, size % 7, None, hashes) for size, hashes in shapes]
        index_records: list[Any] = []
        ids, entries = lay(batch, base_offset, "7F000001", store_ms, index_records)
        answers.append((ids, entries, index_records))
    assert answers[0] == answers[1] == answers[2]
    if shapes:
        assert answers[0][0][0] == f"7F000001{base_offset:016X}"


# --- whole stores, one on each twin --------------------------------------------------------


_RECORDS_TWINS = ("PreparedRecord", "build_record", "build_records")
_APPENDER_TWINS = ("put_one", "append_single", "batch_entries")


def _puts() -> list[PutRequest | BatchPutRequest | list[PutRequest]]:
    base = 1_700_000_000_000
    singles = [
        PutRequest(
            "orders",
            number % 3,
            bytes([number % 251]) * (number % 40),
            flag=number,
            properties=f"TAGS\x01t{number % 4}\x02UNIQ_KEY\x01U{number:08X}"
            + ("\x02KEYS\x01a b" if number % 5 == 0 else ""),
            sys_flag=int(MessageSysFlag.TRANSACTION_PREPARED) if number % 17 == 0 else 0,
            born_host=BORN_HOST,
            born_timestamp_ms=base + number,
        )
        for number in range(120)
    ]
    batch = BatchPutRequest(
        "orders",
        1,
        [BatchEntry(0, b"b%d" % n, f"UNIQ_KEY\x01B{n}\x02TAGS\x01bt") for n in range(8)],
        born_host=BORN_HOST,
        extra_properties="CLUSTER\x01c",
    )
    scheduled = PutRequest(
        SCHEDULE_TOPIC, 2, b"later", properties="DELAY\x013\x02TAGS\x01x", born_host=BORN_HOST
    )
    refused = [
        PutRequest("orders", 0, b"x", properties="TAGS\x01a\x00", born_host=BORN_HOST),
        PutRequest("orders", 99_999, b"x", born_host=BORN_HOST),
        PutRequest("orders", 0, b"x", flag=2**31, born_host=BORN_HOST),
        PutRequest("orders", 0, b"x", born_host=("127.0.0.1", 70_000)),
        PutRequest("orders", 0, b"x", born_timestamp_ms=2**63, born_host=BORN_HOST),
        PutRequest("orders", 0, b"x", born_host=("not-an-ip", 1)),
        PutRequest("bad/topic", 0, b"x", born_host=BORN_HOST),
    ]
    odd = [  # stored: a mapping, an IPv6 born host, a bool field, a new topic
        PutRequest("orders", 1, b"m", properties={"TAGS": "m", "KEYS": "k"}, born_host=BORN_HOST),
        PutRequest("orders", 2, b"v6", properties="TAGS\x01six", born_host=("::1", 5)),
        PutRequest("orders", 0, b"b", reconsume_times=True, born_host=BORN_HOST),
        PutRequest("payments", 0, b"p", properties="UNIQ_KEY\x01P", born_host=BORN_HOST),
    ]
    return [
        *singles[:30], batch, scheduled, singles[30:45], *refused, *odd, *singles[45:80],
        [*singles[80:90], refused[0], *singles[90:]],
    ]  # fmt: skip


def _result(result: PutResult | None) -> tuple[Any, ...] | None:
    if result is None:
        return None
    return (
        result.status, result.commit_log_offset, result.queue_offset, result.store_timestamp_ms,
        result.wrote_bytes, tuple(result.message_ids), result.message_count, result.remark,
    )  # fmt: skip


async def _fill(root: Path) -> tuple[dict[str, bytes], list[Any], list[Any]]:
    """The store's files, put results and arrivals after :func:`_puts` under a manual clock."""
    clock = ManualClock(start_ms=1_700_000_100_000)
    store = FileMessageStore(tiny_config(root), clock=clock, store_host=STORE_HOST)
    await store.start()
    arrivals: list[tuple[str, int, int, int]] = []
    store.add_arrival_listener(lambda *arrival: arrivals.append(arrival))
    answers: list[Any] = []
    for put in _puts():
        clock.advance_ms(3)
        if isinstance(put, PutRequest):
            answers.append(_result(await store.put_message(put)))
            answers.append(_result(store.put_message_at_once(put)))
        elif isinstance(put, BatchPutRequest):
            answers.append(_result(await store.put_messages(put)))
        else:
            answers.append([_result(r) for r in await store.put_message_list(put)])
    await store.shutdown()
    files = {}
    for path in sorted((root / "store").rglob("*")):
        relative = str(path.relative_to(root / "store"))
        if path.is_file() and (relative.startswith(("commitlog", "consumequeue", "index"))):
            files[relative] = path.read_bytes()
    return files, answers, arrivals


def test_stores_on_either_twin_write_the_same_files(
    fast: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in _RECORDS_TWINS:
        monkeypatch.setattr(records, name, getattr(fast, name))
    for name in _APPENDER_TWINS:
        monkeypatch.setattr(appender, name, getattr(fast, name))
    compiled_files, compiled_answers, compiled_arrivals = asyncio.run(_fill(tmp_path / "compiled"))
    for name in _RECORDS_TWINS:
        monkeypatch.setattr(records, name, compiled.pure_twin("bolide.store.records", name))
    for name in _APPENDER_TWINS:
        monkeypatch.setattr(appender, name, compiled.pure_twin("bolide.store.appender", name))
    pure_store_properties = compiled.pure_twin(
        "bolide.protocol.record.properties", "store_properties"
    )
    monkeypatch.setattr(records, "store_properties", pure_store_properties)
    pure_files, pure_answers, pure_arrivals = asyncio.run(_fill(tmp_path / "pure"))
    assert compiled_answers == pure_answers
    assert compiled_arrivals == pure_arrivals
    flat = [
        a for answer in compiled_answers for a in (answer if isinstance(answer, list) else [answer])
    ]
    assert sum(1 for answer in flat if answer[0] != PutStatus.PUT_OK) == 15  # 7 twice, 1 listed
    assert compiled_files.keys() == pure_files.keys()
    assert any(name.startswith("index") for name in compiled_files)
    assert any(name.startswith("consumequeue") for name in compiled_files)
    for name, data in compiled_files.items():
        assert data == pure_files[name], name


def test_the_system_clock_read_inline_is_the_system_clock(fast: ModuleType, tmp_path: Path) -> None:
    # The compiled single put reads SystemClock without calling it (clock_gettime, as
    # time.time_ns does); its store time must fall between two readings of the real one.
    async def put_between() -> tuple[int, int, int]:
        store = FileMessageStore(tiny_config(tmp_path), clock=SystemClock(), store_host=STORE_HOST)
        await store.start()
        try:
            request = PutRequest("orders", 0, b"x", properties="TAGS\x01a", born_host=BORN_HOST)
            before_ms = time.time_ns() // 1_000_000
            result = store.put_message_at_once(request)
            after_ms = time.time_ns() // 1_000_000
        finally:
            await store.shutdown()
        assert result is not None and result.ok
        return before_ms, result.store_timestamp_ms, after_ms

    before_ms, stored_ms, after_ms = asyncio.run(put_between())
    assert appender.append_single is fast.append_single or compiled.pure_python_forced()
    assert before_ms <= stored_ms <= after_ms
