"""RemotingCommand: one request or response of the remoting protocol, and its frame codec.

A command travels as one frame (see :mod:`bolide.protocol.frame` for the frame layout). Its
header is JSON (:mod:`bolide.protocol.header_json`) or the ROCKETMQ binary layout
(:mod:`bolide.protocol.header_binary`), chosen by ``serialize_type``; its body is opaque bytes.
A server answers in the serialize type of the request (:meth:`RemotingCommand.make_response`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from bolide.base.errors import ProtocolError
from bolide.protocol.codes import LanguageCode
from bolide.protocol.frame import RawFrame, SerializeType, encode_frame_prefix
from bolide.protocol.header_binary import decode_binary_header, encode_binary_header
from bolide.protocol.header_json import decode_json_header, encode_json_header

__all__ = [
    "BOLIDE_WIRE_VERSION",
    "FLAG_ONEWAY",
    "FLAG_RESPONSE",
    "Body",
    "LanguageCode",
    "RemotingCommand",
    "decode_command",
    "encode_command",
    "encode_command_parts",
]

FLAG_RESPONSE = 1
"""flag bit 0: the frame answers a request with the same opaque."""
FLAG_ONEWAY = 2
"""flag bit 1: the request must not be answered."""
BOLIDE_WIRE_VERSION = 401
"""MQVersion ordinal V4_9_4, sent in every command we originate; Java peers branch on it."""

Body = bytes | memoryview
"""A body piece: bytes, or a one-dimensional byte memoryview (a slice of a mapped file)."""


@dataclass(slots=True)
class RemotingCommand:
    """One request or response. ``body_parts``, when set, replaces ``body`` (which is then
    ``b""``) with pieces written back to back without copying (pull responses).
    """

    code: int
    opaque: int = 0
    flag: int = 0
    language: LanguageCode = LanguageCode.PYTHON
    version: int = BOLIDE_WIRE_VERSION
    remark: str | None = None
    ext_fields: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    body_parts: tuple[Body, ...] | None = None
    serialize_type: SerializeType = SerializeType.JSON

    @property
    def is_response(self) -> bool:
        """Whether flag bit 0 (RESPONSE) is set."""
        return bool(self.flag & FLAG_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        """Whether flag bit 1 (ONEWAY) is set."""
        return bool(self.flag & FLAG_ONEWAY)

    @property
    def body_length(self) -> int:
        """Body size in bytes: ``len(body)``, or the sum of the ``body_parts`` sizes."""
        if self.body_parts is None:
            return len(self.body)
        return sum(memoryview(part).nbytes for part in self.body_parts)

    @classmethod
    def request(
        cls,
        code: int,
        ext_fields: Mapping[str, str] | None = None,
        body: bytes = b"",
        *,
        oneway: bool = False,
    ) -> RemotingCommand:
        """A JSON request with opaque 0: the connection assigns the opaque when it sends it."""
        return cls(
            code,
            flag=FLAG_ONEWAY if oneway else 0,
            ext_fields=dict(ext_fields) if ext_fields else {},
            body=body,
        )

    def make_response(
        self,
        code: int,
        remark: str | None = None,
        ext_fields: Mapping[str, str] | None = None,
        body: bytes = b"",
        body_parts: tuple[Body, ...] | None = None,
    ) -> RemotingCommand:
        """The response to this request: same opaque and serialize type, flag = RESPONSE."""
        return RemotingCommand(
            code,
            opaque=self.opaque,
            flag=FLAG_RESPONSE,
            remark=remark,
            ext_fields=dict(ext_fields) if ext_fields else {},
            body=body,
            body_parts=body_parts,
            serialize_type=self.serialize_type,
        )


def encode_command_parts(command: RemotingCommand) -> list[Body]:
    """Encode ``command`` as pieces to write back to back: prefix plus header, then the body
    (``body``, or each of ``body_parts``; nothing when empty). Bodies are not copied.

    Raises :class:`ProtocolError` when a header field cannot be represented in the command's
    serialize type (for example a code above 32767 in a ROCKETMQ header).
    """
    encode = (
        encode_json_header if command.serialize_type == SerializeType.JSON else encode_binary_header
    )
    header = encode(
        command.code,
        command.language,
        command.version,
        command.opaque,
        command.flag,
        command.remark,
        command.ext_fields,
    )
    parts = command.body_parts
    if parts is None:
        body = command.body
        prefix = encode_frame_prefix(command.serialize_type, len(header), len(body))
        return [prefix + header, body] if body else [prefix + header]
    body_length = sum(memoryview(part).nbytes for part in parts)
    prefix = encode_frame_prefix(command.serialize_type, len(header), body_length)
    return [prefix + header, *parts]


def encode_command(command: RemotingCommand) -> bytes:
    """Encode ``command`` as one contiguous frame; see :func:`encode_command_parts`."""
    return b"".join(encode_command_parts(command))


def decode_command(frame: RawFrame) -> RemotingCommand:
    """Parse the header of ``frame`` into a command whose body is the frame's body.

    Raises :class:`ProtocolError` for an unknown serialize type or a malformed header.
    """
    if frame.serialize_type == SerializeType.JSON:
        fields = decode_json_header(frame.header)
        serialize_type = SerializeType.JSON
    elif frame.serialize_type == SerializeType.ROCKETMQ:
        fields = decode_binary_header(frame.header)
        serialize_type = SerializeType.ROCKETMQ
    else:
        raise ProtocolError(f"unknown serialize type {frame.serialize_type}")
    code, language, version, opaque, flag, remark, ext_fields = fields
    return RemotingCommand(
        code,
        opaque,
        flag,
        language,
        version,
        remark,
        ext_fields,
        frame.body,
        None,
        serialize_type,
    )
