"""Pull bodies to Arrow rows (bolide.spark.records), checked against the message codec."""

from __future__ import annotations

from typing import Literal

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyspark.sql.pandas.types import to_arrow_schema

from bolide.base.errors import ProtocolError
from bolide.protocol.bodies import MessageQueue
from bolide.protocol.compression import compress_body, compression_type_of
from bolide.protocol.message import MessageSysFlag
from bolide.protocol.msgid import offset_message_id
from bolide.protocol.record import body_crc, decode_properties, encode_properties, encode_record
from bolide.spark.records import ARROW_SCHEMA, RowColumns, _properties_map
from bolide.spark.source import SOURCE_SCHEMA

QUEUE = MessageQueue("orders", "broker-a", 3)
_NO_SURROGATES: tuple[Literal["Cs"]] = ("Cs",)
STORE_HOST = ("10.0.0.7", 10911)


def _record(
    offset: int,
    body: bytes,
    properties: dict[str, str],
    *,
    sys_flag: int = 0,
    store_host: tuple[str, int] = STORE_HOST,
) -> bytes:
    compression = compression_type_of(sys_flag)
    stored = compress_body(body, compression) if compression is not None else body
    return encode_record(
        topic=b"orders",
        body=stored,
        flag=0,
        properties=encode_properties(properties).encode(),
        queue_id=3,
        queue_offset=offset,
        commit_log_offset=1_000 + offset * 100,
        sys_flag=sys_flag,
        born_timestamp_ms=1_700_000_000_000 + offset,
        born_host=("127.0.0.1", 5555),
        store_timestamp_ms=1_700_000_000_500 + offset,
        store_host=store_host,
        reconsume_times=offset % 3,
        prepared_transaction_offset=0,
        body_crc=body_crc(stored),
    )


def test_the_arrow_schema_is_what_spark_derives_from_the_source_schema() -> None:
    assert to_arrow_schema(SOURCE_SCHEMA, timezone="UTC").equals(ARROW_SCHEMA)


def test_rows_carry_every_field() -> None:
    body = b"".join(
        [
            _record(
                7, b"plain", {"UNIQ_KEY": "AB" * 16, "KEYS": "k1 k2", "TAGS": "paid", "x": "1"}
            ),
            _record(
                8,
                b"z" * 5000,
                {"TAGS": "paid"},
                sys_flag=MessageSysFlag.COMPRESSED | MessageSysFlag.COMPRESSION_ZLIB,
                store_host=("::1", 10911),
            ),
        ]
    )
    columns = RowColumns(QUEUE)
    assert columns.add(body, stop_offset=100) == 2
    assert columns.body_bytes == 5 + 5000
    rows = columns.take_batch().to_pylist()
    assert len(columns) == 0
    first, second = rows
    assert first["topic"] == "orders" and first["broker_name"] == "broker-a"
    assert first["queue_id"] == 3 and first["queue_offset"] == 7
    assert first["msg_id"] == "AB" * 16
    assert (first["keys"], first["tags"], first["body"]) == ("k1 k2", "paid", b"plain")
    assert dict(first["properties"]) == {
        "UNIQ_KEY": "AB" * 16,
        "KEYS": "k1 k2",
        "TAGS": "paid",
        "x": "1",
    }
    assert first["born_timestamp"].timestamp() * 1000 == pytest.approx(1_700_000_000_007)
    assert first["store_timestamp"].timestamp() * 1000 == pytest.approx(1_700_000_000_507)
    assert first["reconsume_times"] == 1
    assert second["body"] == b"z" * 5000, "a compressed body is inflated"
    assert second["msg_id"] == offset_message_id(("::1", 10911), 1_800)
    assert second["keys"] is None


def test_stop_offset_and_tags_filter() -> None:
    body = b"".join(_record(n, b"m%d" % n, {"TAGS": "A" if n % 2 else "B"}) for n in range(10))
    columns = RowColumns(QUEUE, frozenset({"A"}))
    assert columns.add(body, stop_offset=6) == 6, "offsets 0..5 are taken, tags checked later"
    assert [row["queue_offset"] for row in columns.take_batch().to_pylist()] == [1, 3, 5]
    everything = RowColumns(QUEUE)
    everything.add(body, stop_offset=10)
    assert everything.take_batch().num_rows == 10
    assert RowColumns(QUEUE).take_batch().num_rows == 0


def test_malformed_bodies_raise_protocol_errors() -> None:
    good = _record(1, b"body", {"TAGS": "A"})
    with pytest.raises(ProtocolError, match="cut short"):
        RowColumns(QUEUE).add(good[:50], 10)
    with pytest.raises(ProtocolError, match="impossible size"):
        RowColumns(QUEUE).add(good[:-1], 10)
    bad_magic = good[:4] + b"\x00\x00\x00\x01" + good[8:]
    with pytest.raises(ProtocolError, match="magic"):
        RowColumns(QUEUE).add(bad_magic, 10)


@given(
    st.lists(
        st.lists(
            st.tuples(
                st.text(
                    alphabet=st.characters(
                        exclude_characters="\x01\x02", exclude_categories=_NO_SURROGATES
                    ),
                    max_size=8,
                ),
                st.text(
                    alphabet=st.characters(
                        exclude_characters="\x02", exclude_categories=_NO_SURROGATES
                    ),
                    max_size=8,
                ),
            ),
            max_size=5,
        ),
        min_size=1,
        max_size=6,
    ),
    st.booleans(),
)
def test_properties_are_parsed_as_the_codec_parses_them(
    rows: list[list[tuple[str, str]]], trailing_separator: bool
) -> None:
    texts = []
    for pairs in rows:
        text = "\x02".join(f"{name}\x01{value}" for name, value in pairs)
        texts.append(text + "\x02" if trailing_separator and text else text)
    parsed = _properties_map(pa.array(texts, pa.string())).to_pylist()
    assert [dict(entries) for entries in parsed] == [decode_properties(t) for t in texts]


def test_properties_that_are_not_utf8_are_a_protocol_error() -> None:
    columns = RowColumns(QUEUE)
    record = bytearray(_record(1, b"body", {"TAGS": "A"}))
    record[-1] = 0xFF
    columns.add(bytes(record), 10)
    with pytest.raises(ProtocolError, match="UTF-8"):
        columns.take_batch()


def test_lz4_and_zstd_bodies_are_inflated_and_a_bad_one_is_flagged() -> None:
    """A bad body used to fail the whole pull, and the stream re-read it forever."""
    lz4 = int(MessageSysFlag.COMPRESSED | MessageSysFlag.COMPRESSION_LZ4)
    zstd = int(MessageSysFlag.COMPRESSED | MessageSysFlag.COMPRESSION_ZSTD)
    broken = bytearray(_record(2, b"zstd " * 50, {}, sys_flag=zstd))
    broken[95:105] = b"\xff" * 10  # inside the compressed body
    body = b"".join(
        [
            _record(0, b"plain", {}),
            _record(1, b"lz4 " * 100, {}, sys_flag=lz4),
            bytes(broken),
            _record(3, b"zstd " * 100, {}, sys_flag=zstd),
        ]
    )
    columns = RowColumns(QUEUE)
    assert columns.add(body, 1 << 40) == 4
    rows = columns.take_batch().to_pylist()
    assert [row["body"] for row in (rows[0], rows[1], rows[3])] == [
        b"plain",
        b"lz4 " * 100,
        b"zstd " * 100,
    ]
    assert [row["body_error"] is None for row in rows] == [True, True, False, True]
    assert "ZSTD" in rows[2]["body_error"]
