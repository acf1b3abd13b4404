"""Admin headers on the broker (docs/protocol.md §2.11): create / delete topic (17, 215), topic
stats
(202), consume stats (208), producer connections (204), delete subscription group (207), who
consumes a topic (300), clone group offset (314), correction offsets (308). The consumer
connection list (203) header is :class:`~bolide.protocol.headers.client.ConsumerGroupRequestHeader`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Self

from bolide.protocol.headers.fields import (
    format_bool,
    optional_int,
    optional_str,
    parse_bool,
    put_optional,
    required_int,
    required_str,
)

__all__ = [
    "CloneGroupOffsetRequestHeader",
    "CreateTopicRequestHeader",
    "DeleteSubscriptionGroupRequestHeader",
    "DeleteTopicRequestHeader",
    "GetConsumeStatsRequestHeader",
    "GetProducerConnectionListRequestHeader",
    "GetTopicStatsInfoRequestHeader",
    "QueryCorrectionOffsetHeader",
    "QueryTopicConsumeByWhoRequestHeader",
    "TopicRequestHeader",
]


@dataclass(frozen=True, slots=True)
class CreateTopicRequestHeader:
    """UPDATE_AND_CREATE_TOPIC (17). ``perm`` uses the PermName bits (READ 4, WRITE 2,
    INHERIT 1); ``topic_filter_type`` is ``SINGLE_TAG`` or ``MULTI_TAG``."""

    topic: str
    default_topic: str
    read_queue_count: int
    write_queue_count: int
    perm: int
    topic_filter_type: str = "SINGLE_TAG"
    order: bool = False
    topic_sys_flag: int | None = None
    attributes: str | None = None
    """5.x topic attributes, ``+message.type=FIFO`` form."""

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> Self:
        """Decode; raises :class:`HeaderError`. ``topicFilterType`` and ``order`` are required
        by Java but default here (``SINGLE_TAG``, false) when a tool leaves them out."""
        return cls(
            required_str(fields, "topic"),
            required_str(fields, "defaultTopic"),
            required_int(fields, "readQueueNums"),
            required_int(fields, "writeQueueNums"),
            required_int(fields, "perm"),
            optional_str(fields, "topicFilterType") or "SINGLE_TAG",
            parse_bool(fields, "order"),
            optional_int(fields, "topicSysFlag"),
            optional_str(fields, "attributes"),
        )

    def to_ext_fields(self) -> dict[str, str]:
        fields = {
            "topic": self.topic,
            "defaultTopic": self.default_topic,
            "readQueueNums": str(self.read_queue_count),
            "writeQueueNums": str(self.write_queue_count),
            "perm": str(self.perm),
            "topicFilterType": self.topic_filter_type,
            "order": format_bool(self.order),
        }
        put_optional(fields, "topicSysFlag", self.topic_sys_flag)
        put_optional(fields, "attributes", self.attributes)
        return fields


@dataclass(frozen=True, slots=True)
class TopicRequestHeader:
    """``topic`` alone: DELETE_TOPIC_IN_BROKER (215), GET_TOPIC_STATS_INFO (202) and
    QUERY_TOPIC_CONSUME_BY_WHO (300) use identical Java classes."""

    topic: str

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> Self:
        """Decode; raises :class:`HeaderError`."""
        return cls(required_str(fields, "topic"))

    def to_ext_fields(self) -> dict[str, str]:
        return {"topic": self.topic}


DeleteTopicRequestHeader = TopicRequestHeader
GetTopicStatsInfoRequestHeader = TopicRequestHeader
QueryTopicConsumeByWhoRequestHeader = TopicRequestHeader


@dataclass(frozen=True, slots=True)
class GetConsumeStatsRequestHeader:
    """GET_CONSUME_STATS (208); without ``topic``, every topic the group has offsets for."""

    consumer_group: str
    topic: str | None = None

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> Self:
        """Decode; raises :class:`HeaderError`."""
        return cls(required_str(fields, "consumerGroup"), optional_str(fields, "topic"))

    def to_ext_fields(self) -> dict[str, str]:
        fields = {"consumerGroup": self.consumer_group}
        put_optional(fields, "topic", self.topic)
        return fields


@dataclass(frozen=True, slots=True)
class GetProducerConnectionListRequestHeader:
    """GET_PRODUCER_CONNECTION_LIST (204)."""

    producer_group: str

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> Self:
        """Decode; raises :class:`HeaderError`."""
        return cls(required_str(fields, "producerGroup"))

    def to_ext_fields(self) -> dict[str, str]:
        return {"producerGroup": self.producer_group}


@dataclass(frozen=True, slots=True)
class DeleteSubscriptionGroupRequestHeader:
    """DELETE_SUBSCRIPTIONGROUP (207); ``remove_offset`` also drops the group's offsets."""

    group_name: str
    remove_offset: bool = False

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> Self:
        """Decode; raises :class:`HeaderError`."""
        return cls(required_str(fields, "groupName"), parse_bool(fields, "removeOffset"))

    def to_ext_fields(self) -> dict[str, str]:
        return {"groupName": self.group_name, "removeOffset": format_bool(self.remove_offset)}


@dataclass(frozen=True, slots=True)
class CloneGroupOffsetRequestHeader:
    """CLONE_GROUP_OFFSET (314): copy ``src_group``'s offsets (of ``topic``, or all) to
    ``dest_group``; ``offline`` says the source group is offline."""

    src_group: str
    dest_group: str
    topic: str | None = None
    offline: bool = False

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> Self:
        """Decode; raises :class:`HeaderError`."""
        return cls(
            required_str(fields, "srcGroup"),
            required_str(fields, "destGroup"),
            optional_str(fields, "topic"),
            parse_bool(fields, "offline"),
        )

    def to_ext_fields(self) -> dict[str, str]:
        fields = {
            "srcGroup": self.src_group,
            "destGroup": self.dest_group,
            "offline": format_bool(self.offline),
        }
        put_optional(fields, "topic", self.topic)
        return fields


@dataclass(frozen=True, slots=True)
class QueryCorrectionOffsetHeader:
    """QUERY_CORRECTION_OFFSET (308): the lowest committed offset per queue of ``topic`` over
    its groups but ``filter_groups`` (comma-separated), compared with ``compare_group``'s."""

    topic: str
    compare_group: str
    filter_groups: str | None = None

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> Self:
        """Decode; raises :class:`HeaderError`."""
        return cls(
            required_str(fields, "topic"),
            required_str(fields, "compareGroup"),
            optional_str(fields, "filterGroups"),
        )

    def to_ext_fields(self) -> dict[str, str]:
        fields = {"topic": self.topic, "compareGroup": self.compare_group}
        put_optional(fields, "filterGroups", self.filter_groups)
        return fields
