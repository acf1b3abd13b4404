"""RECALL_MESSAGE (370, RocketMQ 5): cancel a timer (delay) message before it is due.

The recall handle is what the producer got when it sent the message: URL-safe base64 of the
UTF-8 text ``v1 <topic> <brokerName> <delivery time in ms> <message id (UNIQ_KEY)>``
(RocketMQ's RecallMessageHandle.HandleV1).
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Self

from bolide.protocol.headers.fields import HeaderError, WireHeader, wire, wire_header

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


@wire_header
class RecallMessageRequestHeader(WireHeader):
    """RECALL_MESSAGE (370) request: the topic and the recall handle of the message."""

    topic: str = wire("topic")
    recall_handle: str = wire("recallHandle")
    producer_group: str | None = wire("producerGroup", default=None)


@wire_header
class RecallMessageResponseHeader(WireHeader):
    """RECALL_MESSAGE answer: the recalled message's id."""

    msg_id: str = wire("msgId")
