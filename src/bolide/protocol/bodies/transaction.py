"""The pending half messages of one broker: Bolide's QUERY_HALF_MESSAGES (code
:data:`~bolide.protocol.codes.RequestCode.BOLIDE_QUERY_HALF_MESSAGES`) request header and body.

RocketMQ has no request that lists undecided transactions; Bolide's admin API and
``bolide transaction list`` need one. Request extFields (all optional)::

    producerGroup  only this producer group       topic     only this real topic
    maxCount       at most this many entries (default and cap: HALF_MESSAGE_LIST_MAX_COUNT)
    givenUp        "true": the newest half messages given up to TRANS_CHECK_MAX_TIME_TOPIC
                   instead (``pendingCount`` then counts that topic's messages)

RESUME_CHECK_HALF_MESSAGE (323, RocketMQ's ``mqadmin resumeCheckHalfMessage``) takes
``msgId``, the offset message id of a given-up message, and puts it back among the pending
half messages with its check count reset.

Response body (JSON, Java-style field names)::

    {"brokerName": "broker-a", "pendingCount": 2, "halfCount": 10, "commitCount": 7,
     "rollbackCount": 1, "discardCount": 0, "checkIntervalMs": 60000, "timeoutMs": 6000,
     "checkMax": 15,
     "halfMessages": [{"topic": "orders", "queueId": 3, "producerGroup": "pg", "msgId": "...",
                       "halfQueueOffset": 12, "originQueueOffset": 4, "commitLogOffset": 8812,
                       "checkTimes": 2, "firstStoreTimestamp": 1700000000000,
                       "bornTimestamp": 1700000000000, "ageMs": 7100, "tags": "paid",
                       "keys": "order-17", "bodyLength": 17,
                       "offsetMsgId": "7F00000100002A9F0000000000002272"}, ...]}

``pendingCount`` counts every undecided transaction; ``halfMessages`` holds the oldest
``maxCount`` of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Self

import orjson

from bolide.protocol.bodies.values import (
    as_object,
    get_int,
    get_list,
    get_optional_str,
    get_str,
    parse_object,
)
from bolide.protocol.headers.fields import (
    format_bool,
    optional_int,
    optional_str,
    parse_bool,
    put_optional,
    required_str,
)

__all__ = [
    "HALF_MESSAGE_LIST_MAX_COUNT",
    "HalfMessageInfo",
    "HalfMessageList",
    "QueryHalfMessagesRequestHeader",
    "ResumeCheckHalfMessageRequestHeader",
]

HALF_MESSAGE_LIST_MAX_COUNT = 1_000
"""Entries one answer lists at most (the oldest first); pendingCount still counts them all."""


@dataclass(frozen=True, slots=True)
class QueryHalfMessagesRequestHeader:
    """Filters of QUERY_HALF_MESSAGES; None means "any"."""

    producer_group: str | None = None
    topic: str | None = None
    max_count: int | None = None
    given_up: bool = False

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> Self:
        """Decode; raises :class:`~bolide.protocol.headers.fields.HeaderError`."""
        return cls(
            optional_str(fields, "producerGroup"),
            optional_str(fields, "topic"),
            optional_int(fields, "maxCount"),
            parse_bool(fields, "givenUp"),
        )

    def to_ext_fields(self) -> dict[str, str]:
        fields: dict[str, str] = {}
        put_optional(fields, "producerGroup", self.producer_group)
        put_optional(fields, "topic", self.topic)
        put_optional(fields, "maxCount", self.max_count)
        if self.given_up:
            fields["givenUp"] = format_bool(True)
        return fields


@dataclass(frozen=True, slots=True)
class ResumeCheckHalfMessageRequestHeader:
    """RESUME_CHECK_HALF_MESSAGE (323): ``msg_id`` is an offset message id."""

    msg_id: str

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> Self:
        """Decode; raises :class:`~bolide.protocol.headers.fields.HeaderError`."""
        return cls(required_str(fields, "msgId"))

    def to_ext_fields(self) -> dict[str, str]:
        return {"msgId": self.msg_id}


@dataclass(frozen=True, slots=True)
class HalfMessageInfo:
    """One undecided transaction: its latest half record and how often it was checked.

    ``half_queue_offset`` / ``commit_log_offset`` name the latest copy in
    RMQ_SYS_TRANS_HALF_TOPIC (what a check names); ``origin_queue_offset`` the first one.
    Times are epoch ms; ``age_ms`` counts from the first store on the broker's clock.
    """

    topic: str
    queue_id: int
    producer_group: str
    msg_id: str
    half_queue_offset: int
    origin_queue_offset: int
    commit_log_offset: int
    check_times: int
    first_store_timestamp_ms: int
    born_timestamp_ms: int
    age_ms: int
    tags: str | None = None
    keys: str | None = None
    body_length: int = 0
    offset_msg_id: str = ""
    """The broker's id of the record (what RESUME_CHECK_HALF_MESSAGE takes)."""

    def to_object(self) -> dict[str, Any]:
        obj: dict[str, Any] = {
            "topic": self.topic,
            "queueId": self.queue_id,
            "producerGroup": self.producer_group,
            "msgId": self.msg_id,
            "halfQueueOffset": self.half_queue_offset,
            "originQueueOffset": self.origin_queue_offset,
            "commitLogOffset": self.commit_log_offset,
            "checkTimes": self.check_times,
            "firstStoreTimestamp": self.first_store_timestamp_ms,
            "bornTimestamp": self.born_timestamp_ms,
            "ageMs": self.age_ms,
            "bodyLength": self.body_length,
            "offsetMsgId": self.offset_msg_id,
        }
        if self.tags is not None:
            obj["tags"] = self.tags
        if self.keys is not None:
            obj["keys"] = self.keys
        return obj

    @classmethod
    def from_object(cls, value: Any) -> Self:
        """From the JSON object; raises :class:`BodyError`."""
        obj = as_object(value, "half message")
        return cls(
            topic=get_str(obj, "topic"),
            queue_id=get_int(obj, "queueId"),
            producer_group=get_str(obj, "producerGroup"),
            msg_id=get_str(obj, "msgId", ""),
            half_queue_offset=get_int(obj, "halfQueueOffset"),
            origin_queue_offset=get_int(obj, "originQueueOffset"),
            commit_log_offset=get_int(obj, "commitLogOffset"),
            check_times=get_int(obj, "checkTimes", 0),
            first_store_timestamp_ms=get_int(obj, "firstStoreTimestamp", 0),
            born_timestamp_ms=get_int(obj, "bornTimestamp", 0),
            age_ms=get_int(obj, "ageMs", 0),
            tags=get_optional_str(obj, "tags"),
            keys=get_optional_str(obj, "keys"),
            body_length=get_int(obj, "bodyLength", 0),
            offset_msg_id=get_str(obj, "offsetMsgId", ""),
        )


@dataclass(frozen=True, slots=True)
class HalfMessageList:
    """The answer of QUERY_HALF_MESSAGES: the oldest pending transactions and the broker's
    transaction counters since it started (``half_count`` half messages stored, then
    committed, rolled back, and given up after ``check_max`` checks)."""

    broker_name: str
    pending_count: int
    half_messages: tuple[HalfMessageInfo, ...]
    half_count: int = 0
    commit_count: int = 0
    rollback_count: int = 0
    discard_count: int = 0
    check_interval_ms: int = 0
    timeout_ms: int = 0
    check_max: int = 0

    def to_json(self) -> bytes:
        return orjson.dumps(
            {
                "brokerName": self.broker_name,
                "pendingCount": self.pending_count,
                "halfCount": self.half_count,
                "commitCount": self.commit_count,
                "rollbackCount": self.rollback_count,
                "discardCount": self.discard_count,
                "checkIntervalMs": self.check_interval_ms,
                "timeoutMs": self.timeout_ms,
                "checkMax": self.check_max,
                "halfMessages": [info.to_object() for info in self.half_messages],
            }
        )

    @classmethod
    def from_json(cls, data: bytes | bytearray | memoryview | str) -> Self:
        """Parse; raises :class:`BodyError`."""
        obj = parse_object(data, "half message list")
        return cls(
            broker_name=get_str(obj, "brokerName", ""),
            pending_count=get_int(obj, "pendingCount", 0),
            half_messages=tuple(
                HalfMessageInfo.from_object(item) for item in get_list(obj, "halfMessages")
            ),
            half_count=get_int(obj, "halfCount", 0),
            commit_count=get_int(obj, "commitCount", 0),
            rollback_count=get_int(obj, "rollbackCount", 0),
            discard_count=get_int(obj, "discardCount", 0),
            check_interval_ms=get_int(obj, "checkIntervalMs", 0),
            timeout_ms=get_int(obj, "timeoutMs", 0),
            check_max=get_int(obj, "checkMax", 0),
        )
