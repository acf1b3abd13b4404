"""Broker statistics bodies: BrokerStatsData (315), QueryConsumeTimeSpanBody (303),
QueryConsumeQueueResponseBody (321) and ConsumeMessageDirectlyResult (309).

::

    315  {"statsMinute":{"sum":12,"tps":0.2,"avgpt":1.0},"statsHour":{...},"statsDay":{...}}
    303  {"consumeTimeSpanSet":[{"messageQueue":{"topic":..,"brokerName":..,"queueId":0},
          "minTimeStamp":..,"maxTimeStamp":..,"consumeTimeStamp":..,"delayTime":..}]}
    321  {"queueData":[{"physicOffset":..,"physicSize":..,"tagsCode":..}],
          "maxQueueIndex":..,"minQueueIndex":..,"subscriptionData":{...}?}
    309  {"order":false,"autoCommit":true,"consumeResult":"CR_SUCCESS","remark":..,
          "spentTimeMills":..}
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Self

import orjson

from bolide.protocol.bodies.admin import ConsumeStats, OffsetWrapper
from bolide.protocol.bodies.fastjson import BodyError, dumps
from bolide.protocol.bodies.queue import MessageQueue
from bolide.protocol.bodies.values import (
    as_object,
    get_bool,
    get_float,
    get_int,
    get_list,
    get_object,
    get_optional_str,
    parse_object,
)

__all__ = [
    "BrokerStatsData",
    "BrokerStatsItem",
    "CMResult",
    "ConsumeMessageDirectlyResult",
    "ConsumeQueueData",
    "ConsumeStatsList",
    "QueryConsumeQueueResponseBody",
    "QueryConsumeTimeSpanBody",
    "QueueTimeSpan",
]

LIST_FORM_FIELD = "listForm"
"""Request header field asking GET_BROKER_CONSUME_STATS for :meth:`ConsumeStatsList.
to_list_form_json` (Bolide's; other brokers ignore it and answer the Java form, which
:meth:`ConsumeStatsList.from_json` reads as well)."""

Data = bytes | bytearray | memoryview | str


@dataclass(frozen=True, slots=True)
class BrokerStatsItem:
    """One window: the sum added, per second, and per addition."""

    sum: int = 0
    tps: float = 0.0
    avgpt: float = 0.0

    def to_object(self) -> dict[str, Any]:
        return {"avgpt": self.avgpt, "sum": self.sum, "tps": self.tps}

    @classmethod
    def from_object(cls, value: Any) -> Self:
        obj = as_object(value, "broker stats item")
        return cls(get_int(obj, "sum", 0), get_float(obj, "tps"), get_float(obj, "avgpt"))


@dataclass(frozen=True, slots=True)
class BrokerStatsData:
    """VIEW_BROKER_STATS_DATA's body."""

    stats_minute: BrokerStatsItem = field(default_factory=BrokerStatsItem)
    stats_hour: BrokerStatsItem = field(default_factory=BrokerStatsItem)
    stats_day: BrokerStatsItem = field(default_factory=BrokerStatsItem)

    def to_json(self) -> bytes:
        return dumps(
            {
                "statsDay": self.stats_day.to_object(),
                "statsHour": self.stats_hour.to_object(),
                "statsMinute": self.stats_minute.to_object(),
            }
        )

    @classmethod
    def from_json(cls, data: Data) -> Self:
        """Parse; raises :class:`BodyError`."""
        obj = parse_object(data, "broker stats data")
        return cls(
            BrokerStatsItem.from_object(obj.get("statsMinute", {})),
            BrokerStatsItem.from_object(obj.get("statsHour", {})),
            BrokerStatsItem.from_object(obj.get("statsDay", {})),
        )


@dataclass(frozen=True, slots=True)
class QueueTimeSpan:
    """Store times (ms) of a queue's oldest and newest message and of the group's next one;
    ``delay_time_ms`` = newest - next (0 when caught up)."""

    message_queue: MessageQueue
    min_timestamp_ms: int
    max_timestamp_ms: int
    consume_timestamp_ms: int
    delay_time_ms: int

    def to_object(self) -> dict[str, Any]:
        return {
            "consumeTimeStamp": self.consume_timestamp_ms,
            "delayTime": self.delay_time_ms,
            "maxTimeStamp": self.max_timestamp_ms,
            "messageQueue": self.message_queue.to_object(),
            "minTimeStamp": self.min_timestamp_ms,
        }

    @classmethod
    def from_object(cls, value: Any) -> Self:
        obj = as_object(value, "queue time span")
        return cls(
            MessageQueue.from_object(get_object(obj, "messageQueue")),
            get_int(obj, "minTimeStamp", 0),
            get_int(obj, "maxTimeStamp", 0),
            get_int(obj, "consumeTimeStamp", 0),
            get_int(obj, "delayTime", 0),
        )


@dataclass(frozen=True, slots=True)
class QueryConsumeTimeSpanBody:
    spans: tuple[QueueTimeSpan, ...] = ()

    def to_json(self) -> bytes:
        return dumps({"consumeTimeSpanSet": [span.to_object() for span in self.spans]})

    @classmethod
    def from_json(cls, data: Data) -> Self:
        obj = parse_object(data, "consume time span body")
        return cls(tuple(QueueTimeSpan.from_object(v) for v in get_list(obj, "consumeTimeSpanSet")))


@dataclass(frozen=True, slots=True)
class ConsumeQueueData:
    """One consume-queue entry: where its record is in the commit log and its tags hash."""

    physic_offset: int
    physic_size: int
    tags_code: int

    def to_object(self) -> dict[str, Any]:
        return {
            "bitMap": None,
            "eval": False,
            "extendDataJson": None,
            "msg": None,
            "physicOffset": self.physic_offset,
            "physicSize": self.physic_size,
            "tagsCode": self.tags_code,
        }

    @classmethod
    def from_object(cls, value: Any) -> Self:
        obj = as_object(value, "consume queue data")
        return cls(
            get_int(obj, "physicOffset", 0),
            get_int(obj, "physicSize", 0),
            get_int(obj, "tagsCode", 0),
        )


@dataclass(frozen=True, slots=True)
class QueryConsumeQueueResponseBody:
    queue_data: tuple[ConsumeQueueData, ...]
    min_queue_index: int
    max_queue_index: int
    subscription_data: dict[str, Any] | None = None

    def to_json(self) -> bytes:
        obj: dict[str, Any] = {
            "maxQueueIndex": self.max_queue_index,
            "minQueueIndex": self.min_queue_index,
            "queueData": [entry.to_object() for entry in self.queue_data],
        }
        if self.subscription_data is not None:
            obj["subscriptionData"] = self.subscription_data
        return dumps(obj)

    @classmethod
    def from_json(cls, data: Data) -> Self:
        obj = parse_object(data, "query consume queue body")
        subscription = obj.get("subscriptionData")
        return cls(
            tuple(ConsumeQueueData.from_object(v) for v in get_list(obj, "queueData")),
            get_int(obj, "minQueueIndex", 0),
            get_int(obj, "maxQueueIndex", 0),
            as_object(subscription, "subscription data") if subscription is not None else None,
        )


class CMResult(enum.Enum):
    """How a listener handled a message consumed directly (Java's CMResult)."""

    CR_SUCCESS = "CR_SUCCESS"
    CR_LATER = "CR_LATER"
    CR_ROLLBACK = "CR_ROLLBACK"
    CR_COMMIT = "CR_COMMIT"
    CR_THROW_EXCEPTION = "CR_THROW_EXCEPTION"
    CR_RETURN_NULL = "CR_RETURN_NULL"


@dataclass(frozen=True, slots=True)
class ConsumeMessageDirectlyResult:
    """CONSUME_MESSAGE_DIRECTLY's answer from the client."""

    consume_result: CMResult
    order: bool = False
    auto_commit: bool = True
    remark: str | None = None
    spent_time_ms: int = 0

    def to_json(self) -> bytes:
        return dumps(
            {
                "autoCommit": self.auto_commit,
                "consumeResult": self.consume_result.value,
                "order": self.order,
                "remark": self.remark,
                "spentTimeMills": self.spent_time_ms,
            }
        )

    @classmethod
    def from_json(cls, data: Data) -> Self:
        obj = parse_object(data, "consume message directly result")
        return cls(
            _cm_result(obj.get("consumeResult")),
            get_bool(obj, "order"),
            get_bool(obj, "autoCommit", True),
            get_optional_str(obj, "remark"),
            get_int(obj, "spentTimeMills", 0),
        )


def _cm_result(value: Any) -> CMResult:
    if value is None:
        return CMResult.CR_RETURN_NULL
    try:
        return CMResult(str(value))
    except ValueError as error:
        raise BodyError(f"'consumeResult' is not a CMResult: {value!r}") from error


@dataclass(frozen=True, slots=True)
class ConsumeStatsList:
    """GET_BROKER_CONSUME_STATS (317): every group's consume stats on one broker.
    ``online_client_counts`` is Bolide's addition (other readers ignore it)."""

    broker_address: str
    entries: tuple[tuple[str, ConsumeStats], ...]
    online_client_counts: dict[str, int] = field(default_factory=dict)

    @property
    def total_diff(self) -> int:
        return sum(
            max(0, item.broker_offset - item.consumer_offset)
            for _, stats in self.entries
            for item in stats.offset_table.values()
        )

    def to_json(self) -> bytes:
        listed = [{group: [_stats_object(stats)]} for group, stats in self.entries]
        return dumps(
            {
                "brokerAddr": self.broker_address,
                "consumeStatsList": listed,
                "onlineClientCounts": self.online_client_counts,
                "totalDiff": self.total_diff,
            }
        )

    def to_list_form_json(self) -> bytes:
        """Standard JSON: ``groups`` = [{"group", "consumeTps", "queues": [[topic,
        brokerName, queueId, brokerOffset, consumerOffset, lastTimestamp], ...]}]."""
        groups = [
            {
                "consumeTps": stats.consume_tps,
                "group": group,
                "queues": [
                    [
                        queue.topic,
                        queue.broker_name,
                        queue.queue_id,
                        item.broker_offset,
                        item.consumer_offset,
                        item.last_timestamp_ms,
                    ]
                    for queue, item in stats.offset_table.items()
                ],
            }
            for group, stats in self.entries
        ]
        return orjson.dumps(
            {
                "brokerAddr": self.broker_address,
                "groups": groups,
                "onlineClientCounts": self.online_client_counts,
                "totalDiff": self.total_diff,
            }
        )

    @classmethod
    def from_json(cls, data: Data) -> Self:
        """Either form (the Java form or :meth:`to_list_form_json`'s)."""
        try:
            plain = orjson.loads(bytes(data) if not isinstance(data, str) else data)
        except orjson.JSONDecodeError:
            plain = None  # fastjson object keys: the Java form
        if isinstance(plain, dict) and "groups" in plain:
            return cls._from_list_form(plain)
        obj = parse_object(data, "consume stats list")
        entries: list[tuple[str, ConsumeStats]] = []
        for item in get_list(obj, "consumeStatsList"):
            for group, stats_list in as_object(item, "consume stats entry").items():
                for stats in stats_list:
                    entries.append((str(group), _stats_from_object(stats)))
        return cls._with_counts(obj, entries)

    @classmethod
    def _from_list_form(cls, obj: dict[str, Any]) -> Self:
        try:
            entries = [_list_form_stats(value) for value in get_list(obj, "groups")]
        except (TypeError, ValueError) as error:
            raise BodyError(f"bad consume stats list: {error}") from error
        return cls._with_counts(obj, entries)

    @classmethod
    def _with_counts(cls, obj: dict[str, Any], entries: list[tuple[str, ConsumeStats]]) -> Self:
        counts = obj.get("onlineClientCounts") or {}
        return cls(
            str(obj.get("brokerAddr", "")),
            tuple(entries),
            {str(k): int(v) for k, v in as_object(counts, "online client counts").items()},
        )


def _list_form_stats(value: Any) -> tuple[str, ConsumeStats]:
    obj = as_object(value, "consume stats")
    table = {
        MessageQueue(str(topic), str(broker), int(queue_id)): OffsetWrapper(
            int(broker_offset), int(consumer_offset), int(last_ms)
        )
        for topic, broker, queue_id, broker_offset, consumer_offset, last_ms in get_list(
            obj, "queues"
        )
    }
    return str(obj.get("group", "")), ConsumeStats(table, get_float(obj, "consumeTps"))


def _stats_object(stats: ConsumeStats) -> dict[str, Any]:
    ordered = sorted(stats.offset_table.items(), key=lambda item: item[0])
    return {
        "consumeTps": stats.consume_tps,
        "offsetTable": {queue.to_key(): item.to_object() for queue, item in ordered},
    }


def _stats_from_object(value: Any) -> ConsumeStats:
    obj = as_object(value, "consume stats")
    table = get_object(obj, "offsetTable")
    return ConsumeStats(
        {MessageQueue.from_key(k): OffsetWrapper.from_object(v) for k, v in table.items()},
        get_float(obj, "consumeTps"),
    )
