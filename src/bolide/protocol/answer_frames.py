"""Precompiled answer frames: the broker's SUCCESS answer to a single send, as bytes.

A send answered SUCCESS always has the same JSON header but for four values: the opaque, the
message id, the queue id and the queue offset. :class:`SendSuccessFrames` keeps the rest as
text made once and writes the frame with one format and one encode, instead of a
:class:`~bolide.protocol.command.RemotingCommand`, its field mapping and a JSON encoding per
answer. The bytes are those :func:`~bolide.protocol.command.encode_command_parts` writes for
the same answer (``tests/protocol/test_answer_frames.py`` compares them, and the broker's
fast-path test compares whole answer streams).
"""

from __future__ import annotations

from collections.abc import Mapping

import orjson

from bolide.base import compiled
from bolide.protocol.codes import LanguageCode, ResponseCode
from bolide.protocol.command import BOLIDE_WIRE_VERSION, FLAG_RESPONSE
from bolide.protocol.frame import SerializeType, encode_frame_prefix

__all__ = ["SendSuccessFrames", "success_frame"]


class SendSuccessFrames:
    """SUCCESS answers to single sends, JSON header, no remark, no body.

    ``extra_fields`` are the extFields every answer carries after the send result's three
    (the broker's MSG_REGION and TRACE_ON), in that order.
    """

    def __init__(self, extra_fields: Mapping[str, str]) -> None:
        extra = orjson.dumps(dict(extra_fields)).decode()[1:-1]
        self._head = f'{{"code":{int(ResponseCode.SUCCESS)},"extFields":{{"msgId":"'.encode()
        self._tail = (
            f'"{"," if extra else ""}{extra}}},"flag":{FLAG_RESPONSE},'
            f'"language":"{LanguageCode.PYTHON.name}","opaque":'
        ).encode()
        self._end = f',"serializeTypeCurrentRPC":"JSON","version":{BOLIDE_WIRE_VERSION}}}'.encode()

    @property
    def pieces(self) -> tuple[bytes, bytes, bytes]:
        """``(head, tail, end)``: :func:`success_frame`'s first three arguments, for a caller
        that calls it directly (the send fast path, one Python call fewer a send)."""
        return self._head, self._tail, self._end

    def frame(self, opaque: int, message_id: str, queue_id: int, queue_offset: int) -> bytes:
        """The whole answer frame (prefix and header); ``message_id`` is hexadecimal."""
        return success_frame(
            self._head, self._tail, self._end, opaque, message_id, queue_id, queue_offset
        )


def success_frame(
    head: bytes,
    tail: bytes,
    end: bytes,
    opaque: int,
    message_id: str,
    queue_id: int,
    queue_offset: int,
) -> bytes:
    """A SUCCESS answer frame from the fixed parts of its header (``head`` up to the message
    id, ``tail`` from after the queue offset up to the opaque, ``end`` after the opaque) and
    the four values; ``message_id`` is ASCII (hexadecimal)."""
    header = b'%s%s","queueId":"%d","queueOffset":"%d%s%d%s' % (
        head,
        message_id.encode(),
        queue_id,
        queue_offset,
        tail,
        opaque,
        end,
    )
    return encode_frame_prefix(SerializeType.JSON, len(header), 0) + header


# The compiled twin (bolide/protocol/_answer_frames.pyx), unless BOLIDE_PURE_PYTHON=1 or not built.
compiled.install(globals(), "bolide.protocol._compiled", ("success_frame",))
