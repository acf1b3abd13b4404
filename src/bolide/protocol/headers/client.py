"""Client management headers: unregister (35), consumer list (38), notify (40), reset offset
(220 broker→client, 222 admin→broker), consumer status (221, 223), running info (307) and
consume directly (309). HEART_BEAT (34) has no header: its data is the body.
"""

from __future__ import annotations

from bolide.protocol.headers.fields import WireHeader, wire, wire_header

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


@wire_header
class UnregisterClientRequestHeader(WireHeader):
    """UNREGISTER_CLIENT (35). Wire key ``clientID`` has a capital D. C++ sends the group it
    does not use as ``""``, which reads as ``None``."""

    client_id: str = wire("clientID")
    producer_group: str | None = wire("producerGroup", default=None)
    consumer_group: str | None = wire("consumerGroup", default=None)


@wire_header
class ConsumerGroupRequestHeader(WireHeader):
    """``consumerGroup`` alone: GET_CONSUMER_LIST_BY_GROUP (38), NOTIFY_CONSUMER_IDS_CHANGED
    (40) and GET_CONSUMER_CONNECTION_LIST (203) use identical Java classes."""

    consumer_group: str = wire("consumerGroup")


GetConsumerListByGroupRequestHeader = ConsumerGroupRequestHeader
NotifyConsumerIdsChangedRequestHeader = ConsumerGroupRequestHeader
GetConsumerConnectionListRequestHeader = ConsumerGroupRequestHeader


@wire_header
class ResetOffsetRequestHeader(WireHeader):
    """RESET_CONSUMER_CLIENT_OFFSET (220) and INVOKE_BROKER_TO_RESET_OFFSET (222).

    ``timestamp_ms`` -1 means "to the max offset". ``is_force`` (wire ``isForce``): when
    false a queue is only moved backwards; a missing ``isForce`` reads false. Java's form
    (:meth:`to_ext_fields`) writes it ``"true"``/``"false"``.
    """

    topic: str = wire("topic")
    group: str = wire("group")
    timestamp_ms: int = wire("timestamp")
    is_force: bool = wire("isForce", default=False)

    def to_cpp_ext_fields(self) -> dict[str, str]:
        """Form for a C++ consumer, which reads ``isForce`` with atoi: ``"1"``/``"0"``."""
        fields = self.to_ext_fields()
        fields["isForce"] = "1" if self.is_force else "0"
        return fields


@wire_header
class GetConsumerStatusRequestHeader(WireHeader):
    """GET_CONSUMER_STATUS_FROM_CLIENT (221) and INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223)."""

    topic: str = wire("topic")
    group: str = wire("group")
    client_addr: str | None = wire("clientAddr", default=None)


@wire_header
class GetConsumerRunningInfoRequestHeader(WireHeader):
    """GET_CONSUMER_RUNNING_INFO (307), admin→broker and forwarded broker→client."""

    consumer_group: str = wire("consumerGroup")
    client_id: str = wire("clientId")
    jstack_enable: bool = wire("jstackEnable", default=False)


@wire_header
class ConsumeMessageDirectlyResultRequestHeader(WireHeader):
    """CONSUME_MESSAGE_DIRECTLY (309); the body is the raw stored message."""

    consumer_group: str = wire("consumerGroup")
    client_id: str | None = wire("clientId", default=None)
    msg_id: str | None = wire("msgId", default=None)
    broker_name: str | None = wire("brokerName", default=None)
