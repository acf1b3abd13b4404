"""Header dataclasses: round trips for every header, C++ forms, v1/v2 mapping, typed errors."""

from __future__ import annotations

import contextlib
import dataclasses
import types
import typing
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bolide.base.errors import ProtocolError
from bolide.protocol import headers
from bolide.protocol.command import RemotingCommand, decode_command, encode_command
from bolide.protocol.frame import FrameDecoder, RawFrame, SerializeType
from bolide.protocol.headers import (
    GetRouteInfoRequestHeader,
    HeaderError,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    PullSysFlag,
    QueryMessageRequestHeader,
    ResetOffsetRequestHeader,
    SendMessageRequestHeader,
    SendMessageResponseHeader,
    UnregisterClientRequestHeader,
)

HEADER_CLASSES: list[type[Any]] = sorted(
    {
        value
        for name, value in vars(headers).items()
        if name.endswith("Header") and isinstance(value, type) and dataclasses.is_dataclass(value)
    },
    key=lambda cls: cls.__name__,
)


def strategy_for(annotation: Any) -> st.SearchStrategy[Any]:
    if annotation is str:
        return st.text(min_size=1, max_size=16)  # optional "" reads as absent by design
    if annotation is bool:
        return st.booleans()
    if annotation is int:
        return st.integers(-(2**63), 2**63 - 1)
    if isinstance(annotation, types.UnionType):
        (inner,) = (arg for arg in typing.get_args(annotation) if arg is not type(None))
        return st.none() | strategy_for(inner)
    raise AssertionError(f"no strategy for {annotation!r}")


def instances(cls: type[Any]) -> st.SearchStrategy[Any]:
    hints = typing.get_type_hints(cls)
    fields = {field.name: strategy_for(hints[field.name]) for field in dataclasses.fields(cls)}
    return st.builds(cls, **fields)


def test_every_header_module_class_is_covered() -> None:
    assert len(HEADER_CLASSES) == 34  # aliases of identical Java classes count once
    assert SendMessageRequestHeader in HEADER_CLASSES


@pytest.mark.parametrize("cls", HEADER_CLASSES, ids=lambda cls: cls.__name__)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_round_trip_through_the_wire(cls: type[Any], data: st.DataObject) -> None:
    header = data.draw(instances(cls))
    fields = header.to_ext_fields()
    assert all(type(value) is str for value in fields.values())
    assert cls.from_ext_fields(fields) == header
    for serialize_type in SerializeType:
        command = RemotingCommand(1, ext_fields=fields, serialize_type=serialize_type)
        (frame,) = FrameDecoder().feed(encode_command(command))
        assert cls.from_ext_fields(decode_command(frame).ext_fields) == header


@settings(max_examples=100)
@given(header=instances(SendMessageRequestHeader))
def test_send_v1_and_v2_decode_to_one_header(header: SendMessageRequestHeader) -> None:
    v2 = header.to_v2_ext_fields()
    assert set(v2) <= set("abcdefghijklmn")
    assert SendMessageRequestHeader.from_v2_ext_fields(v2) == header
    assert SendMessageRequestHeader.from_ext_fields(header.to_ext_fields()) == header


def test_send_v2_letter_mapping() -> None:
    fields = {
        "a": "PG",
        "b": "T",
        "c": "TBW102",
        "d": "4",
        "e": "3",
        "f": "0",
        "g": "1700000000000",
        "h": "7",
        "i": "TAGS\u0001a\u0002",
        "j": "2",
        "k": "false",
        "l": "16",
        "m": "true",
        "n": "broker-a",
    }
    header = SendMessageRequestHeader.from_v2_ext_fields(fields)
    assert header == SendMessageRequestHeader(
        producer_group="PG",
        topic="T",
        default_topic="TBW102",
        default_topic_queue_count=4,
        queue_id=3,
        sys_flag=0,
        born_timestamp_ms=1_700_000_000_000,
        flag=7,
        properties="TAGS\u0001a\u0002",
        reconsume_times=2,
        unit_mode=False,
        max_reconsume_times=16,
        batch=True,
        broker_name="broker-a",
    )
    assert header.to_v2_ext_fields() == fields
    v1 = header.to_ext_fields()
    assert v1["producerGroup"] == "PG" and v1["batch"] == "true" and v1["bname"] == "broker-a"


def test_cpp_send_request_as_it_arrives() -> None:
    # C++ 1.2.3: ints as JSON numbers, booleans "0"/"1", batch as code 10, signing keys.
    header_json = (
        b'{"code":10,"extFields":{"AccessKey":"","OnsChannel":"ALIYUN","Signature":"x=",'
        b'"producerGroup":"PG","topic":"T","defaultTopic":"TBW102","defaultTopicQueueNums":4,'
        b'"queueId":1,"sysFlag":0,"bornTimestamp":"1700000000000","flag":0,'
        b'"properties":"WAIT\\u0001true\\u0002","reconsumeTimes":"0","unitMode":"0",'
        b'"batch":"1"},"flag":0,"language":"CPP","opaque":1,"remark":"","version":63}\n'
    )
    command = decode_command(RawFrame(0, header_json, b""))
    header = SendMessageRequestHeader.from_ext_fields(command.ext_fields)
    assert header.batch is True and header.unit_mode is False
    assert (header.queue_id, header.default_topic_queue_count, header.reconsume_times) == (1, 4, 0)
    assert header.max_reconsume_times is None and header.broker_name is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("true", True),
        ("TRUE", True),
        ("True", True),
        ("1", True),
        ("0", False),
        ("false", False),
        ("yes", False),
        ("", False),
    ],
)
def test_boolean_texts(text: str, expected: bool) -> None:
    fields = {"topic": "T", "group": "G", "timestamp": "-1", "isForce": text}
    assert ResetOffsetRequestHeader.from_ext_fields(fields).is_force is expected


def test_reset_offset_forms() -> None:
    header = ResetOffsetRequestHeader("T", "G", -1, True)
    assert header.to_ext_fields()["isForce"] == "true"
    assert header.to_cpp_ext_fields()["isForce"] == "1"
    assert ResetOffsetRequestHeader("T", "G", 5, False).to_cpp_ext_fields()["isForce"] == "0"


def test_cpp_unregister_empty_group_reads_as_absent() -> None:
    fields = {"clientID": "1-10.0.0.7@DEFAULT", "producerGroup": "", "consumerGroup": "G"}
    header = UnregisterClientRequestHeader.from_ext_fields(fields)
    assert header.producer_group is None and header.consumer_group == "G"


def test_route_header_accept_standard_json_only() -> None:
    assert (
        GetRouteInfoRequestHeader.from_ext_fields({"topic": "T"}).accept_standard_json_only is None
    )
    fields = {"topic": "T", "acceptStandardJsonOnly": "true"}
    assert GetRouteInfoRequestHeader.from_ext_fields(fields).accept_standard_json_only is True


def test_query_message_unique_key_flag() -> None:
    header = QueryMessageRequestHeader("T", "k", 32, 0, 10, unique_key_query=True)
    fields = header.to_ext_fields()
    assert fields["_UNIQUE_KEY_QUERY"] == "true"
    assert QueryMessageRequestHeader.from_ext_fields(fields) == header


def test_send_response_always_carries_region_and_trace() -> None:
    fields = SendMessageResponseHeader("ABC", 2, 17).to_ext_fields()
    assert fields == {
        "msgId": "ABC",
        "queueId": "2",
        "queueOffset": "17",
        "MSG_REGION": "DefaultRegion",
        "TRACE_ON": "true",
    }


PULL_FIELDS = {
    "consumerGroup": "G",
    "topic": "T",
    "queueId": "0",
    "queueOffset": "12",
    "maxMsgNums": "32",
    "sysFlag": "7",
    "commitOffset": "10",
    "suspendTimeoutMillis": "15000",
    "subVersion": "1700000000000",
    "subscription": "TagA || TagB",
    "expressionType": "TAG",
    "bname": "broker-a",
    "AccessKey": "",
}


def test_pull_request_and_flags() -> None:
    header = PullMessageRequestHeader.from_ext_fields(PULL_FIELDS)
    assert (
        header.flags == PullSysFlag.COMMIT_OFFSET | PullSysFlag.SUSPEND | PullSysFlag.SUBSCRIPTION
    )
    assert PullSysFlag.CLASS_FILTER not in header.flags
    assert (header.queue_offset, header.max_messages, header.suspend_timeout_ms) == (12, 32, 15000)
    assert header.subscription == "TagA || TagB"


@pytest.mark.parametrize("key", [k for k in PULL_FIELDS if k[0].islower()][:9])
def test_pull_missing_required_field_names_it(key: str) -> None:
    fields = {k: v for k, v in PULL_FIELDS.items() if k != key}
    with pytest.raises(HeaderError, match=f"'{key}'.*missing"):
        PullMessageRequestHeader.from_ext_fields(fields)


@pytest.mark.parametrize("key", ["queueId", "queueOffset", "maxMsgNums", "subVersion"])
def test_pull_bad_number_names_the_field(key: str) -> None:
    with pytest.raises(HeaderError, match=f"'{key}'.*not an integer") as caught:
        PullMessageRequestHeader.from_ext_fields({**PULL_FIELDS, key: "12x"})
    assert isinstance(caught.value, ProtocolError)


def test_pull_response_errors_and_values() -> None:
    fields = {
        "suggestWhichBrokerId": "0",
        "nextBeginOffset": "5",
        "minOffset": "0",
        "maxOffset": "9",
    }
    assert PullMessageResponseHeader.from_ext_fields(fields) == PullMessageResponseHeader(
        0, 5, 0, 9
    )
    with pytest.raises(HeaderError, match="maxOffset"):
        PullMessageResponseHeader.from_ext_fields({**fields, "maxOffset": "nine"})


@pytest.mark.parametrize(
    ("key", "message"),
    [("topic", "missing"), ("queueId", "missing"), ("bornTimestamp", "missing")],
)
def test_send_missing_fields_named(key: str, message: str) -> None:
    fields = SendMessageRequestHeader("PG", "T", "TBW102", 4, 0, 0, 1, 0).to_ext_fields()
    del fields[key]
    with pytest.raises(HeaderError, match=f"'{key}'.*{message}"):
        SendMessageRequestHeader.from_ext_fields(fields)
    with pytest.raises(HeaderError, match=r"'l'.*not an integer"):
        SendMessageRequestHeader.from_v2_ext_fields(
            {
                **SendMessageRequestHeader("PG", "T", "TBW102", 4, 0, 0, 1, 0).to_v2_ext_fields(),
                "l": "x",
            }
        )


@pytest.mark.parametrize("cls", HEADER_CLASSES, ids=lambda cls: cls.__name__)
def test_empty_fields_raise_only_header_error(cls: type[Any]) -> None:
    with contextlib.suppress(HeaderError):
        cls.from_ext_fields({})


@settings(max_examples=300)
@given(
    fields=st.dictionaries(
        st.sampled_from([*PULL_FIELDS, "x"]),
        st.text(max_size=6) | st.integers().map(str),
        max_size=14,
    )
)
def test_fast_and_checked_pull_paths_agree(fields: dict[str, str]) -> None:
    """Random field sets either decode or raise HeaderError — never KeyError/ValueError."""
    try:
        header = PullMessageRequestHeader.from_ext_fields(fields)
    except HeaderError:
        return
    assert header.to_ext_fields()["topic"] == fields["topic"]
