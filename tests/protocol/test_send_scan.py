"""The send header scan: the compiled scanner, its pure twin and the general path agree.

For any header bytes, the compiled ``scan_send_request`` (``_send_scan.pyx``) and the pure twin
(``send_scan.py``, on orjson) answer the same thing; and whenever they answer values, those
are the values the general path reads from the same bytes (``decode_json_header`` +
``send_header_values``). Headers are generated as the Java, C++ and Python peers write them,
then varied: other value types, repeated keys, escapes, whitespace, cuts and flipped bytes.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

import orjson
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from bolide.base import compiled
from bolide.base.errors import ProtocolError
from bolide.protocol import answer_frames, send_scan
from bolide.protocol import record as door
from bolide.protocol.header_json import decode_json_header
from bolide.protocol.headers.send import send_header_values

assert callable(send_scan.scan_send_request)  # imported so that its twins are registered
assert callable(answer_frames.success_frame)
assert callable(door.decode_batch_body)

_PURE = compiled.pure_twin("bolide.protocol.send_scan", "scan_send_request")
_V1 = (
    "producerGroup", "topic", "defaultTopic", "defaultTopicQueueNums", "queueId", "sysFlag",
    "bornTimestamp", "flag", "properties", "reconsumeTimes", "unitMode", "maxReconsumeTimes",
    "batch", "bname",
)  # fmt: skip
_V2 = tuple("abcdefghijklmn")


@pytest.fixture(scope="module")
def fast_scan() -> ModuleType:
    try:
        return importlib.import_module("bolide.protocol._compiled")
    except ImportError:
        pytest.skip("the compiled frame module was not built (pure-Python install)")


def _general(header: bytes) -> tuple[Any, ...] | None:
    """What the general path reads: the command header, then the send header values."""
    try:
        code, language, version, opaque, flag, _, ext = decode_json_header(header)
    except ProtocolError:
        return None
    if code not in (10, 310) or flag != 0:
        return None
    values = send_header_values(ext, v2=code == 310)
    return None if values is None else (code, opaque, language, version, *values)


_TEXT = st.text(alphabet=st.characters(codec="utf-8"), max_size=12)
_DECIMAL = st.integers(min_value=-(10**19), max_value=10**19).map(str)
_EXT_VALUE = st.one_of(
    _DECIMAL,
    _TEXT,
    st.sampled_from(["", "true", "TRUE", "1", "0", "false", "+5", " 7", "1_0", "٣", "-", "-0"]),
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.none(),
    st.booleans(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.lists(st.integers(-(2**40), 2**40), max_size=2),
    st.dictionaries(st.text(max_size=2), st.integers(-(2**40), 2**40), max_size=2),
)


@st.composite
def _ext_fields(draw: st.DrawFn, names: tuple[str, ...]) -> dict[str, Any]:
    fields: dict[str, Any] = {
        names[0]: draw(st.sampled_from(["PG", "grp-1"])),
        names[1]: draw(st.sampled_from(["TopicA", "t_b", "%RETRY%g"])),
        names[2]: "TBW102",
        names[3]: draw(st.sampled_from(["4", 4, "8"])),
        names[4]: draw(st.sampled_from(["0", "3", -1, 2, "-1"])),
        names[5]: draw(st.sampled_from(["0", 0, "4"])),
        names[6]: draw(st.sampled_from(["1700000000000", "17"])),
        names[7]: draw(st.sampled_from(["0", 0, "1"])),
        names[8]: draw(st.sampled_from(["UNIQ_KEY\x01abc\x02WAIT\x01true", "", "A\x01é\x02"])),
    }
    for index in (9, 10, 11, 12, 13):
        if draw(st.booleans()):
            fields[names[index]] = draw(st.sampled_from(["0", "", "3", "false", "true", "1"]))
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 2, 3]))):  # damage or add fields
        key = draw(st.one_of(st.sampled_from(names), st.sampled_from(_V1 + _V2), _TEXT))
        fields[key] = draw(_EXT_VALUE)
    return fields


@st.composite
def _header(draw: st.DrawFn) -> bytes:
    code = draw(st.sampled_from([310, 310, 310, 10, 10, 320, 34]))
    names = _V1 if code == 10 or draw(st.integers(0, 9)) == 0 else _V2
    header: dict[str, Any] = {"code": code}
    header["extFields"] = draw(_ext_fields(names))
    header["flag"] = draw(st.sampled_from([0, 0, 0, 0, 0, 1, 2]))
    header["language"] = draw(st.sampled_from(["JAVA", "CPP", "PYTHON", "GO", "KLINGON"]))
    header["opaque"] = draw(st.integers(min_value=-(2**31), max_value=2**31 - 1))
    if draw(st.booleans()):
        header["remark"] = draw(st.sampled_from(["", None, "why"]))
    if draw(st.booleans()):
        header["serializeTypeCurrentRPC"] = "JSON"
    header["version"] = draw(st.sampled_from([401, 63, 0]))
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 2]))):  # other types, unknown keys...
        key = draw(st.sampled_from([*header, "extra", "code"]))
        if draw(st.booleans()):
            header[key] = draw(st.one_of(_EXT_VALUE, st.integers(-(2**40), 2**40)))
        else:
            header.pop(key, None)
    text = orjson.dumps(header, option=draw(st.sampled_from([0, orjson.OPT_INDENT_2])))
    if draw(st.integers(0, 4)) == 0:  # a repeated key: the last one counts
        repeated = draw(st.sampled_from([b'"code":', b'"extFields":', b'"flag":', b'"opaque":']))
        value = draw(st.sampled_from([b'"x"', b"310", b"0", b"{}", b"[1,{}]", b"null"]))
        text = text.replace(b"{", b"{" + repeated + value + b",", 1)
    if draw(st.integers(0, 3)) == 0:  # escapes where plain text was
        text = text.replace(b"TopicA", b"\\u0054opic\\u0041").replace(b"PG", b"\\/PG\\n")
    if draw(st.integers(0, 9)) == 0:
        text = text + b"\n"
    if draw(st.integers(0, 9)) == 0 and text:  # damage
        position = draw(st.integers(0, len(text) - 1))
        if draw(st.booleans()):
            text = text[:position]
        else:
            text = text[:position] + bytes([draw(st.integers(0, 255))]) + text[position + 1 :]
    return text


_CPP = (
    b'{"code":10,"extFields":{"AccessKey":"","OnsChannel":"ALIYUN","Signature":"",'
    b'"producerGroup":"g","topic":"t","defaultTopic":"TBW102","defaultTopicQueueNums":4,'
    b'"queueId":1,"sysFlag":0,"bornTimestamp":"17","flag":0,'
    b'"properties":"A\\u0001b\\u0002","reconsumeTimes":"0","unitMode":"false",'
    b'"batch":"false"},"flag":0,"language":"CPP","opaque":5,"remark":"","version":63}\n'
)
_JAVA = (
    b'{"code":310,"extFields":{"a":"PG","b":"T","c":"TBW102","d":"4","e":"3","f":"0",'
    b'"g":"1700000000000","h":"0","i":"UNIQ_KEY\\u0001AB\\u0002WAIT\\u0001true","j":"0",'
    b'"k":"false","l":"16","m":"false","n":"broker-a"},"flag":0,"language":"JAVA",'
    b'"opaque":77,"serializeTypeCurrentRPC":"JSON","version":401}'
)


@settings(max_examples=600, deadline=None)
@given(_header())
@example(_CPP)
@example(_JAVA)
@example(_JAVA.replace(b'"k":"false"', b'"k":"TRUE"').replace(b'"j":"0"', b'"j":""'))
@example(_JAVA.replace(b'"T"', b'"\\ud83d\\ude00"'))  # a surrogate pair
@example(_JAVA.replace(b'"T"', b'"\\ud83d"'))  # a lone high surrogate: not JSON
@example(_JAVA.replace(b'"T"', b'"\xf0\x9f\x98\x80"'))  # the same, raw UTF-8
@example(_JAVA.replace(b'"T"', b'"\xed\xa0\x80"'))  # an encoded surrogate: not UTF-8
@example(_JAVA.replace(b'"d":"4"', b'"d":4.0'))
@example(_JAVA.replace(b'"d":"4"', b'"d":1234567890123456789'))
@example(_JAVA.replace(b'"d":"4"', b'"d":"123456789012345678"'))
@example(_JAVA.replace(b'"opaque":77', b'"opaque":2147483648'))
@example(_JAVA.replace(b'"opaque":77,', b""))
@example(_JAVA.replace(b'"x":', b'"x":').replace(b'"n":', b'"zz":[1,"\\u0001"],"n":'))
def test_compiled_pure_and_general_agree(fast_scan: ModuleType, header: bytes) -> None:
    pure = _PURE(header)
    assert fast_scan.scan_send_request(header) == pure
    if pure is not None:
        assert pure == _general(header)


def test_the_common_headers_are_read() -> None:
    java = send_scan.scan_send_request(_JAVA)
    assert java is not None
    assert java[:4] == (310, 77, java[2], 401)
    assert java[2].name == "JAVA"
    assert java[4:] == (
        "PG", "T", "TBW102", 4, 3, 0, 1_700_000_000_000, 0, "UNIQ_KEY\x01AB\x02WAIT\x01true", 0,
        False, 16, False, "broker-a",
    )  # fmt: skip
    cpp = send_scan.scan_send_request(_CPP)
    assert cpp is not None and cpp[2].name == "CPP" and cpp[8] == 1 and cpp[7] == 4


def test_other_requests_are_left_to_the_general_path() -> None:
    for header in (
        _JAVA.replace(b'"code":310', b'"code":320'),  # a batch
        _JAVA.replace(b'"flag":0,"lang', b'"flag":2,"lang'),  # oneway
        _JAVA.replace(b'"version"', b'"extra":1,"version"'),  # an unknown key
        _JAVA.replace(b'"e":"3"', b'"e":"three"'),  # a bad queue id: the general path says so
        _JAVA.replace(b'"b":"T",', b""),  # no topic
        b"not json",
    ):
        assert send_scan.scan_send_request(header) is None


@given(
    opaque=st.integers(min_value=-(2**31), max_value=2**31 - 1),
    message_id=st.text(alphabet="0123456789ABCDEF", min_size=32, max_size=40),
    queue_id=st.integers(min_value=0, max_value=2**16),
    queue_offset=st.integers(min_value=0, max_value=2**63 - 1),
    extra=st.sampled_from([b"", b',"MSG_REGION":"DefaultRegion","TRACE_ON":"true"']),
)
def test_the_answer_frames_are_the_same_bytes(
    fast_scan: ModuleType,
    opaque: int,
    message_id: str,
    queue_id: int,
    queue_offset: int,
    extra: bytes,
) -> None:
    pure = compiled.pure_twin("bolide.protocol.answer_frames", "success_frame")
    parts = (b'{"code":0,"extFields":{"msgId":"', b'"' + extra + b'},"opaque":', b"}")
    arguments = (*parts, opaque, message_id, queue_id, queue_offset)
    assert fast_scan.success_frame(*arguments) == pure(*arguments)


def _outcome(function: Any, body: bytes | memoryview) -> Any:
    try:
        return [(entry.flag, entry.body, entry.properties) for entry in function(body)]
    except ProtocolError as error:
        return (type(error), str(error))


@st.composite
def _batch_body(draw: st.DrawFn) -> bytes:
    entries = [
        door.BatchEntry(
            draw(st.integers(-(2**31), 2**31 - 1)),
            draw(st.binary(max_size=40)),
            draw(st.text(max_size=20)),
        )
        for _ in range(draw(st.integers(0, 5)))
    ]
    body = door.encode_batch_body(entries)
    if body and draw(st.booleans()):  # damage: a cut, a flipped byte
        position = draw(st.integers(0, len(body) - 1))
        if draw(st.booleans()):
            body = body[:position]
        else:
            body = body[:position] + bytes([draw(st.integers(0, 255))]) + body[position + 1 :]
    return body


@given(_batch_body())
@example(b"\x00" * 16 + b"\xff\xff\xff\xff\x00\x00")  # a negative body length
@example(b"\x00" * 20 + b"\x00\x02\xff\xfe")  # properties that are not UTF-8
def test_batch_bodies_decode_alike(body: bytes) -> None:
    try:
        fast = importlib.import_module("bolide.protocol.record._compiled")
    except ImportError:
        pytest.skip("the compiled wire module was not built (pure-Python install)")
    pure = compiled.pure_twin("bolide.protocol.record.batch", "decode_batch_body")
    assert _outcome(fast.decode_batch_body, body) == _outcome(pure, body)
    assert _outcome(fast.decode_batch_body, memoryview(body)) == _outcome(pure, body)
