"""Golden frames captured from the real C++ client (rocketmq==0.4.4), decoded without it.

The files in tests/compat/golden/ are the exact bytes librocketmq 1.2.3 sent to the scratch
server of tests/compat/cpp_harness.py (``python -m tests.compat.cpp_harness`` re-captures
them). Each holds one frame.
"""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest

from bolide.protocol.command import LanguageCode, RemotingCommand, decode_command
from bolide.protocol.compression import decompress_body
from bolide.protocol.frame import FrameDecoder, SerializeType
from bolide.protocol.headers.send import SendMessageRequestHeader
from bolide.protocol.message import java_string_hash
from bolide.protocol.record import decode_batch_body, decode_properties, encode_batch_body

GOLDEN = Path(__file__).parent.parent / "compat" / "golden"
_UNIQ_KEY = re.compile("[0-9A-F]{32}")


def _frame_bytes(name: str) -> bytes:
    return (GOLDEN / f"{name}.bin").read_bytes()


def _command(name: str) -> RemotingCommand:
    frames = FrameDecoder().feed(_frame_bytes(name))
    assert len(frames) == 1
    assert frames[0].serialize_type == SerializeType.JSON
    return decode_command(frames[0])


def _send(name: str) -> tuple[SendMessageRequestHeader, dict[str, str], bytes]:
    command = _command(name)
    assert command.code == 10
    header = SendMessageRequestHeader.from_ext_fields(command.ext_fields)
    return header, decode_properties(header.properties or ""), command.body


@pytest.mark.parametrize(
    "name",
    [
        "route_request",
        "send_sync",
        "send_oneway",
        "send_orderly",
        "send_batch",
        "send_compressed",
        "unregister_client",
    ],
)
def test_every_golden_frame_is_a_cpp_json_request(name: str) -> None:
    raw = _frame_bytes(name)
    assert int.from_bytes(raw[:4], "big") == len(raw) - 4
    command = _command(name)
    assert command.language == LanguageCode.CPP
    assert command.version == 63
    assert command.flag == 0  # even the oneway send: the C++ client marks it after encoding
    assert command.ext_fields["OnsChannel"] == "ALIYUN"
    assert command.ext_fields["AccessKey"] == ""
    assert command.ext_fields["Signature"]


def test_cpp_header_json_shape() -> None:
    raw = _frame_bytes("send_sync")
    header = raw[8 : 8 + int.from_bytes(raw[4:8], "big")]
    assert header.endswith(b"\n")
    parsed = orjson.loads(header)
    assert parsed["remark"] == ""
    # Mixed types: queueId, sysFlag, flag and defaultTopicQueueNums are JSON numbers...
    assert parsed["extFields"]["queueId"] == 0
    assert parsed["extFields"]["sysFlag"] == 0
    # ...while others are strings; decoding turns every value into a string.
    assert parsed["extFields"]["reconsumeTimes"] == "0"
    assert _command("send_sync").ext_fields["queueId"] == "0"


def test_route_request() -> None:
    command = _command("route_request")
    assert command.code == 105
    assert command.ext_fields["topic"] == "TopicGolden"
    assert command.body == b""


def test_send_sync() -> None:
    header, properties, body = _send("send_sync")
    assert header.topic == "TopicGolden"
    assert header.producer_group == "PG_GOLDEN"
    assert header.default_topic == "TBW102"
    assert header.default_topic_queue_count == 4
    assert header.queue_id == 0
    assert header.sys_flag == 0
    assert header.flag == 0
    assert header.reconsume_times == 0
    assert not header.unit_mode
    assert not header.batch
    assert header.born_timestamp_ms > 1_700_000_000_000
    assert body == b"golden sync"
    assert header.properties is not None
    assert header.properties.endswith("\x02")
    assert properties == {
        "KEYS": "key-1 key-2",
        "TAGS": "TagA",
        "UNIQ_KEY": properties["UNIQ_KEY"],
        "WAIT": "true",
        "color": "blue",
    }
    assert _UNIQ_KEY.fullmatch(properties["UNIQ_KEY"])
    assert java_string_hash(properties["TAGS"]) == 2598919


def test_send_oneway_and_orderly() -> None:
    oneway_header, oneway_properties, oneway_body = _send("send_oneway")
    assert oneway_body == b"golden oneway"
    assert set(oneway_properties) == {"UNIQ_KEY", "WAIT"}
    orderly_header, _, orderly_body = _send("send_orderly")
    assert orderly_body == b"golden order"
    assert orderly_header.queue_id == 3  # send_orderly(arg=7) over 4 queues
    assert oneway_header.topic == orderly_header.topic == "TopicGolden"


def test_send_batch() -> None:
    header, properties, body = _send("send_batch")
    assert header.batch
    assert properties == {"WAIT": "true"}
    entries = decode_batch_body(body)
    assert [entry.body for entry in entries] == [
        b"golden batch 0",
        b"golden batch 1",
        b"golden batch 2",
    ]
    inner = [decode_properties(entry.properties) for entry in entries]
    assert [one["KEYS"] for one in inner] == ["b0", "b1", "b2"]
    assert {one["TAGS"] for one in inner} == {"TagB"}
    assert len({one["UNIQ_KEY"] for one in inner}) == 3
    assert all(_UNIQ_KEY.fullmatch(one["UNIQ_KEY"]) for one in inner)
    # The C++ batch layout is exactly ours: re-encoding gives the captured bytes back.
    assert encode_batch_body(entries) == body


def test_send_compressed() -> None:
    header, _, body = _send("send_compressed")
    assert header.sys_flag == 1
    assert decompress_body(body) == b"golden " * 700


def test_unregister_client() -> None:
    command = _command("unregister_client")
    assert command.code == 35
    assert command.ext_fields["producerGroup"] == "PG_GOLDEN"
    assert command.ext_fields["consumerGroup"] == ""
    assert re.fullmatch(r"\d+-127\.0\.0\.1@DEFAULT", command.ext_fields["clientID"])
