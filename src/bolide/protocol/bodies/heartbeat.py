"""HEART_BEAT (34) body and the subscription model (docs/protocol.md §2.5, §4.2, §7.3).

Java form (fastjson, keys sorted, enums by name)::

    {"clientID":"10.0.0.5@12345#881234567890123",
     "consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_FIRST_OFFSET",
        "consumeType":"CONSUME_PASSIVELY","groupName":"G1","messageModel":"CLUSTERING",
        "subscriptionDataSet":[{"classFilterMode":false,"codeSet":[2598919],
            "expressionType":"TAG","subString":"TagA","subVersion":1700000000000,
            "tagsSet":["TagA"],"topic":"T1"}],
        "unitMode":false}],
     "producerDataSet":[{"groupName":"PG1"}]}

Read leniently, for the C++ client: enums as ordinals, ``subVersion`` as a string, missing
``tagsSet``/``codeSet``/``expressionType``/``classFilterMode``/``unitMode``, missing
``consumerDataSet``/``producerDataSet``/``subscriptionDataSet``. C++ fills ``codeSet`` with
``atoi(tag)``, so a broker must not trust it: :meth:`SubscriptionData.with_recomputed_codes`.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Self

from bolide.protocol.bodies.fastjson import BodyError, dumps
from bolide.protocol.bodies.values import (
    as_object,
    get_bool,
    get_enum,
    get_int,
    get_list,
    get_str,
    get_str_list,
    parse_object,
    to_int,
)
from bolide.protocol.message import java_string_hash

__all__ = [
    "EXPRESSION_TYPE_SQL92",
    "EXPRESSION_TYPE_TAG",
    "SUBSCRIBE_ALL",
    "ConsumeFromWhere",
    "ConsumeType",
    "ConsumerData",
    "HeartbeatData",
    "MessageModel",
    "ProducerData",
    "SubscriptionData",
]

SUBSCRIBE_ALL = "*"
"""The subscription expression that matches every tag."""
EXPRESSION_TYPE_TAG = "TAG"
EXPRESSION_TYPE_SQL92 = "SQL92"
"""A subscription by a SQL92 condition over the message properties (MessageSelector.bySql)."""
"""The default expression type (the other is ``SQL92``)."""
_TAG_SEPARATOR = "||"


class ConsumeType(enum.IntEnum):
    """Pull (actively) or push (passively) consumer."""

    CONSUME_ACTIVELY = 0
    CONSUME_PASSIVELY = 1


class MessageModel(enum.IntEnum):
    """Every consumer gets every message (broadcasting) or the group shares them (clustering)."""

    BROADCASTING = 0
    CLUSTERING = 1


class ConsumeFromWhere(enum.IntEnum):
    """Where a consumer group without a committed offset starts (ordinals as Java's enum)."""

    CONSUME_FROM_LAST_OFFSET = 0
    CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST = 1
    CONSUME_FROM_MIN_OFFSET = 2
    CONSUME_FROM_MAX_OFFSET = 3
    CONSUME_FROM_FIRST_OFFSET = 4
    CONSUME_FROM_TIMESTAMP = 5


@dataclass(frozen=True, slots=True)
class SubscriptionData:
    """One topic subscription. ``sub_string`` is the expression (``"*"`` for all);
    ``tags_set`` its tags and ``code_set`` their Java ``String.hashCode``; ``sub_version`` the
    time (ms) the subscription was built — a newer version replaces an older one."""

    topic: str
    sub_string: str
    tags_set: tuple[str, ...] = ()
    code_set: tuple[int, ...] = ()
    sub_version: int = 0
    expression_type: str = EXPRESSION_TYPE_TAG
    class_filter_mode: bool = False

    @classmethod
    def from_expression(
        cls,
        topic: str,
        expression: str | None,
        sub_version: int,
        expression_type: str = EXPRESSION_TYPE_TAG,
    ) -> Self:
        """Build a subscription the way Java's FilterAPI does.

        ``None``, ``""`` and ``"*"`` mean all tags (``sub_string`` ``"*"``). A TAG expression is
        split on ``"||"``, each tag trimmed, empty ones dropped; codes are the tags' Java
        hashes. Raises :class:`BodyError` when a TAG expression holds no tag (``"||"``).
        Non-TAG expressions (SQL92) are kept as they are, without tags.
        """
        if not expression or expression.strip() == SUBSCRIBE_ALL:
            return cls(topic, SUBSCRIBE_ALL, (), (), sub_version, expression_type)
        if expression_type != EXPRESSION_TYPE_TAG:
            return cls(topic, expression, (), (), sub_version, expression_type)
        tags = tuple(dict.fromkeys(tag.strip() for tag in expression.split(_TAG_SEPARATOR)))
        tags = tuple(tag for tag in tags if tag)
        if not tags:
            raise BodyError(f"subscription expression {expression!r} holds no tag")
        codes = tuple(dict.fromkeys(java_string_hash(tag) for tag in tags))
        return cls(topic, expression, tags, codes, sub_version, expression_type)

    @property
    def is_all(self) -> bool:
        """Whether the subscription matches every message."""
        return self.sub_string == SUBSCRIBE_ALL or not self.sub_string

    def with_recomputed_codes(self) -> Self:
        """The same subscription with tags and codes rebuilt from ``sub_string`` (peers' own
        codes are not trusted: C++ sends ``atoi(tag)``). Raises :class:`BodyError` as
        :meth:`from_expression`."""
        return self.from_expression(
            self.topic, self.sub_string, self.sub_version, self.expression_type
        )

    def to_object(self) -> dict[str, Any]:
        """The Java JSON object."""
        return {
            "classFilterMode": self.class_filter_mode,
            "codeSet": list(self.code_set),
            "expressionType": self.expression_type,
            "subString": self.sub_string,
            "subVersion": self.sub_version,
            "tagsSet": list(self.tags_set),
            "topic": self.topic,
        }

    @classmethod
    def from_object(cls, value: Any) -> Self:
        """From a Java or C++ JSON object; raises :class:`BodyError`."""
        obj = as_object(value, "subscription data")
        return cls(
            get_str(obj, "topic"),
            get_str(obj, "subString", SUBSCRIBE_ALL),
            get_str_list(obj, "tagsSet"),
            tuple(to_int(code, "codeSet") for code in get_list(obj, "codeSet")),
            get_int(obj, "subVersion", 0),
            get_str(obj, "expressionType", EXPRESSION_TYPE_TAG),
            get_bool(obj, "classFilterMode"),
        )


def read_consume_settings(
    obj: Mapping[str, Any],
) -> tuple[ConsumeType, MessageModel, ConsumeFromWhere]:
    """``consumeType``, ``messageModel`` and ``consumeFromWhere`` of a consumer's JSON object
    (names or ordinals), each defaulting as RocketMQ does when absent: CONSUME_PASSIVELY,
    CLUSTERING, CONSUME_FROM_LAST_OFFSET. Raises :class:`BodyError` on an unknown value."""
    return (
        get_enum(obj, "consumeType", ConsumeType, ConsumeType.CONSUME_PASSIVELY),
        get_enum(obj, "messageModel", MessageModel, MessageModel.CLUSTERING),
        get_enum(
            obj,
            "consumeFromWhere",
            ConsumeFromWhere,
            ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        ),
    )


@dataclass(frozen=True, slots=True)
class ConsumerData:
    """One consumer group as a client reports it."""

    group_name: str
    consume_type: ConsumeType = ConsumeType.CONSUME_PASSIVELY
    message_model: MessageModel = MessageModel.CLUSTERING
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    subscription_data_set: tuple[SubscriptionData, ...] = ()
    unit_mode: bool = False

    def to_object(self) -> dict[str, Any]:
        """The Java JSON object (enums by name)."""
        return {
            "consumeFromWhere": self.consume_from_where.name,
            "consumeType": self.consume_type.name,
            "groupName": self.group_name,
            "messageModel": self.message_model.name,
            "subscriptionDataSet": [item.to_object() for item in self.subscription_data_set],
            "unitMode": self.unit_mode,
        }

    @classmethod
    def from_object(cls, value: Any) -> Self:
        """From a Java (names) or C++ (ordinals) JSON object; raises :class:`BodyError`."""
        obj: Mapping[str, Any] = as_object(value, "consumer data")
        return cls(
            get_str(obj, "groupName"),
            *read_consume_settings(obj),
            tuple(
                SubscriptionData.from_object(item) for item in get_list(obj, "subscriptionDataSet")
            ),
            get_bool(obj, "unitMode"),
        )


@dataclass(frozen=True, slots=True)
class ProducerData:
    """One producer group as a client reports it."""

    group_name: str

    def to_object(self) -> dict[str, Any]:
        """The Java JSON object."""
        return {"groupName": self.group_name}

    @classmethod
    def from_object(cls, value: Any) -> Self:
        """From the JSON object; raises :class:`BodyError`."""
        return cls(get_str(as_object(value, "producer data"), "groupName"))


@dataclass(frozen=True, slots=True)
class HeartbeatData:
    """HEART_BEAT body: the client id (wire ``clientID``) and its groups."""

    client_id: str
    producer_data_set: tuple[ProducerData, ...] = ()
    consumer_data_set: tuple[ConsumerData, ...] = ()

    def to_json(self) -> bytes:
        """The Java JSON body."""
        return dumps(
            {
                "clientID": self.client_id,
                "consumerDataSet": [item.to_object() for item in self.consumer_data_set],
                "producerDataSet": [item.to_object() for item in self.producer_data_set],
            }
        )

    @classmethod
    def from_json(cls, data: bytes | bytearray | memoryview | str) -> Self:
        """Parse a Java or C++ heartbeat body; raises :class:`BodyError`."""
        obj = parse_object(data, "heartbeat data")
        return cls(
            get_str(obj, "clientID"),
            tuple(ProducerData.from_object(item) for item in get_list(obj, "producerDataSet")),
            tuple(ConsumerData.from_object(item) for item in get_list(obj, "consumerDataSet")),
        )
