"""POP consumption headers (RocketMQ 5.x remoting): POP_MESSAGE (200050), ACK_MESSAGE (200051),
CHANGE_MESSAGE_INVISIBLETIME (200053). Wire names are Java's
(``PopMessageRequestHeader``, ``AckMessageRequestHeader``, ``ChangeInvisibleTimeRequestHeader``
and their response headers).

The receipt handle (Java's ``extraInfo``, carried to clients in the ``POP_CK`` property) is
the space-separated text::

    startOffset popTime invisibleTime reviveQid topicType brokerName queueId offset
    [commitLogOffset]

``topicType`` is 0 for a normal topic; ``reviveQid`` is 999 for an orderly (FIFO) pop.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Self

from bolide.protocol.headers.fields import (
    HeaderError,
    WireHeader,
    format_bool,
    optional_int,
    optional_str,
    parse_bool,
    required_int,
    required_str,
    wire,
    wire_header,
)

__all__ = [
    "FIRST_POP_TIME_PROPERTY",
    "ORDER_REVIVE_QUEUE_ID",
    "POP_CK_PROPERTY",
    "AckMessageRequestHeader",
    "ChangeInvisibleTimeRequestHeader",
    "ChangeInvisibleTimeResponseHeader",
    "ConsumeInitMode",
    "PopMessageRequestHeader",
    "PopMessageResponseHeader",
    "PopTopicType",
    "ReceiptHandle",
]

POP_CK_PROPERTY: Final = "POP_CK"
"""Message property holding the receipt handle of a popped message."""
ORDER_REVIVE_QUEUE_ID: Final = 999
"""``reviveQid`` of a handle from an orderly pop (Java's KeyBuilder.POP_ORDER_REVIVE_QUEUE)."""
FIRST_POP_TIME_PROPERTY: Final = "1ST_POP_TIME"
"""Java's PROPERTY_FIRST_POP_TIME: when a message retried through a POP retry topic was first
popped (ms since the epoch), kept on every later copy."""


class PopTopicType:
    """A receipt handle's topic type: which topic the popped message was read from."""

    NORMAL: Final = 0
    RETRY: Final = 1
    """``%RETRY%<group>_<topic>`` (Java's V1 naming, its default)."""
    RETRY_V2: Final = 2
    """``%RETRY%<group>+<topic>`` (the broker's enableRetryTopicV2)."""


class ConsumeInitMode:
    """Where a group with no progress on a queue starts popping (Java ConsumeInitMode)."""

    MIN: Final = 0
    MAX: Final = 1


@dataclass(frozen=True, slots=True)
class ReceiptHandle:
    """One popped message's handle (see the module docstring for its text form)."""

    start_offset: int
    pop_time_ms: int
    invisible_time_ms: int
    revive_queue_id: int
    topic_type: int
    broker_name: str
    queue_id: int
    queue_offset: int
    commit_log_offset: int = -1

    def encode(self) -> str:
        text = (
            f"{self.start_offset} {self.pop_time_ms} {self.invisible_time_ms} "
            f"{self.revive_queue_id} {self.topic_type} {self.broker_name} {self.queue_id} "
            f"{self.queue_offset}"
        )
        if self.commit_log_offset >= 0:
            text += f" {self.commit_log_offset}"
        return text

    @classmethod
    def decode(cls, text: str) -> Self:
        """Parse a handle; raises :class:`HeaderError` when it is not one."""
        parts = text.split(" ")
        if len(parts) not in (8, 9) or not parts[5]:
            raise HeaderError(f"illegal receipt handle {text!r}")
        try:
            numbers = [int(part) for i, part in enumerate(parts) if i != 5]
        except ValueError as error:
            raise HeaderError(f"illegal receipt handle {text!r}") from error
        commit_log_offset = numbers[7] if len(numbers) == 8 else -1
        if min(numbers[:7]) < 0:
            raise HeaderError(f"illegal receipt handle {text!r}")
        start, pop_time, invisible, revive_queue_id, topic_type = numbers[:5]
        return cls(
            start,
            pop_time,
            invisible,
            revive_queue_id,
            topic_type,
            parts[5],
            numbers[5],
            numbers[6],
            commit_log_offset,
        )

    @property
    def is_order(self) -> bool:
        return self.revive_queue_id == ORDER_REVIVE_QUEUE_ID

    def deadline_ms(self) -> int:
        """When the message becomes visible again unless acked (ms since the epoch)."""
        return self.pop_time_ms + self.invisible_time_ms


@dataclass(frozen=True, slots=True)
class PopMessageRequestHeader:
    """POP_MESSAGE (200050). ``queue_id`` -1 pops from every readable queue of the topic."""

    consumer_group: str
    topic: str
    queue_id: int
    max_messages: int
    invisible_time_ms: int
    poll_time_ms: int
    born_time_ms: int
    init_mode: int = ConsumeInitMode.MAX
    expression_type: str | None = None
    expression: str | None = None
    order: bool = False
    attempt_id: str | None = None

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> Self:
        """Decode; raises :class:`HeaderError`."""
        return cls(
            required_str(fields, "consumerGroup"),
            required_str(fields, "topic"),
            required_int(fields, "queueId"),
            required_int(fields, "maxMsgNums"),
            required_int(fields, "invisibleTime"),
            required_int(fields, "pollTime"),
            required_int(fields, "bornTime"),
            optional_int(fields, "initMode") or 0,
            optional_str(fields, "expType"),
            optional_str(fields, "exp"),
            parse_bool(fields, "order"),
            optional_str(fields, "attemptId"),
        )

    def to_ext_fields(self) -> dict[str, str]:
        fields = {
            "consumerGroup": self.consumer_group,
            "topic": self.topic,
            "queueId": str(self.queue_id),
            "maxMsgNums": str(self.max_messages),
            "invisibleTime": str(self.invisible_time_ms),
            "pollTime": str(self.poll_time_ms),
            "bornTime": str(self.born_time_ms),
            "initMode": str(self.init_mode),
            "order": format_bool(self.order),
        }
        if self.expression_type is not None:
            fields["expType"] = self.expression_type
        if self.expression is not None:
            fields["exp"] = self.expression
        if self.attempt_id is not None:
            fields["attemptId"] = self.attempt_id
        return fields


@wire_header
class PopMessageResponseHeader(WireHeader):
    """POP_MESSAGE response: when the batch was popped, for how long it is invisible, and how
    many messages are left (``restNum``). The three ``…Info`` texts read as ``""`` when
    missing."""

    pop_time_ms: int = wire("popTime")
    invisible_time_ms: int = wire("invisibleTime")
    revive_queue_id: int = wire("reviveQid")
    rest_count: int = wire("restNum")
    start_offset_info: str = wire("startOffsetInfo", default="")
    message_offset_info: str = wire("msgOffsetInfo", default="")
    order_count_info: str = wire("orderCountInfo", default="")


@wire_header
class AckMessageRequestHeader(WireHeader):
    """ACK_MESSAGE (200051): ``extra_info`` is the receipt handle; ``offset`` the message's
    queue offset."""

    consumer_group: str = wire("consumerGroup")
    topic: str = wire("topic")
    queue_id: int = wire("queueId")
    extra_info: str = wire("extraInfo")
    offset: int = wire("offset")


@wire_header
class ChangeInvisibleTimeRequestHeader(WireHeader):
    """CHANGE_MESSAGE_INVISIBLETIME (200053): make the message invisible for
    ``invisible_time_ms`` from now."""

    consumer_group: str = wire("consumerGroup")
    topic: str = wire("topic")
    queue_id: int = wire("queueId")
    extra_info: str = wire("extraInfo")
    offset: int = wire("offset")
    invisible_time_ms: int = wire("invisibleTime")


@wire_header
class ChangeInvisibleTimeResponseHeader(WireHeader):
    """The new pop time and invisible time; the client builds the new handle from them."""

    pop_time_ms: int = wire("popTime")
    invisible_time_ms: int = wire("invisibleTime")
    revive_queue_id: int = wire("reviveQid")
