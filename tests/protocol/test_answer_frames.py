"""The precompiled send answer against the general encoder: the same bytes."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from bolide.protocol.answer_frames import SendSuccessFrames
from bolide.protocol.codes import ResponseCode
from bolide.protocol.command import FLAG_RESPONSE, RemotingCommand, encode_command

_INT32 = st.integers(min_value=-(2**31), max_value=2**31 - 1)


@given(
    opaque=_INT32,
    message_id=st.text(alphabet="0123456789ABCDEF", min_size=32, max_size=40),
    queue_id=st.integers(min_value=0, max_value=2**16),
    queue_offset=st.integers(min_value=0, max_value=2**63 - 1),
    region=st.text(max_size=12),
    trace=st.sampled_from(["true", "false"]),
)
def test_a_success_frame_is_what_the_command_encoder_writes(
    opaque: int, message_id: str, queue_id: int, queue_offset: int, region: str, trace: str
) -> None:
    extra = {"MSG_REGION": region, "TRACE_ON": trace}
    request = RemotingCommand(310, opaque=opaque)
    fields = {
        "msgId": message_id,
        "queueId": str(queue_id),
        "queueOffset": str(queue_offset),
        **extra,
    }
    answer = request.make_response(ResponseCode.SUCCESS, None, fields)
    answer.flag |= FLAG_RESPONSE
    expected = encode_command(answer)
    frames = SendSuccessFrames(extra)
    assert frames.frame(opaque, message_id, queue_id, queue_offset) == expected


def test_no_extra_fields() -> None:
    request = RemotingCommand(10, opaque=7)
    fields = {"msgId": "AB", "queueId": "1", "queueOffset": "2"}
    expected = encode_command(request.make_response(ResponseCode.SUCCESS, None, fields))
    assert SendSuccessFrames({}).frame(7, "AB", 1, 2) == expected
