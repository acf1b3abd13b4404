"""Properties strings, the Java string hash, sysFlag bits and the Message / MessageExt accessors."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bolide.base.errors import ProtocolError
from bolide.protocol.address import format_socket_address, pack_ip, parse_socket_address, unpack_ip
from bolide.protocol.message import (
    COMPRESSION_TYPE_MASK,
    TRANSACTION_MASK,
    Message,
    MessageExt,
    MessageSysFlag,
    PropertyKey,
    java_string_hash,
    reset_transaction_type,
    tags_code,
    transaction_type,
)
from bolide.protocol.record import (
    BLANK_MAGIC_CODE,
    MESSAGE_MAGIC_CODE,
    decode_properties,
    encode_properties,
    join_properties,
)

# --- magic codes and flags -----------------------------------------------------------------


def test_magic_codes_are_the_documented_words() -> None:
    assert MESSAGE_MAGIC_CODE & 0xFFFFFFFF == 0xDAA320A7
    assert BLANK_MAGIC_CODE & 0xFFFFFFFF == 0xCBD43194


def test_sys_flag_values_match_protocol_md() -> None:
    assert MessageSysFlag.COMPRESSED == 0x1
    assert MessageSysFlag.MULTI_TAGS == 0x2
    assert MessageSysFlag.TRANSACTION_PREPARED == 0x4
    assert MessageSysFlag.TRANSACTION_COMMIT == 0x8
    assert MessageSysFlag.TRANSACTION_ROLLBACK == 0xC
    assert MessageSysFlag.BORNHOST_V6 == 0x10
    assert MessageSysFlag.STOREHOST_V6 == 0x20
    assert MessageSysFlag.NEED_UNWRAP == 0x40
    assert MessageSysFlag.INNER_BATCH == 0x80
    assert MessageSysFlag.COMPRESSION_ZLIB == 0x300
    assert TRANSACTION_MASK == 0xC
    assert COMPRESSION_TYPE_MASK == 0x700


def test_transaction_type_reads_and_replaces_only_its_bits() -> None:
    flag = MessageSysFlag.COMPRESSED | MessageSysFlag.TRANSACTION_PREPARED | 0x300
    assert transaction_type(flag) == MessageSysFlag.TRANSACTION_PREPARED
    committed = reset_transaction_type(flag, MessageSysFlag.TRANSACTION_COMMIT)
    assert transaction_type(committed) == MessageSysFlag.TRANSACTION_COMMIT
    assert committed & ~TRANSACTION_MASK == flag & ~TRANSACTION_MASK
    assert transaction_type(reset_transaction_type(flag, 0)) == 0


def test_property_keys_include_the_4x_and_timer_names() -> None:
    assert PropertyKey.UNIQ_KEY == "UNIQ_KEY"
    assert PropertyKey.DELAY == "DELAY"
    assert PropertyKey.REAL_QID == "REAL_QID"
    assert PropertyKey.MAX_RECONSUME_TIMES == "MAX_RECONSUME_TIMES"
    assert PropertyKey.TIMER_DELIVER_MS == "TIMER_DELIVER_MS"
    assert PropertyKey.TIMER_DELAY_SEC == "TIMER_DELAY_SEC"
    assert PropertyKey.TIMER_DELAY_MS == "TIMER_DELAY_MS"


# --- properties string ---------------------------------------------------------------------


def test_encode_properties_is_java_form_without_trailing_separator() -> None:
    text = encode_properties({"KEYS": "k", "TAGS": "TagA"})
    assert text == "KEYS\x01k\x02TAGS\x01TagA"
    assert encode_properties({}) == ""


def test_decode_java_form() -> None:
    assert decode_properties("KEYS\x01k\x02TAGS\x01TagA") == {"KEYS": "k", "TAGS": "TagA"}


def test_decode_cpp_form_with_trailing_separator() -> None:
    # As captured from librocketmq (real-clients.md §1.4).
    text = (
        "KEYS\x01k\x02TAGS\x01TagA\x02UNIQ_KEY\x01"
        "0A0000070ABC1234567890ABCDEF0000\x02WAIT\x01true\x02myprop\x01v\x02"
    )
    assert decode_properties(text) == {
        "KEYS": "k",
        "TAGS": "TagA",
        "UNIQ_KEY": "0A0000070ABC1234567890ABCDEF0000",
        "WAIT": "true",
        "myprop": "v",
    }


def test_decode_is_tolerant() -> None:
    text = "\x02\x02A\x01\x02noseparator\x02\x01novalue-name\x02B\x01x\x01y\x02A\x01last\x02"
    # Empty chunks and chunks without a name or separator are skipped; an empty value is kept;
    # a value keeps later \x01; a repeated name keeps its last value.
    assert decode_properties(text) == {"A": "last", "B": "x\x01y"}
    assert decode_properties("E\x01") == {"E": ""}
    assert decode_properties("") == {}


@pytest.mark.parametrize(
    "properties",
    [{"a\x01": "v"}, {"a": "v\x02"}, {"a\x02b": "v"}, {"a": "v\x01"}, {"": "v"}],
)
def test_encode_refuses_what_cannot_be_parsed_back(properties: dict[str, str]) -> None:
    with pytest.raises(ProtocolError):
        encode_properties(properties)


_names = st.text(min_size=1).filter(lambda s: "\x01" not in s and "\x02" not in s)
_values = st.text().filter(lambda s: "\x01" not in s and "\x02" not in s)


@given(st.dictionaries(_names, _values, max_size=12))
def test_properties_round_trip(properties: dict[str, str]) -> None:
    text = encode_properties(properties)
    assert decode_properties(text) == properties
    # The C++ form (a trailing separator) parses the same.
    assert decode_properties(text + "\x02" if text else text) == properties


@given(st.text())
def test_decode_properties_never_raises(text: str) -> None:
    decode_properties(text)


def test_join_properties_inserts_a_separator_only_when_missing() -> None:
    assert join_properties("A\x01a", "B\x01b") == "A\x01a\x02B\x01b"
    assert join_properties("A\x01a\x02", "B\x01b") == "A\x01a\x02B\x01b"
    assert join_properties("", "B\x01b") == "B\x01b"
    assert join_properties("A\x01a", "") == "A\x01a"


# --- Java String.hashCode ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("TagA", 2598919),
        ("TagB", 2598920),
        ("*", 42),
        ("", 0),
        # Values computed by hand from h = 31*h + unit over UTF-16 code units:
        ("é", 0xE9),
        ("héllo", 103094734),
        # U+1F600 is the surrogate pair D83D DE00: 31*0xD83D + 0xDE00.
        ("\U0001f600", 31 * 0xD83D + 0xDE00),
        # Overflow wraps to a signed int32, as in Java: "polygenelubricants" hashes to MIN_VALUE.
        ("polygenelubricants", -(2**31)),
        ("Aa", 2112),
        ("BB", 2112),
    ],
)
def test_java_string_hash_golden(text: str, expected: int) -> None:
    assert java_string_hash(text) == expected


def _reference_hash(text: str) -> int:
    units = text.encode("utf-16-be", "surrogatepass")
    value = 0
    for index in range(0, len(units), 2):
        value = (value * 31 + int.from_bytes(units[index : index + 2], "big")) % 2**32
    return value - 2**32 if value >= 2**31 else value


@given(st.text())
def test_java_string_hash_matches_the_definition(text: str) -> None:
    result = java_string_hash(text)
    assert result == _reference_hash(text)
    assert -(2**31) <= result < 2**31


def test_lone_surrogate_counts_as_one_unit() -> None:
    assert java_string_hash("a\ud800") == 31 * ord("a") + 0xD800


def test_tags_code() -> None:
    assert tags_code(None) == 0
    assert tags_code("") == 0
    assert tags_code("TagA") == 2598919


# --- addresses -----------------------------------------------------------------------------


def test_ip_packing() -> None:
    assert pack_ip("127.0.0.1") == b"\x7f\x00\x00\x01"
    assert pack_ip("::1") == b"\x00" * 15 + b"\x01"
    assert unpack_ip(b"\x0a\x00\x00\x07") == "10.0.0.7"
    assert unpack_ip(b"\x00" * 15 + b"\x01") == "::1"


@pytest.mark.parametrize("host", ["localhost", "127.1", "1.2.3.4 x", "", "1.2.3.256", "::g"])
def test_pack_ip_refuses_non_literals(host: str) -> None:
    with pytest.raises(ProtocolError):
        pack_ip(host)


def test_unpack_ip_refuses_odd_lengths() -> None:
    with pytest.raises(ProtocolError):
        unpack_ip(b"\x00" * 5)


def test_socket_address_text_forms() -> None:
    assert format_socket_address(("127.0.0.1", 10911)) == "127.0.0.1:10911"
    assert format_socket_address(("::1", 10911)) == "[::1]:10911"
    assert parse_socket_address("127.0.0.1:10911") == ("127.0.0.1", 10911)
    assert parse_socket_address("[::1]:10911") == ("::1", 10911)
    for bad in ["127.0.0.1", ":80", "h:x", "h:70000"]:
        with pytest.raises(ProtocolError):
            parse_socket_address(bad)


# --- Message and MessageExt ----------------------------------------------------------------


def test_message_convenience_arguments_become_properties() -> None:
    message = Message("orders", b'{"id": 17}', tags="paid", keys="order-17", delay_level=3)
    assert message.properties == {"TAGS": "paid", "KEYS": "order-17", "DELAY": "3"}
    assert message.tags == "paid"
    assert message.keys == "order-17"
    assert message.key_list == ["order-17"]
    assert message.delay_level == 3
    assert message.flag == 0


def test_message_keys_from_a_list_are_space_joined() -> None:
    message = Message("t", b"", keys=["a", "", "b"])
    assert message.keys == "a b"
    assert message.key_list == ["a", "b"]


def test_message_copies_the_callers_properties() -> None:
    mine = {"p": "v"}
    message = Message("t", b"x", 7, mine, tags="T")
    assert mine == {"p": "v"}
    assert message.properties == {"p": "v", "TAGS": "T"}
    assert message.flag == 7


def test_setting_none_removes_a_property() -> None:
    message = Message("t", tags="T", keys="k", delay_level=2)
    message.unique_key = "ABC"
    assert message.unique_key == "ABC"
    message.tags = None
    message.keys = None
    message.delay_level = 0
    message.unique_key = None
    assert message.properties == {}
    assert message.delay_level == 0
    assert message.tags is None


def test_bad_delay_property_is_a_protocol_error() -> None:
    message = Message("t", properties={"DELAY": "soon"})
    with pytest.raises(ProtocolError):
        _ = message.delay_level


def test_wait_and_transaction_accessors() -> None:
    assert Message("t").wait_store_msg_ok
    assert not Message("t", properties={"WAIT": "false"}).wait_store_msg_ok
    assert Message("t", properties={"TRAN_MSG": "true"}).is_transaction_prepared
    assert not Message("t").is_transaction_prepared


def test_message_ext_ids() -> None:
    message = MessageExt(
        topic="t", body=b"", store_host=("127.0.0.1", 10911), commit_log_offset=0x1234
    )
    assert message.offset_msg_id == "7F00000100002A9F0000000000001234"
    assert message.msg_id == message.offset_msg_id
    message.properties["UNIQ_KEY"] = "0A00000700002A9F0000000000000001"
    assert message.msg_id == "0A00000700002A9F0000000000000001"
    assert message.offset_msg_id == "7F00000100002A9F0000000000001234"


def test_message_ext_accessors_share_the_message_ones() -> None:
    message = MessageExt(topic="t", body=b"", properties={"TAGS": "A", "KEYS": "k1 k2"})
    assert message.tags == "A"
    assert message.key_list == ["k1", "k2"]
    # Mutable, as the C++ client restores RETRY_TOPIC into topic.
    message.topic = "other"
    assert message.topic == "other"
