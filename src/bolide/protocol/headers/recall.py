"""RECALL_MESSAGE (370, RocketMQ 5): cancel a timer (delay) message before it is due.

The recall handle is what the producer got when it sent the message: URL-safe base64 of the
UTF-8 text ``v1 <topic> <brokerName> <delivery time in ms> <message id (UNIQ_KEY)>``
(RocketMQ's RecallMessageHandle.HandleV1).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Self

from bolide.protocol.headers.fields import HeaderError, optional_str, required_str

__all__ = ["RecallHandle", "RecallMessageRequestHeader", "RecallMessageResponseHeader"]


@dataclass(frozen=True, slots=True)
class RecallHandle:
    topic: str
    broker_name: str
    deliver_ms: int
    message_id: str

    def encode(self) -> str:
        text = f"v1 {self.topic} {self.broker_name} {self.deliver_ms} {self.message_id}"
        return base64.urlsafe_b64encode(text.encode()).decode()

    @classmethod
    def decode(cls, handle: str) -> Self:
        """Raises :class:`HeaderError` when ``handle`` is not a v1 recall handle."""
        try:
            text = base64.urlsafe_b64decode(handle.encode()).decode()
        except (binascii.Error, UnicodeDecodeError, ValueError) as error:
            raise HeaderError(f"recall handle {handle!r} is not base64") from error
        parts = text.split(" ")
        if len(parts) != 5 or parts[0] != "v1" or not parts[3].isdigit() or not all(parts):
            raise HeaderError(f"recall handle {handle!r} is illegal")
        return cls(parts[1], parts[2], int(parts[3]), parts[4])


@dataclass(frozen=True, slots=True)
class RecallMessageRequestHeader:
    topic: str
    recall_handle: str
    producer_group: str | None = None

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> Self:
        return cls(
            required_str(fields, "topic"),
            required_str(fields, "recallHandle"),
            optional_str(fields, "producerGroup"),
        )

    def to_ext_fields(self) -> dict[str, str]:
        fields = {"topic": self.topic, "recallHandle": self.recall_handle}
        if self.producer_group is not None:
            fields["producerGroup"] = self.producer_group
        return fields


@dataclass(frozen=True, slots=True)
class RecallMessageResponseHeader:
    msg_id: str

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> Self:
        return cls(required_str(fields, "msgId"))

    def to_ext_fields(self) -> dict[str, str]:
        return {"msgId": self.msg_id}
