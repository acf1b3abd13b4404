"""The sink's fast path: Arrow columns to batch bodies (bolide.spark.sink_rows and its compiled
twin), held to the bytes of the general path (Message per row, the producer's prepare_batch)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import ModuleType
from typing import Any, Literal

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bolide.base import compiled, limits
from bolide.client.producer.prepare import SendSettings, prepare_batch
from bolide.spark import sink_rows
from bolide.spark.sink_columns import PlainRows, plain_rows
from bolide.spark.writer import _messages, unique_key_prefix
from tests.spark.conftest import BackgroundCluster, rows_of_topic

TWIN = "bolide.spark.sink_rows"
MAPS = pa.map_(pa.string(), pa.string())
PREFIX = unique_key_prefix("job", 3, 1)
MAX_BODY_BYTES = limits.MESSAGE_BODY_MAX_BYTES

_NO_SURROGATES: tuple[Literal["Cs"]] = ("Cs",)
_TEXT = st.text(st.characters(blacklist_categories=_NO_SURROGATES, blacklist_characters="\x01\x02"))
_ROW = st.fixed_dictionaries(
    {
        "body": st.binary(min_size=1, max_size=64),
        "tags": st.none() | _TEXT,
        "keys": st.none() | _TEXT,
    }
)


def _compiled() -> ModuleType:
    try:
        return importlib.import_module("bolide.spark._compiled")
    except ImportError:  # pragma: no cover - a build without a C compiler
        pytest.skip("the compiled sink encoder was not built (pure-Python install)")


def _pure() -> Callable[..., Any]:
    return compiled.pure_twin(TWIN, "encode_batch_rows")


def _batch(rows: list[dict[str, Any]], **columns: pa.DataType) -> pa.RecordBatch:
    schema = pa.schema(
        [("body", pa.binary()), ("tags", pa.string()), ("keys", pa.string()), *columns.items()]
    )
    full = [{name: row.get(name) for name in schema.names} for row in rows]
    return pa.RecordBatch.from_pylist(full, schema=schema)


def _encode_all(
    encode: Callable[..., Any], plain: PlainRows, first_row: int, max_messages: int
) -> list[tuple[bytes, str, int]]:
    requests = []
    start = 0
    while start < plain.count:
        request = encode(
            plain.bodies,
            plain.tags,
            plain.keys,
            PREFIX.encode(),
            first_row,
            start,
            max_messages,
            limits.SPARK_WRITE_BATCH_MAX_BYTES,
        )
        requests.append(request)
        start = request[2]
    return requests


def _general_path(
    batch: pa.RecordBatch, first_row: int, stops: list[int]
) -> list[tuple[bytes, str]]:
    """What the general path sends for the same rows cut at the same places."""
    messages = [message for message, _ in _messages(batch, "sunk", PREFIX, first_row)]
    requests = []
    start = 0
    for stop in stops:
        unused_keys = ["unused"] * (stop - start)  # every message has its UNIQ_KEY
        prepared = prepare_batch(messages[start:stop], unused_keys, 0, SendSettings("g"))
        requests.append((prepared.body, prepared.msg_id))
        start = stop
    return requests


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(_ROW, min_size=1, max_size=40), first_row=st.integers(0, 2**40))
def test_plain_rows_encode_to_the_general_paths_bytes(
    rows: list[dict[str, Any]], first_row: int
) -> None:
    batch = _batch(rows)
    plain = plain_rows(batch, "sunk", MAX_BODY_BYTES)
    assert plain is not None and plain.topic == "sunk"
    pure = _encode_all(_pure(), plain, first_row, 7)
    assert _encode_all(sink_rows.encode_batch_rows, plain, first_row, 7) == pure
    stops = [stop for _, _, stop in pure]
    assert [(body, ids) for body, ids, _ in pure] == _general_path(batch, first_row, stops)


@settings(max_examples=60, deadline=None)
@given(
    rows=st.lists(_ROW, min_size=1, max_size=30),
    start=st.integers(0, 29),
    max_messages=st.integers(1, 40),
    max_body_bytes=st.integers(1, 2_000),
)
def test_compiled_twin_matches_the_pure_one(
    rows: list[dict[str, Any]], start: int, max_messages: int, max_body_bytes: int
) -> None:
    plain = plain_rows(_batch(rows), "sunk", MAX_BODY_BYTES)
    assert plain is not None
    start = min(start, plain.count)
    arguments = (plain.bodies, plain.tags, plain.keys, PREFIX.encode(), 5, start)
    limits_ = (max_messages, max_body_bytes)
    assert _compiled().encode_batch_rows(*arguments, *limits_) == _pure()(*arguments, *limits_)


def test_sliced_and_string_columns_read_from_their_offset() -> None:
    rows = [{"body": f"body-{n}".encode(), "tags": f"t{n}", "keys": None} for n in range(10)]
    batch = _batch(rows).slice(3, 5)
    text_bodies = batch.set_column(0, "body", batch.column(0).cast(pa.string()))
    for candidate in (batch, text_bodies):
        plain = plain_rows(candidate, "sunk", MAX_BODY_BYTES)
        assert plain is not None and plain.count == 5
        (request,) = _encode_all(sink_rows.encode_batch_rows, plain, 0, 64)
        assert [request[:2]] == _general_path(batch, 0, [5])


@pytest.mark.parametrize(
    ("rows", "columns"),
    [
        ([{"body": b"x", "properties": [("a", "1")]}], {"properties": MAPS}),
        ([{"body": b"x", "sharding_key": ""}], {"sharding_key": pa.string()}),
        ([{"body": b"x", "delay_level": 3}], {"delay_level": pa.int32()}),
        ([{"body": b"x", "deliver_at_ms": 1}], {"deliver_at_ms": pa.int64()}),
        ([{"body": b"x", "topic": "a"}, {"body": b"y", "topic": "b"}], {"topic": pa.string()}),
        ([{"body": b"x", "topic": "%RETRY%g"}], {"topic": pa.string()}),
        ([{"body": b"x", "topic": "bad topic"}], {"topic": pa.string()}),
        ([{"body": None}], {}),
        ([{"body": b""}], {}),
        ([{"body": b"x", "tags": "a\x02b"}], {}),
        ([{"body": b"x", "keys": "a\x01b"}], {}),
        ([{"body": b"x", "keys": "k" * 40_000}], {}),
    ],
    ids=[
        "properties", "sharding-key", "delay", "deliver-at", "two-topics", "retry-topic",
        "bad-topic", "null-body", "empty-body", "separator-in-tags", "separator-in-keys",
        "long-keys",
    ],
)  # fmt: skip
def test_other_rows_take_the_general_path(
    rows: list[dict[str, Any]], columns: dict[str, pa.DataType]
) -> None:
    assert plain_rows(_batch(rows, **columns), "sunk", MAX_BODY_BYTES) is None


def test_extras_that_are_all_empty_keep_the_fast_path() -> None:
    columns = {
        "properties": pa.map_(pa.string(), pa.string()),
        "sharding_key": pa.string(),
        "delay_level": pa.int32(),
        "deliver_at_ms": pa.int64(),
        "topic": pa.string(),
    }
    rows: list[dict[str, Any]] = [
        {"body": b"x", "properties": [], "delay_level": 0, "topic": "sunk"},
        {"body": b"y", "topic": None},
    ]
    plain = plain_rows(_batch(rows, **columns), "sunk", MAX_BODY_BYTES)
    assert plain is not None and plain.topic == "sunk" and plain.count == 2
    assert plain_rows(_batch([{"body": b"x" * 11}]), "sunk", 10) is None, "over the limit"
    assert plain_rows(_batch([{"body": b"x"}]), None, MAX_BODY_BYTES) is None, "no topic"


def test_plain_batches_land_as_the_general_path_would_write_them(
    cluster: BackgroundCluster,
) -> None:
    from bolide.spark.options import parse_write_options
    from bolide.spark.writer import write_partition

    cluster.create_topic("sunk", 2)
    rows: list[dict[str, Any]] = [
        {"body": f"b{n}".encode(), "tags": "t" if n % 3 else None, "keys": f"k{n}" if n % 2 else ""}
        for n in range(600)
    ]
    options = parse_write_options({"namesrv": cluster.namesrv_address, "topic": "sunk"})
    report = write_partition(options, iter([_batch(rows[:500]), _batch(rows[500:])]), "job", 3, 1)
    assert report.rows == 600 and report.body_bytes == sum(len(row["body"]) for row in rows)
    assert report.requests == 3, "256 rows a request, the rest of each record batch alone"
    landed = sorted(rows_of_topic(cluster, "sunk"), key=lambda row: row["msg_id"])
    assert [row["msg_id"] for row in landed] == [PREFIX + f"{n:012X}" for n in range(600)]
    assert [(row["body"], row["tags"], row["keys"]) for row in landed] == [
        (row["body"], row["tags"], row["keys"] or None) for row in rows
    ]
