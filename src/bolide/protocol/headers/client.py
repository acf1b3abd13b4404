"""Client management headers: unregister (35), consumer list (38), notify (40), reset offset
(220 broker→client, 222 admin→broker), consumer status (221, 223), running info (307) and
consume directly (309). HEART_BEAT (34) has no header: its data is the body.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Self

from bolide.protocol.headers.fields import (
    format_bool,
    optional_str,
    parse_bool,
    put_optional,
    required_int,
    required_str,
)

__all__ = [
    "ConsumeMessageDirectlyResultRequestHeader",
    "ConsumerGroupRequestHeader",
    "GetConsumerConnectionListRequestHeader",
    "GetConsumerListByGroupRequestHeader",
    "GetConsumerRunningInfoRequestHeader",
    "GetConsumerStatusRequestHeader",
    "NotifyConsumerIdsChangedRequestHeader",
    "ResetOffsetRequestHeader",
    "UnregisterClientRequestHeader",
]


@dataclass(frozen=True, slots=True)
class UnregisterClientRequestHeader:
    """UNREGISTER_CLIENT (35). Wire key ``clientID`` has a capital D. C++ sends the group it
    does not use as ``""``, which reads as ``None``."""

    client_id: str
    producer_group: str | None = None
    consumer_group: str | None = None

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> Self:
        """Decode; raises :class:`HeaderError`."""
        return cls(
            required_str(fields, "clientID"),
            optional_str(fields, "producerGroup"),
            optional_str(fields, "consumerGroup"),
        )

    def to_ext_fields(self) -> dict[str, str]:
        fields = {"clientID": self.client_id}
        put_optional(fields, "producerGroup", self.producer_group)
        put_optional(fields, "consumerGroup", self.consumer_group)
        return fields


@dataclass(frozen=True, slots=True)
class ConsumerGroupRequestHeader:
    """``consumerGroup`` alone: GET_CONSUMER_LIST_BY_GROUP (38), NOTIFY_CONSUMER_IDS_CHANGED
    (40) and GET_CONSUMER_CONNECTION_LIST (203) use identical Java classes."""

    consumer_group: str

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> Self:
        """Decode; raises :class:`HeaderError`."""
        return cls(required_str(fields, "consumerGroup"))

    def to_ext_fields(self) -> dict[str, str]:
        return {"consumerGroup": self.consumer_group}


GetConsumerListByGroupRequestHeader = ConsumerGroupRequestHeader
NotifyConsumerIdsChangedRequestHeader = ConsumerGroupRequestHeader
GetConsumerConnectionListRequestHeader = ConsumerGroupRequestHeader


@dataclass(frozen=True, slots=True)
class ResetOffsetRequestHeader:
    """RESET_CONSUMER_CLIENT_OFFSET (220) and INVOKE_BROKER_TO_RESET_OFFSET (222).

    ``timestamp_ms`` -1 means "to the max offset". ``is_force`` (wire ``isForce``): when
    false a queue is only moved backwards.
    """

    topic: str
    group: str
    timestamp_ms: int
    is_force: bool

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> Self:
        """Decode; raises :class:`HeaderError`."""
        return cls(
            required_str(fields, "topic"),
            required_str(fields, "group"),
            required_int(fields, "timestamp"),
            parse_bool(fields, "isForce"),
        )

    def to_ext_fields(self) -> dict[str, str]:
        """Java form: ``isForce`` is ``"true"``/``"false"``."""
        return {
            "topic": self.topic,
            "group": self.group,
            "timestamp": str(self.timestamp_ms),
            "isForce": format_bool(self.is_force),
        }

    def to_cpp_ext_fields(self) -> dict[str, str]:
        """Form for a C++ consumer, which reads ``isForce`` with atoi: ``"1"``/``"0"``."""
        fields = self.to_ext_fields()
        fields["isForce"] = "1" if self.is_force else "0"
        return fields


@dataclass(frozen=True, slots=True)
class GetConsumerStatusRequestHeader:
    """GET_CONSUMER_STATUS_FROM_CLIENT (221) and INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223)."""

    topic: str
    group: str
    client_addr: str | None = None

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> Self:
        """Decode; raises :class:`HeaderError`."""
        return cls(
            required_str(fields, "topic"),
            required_str(fields, "group"),
            optional_str(fields, "clientAddr"),
        )

    def to_ext_fields(self) -> dict[str, str]:
        fields = {"topic": self.topic, "group": self.group}
        put_optional(fields, "clientAddr", self.client_addr)
        return fields


@dataclass(frozen=True, slots=True)
class GetConsumerRunningInfoRequestHeader:
    """GET_CONSUMER_RUNNING_INFO (307), admin→broker and forwarded broker→client."""

    consumer_group: str
    client_id: str
    jstack_enable: bool = False

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> Self:
        """Decode; raises :class:`HeaderError`."""
        return cls(
            required_str(fields, "consumerGroup"),
            required_str(fields, "clientId"),
            parse_bool(fields, "jstackEnable"),
        )

    def to_ext_fields(self) -> dict[str, str]:
        return {
            "consumerGroup": self.consumer_group,
            "clientId": self.client_id,
            "jstackEnable": format_bool(self.jstack_enable),
        }


@dataclass(frozen=True, slots=True)
class ConsumeMessageDirectlyResultRequestHeader:
    """CONSUME_MESSAGE_DIRECTLY (309); the body is the raw stored message."""

    consumer_group: str
    client_id: str | None = None
    msg_id: str | None = None
    broker_name: str | None = None

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> Self:
        """Decode; raises :class:`HeaderError`."""
        return cls(
            required_str(fields, "consumerGroup"),
            optional_str(fields, "clientId"),
            optional_str(fields, "msgId"),
            optional_str(fields, "brokerName"),
        )

    def to_ext_fields(self) -> dict[str, str]:
        fields = {"consumerGroup": self.consumer_group}
        put_optional(fields, "clientId", self.client_id)
        put_optional(fields, "msgId", self.msg_id)
        put_optional(fields, "brokerName", self.broker_name)
        return fields
