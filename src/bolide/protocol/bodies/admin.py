"""Admin response bodies: consume stats (208), topic stats (202), consumer connections (203),
producer connections (204).

::

    ConsumeStats        {"consumeTps":0.0,"offsetTable":{{"brokerName":"b","queueId":0,
                         "topic":"T"}:{"brokerOffset":100,"consumerOffset":90,
                         "lastTimestamp":1700000000000},…}}
    TopicStatsTable     {"offsetTable":{{MessageQueue}:{"lastUpdateTimestamp":…,
                         "maxOffset":…,"minOffset":…},…}}
    ConsumerConnection  {"connectionSet":[{"clientAddr":"10.0.0.5:53211","clientId":"…",
                         "language":"JAVA","version":401}],"consumeFromWhere":"…",
                         "consumeType":"…","messageModel":"…","subscriptionTable":{"T":{…}}}
    ProducerConnection  {"connectionSet":[{Connection},…]}

The MessageQueue-keyed tables use fastjson object keys, because the Java admin tools parse
them with fastjson into ``Map<MessageQueue, …>``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Self

from bolide.protocol.bodies.fastjson import dumps
from bolide.protocol.bodies.heartbeat import (
    ConsumeFromWhere,
    ConsumeType,
    MessageModel,
    SubscriptionData,
    read_consume_settings,
)
from bolide.protocol.bodies.queue import MessageQueue
from bolide.protocol.bodies.values import (
    as_object,
    get_enum_or,
    get_float,
    get_int,
    get_list,
    get_object,
    get_str,
    parse_object,
)
from bolide.protocol.codes import LanguageCode

__all__ = [
    "Connection",
    "ConsumeStats",
    "ConsumerConnection",
    "OffsetWrapper",
    "ProducerConnection",
    "TopicOffset",
    "TopicStatsTable",
]

Data = bytes | bytearray | memoryview | str


@dataclass(frozen=True, slots=True)
class OffsetWrapper:
    """One queue of a consume-stats table: broker max offset, committed offset, and the store
    time (ms) of the last consumed message."""

    broker_offset: int
    consumer_offset: int
    last_timestamp_ms: int = 0

    def to_object(self) -> dict[str, Any]:
        """The JSON object."""
        return {
            "brokerOffset": self.broker_offset,
            "consumerOffset": self.consumer_offset,
            "lastTimestamp": self.last_timestamp_ms,
        }

    @classmethod
    def from_object(cls, value: Any) -> Self:
        """From the JSON object; raises :class:`BodyError`."""
        obj = as_object(value, "offset wrapper")
        return cls(
            get_int(obj, "brokerOffset", 0),
            get_int(obj, "consumerOffset", 0),
            get_int(obj, "lastTimestamp", 0),
        )


@dataclass(frozen=True, slots=True)
class ConsumeStats:
    """GET_CONSUME_STATS body: per queue progress, and the group's consume rate (msgs/s)."""

    offset_table: dict[MessageQueue, OffsetWrapper] = field(default_factory=dict)
    consume_tps: float = 0.0

    def to_json(self) -> bytes:
        """The Java form (fastjson object keys)."""
        ordered = sorted(self.offset_table.items(), key=lambda item: item[0])
        table = {queue.to_key(): item.to_object() for queue, item in ordered}
        return dumps({"consumeTps": self.consume_tps, "offsetTable": table})

    @classmethod
    def from_json(cls, data: Data) -> Self:
        """Parse (object keys or their JSON text); raises :class:`BodyError`."""
        obj = parse_object(data, "consume stats")
        table = get_object(obj, "offsetTable")
        return cls(
            {MessageQueue.from_key(k): OffsetWrapper.from_object(v) for k, v in table.items()},
            get_float(obj, "consumeTps"),
        )


@dataclass(frozen=True, slots=True)
class TopicOffset:
    """One queue of a topic-stats table: offsets and the last store time (ms)."""

    min_offset: int
    max_offset: int
    last_update_timestamp_ms: int = 0

    def to_object(self) -> dict[str, Any]:
        """The JSON object."""
        return {
            "lastUpdateTimestamp": self.last_update_timestamp_ms,
            "maxOffset": self.max_offset,
            "minOffset": self.min_offset,
        }

    @classmethod
    def from_object(cls, value: Any) -> Self:
        """From the JSON object; raises :class:`BodyError`."""
        obj = as_object(value, "topic offset")
        return cls(
            get_int(obj, "minOffset", 0),
            get_int(obj, "maxOffset", 0),
            get_int(obj, "lastUpdateTimestamp", 0),
        )


@dataclass(frozen=True, slots=True)
class TopicStatsTable:
    """GET_TOPIC_STATS_INFO body."""

    offset_table: dict[MessageQueue, TopicOffset] = field(default_factory=dict)

    def to_json(self) -> bytes:
        """The Java form (fastjson object keys)."""
        ordered = sorted(self.offset_table.items(), key=lambda item: item[0])
        return dumps({"offsetTable": {queue.to_key(): item.to_object() for queue, item in ordered}})

    @classmethod
    def from_json(cls, data: Data) -> Self:
        """Parse (object keys or their JSON text); raises :class:`BodyError`."""
        table = get_object(parse_object(data, "topic stats"), "offsetTable")
        return cls({MessageQueue.from_key(k): TopicOffset.from_object(v) for k, v in table.items()})


@dataclass(frozen=True, slots=True)
class Connection:
    """One client connection as the broker saw it at heartbeat."""

    client_id: str
    client_addr: str
    language: LanguageCode
    version: int

    def to_object(self) -> dict[str, Any]:
        """The JSON object (language by name)."""
        return {
            "clientAddr": self.client_addr,
            "clientId": self.client_id,
            "language": self.language.name,
            "version": self.version,
        }

    @classmethod
    def from_object(cls, value: Any) -> Self:
        """From the JSON object; an unknown language reads as OTHER. Raises :class:`BodyError`."""
        obj = as_object(value, "connection")
        language = get_enum_or(obj, "language", LanguageCode, LanguageCode.OTHER)
        return cls(
            get_str(obj, "clientId"),
            get_str(obj, "clientAddr", ""),
            language,
            get_int(obj, "version", 0),
        )


def _connections(obj: dict[Any, Any]) -> tuple[Connection, ...]:
    return tuple(Connection.from_object(item) for item in get_list(obj, "connectionSet"))


@dataclass(frozen=True, slots=True)
class ConsumerConnection:
    """GET_CONSUMER_CONNECTION_LIST body: the group's connections and registration."""

    connection_set: tuple[Connection, ...] = ()
    subscription_table: dict[str, SubscriptionData] = field(default_factory=dict)
    consume_type: ConsumeType = ConsumeType.CONSUME_PASSIVELY
    message_model: MessageModel = MessageModel.CLUSTERING
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET

    def to_json(self) -> bytes:
        """The Java JSON body (enums by name)."""
        return dumps(
            {
                "connectionSet": [item.to_object() for item in self.connection_set],
                "consumeFromWhere": self.consume_from_where.name,
                "consumeType": self.consume_type.name,
                "messageModel": self.message_model.name,
                "subscriptionTable": {
                    topic: item.to_object() for topic, item in self.subscription_table.items()
                },
            }
        )

    @classmethod
    def from_json(cls, data: Data) -> Self:
        """Parse; raises :class:`BodyError`."""
        obj = parse_object(data, "consumer connection")
        table = get_object(obj, "subscriptionTable")
        return cls(
            _connections(obj),
            {str(topic): SubscriptionData.from_object(item) for topic, item in table.items()},
            *read_consume_settings(obj),
        )


@dataclass(frozen=True, slots=True)
class ProducerConnection:
    """GET_PRODUCER_CONNECTION_LIST body."""

    connection_set: tuple[Connection, ...] = ()

    def to_json(self) -> bytes:
        """The JSON body."""
        return dumps({"connectionSet": [item.to_object() for item in self.connection_set]})

    @classmethod
    def from_json(cls, data: Data) -> Self:
        """Parse; raises :class:`BodyError`."""
        return cls(_connections(parse_object(data, "producer connection")))
