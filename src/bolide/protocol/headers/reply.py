"""PUSH_REPLY_MESSAGE_TO_CLIENT (326): the header a broker sends the requesting client with a
reply's body (RocketMQ 4.7+ request-reply; Java's ReplyMessageRequestHeader).

The replier sends its answer with SEND_REPLY_MESSAGE (324, the long send header) or
SEND_REPLY_MESSAGE_V2 (325, the one-letter header); the broker pushes it on the connection of
the client named by the message's REPLY_TO_CLIENT property with this header.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Self

from bolide.protocol.headers.fields import (
    optional_int,
    optional_str,
    put_optional,
    required_int,
    required_str,
)

__all__ = ["ReplyMessageRequestHeader"]


@dataclass(frozen=True, slots=True)
class ReplyMessageRequestHeader:
    """One reply pushed to its requester; hosts are ``"ip:port"``, times epoch ms."""

    producer_group: str
    topic: str
    default_topic: str
    default_topic_queue_count: int
    queue_id: int
    sys_flag: int
    born_timestamp_ms: int
    flag: int
    born_host: str
    store_host: str
    store_timestamp_ms: int
    properties: str | None = None
    reconsume_times: int | None = None
    unit_mode: bool = False

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> Self:
        """Decode; raises :class:`HeaderError` when a required field is missing or bad."""
        return cls(
            required_str(fields, "producerGroup"),
            required_str(fields, "topic"),
            required_str(fields, "defaultTopic"),
            required_int(fields, "defaultTopicQueueNums"),
            required_int(fields, "queueId"),
            required_int(fields, "sysFlag"),
            required_int(fields, "bornTimestamp"),
            required_int(fields, "flag"),
            required_str(fields, "bornHost"),
            required_str(fields, "storeHost"),
            required_int(fields, "storeTimestamp"),
            optional_str(fields, "properties"),
            optional_int(fields, "reconsumeTimes"),
            optional_str(fields, "unitMode") == "true",
        )

    def to_ext_fields(self) -> dict[str, str]:
        fields = {
            "producerGroup": self.producer_group,
            "topic": self.topic,
            "defaultTopic": self.default_topic,
            "defaultTopicQueueNums": str(self.default_topic_queue_count),
            "queueId": str(self.queue_id),
            "sysFlag": str(self.sys_flag),
            "bornTimestamp": str(self.born_timestamp_ms),
            "flag": str(self.flag),
            "bornHost": self.born_host,
            "storeHost": self.store_host,
            "storeTimestamp": str(self.store_timestamp_ms),
            "unitMode": "true" if self.unit_mode else "false",
        }
        put_optional(fields, "properties", self.properties)
        if self.reconsume_times is not None:
            fields["reconsumeTimes"] = str(self.reconsume_times)
        return fields
