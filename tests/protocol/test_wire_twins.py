"""The compiled record codec (``protocol/record/_*.pyx``) against its pure-Python twins.

Differential and property tests: for generated records, properties strings and corruptions
of them, both twins must give the same bytes, the same answers and the same errors (type,
record index, position). The compiled module is imported directly, so these run whatever
BOLIDE_PURE_PYTHON says; they skip only where the extension was not built (no compiler).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bolide.base import compiled
from bolide.base.errors import InvariantViolationError, ProtocolError
from bolide.protocol import frame
from bolide.protocol import record as door
from bolide.protocol.address import pack_ip
from bolide.protocol.message import MessageExt
from bolide.protocol.record import RecordDecodeError, RowSink, decode_records, encode_record

WIRE_ROOMS = (
    "bolide.protocol.record.layout",
    "bolide.protocol.record.properties",
    "bolide.protocol.record.messages",
)
"""The rooms of the record whose twins ``record/_*.pyx`` compiles (besides rows and batch)."""


def _compiled_module() -> ModuleType:
    try:
        return importlib.import_module("bolide.protocol.record._compiled")
    except ImportError:  # pragma: no cover - a build without a C compiler
        pytest.skip("the compiled wire codec was not built (pure-Python install)")


@pytest.fixture(scope="module")
def fast() -> ModuleType:
    return _compiled_module()


@pytest.fixture(scope="module")
def fast_frames() -> ModuleType:
    try:
        return importlib.import_module("bolide.protocol._compiled")
    except ImportError:  # pragma: no cover - a build without a C compiler
        pytest.skip("the compiled frame cut was not built (pure-Python install)")


assert callable(frame.split_frames)  # imported so that its twins are registered


def _pure(name: str) -> Callable[..., Any]:
    for room in WIRE_ROOMS:
        try:
            return compiled.pure_twin(room, name)
        except KeyError:
            continue
    raise KeyError(name)


def _outcome(function: Callable[..., Any], *arguments: Any) -> tuple[str, Any]:
    """("ok", result) or ("error", (type name, message, index, position, next position))."""
    try:
        return "ok", function(*arguments)
    except ProtocolError as error:
        return "error", (
            type(error).__name__,
            str(error),
            getattr(error, "index", None),
            getattr(error, "position", None),
            getattr(error, "next_position", None),
            len(getattr(error, "decoded", ())),
        )


def _as_tuple(*fields: Any) -> tuple[Any, ...]:
    return fields


_TEXT = st.text(alphabet=st.sampled_from("ab\x01\x02 é中😀="), max_size=40)
_NAME = st.text(alphabet=st.sampled_from("abcXYZ_é"), min_size=1, max_size=8)
_HOST = st.sampled_from([("10.0.0.7", 51234), ("127.0.0.1", 10911), ("::1", 7), ("fe80::2", 0)])


@st.composite
def _records(draw: st.DrawFn) -> bytes:
    properties = draw(st.dictionaries(_NAME, st.text(max_size=12).filter(_no_separator)))
    return encode_record(
        topic=draw(st.text(alphabet="TopicAé-_%", min_size=1, max_size=30)).encode(),
        body=draw(st.binary(max_size=300)),
        flag=draw(st.integers(-(2**31), 2**31 - 1)),
        properties=door.encode_properties(properties).encode("utf-8", "surrogatepass"),
        queue_id=draw(st.integers(0, 1023)),
        queue_offset=draw(st.integers(0, 2**62)),
        commit_log_offset=draw(st.integers(0, 2**62)),
        sys_flag=draw(st.sampled_from([0, 0x2, 0x4, 0x8, 0x80])),
        born_timestamp_ms=draw(st.integers(0, 2**50)),
        born_host=draw(_HOST),
        store_timestamp_ms=draw(st.integers(0, 2**50)),
        store_host=draw(_HOST),
        reconsume_times=draw(st.integers(0, 16)),
        prepared_transaction_offset=draw(st.integers(0, 2**40)),
        body_crc=draw(st.integers(0, 2**31 - 1)),
    )


def _no_separator(text: str) -> bool:
    return "\x01" not in text and "\x02" not in text


@given(_TEXT)
def test_properties_parse_alike(fast: ModuleType, text: str) -> None:
    assert fast.decode_properties(text) == _pure("decode_properties")(text)


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_records(), min_size=1, max_size=4))
def test_pull_bodies_decode_alike(fast: ModuleType, records: list[bytes]) -> None:
    body = b"".join(records)
    expected = _outcome(_pure("decode_messages"), body, _as_tuple, False)
    assert expected[0] == "ok" and len(expected[1]) == len(records)
    assert _outcome(fast.decode_messages, body, _as_tuple, False) == expected
    assert _outcome(fast.decode_messages, memoryview(body), MessageExt, False) == _outcome(
        _pure("decode_messages"), body, MessageExt, False
    )
    position = 0
    for record in records:
        header = _outcome(_pure("read_record_header"), body, position)
        assert _outcome(fast.read_record_header, body, position) == header
        position += len(record)


def test_a_long_body_that_repeats_and_changes_decodes_alike(fast: ModuleType) -> None:
    """The compiled decode reuses what one record repeats from the one before (the topic, a
    host and port) and the property names of the body (up to a bound): 40 records whose
    topics, hosts, ports and property names change and repeat (more names than the bound)."""
    hosts = [("10.0.0.7", 51234), ("10.0.0.7", 51235), ("::1", 51234), ("10.0.0.8", 51234)]
    records = [
        encode_record(
            topic=("Topic" if index % 5 else "Other" * (index % 3 + 1)).encode(),
            body=bytes([index]) * (index + 1),
            flag=index,
            properties=door.encode_properties(
                {"UNIQ_KEY": f"K{index}", f"name{index % 24}": "v", "é名": str(index % 2)}
            ).encode(),
            queue_id=index % 4,
            queue_offset=index,
            commit_log_offset=1000 + index,
            sys_flag=0,
            born_timestamp_ms=index,
            born_host=hosts[index % 4],
            store_host=hosts[(index // 3) % 4],
            store_timestamp_ms=index,
            reconsume_times=0,
            prepared_transaction_offset=0,
            body_crc=0,
        )
        for index in range(40)
    ]
    body = b"".join(records)
    for factory in (_as_tuple, MessageExt):
        expected = _outcome(_pure("decode_messages"), body, factory, False)
        assert expected[0] == "ok" and len(expected[1]) == 40
        assert _outcome(fast.decode_messages, body, factory, False) == expected


@settings(suppress_health_check=[HealthCheck.too_slow], max_examples=300)
@given(_records(), _records(), st.data())
def test_corrupt_bodies_fail_alike(
    fast: ModuleType, first: bytes, second: bytes, data: st.DataObject
) -> None:
    body = bytearray(first + second)
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(body) - 1))
        body[at] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(body)))
    corrupt = bytes(body[:cut])
    for verify_crc in (False, True):
        assert _outcome(fast.decode_messages, corrupt, _as_tuple, verify_crc) == _outcome(
            _pure("decode_messages"), corrupt, _as_tuple, verify_crc
        )
    for position in (0, len(first), cut, -1):
        assert _outcome(fast.read_record_header, corrupt, position) == _outcome(
            _pure("read_record_header"), corrupt, position
        )
        offset = position * 3
        assert _outcome(fast.read_stored_record, corrupt, position, offset) == _outcome(
            _pure("read_stored_record"), corrupt, position, offset
        )


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(_records())
def test_recovery_checks_agree_on_sound_records(fast: ModuleType, record: bytes) -> None:
    header = door.read_record_header(record)
    body = record[header.body_offset : header.body_offset + header.body_length]
    sound = bytearray(record)
    sound[8:12] = door.body_crc(body).to_bytes(4, "big")
    for buffer in (bytes(sound), record, bytes(sound[:-1]) + b"\0"):
        offset = header.commit_log_offset
        result = _outcome(fast.read_stored_record, buffer, 0, offset)
        assert result == _outcome(_pure("read_stored_record"), buffer, 0, offset)
    if not record.endswith(b"\0"):  # else a torn tail by recovery's rule
        result = _outcome(fast.read_stored_record, bytes(sound), 0, header.commit_log_offset)
        assert result[0] == "ok"


class _Record:
    """What write_records reads of a record (the store's PreparedRecord)."""

    def __init__(self, body: bytes, flag: int, properties: bytes, topic_bytes: int) -> None:
        self.body = body
        self.flag = flag
        self.properties_bytes = properties
        self.body_crc = door.body_crc(body)
        self.size = door.RECORD_OVERHEAD_BYTES + len(body) + topic_bytes + len(properties)


@given(
    st.lists(st.tuples(st.binary(max_size=200), st.integers(-5, 5), _TEXT.map(str.encode))),
    _HOST,
    _HOST,
    st.one_of(st.none(), st.integers(0, 2**40)),
)
def test_records_are_written_alike(
    fast: ModuleType,
    contents: list[tuple[bytes, int, bytes]],
    born: tuple[str, int],
    store: tuple[str, int],
    first_queue_offset: int | None,
) -> None:
    if not contents:
        return
    topic = b"orders"
    born_ip, store_ip = pack_ip(born[0]), pack_ip(store[0])
    extra = len(born_ip) + len(store_ip) - 8
    records = [
        _Record(body, flag, properties, len(topic) + extra) for body, flag, properties in contents
    ]
    total = sum(record.size for record in records)
    outputs = []
    for write in (fast.write_records, _pure("write_records")):
        buffer = bytearray(total + 20)
        end = write(
            memoryview(buffer), 10, records, bytes((len(topic),)) + topic, 3, first_queue_offset,
            1_000, 0x31, 5, born_ip, born[1], 6, store_ip, store[1], 1, 0,
        )  # fmt: skip
        outputs.append((end, bytes(buffer)))
    assert outputs[0] == outputs[1]
    decoded = door.decode_messages(outputs[0][1][10 : 10 + total], _as_tuple)
    assert [message[1] for message in decoded] == [body for body, _, _ in contents]


def test_a_record_of_the_wrong_size_is_a_bug_in_both(fast: ModuleType) -> None:
    lying = _Record(b"body", 0, b"", 6)
    lying.size += 1
    for write in (fast.write_records, _pure("write_records")):
        buffer = bytearray(500)
        with pytest.raises(InvariantViolationError):
            write(memoryview(buffer), 0, [lying], b"\x06orders", 0, 0, 0, 0, 0,
                  b"\x7f\0\0\1", 1, 0, b"\x7f\0\0\1", 2, 0, 0)  # fmt: skip
        assert buffer == bytes(500)


def test_the_twin_in_use_is_the_one_the_switch_asks_for(fast: ModuleType) -> None:
    status = compiled.status()
    if compiled.pure_python_forced():
        assert door.decode_messages is _pure("decode_messages") and not status.compiled
    else:
        assert door.decode_messages is fast.decode_messages and status.compiled
    for room in WIRE_ROOMS:
        for name in importlib.import_module(room).COMPILED_NAMES:
            assert callable(getattr(fast, name)) and callable(_pure(name))


def _sink_columns(sink: RowSink) -> tuple[Any, ...]:
    columns = [bytes(getattr(sink, name)) for name in RowSink.__slots__ if name != "count"]
    return (*columns, sink.count)


def _inflate_marker(payload: bytes, sys_flag: int, row: int) -> bytes:
    if sys_flag & 0x700 == 0x100:
        raise ProtocolError("LZ4 unsupported here")
    return b"inflated:%d:" % row + payload  # the row index is part of what twins agree on


def _scan(function: Callable[..., Any], body: bytes, stop_offset: int) -> tuple[Any, ...]:
    sink = RowSink()
    return _outcome(function, body, stop_offset, sink, _inflate_marker), _sink_columns(sink)


@settings(suppress_health_check=[HealthCheck.too_slow], max_examples=200)
@given(st.lists(_records(), min_size=1, max_size=4), st.integers(0, 2**62), st.data())
def test_rows_scan_alike(
    fast: ModuleType, records: list[bytes], stop_offset: int, data: st.DataObject
) -> None:
    body = bytearray(b"".join(records))
    if data.draw(st.booleans()):  # mark the first record compressed (zlib or LZ4)
        body[39] |= 1 | data.draw(st.sampled_from([0, 0x100, 0x300])) >> 8
    pure = compiled.pure_twin("bolide.protocol.record.rows", "scan_rows")
    expected = _scan(pure, bytes(body), stop_offset)
    assert _scan(fast.scan_rows, bytes(body), stop_offset) == expected
    if data.draw(st.booleans()):
        at = data.draw(st.integers(0, len(body) - 1))
        body[at] = data.draw(st.integers(0, 255))
        cut = bytes(body[: data.draw(st.integers(0, len(body)))])
        assert _scan(fast.scan_rows, cut, stop_offset) == _scan(pure, cut, stop_offset)


def _frames_outcome(function: Callable[..., Any], data: bytes, limit: int) -> tuple[Any, ...]:
    frames: list[Any] = []
    result = _outcome(function, memoryview(data), limit, frames)
    return result, [(f.serialize_type, f.header, f.body) for f in frames]


@st.composite
def _frame_stream(draw: st.DrawFn) -> bytes:
    pieces = []
    for _ in range(draw(st.integers(0, 4))):
        header = draw(st.binary(max_size=40))
        body = draw(st.binary(max_size=60))
        serialize_type = draw(st.sampled_from([0, 1, 0, 1, 2]))
        total = 4 + len(header) + len(body) + draw(st.sampled_from([0, 0, 0, -3, -100]))
        word = (serialize_type << 24) | len(header)
        pieces.append(total.to_bytes(4, "big", signed=True) + word.to_bytes(4, "big"))
        pieces += (header, body)
    return b"".join(pieces)


@settings(max_examples=300)
@given(_frame_stream(), st.data())
def test_frames_cut_alike(fast_frames: ModuleType, stream: bytes, data: st.DataObject) -> None:
    cut = stream[: data.draw(st.integers(0, len(stream)))]
    limit = data.draw(st.sampled_from([16 * 1024 * 1024, 64, 9]))
    pure = compiled.pure_twin("bolide.protocol.frame", "split_frames")
    assert _frames_outcome(fast_frames.split_frames, cut, limit) == _frames_outcome(
        pure, cut, limit
    )


def _three_records() -> list[bytes]:
    return [
        encode_record(
            topic=b"T",
            body=f"body {n}".encode(),
            flag=0,
            properties=b"UNIQ_KEY\x01u",
            queue_id=0,
            queue_offset=n,
            commit_log_offset=n * 100,
            sys_flag=0,
            born_timestamp_ms=1,
            born_host=("10.0.0.1", 1),
            store_timestamp_ms=2,
            store_host=("10.0.0.2", 2),
            reconsume_times=0,
            prepared_transaction_offset=0,
            body_crc=0,
        )
        for n in range(3)
    ]


def test_a_bad_record_is_reported_with_its_index_and_where_to_go_on() -> None:
    records = _three_records()
    bad = bytearray(records[1])
    bad[4:8] = b"\0\0\0\0"  # not a magic code
    body = records[0] + bytes(bad) + records[2]
    with pytest.raises(RecordDecodeError, match="bad magic") as caught:
        decode_records(body)
    error = caught.value
    assert (error.index, error.position) == (1, len(records[0]))
    assert [message.queue_offset for message in error.decoded] == [0]
    assert error.next_position == len(records[0]) + len(records[1])
    rest = decode_records(body[error.next_position :])
    assert [message.queue_offset for message in rest] == [2]


def test_a_body_that_does_not_inflate_is_reported_with_its_index() -> None:
    records = _three_records()
    compressed = bytearray(records[2])
    compressed[39] |= 1  # COMPRESSED, but the body is not zlib
    body = records[0] + records[1] + bytes(compressed)
    with pytest.raises(RecordDecodeError, match="inflate") as caught:
        decode_records(body)
    assert (caught.value.index, len(caught.value.decoded)) == (2, 2)
    assert caught.value.next_position == len(body)
    assert len(decode_records(body, decompress=False)) == 3


_PROPERTY_TEXT = st.lists(st.sampled_from(["\x01", "\x02", "A", "WAIT", "DELAY", "é", "K"])).map(
    "".join
)


_PROPERTY_PAIRS = st.lists(
    st.sampled_from(
        [
            "WAIT\x01true",
            "UNIQ_KEY\x01AB",
            "XDELAY\x01",
            "KEYS\x01k\x01",
            "\x02",
            "WAITS\x01",
            "CLUSTER",
            "A\x01\U0001f600",
            "WAIT\x01",
            "\x01",
            "",
        ]
    )
).map("\x02".join)


@given(text=st.one_of(_PROPERTY_TEXT, _PROPERTY_PAIRS), extra=_PROPERTY_TEXT)
@example(text="UNIQ_KEY\x01AB\x02WAIT\x01true", extra="CLUSTER\x01c")
@example(text="WAIT\x01t\x02", extra="")
@example(text="a\x01b\x02WAIT\x01t\x02", extra="x\x01y")
@example(text="a\x01b\x01c\x02d", extra="")
def test_the_send_properties_edit_is_the_same(fast: ModuleType, text: str, extra: str) -> None:
    marks = ("DELAY\x01", "CLUSTER\x01")
    expected = _pure("edit_plain_properties")(text, marks, "WAIT", extra)
    assert fast.edit_plain_properties(text, marks, "WAIT", extra) == expected
    if expected is not None:  # the one-call edit is the three steps it stands for
        assert door.properties_are_plain(text, ("DELAY", "CLUSTER"))
        assert expected == door.join_properties(door.without_property(text, "WAIT"), extra)
    else:
        assert not door.properties_are_plain(text, ("DELAY", "CLUSTER"))
