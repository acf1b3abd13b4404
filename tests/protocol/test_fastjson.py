"""fastjson's map forms (docs/protocol.md §1.8, §4.4): parse and produce, hostile input."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bolide.base import limits
from bolide.base.errors import ProtocolError
from bolide.protocol.bodies.fastjson import BodyError, ObjectKey, dumps, loads


def test_unquoted_numeric_keys() -> None:
    assert loads(b'{"brokerAddrs":{0:"10.0.0.1:10911"}}') == {"brokerAddrs": {0: "10.0.0.1:10911"}}
    assert loads(b'{"offsetTable":{"T@G":{0:12,1:7}}}') == {"offsetTable": {"T@G": {0: 12, 1: 7}}}
    assert loads(b'{"offsetTable":{1:0,2:0,3:17}}') == {"offsetTable": {1: 0, 2: 0, 3: 17}}
    assert loads("{-1 : 5 }") == {-1: 5}


def test_inlined_object_keys() -> None:
    parsed = loads(b'{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:5}}')
    ((key, value),) = parsed["offsetTable"].items()
    assert key == ObjectKey((("brokerName", "b"), ("queueId", 0), ("topic", "T")))
    assert key.as_dict() == {"brokerName": "b", "queueId": 0, "topic": "T"}
    assert value == 5


def test_nested_values_inside_object_keys_are_frozen() -> None:
    parsed = loads('{{"a":[1,{"b":2}]}:true}')
    ((key, value),) = parsed.items()
    assert key.as_dict()["a"] == (1, ObjectKey((("b", 2),)))
    assert value is True


def test_produce_object_keys_exactly_as_fastjson() -> None:
    key = ObjectKey.of({"brokerName": "b", "queueId": 0, "topic": "T"})
    assert dumps({"offsetTable": {key: 5}}) == (
        b'{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:5}}'
    )


def test_produce_int_keys_quoted_or_not() -> None:
    value = {"brokerAddrs": {0: "10.0.0.1:10911"}}
    assert dumps(value) == b'{"brokerAddrs":{"0":"10.0.0.1:10911"}}'
    assert dumps(value, unquoted_int_keys=True) == b'{"brokerAddrs":{0:"10.0.0.1:10911"}}'


def test_lenient_path_decodes_strings_like_json() -> None:
    assert loads('{0:"a\\"b\\u00e9\\n\\ud83d\\ude00", "k":[1.5e3,-0,null]}') == {
        0: 'a"b\u00e9\n\U0001f600',
        "k": [1500.0, 0, None],
    }


def test_consumer_offset_file_round_trip() -> None:
    text = b'{"offsetTable":{"T@G":{0:12,1:7},"%RETRY%G@G":{0:0}}}'
    parsed = loads(text)
    assert dumps(parsed, unquoted_int_keys=True) == text
    assert loads(dumps(parsed)) == {
        "offsetTable": {"T@G": {"0": 12, "1": 7}, "%RETRY%G@G": {"0": 0}}
    }


@pytest.mark.parametrize(
    "text",
    [
        "",
        "{",
        "{0}",
        "{0:}",
        "{0:1,}",
        "{0:1 2}",
        '{0:"x}',
        '{0:"\\q"}',
        "{0:[1,}",
        "{0:tru}",
        "{0:1}x",
        "{a:1}",
        "{0:-}",
        "{0:\x01}",
        "{{}:",
        "{٣:1}",
    ],
)
def test_malformed_text_raises_body_error(text: str) -> None:
    with pytest.raises(BodyError):
        loads(text)


def test_invalid_utf8_raises_body_error() -> None:
    with pytest.raises(BodyError):
        loads(b'{0:"\xff"}')


def test_depth_is_bounded_on_the_lenient_path() -> None:
    deep = (
        "{0:"
        + "[" * (limits.JSON_BODY_MAX_DEPTH_LEVELS + 1)
        + "]" * (limits.JSON_BODY_MAX_DEPTH_LEVELS + 1)
        + "}"
    )
    with pytest.raises(BodyError, match="deeper"):
        loads(deep)
    very_deep = "{0:" + "[" * 100_000
    with pytest.raises(BodyError):
        loads(very_deep)


def test_unwritable_values_raise_body_error() -> None:
    with pytest.raises(BodyError):
        dumps({ObjectKey.of({"a": 1}): object()})
    with pytest.raises(BodyError):
        dumps({ObjectKey.of({"a": 1}): {1.5: 2}})


scalars: st.SearchStrategy[Any] = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.text(max_size=8),
    st.floats(allow_nan=False, allow_infinity=False),
)
keys: st.SearchStrategy[Any] = (
    st.text(max_size=6)
    | st.integers(-(2**63), 2**63 - 1)
    | st.dictionaries(st.text(max_size=4), scalars, max_size=3).map(ObjectKey.of)
)
values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(keys, children, max_size=3),
    max_leaves=12,
)


@settings(max_examples=300)
@given(value=values)
def test_produce_then_parse_is_identity(value: Any) -> None:
    assert loads(dumps(value, unquoted_int_keys=True)) == value


@settings(max_examples=500)
@given(
    text=st.text(alphabet='{}[]:,"0123456789-.eE truefalsn\\u', max_size=40) | st.text(max_size=30)
)
def test_random_text_raises_only_protocol_errors(text: str) -> None:
    with contextlib.suppress(ProtocolError):
        loads(text)


@settings(max_examples=200)
@given(data=st.binary(max_size=40))
def test_random_bytes_raise_only_protocol_errors(data: bytes) -> None:
    with contextlib.suppress(ProtocolError):
        loads(data)
