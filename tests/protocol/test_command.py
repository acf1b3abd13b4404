"""RemotingCommand codec: golden framing bytes, peer forms, round trips, hostile input."""

from __future__ import annotations

import contextlib

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bolide.base.errors import ProtocolError
from bolide.protocol.command import (
    BOLIDE_WIRE_VERSION,
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    LanguageCode,
    RemotingCommand,
    decode_command,
    encode_command,
    encode_command_parts,
)
from bolide.protocol.frame import FrameDecoder, RawFrame, SerializeType, encode_frame_prefix

APPENDIX_A_REQUEST_HEADER = (
    b'{"code":34,"extFields":{},"flag":0,"language":"JAVA","opaque":7,'
    b'"serializeTypeCurrentRPC":"JSON","version":401}'
)
APPENDIX_A_RESPONSE_HEADER = (
    b'{"code":0,"flag":1,"language":"JAVA","opaque":7,'
    b'"serializeTypeCurrentRPC":"JSON","version":401}'
)
APPENDIX_A_BINARY_HEADER = bytes.fromhex(
    "0022 00 0191 00000007 00000000 00000000 0000000C 0005 746F706963 00000001 54"
)


def frame_of(command: RemotingCommand) -> RawFrame:
    frames = FrameDecoder().feed(encode_command(command))
    assert len(frames) == 1
    return frames[0]


def test_appendix_a_json_request() -> None:
    request = RemotingCommand(34, opaque=7, language=LanguageCode.JAVA, body=b'{"clientID":"x"}')
    encoded = encode_command(request)
    assert len(APPENDIX_A_REQUEST_HEADER) == 111
    assert encoded == bytes.fromhex("00000083 0000006F") + APPENDIX_A_REQUEST_HEADER + request.body


def test_appendix_a_json_response() -> None:
    request = RemotingCommand(34, opaque=7, language=LanguageCode.JAVA)
    response = request.make_response(0)
    response.language = LanguageCode.JAVA
    encoded = encode_command(response)
    assert encoded == bytes.fromhex("00000063 0000005F") + APPENDIX_A_RESPONSE_HEADER


def test_appendix_a_binary_header() -> None:
    command = RemotingCommand(
        34,
        opaque=7,
        language=LanguageCode.JAVA,
        ext_fields={"topic": "T"},
        serialize_type=SerializeType.ROCKETMQ,
    )
    assert encode_command(command) == bytes.fromhex("00000025 01000021") + APPENDIX_A_BINARY_HEADER
    decoded = decode_command(RawFrame(1, APPENDIX_A_BINARY_HEADER, b""))
    assert decoded == command


def test_decode_appendix_a_json() -> None:
    decoded = decode_command(RawFrame(0, APPENDIX_A_REQUEST_HEADER, b"{}"))
    assert decoded == RemotingCommand(34, 7, 0, LanguageCode.JAVA, 401, body=b"{}")


def test_decode_cpp_header_form() -> None:
    header = (
        b'{"code":11,"extFields":{"AccessKey":"","OnsChannel":"ALIYUN","Signature":"s=",'
        b'"queueId":3,"maxMsgNums":32,"sysFlag":6,"commitOffset":"0","ratio":1.0,'
        b'"half":0.5,"ok":true,"gone":null},"flag":0,"language":"CPP","opaque":5,'
        b'"remark":"","version":63}\n'
    )
    command = decode_command(RawFrame(0, header, b""))
    assert command.language == LanguageCode.CPP
    assert command.version == 63
    assert command.remark == ""
    assert command.ext_fields == {
        "AccessKey": "",
        "OnsChannel": "ALIYUN",
        "Signature": "s=",
        "queueId": "3",
        "maxMsgNums": "32",
        "sysFlag": "6",
        "commitOffset": "0",
        "ratio": "1",
        "half": "0.5",
        "ok": "true",
    }


def test_unknown_language_name_reads_as_other() -> None:
    command = decode_command(RawFrame(0, b'{"code":1,"language":"COBOL"}', b""))
    assert command.language == LanguageCode.OTHER
    assert (command.opaque, command.flag, command.version) == (0, 0, 0)


def test_every_language_name_round_trips() -> None:
    for language in LanguageCode:
        command = RemotingCommand(1, language=language)
        assert decode_command(frame_of(command)).language is language


def test_request_and_response_helpers() -> None:
    request = RemotingCommand.request(10, {"a": "b"}, b"body", oneway=True)
    assert request.is_oneway and not request.is_response
    assert request.flag == FLAG_ONEWAY and request.version == BOLIDE_WIRE_VERSION
    assert request.language == LanguageCode.PYTHON
    request.opaque = 42
    request.serialize_type = SerializeType.ROCKETMQ
    response = request.make_response(17, "no topic", {"x": "1"}, b"r")
    assert response.flag == FLAG_RESPONSE and response.is_response
    assert (response.opaque, response.serialize_type) == (42, SerializeType.ROCKETMQ)
    assert (response.code, response.remark, response.ext_fields, response.body) == (
        17,
        "no topic",
        {"x": "1"},
        b"r",
    )


def test_response_with_fields_keeps_them_and_remark() -> None:
    response = RemotingCommand(1, flag=FLAG_RESPONSE, remark="boom", ext_fields={"k": "v"})
    header = frame_of(response).header
    assert orjson.loads(header)["extFields"] == {"k": "v"}
    assert b'"remark":"boom"' in header


def test_body_parts_are_passed_through_without_copy() -> None:
    backing = bytearray(b"0123456789")
    parts = (memoryview(backing)[0:4], b"xy", memoryview(backing)[8:10])
    response = RemotingCommand(0, opaque=3, flag=FLAG_RESPONSE, body_parts=parts)
    assert response.body_length == 8
    pieces = encode_command_parts(response)
    assert pieces[1] is parts[0] and pieces[3] is parts[2]
    frame = frame_of(response)
    assert frame.body == b"0123xy89"


def test_empty_body_yields_one_piece() -> None:
    pieces = encode_command_parts(RemotingCommand(0))
    assert len(pieces) == 1


def test_binary_header_rejects_codes_wider_than_16_bits() -> None:
    with pytest.raises(ProtocolError):
        encode_command(RemotingCommand(40000, serialize_type=SerializeType.ROCKETMQ))


def test_json_header_rejects_unencodable_ext_values() -> None:
    bad: dict[str, str] = {"k": object()}  # type: ignore[dict-item]
    with pytest.raises(ProtocolError):
        encode_command(RemotingCommand(1, ext_fields=bad))


@pytest.mark.parametrize(
    "header",
    [
        b"",
        b"[]",
        b"{",
        b'{"language":"JAVA"}',
        b'{"code":"10"}',
        b'{"code":true}',
        b'{"code":4294967296}',
        b'{"code":1,"opaque":"x"}',
        b'{"code":1,"flag":1.5}',
        b'{"code":1,"remark":5}',
        b'{"code":1,"extFields":[]}',
        b"\xff\xfe",
    ],
)
def test_malformed_json_headers(header: bytes) -> None:
    with pytest.raises(ProtocolError):
        decode_command(RawFrame(0, header, b""))


@pytest.mark.parametrize(
    "header",
    [
        b"",
        APPENDIX_A_BINARY_HEADER[:-1],
        APPENDIX_A_BINARY_HEADER + b"\x00",
        bytes.fromhex("0022 00 0191 00000007 00000000 FFFFFFFF 00000000"),
        bytes.fromhex("0022 00 0191 00000007 00000000 00000002 FFFE 00000000"),
        bytes.fromhex("0022 00 0191 00000007 00000000 00000000 00000002 0005"),
        bytes.fromhex("0022 00 0191 00000007 00000000 00000000 00000006 0001 41 0000"),
    ],
)
def test_malformed_binary_headers(header: bytes) -> None:
    with pytest.raises(ProtocolError):
        decode_command(RawFrame(1, header, b""))


def test_unknown_serialize_type_in_raw_frame() -> None:
    with pytest.raises(ProtocolError):
        decode_command(RawFrame(7, b"{}", b""))


def test_binary_unknown_language_byte_and_empty_key() -> None:
    header = bytes.fromhex(
        "0001 63 0001 00000001 00000000 00000000 0000000B 0000 00000005 7669736962"
    )
    command = decode_command(RawFrame(1, header, b""))
    assert command.language == LanguageCode.OTHER
    assert command.ext_fields == {}


text = st.text(max_size=12)
int32 = st.integers(-(2**31), 2**31 - 1)
int16 = st.integers(-(2**15), 2**15 - 1)


@st.composite
def commands(draw: st.DrawFn) -> RemotingCommand:
    serialize_type = draw(st.sampled_from(list(SerializeType)))
    narrow = serialize_type == SerializeType.ROCKETMQ
    remark = draw(st.none() | st.text(min_size=1 if narrow else 0, max_size=20))
    return RemotingCommand(
        code=draw(int16 if narrow else int32),
        opaque=draw(int32),
        flag=draw(st.sampled_from([0, 1, 2, 3]) | int32),
        language=draw(st.sampled_from(list(LanguageCode))),
        version=draw(int16 if narrow else int32),
        remark=remark,
        ext_fields=draw(st.dictionaries(st.text(min_size=1, max_size=12), text, max_size=6)),
        body=draw(st.binary(max_size=64)),
        serialize_type=serialize_type,
    )


@settings(max_examples=300)
@given(command=commands())
def test_encode_decode_identity(command: RemotingCommand) -> None:
    assert decode_command(frame_of(command)) == command


@settings(max_examples=100)
@given(command_list=st.lists(commands(), min_size=1, max_size=5), data=st.data())
def test_split_stream_decodes_to_the_same_commands(
    command_list: list[RemotingCommand], data: st.DataObject
) -> None:
    stream = b"".join(encode_command(command) for command in command_list)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=10)))
    decoder = FrameDecoder()
    decoded: list[RemotingCommand] = []
    start = 0
    for cut in [*cuts, len(stream)]:
        decoded += [decode_command(frame) for frame in decoder.feed(stream[start:cut])]
        start = cut
    assert decoded == command_list


@settings(max_examples=500)
@given(serialize_type=st.sampled_from([0, 1]), header=st.binary(max_size=80))
def test_random_headers_raise_only_protocol_errors(serialize_type: int, header: bytes) -> None:
    with contextlib.suppress(ProtocolError):
        decode_command(RawFrame(serialize_type, header, b""))


@settings(max_examples=300)
@given(header=st.binary(max_size=60), body=st.binary(max_size=8))
def test_random_bytes_through_the_whole_pipeline(header: bytes, body: bytes) -> None:
    for serialize_type in (0, 1):
        stream = encode_frame_prefix(serialize_type, len(header), len(body)) + header + body
        try:
            for frame in FrameDecoder().feed(stream):
                decode_command(frame)
        except ProtocolError:
            pass


@settings(max_examples=200)
@given(
    fields=st.dictionaries(
        st.text(max_size=8),
        st.one_of(
            st.none(),
            st.booleans(),
            st.integers(-(2**63), 2**63 - 1),
            st.floats(allow_nan=False, allow_infinity=False),
            text,
            st.lists(st.integers(-5, 5), max_size=2),
        ),
        max_size=6,
    )
)
def test_json_ext_fields_of_any_scalar_type_become_strings(fields: dict[str, object]) -> None:
    header = orjson.dumps({"code": 1, "extFields": fields})
    command = decode_command(RawFrame(0, header, b""))
    assert set(command.ext_fields) == {key for key, value in fields.items() if value is not None}
    assert all(type(value) is str for value in command.ext_fields.values())
