"""Turning messages into send requests: ids, WAIT, compression, retry headers, batch rules."""

from __future__ import annotations

import pytest

from bolide.base import limits
from bolide.base.errors import InvalidMessageError, MessageTooLargeError
from bolide.client.message import Message
from bolide.client.producer.prepare import SendSettings, check_topic, prepare_batch, prepare_message
from bolide.protocol.compression import decompress_body
from bolide.protocol.headers import SendMessageRequestHeader
from bolide.protocol.message import MessageSysFlag, PropertyKey
from bolide.protocol.record import decode_batch_body, decode_properties

SETTINGS = SendSettings("pg")
NOW_MS = 1_700_000_000_123


def test_a_message_gets_a_unique_key_wait_and_the_born_time() -> None:
    prepared = prepare_message(Message("T", b"hi", tags="a", keys=["k1", "k2"]), "ID1", NOW_MS,
                               SETTINGS)  # fmt: skip
    properties = decode_properties(prepared.properties)
    assert properties == {"TAGS": "a", "KEYS": "k1 k2", "UNIQ_KEY": "ID1", "WAIT": "true"}
    assert prepared.msg_id == "ID1"
    header = prepared.header_for(3)
    assert (header.queue_id, header.born_timestamp_ms, header.producer_group) == (3, NOW_MS, "pg")
    assert (header.default_topic, header.default_topic_queue_count) == ("TBW102", 4)
    assert header.sys_flag == 0 and not header.batch


def test_an_existing_unique_key_is_kept() -> None:
    message = Message("T", b"x", properties={PropertyKey.UNIQ_KEY: "MINE"})
    assert prepare_message(message, "NEW", NOW_MS, SETTINGS).msg_id == "MINE"


def test_bodies_over_the_threshold_are_compressed_with_the_zlib_flags() -> None:
    body = b"abc" * 2_000
    prepared = prepare_message(Message("T", body), "ID", NOW_MS, SETTINGS)
    assert prepared.sys_flag & MessageSysFlag.COMPRESSED
    assert prepared.sys_flag & 0x700 == MessageSysFlag.COMPRESSION_ZLIB
    assert decompress_body(prepared.body) == body
    small = prepare_message(Message("T", b"a" * 100), "ID", NOW_MS, SETTINGS)
    assert small.sys_flag == 0 and small.body == b"a" * 100


def test_delays_travel_as_properties() -> None:
    message = Message("T", b"x", delay_level=3, deliver_at_ms=NOW_MS + 5_000, delay_ms=10)
    properties = decode_properties(prepare_message(message, "ID", NOW_MS, SETTINGS).properties)
    assert properties[PropertyKey.DELAY] == "3"
    assert properties[PropertyKey.TIMER_DELIVER_MS] == str(NOW_MS + 5_000)
    assert properties[PropertyKey.TIMER_DELAY_MS] == "10"


def test_retry_topic_counters_move_to_the_header() -> None:
    message = Message(
        "%RETRY%G", b"x", properties={"RECONSUME_TIME": "2", "MAX_RECONSUME_TIMES": "16"}
    )
    prepared = prepare_message(message, "ID", NOW_MS, SETTINGS)
    header = prepared.header_for(0)
    assert (header.reconsume_times, header.max_reconsume_times) == (2, 16)
    assert "RECONSUME_TIME" not in decode_properties(prepared.properties)


@pytest.mark.parametrize(
    ("topic", "complaint"),
    [("", "empty"), ("a b", "characters"), ("x" * 128, "128 characters"), ("TBW102", "template")],
)
def test_bad_topics_are_refused_with_a_reason(topic: str, complaint: str) -> None:
    with pytest.raises(InvalidMessageError, match=complaint):
        check_topic(topic)


def test_empty_and_too_big_bodies_are_refused() -> None:
    with pytest.raises(InvalidMessageError, match="empty"):
        prepare_message(Message("T", b""), "ID", NOW_MS, SETTINGS)
    too_big = b"x" * (limits.MESSAGE_BODY_MAX_BYTES + 1)
    with pytest.raises(MessageTooLargeError, match="at most 4194304"):
        prepare_message(Message("T", too_big), "ID", NOW_MS, SETTINGS)


def test_reserved_property_names_are_refused() -> None:
    message = Message("T", b"x")
    message.put_user_property("color", "blue")
    assert message.properties["color"] == "blue"
    with pytest.raises(InvalidMessageError):
        message.put_user_property("UNIQ_KEY", "x")


def test_a_batch_body_carries_each_message_with_its_own_key() -> None:
    messages = [Message("T", f"m{i}".encode(), tags="t", flag=i) for i in range(3)]
    prepared = prepare_batch(messages, ["K0", "K1", "K2"], NOW_MS, SETTINGS)
    assert prepared.batch and prepared.msg_id == "K0,K1,K2"
    assert prepared.header_for(1).batch
    entries = decode_batch_body(prepared.body)
    assert [(e.flag, e.body) for e in entries] == [(0, b"m0"), (1, b"m1"), (2, b"m2")]
    assert [decode_properties(e.properties)[PropertyKey.UNIQ_KEY] for e in entries] == [
        "K0",
        "K1",
        "K2",
    ]


@pytest.mark.parametrize(
    ("messages", "complaint"),
    [
        ([], "at least one"),
        ([Message("A", b"1"), Message("B", b"2")], "one topic"),
        ([Message("A", b"1", delay_level=2)], "delayed"),
        ([Message("%RETRY%G", b"1")], "retry"),
    ],
)
def test_batch_rules(messages: list[Message], complaint: str) -> None:
    with pytest.raises(InvalidMessageError, match=complaint):
        prepare_batch(messages, ["K"] * len(messages), NOW_MS, SETTINGS)


def test_a_batch_over_the_size_limit_is_refused() -> None:
    settings = SendSettings("pg", max_message_bytes=1_000)
    messages = [Message("T", b"x" * 400) for _ in range(3)]
    with pytest.raises(MessageTooLargeError, match="split it"):
        prepare_batch(messages, ["K"] * 3, NOW_MS, settings)


def test_properties_over_32767_utf8_bytes_are_refused() -> None:
    near_limit = Message("T", b"x", properties={"note": "é" * 16_000})  # 32 000 bytes: fits
    prepare_message(near_limit, "ID", NOW_MS, SETTINGS)
    too_long = Message("T", b"x", properties={"note": "é" * 16_500})  # 33 000 bytes
    with pytest.raises(MessageTooLargeError, match="32767"):
        prepare_message(too_long, "ID", NOW_MS, SETTINGS)


def test_header_for_is_the_keyword_built_header() -> None:
    """``header_for`` builds the header positionally (no frozen __init__): same fields."""
    plain = prepare_message(Message("T", b"x", 3, tags="a"), "K1", NOW_MS, SETTINGS)
    retry = prepare_message(
        Message("%RETRY%g", b"x", properties={"RECONSUME_TIME": "3", "MAX_RECONSUME_TIMES": "16"}),
        "K2",
        NOW_MS,
        SETTINGS,
    )
    batch = prepare_batch([Message("T", b"y")], ["K3"], NOW_MS, SETTINGS)
    for prepared in (plain, retry, batch):
        expected = SendMessageRequestHeader(
            producer_group="pg",
            topic=prepared.topic,
            default_topic="TBW102",
            default_topic_queue_count=4,
            queue_id=5,
            sys_flag=prepared.sys_flag,
            born_timestamp_ms=NOW_MS,
            flag=prepared.flag,
            properties=prepared.properties or None,
            reconsume_times=prepared.reconsume_times or 0,
            unit_mode=False,
            max_reconsume_times=prepared.max_reconsume_times,
            batch=prepared.batch,
        )
        header = prepared.header_for(5)
        assert header == expected and hash(header) == hash(expected)
    assert retry.header_for(0).reconsume_times == 3 and batch.header_for(0).batch


@pytest.mark.parametrize(
    ("setting", "property_name"),
    [("deliver_at_ms", PropertyKey.TIMER_DELIVER_MS), ("delay_ms", PropertyKey.TIMER_DELAY_MS)],
)
def test_timer_settings_are_properties_refusing_negative_values(
    setting: str, property_name: str
) -> None:
    message = Message("T", b"x")
    assert getattr(message, setting) is None
    setattr(message, setting, 2_500)
    assert (getattr(message, setting), message.properties[property_name]) == (2_500, "2500")
    with pytest.raises(InvalidMessageError, match=f"^{setting} must not be negative, not -1$"):
        setattr(message, setting, -1)
    assert message.properties[property_name] == "2500"
    setattr(message, setting, None)
    assert property_name not in message.properties
    message.properties[property_name] = "soon"
    assert getattr(message, setting) is None
