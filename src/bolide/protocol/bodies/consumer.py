"""Consumer-side bodies: consumer list (38), queue locks (41, 42), reset offset (220, 222) and
consumer running info (307).

::

    consumer list   {"consumerIdList":["cid1","cid2"]}
    lock request    {"clientId":"cid","consumerGroup":"G","mqSet":[{MessageQueue},…]}
    lock response   {"lockOKMQSet":[{MessageQueue},…]}
    reset (Java)    {"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:123,…}}
    reset (C++)     {"offsetTable":[{"brokerName":"b","offset":123,"queueId":0,"topic":"T"},…]}
    running info    {"jstack":…,"mqTable":{{MessageQueue}:{ProcessQueueInfo},…},
                     "properties":{…},"statusTable":{"T":{ConsumeStatus},…},
                     "subscriptionSet":[{SubscriptionData},…]}

The Java reset form uses fastjson object keys (not JSON); a C++ consumer can only read the list
form, so a broker picks the form from the consumer connection's language.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Self

from bolide.protocol.bodies.fastjson import ObjectKey, dumps
from bolide.protocol.bodies.heartbeat import SubscriptionData
from bolide.protocol.bodies.queue import MessageQueue
from bolide.protocol.bodies.values import (
    as_object,
    get_int,
    get_list,
    get_object,
    get_optional_str,
    get_str,
    get_str_list,
    parse_object,
    to_int,
    to_text,
)

__all__ = [
    "ConsumerRunningInfo",
    "GetConsumerListByGroupResponseBody",
    "LockBatchRequestBody",
    "LockBatchResponseBody",
    "ResetOffsetBody",
    "ResetOffsetBodyForC",
    "UnlockBatchRequestBody",
]

Data = bytes | bytearray | memoryview | str


@dataclass(frozen=True, slots=True)
class GetConsumerListByGroupResponseBody:
    """GET_CONSUMER_LIST_BY_GROUP success body: the group's client ids."""

    consumer_id_list: tuple[str, ...] = ()

    def to_json(self) -> bytes:
        """The JSON body."""
        return dumps({"consumerIdList": list(self.consumer_id_list)})

    @classmethod
    def from_json(cls, data: Data) -> Self:
        """Parse; raises :class:`BodyError`."""
        return cls(get_str_list(parse_object(data, "consumer list"), "consumerIdList"))


def _queues(obj: dict[Any, Any], key: str) -> frozenset[MessageQueue]:
    return frozenset(MessageQueue.from_object(item) for item in get_list(obj, key))


def _queue_list(queues: frozenset[MessageQueue]) -> list[dict[str, Any]]:
    return [queue.to_object() for queue in sorted(queues)]


@dataclass(frozen=True, slots=True)
class LockBatchRequestBody:
    """LOCK_BATCH_MQ request body: lock these queues of ``consumer_group`` for ``client_id``."""

    consumer_group: str
    client_id: str
    mq_set: frozenset[MessageQueue] = frozenset()

    def to_json(self) -> bytes:
        """The JSON body (queues sorted)."""
        return dumps(
            {
                "clientId": self.client_id,
                "consumerGroup": self.consumer_group,
                "mqSet": _queue_list(self.mq_set),
            }
        )

    @classmethod
    def from_json(cls, data: Data) -> Self:
        """Parse; raises :class:`BodyError`."""
        obj = parse_object(data, "lock batch request")
        return cls(get_str(obj, "consumerGroup"), get_str(obj, "clientId"), _queues(obj, "mqSet"))


UnlockBatchRequestBody = LockBatchRequestBody
"""UNLOCK_BATCH_MQ request body: the same fields (Java declares a twin class)."""


@dataclass(frozen=True, slots=True)
class LockBatchResponseBody:
    """LOCK_BATCH_MQ response body: the queues now held by the requesting client."""

    lock_ok_mq_set: frozenset[MessageQueue] = frozenset()

    def to_json(self) -> bytes:
        """The JSON body (queues sorted)."""
        return dumps({"lockOKMQSet": _queue_list(self.lock_ok_mq_set)})

    @classmethod
    def from_json(cls, data: Data) -> Self:
        """Parse; raises :class:`BodyError`."""
        return cls(_queues(parse_object(data, "lock batch response"), "lockOKMQSet"))


@dataclass(frozen=True, slots=True)
class ResetOffsetBody:
    """Reset-offset body: new offset per queue. Written in the Java object-key form."""

    offset_table: dict[MessageQueue, int] = field(default_factory=dict)

    def to_json(self) -> bytes:
        """The Java form (fastjson object keys; not standard JSON)."""
        table = {queue.to_key(): offset for queue, offset in sorted(self.offset_table.items())}
        return dumps({"offsetTable": table})

    @classmethod
    def from_json(cls, data: Data) -> Self:
        """Parse the Java form or the C++ list form; raises :class:`BodyError`."""
        obj = parse_object(data, "reset offset body")
        if isinstance(obj.get("offsetTable"), list):
            return cls(ResetOffsetBodyForC.from_object(obj).offset_table)
        return cls(
            {
                MessageQueue.from_key(key): to_int(offset, "offset")
                for key, offset in get_object(obj, "offsetTable").items()
            }
        )


@dataclass(frozen=True, slots=True)
class ResetOffsetBodyForC:
    """Reset-offset body in the list form the C++ client reads (Java ResetOffsetBodyForC)."""

    offset_table: dict[MessageQueue, int] = field(default_factory=dict)

    def to_json(self) -> bytes:
        """The list form (standard JSON)."""
        entries = [
            {**queue.to_object(), "offset": offset}
            for queue, offset in sorted(self.offset_table.items())
        ]
        return dumps({"offsetTable": entries})

    @classmethod
    def from_object(cls, obj: dict[Any, Any]) -> Self:
        """From the parsed object; raises :class:`BodyError`."""
        table: dict[MessageQueue, int] = {}
        for entry in get_list(obj, "offsetTable"):
            table[MessageQueue.from_object(entry)] = get_int(as_object(entry, "entry"), "offset")
        return cls(table)

    @classmethod
    def from_json(cls, data: Data) -> Self:
        """Parse; raises :class:`BodyError`."""
        return cls.from_object(parse_object(data, "reset offset body"))


@dataclass(frozen=True, slots=True)
class ConsumerRunningInfo:
    """GET_CONSUMER_RUNNING_INFO response body, kept generic: ``mq_table`` values
    (ProcessQueueInfo) and ``status_table`` values (ConsumeStatus) stay plain JSON objects."""

    properties: dict[str, str] = field(default_factory=dict)
    subscription_set: tuple[SubscriptionData, ...] = ()
    mq_table: dict[MessageQueue, dict[str, Any]] = field(default_factory=dict)
    status_table: dict[str, dict[str, Any]] = field(default_factory=dict)
    jstack: str | None = None

    def to_json(self) -> bytes:
        """The Java form (``mqTable`` with fastjson object keys)."""
        body: dict[str, Any] = {}
        if self.jstack is not None:
            body["jstack"] = self.jstack
        body["mqTable"] = {queue.to_key(): info for queue, info in sorted(self.mq_table.items())}
        body["properties"] = self.properties
        body["statusTable"] = self.status_table
        body["subscriptionSet"] = [item.to_object() for item in self.subscription_set]
        return dumps(body)

    @classmethod
    def from_json(cls, data: Data) -> Self:
        """Parse; raises :class:`BodyError`."""
        obj = parse_object(data, "consumer running info")
        properties = get_object(obj, "properties")
        mq_table = get_object(obj, "mqTable")
        status_table = get_object(obj, "statusTable")
        return cls(
            {str(key): to_text(value, str(key)) for key, value in properties.items()},
            tuple(SubscriptionData.from_object(item) for item in get_list(obj, "subscriptionSet")),
            {
                MessageQueue.from_key(key): _plain(as_object(info, "process queue info"))
                for key, info in mq_table.items()
            },
            {str(key): _plain(as_object(value, str(key))) for key, value in status_table.items()},
            get_optional_str(obj, "jstack"),
        )


def _plain(value: Any) -> Any:
    """Turn parser key objects back into plain values (ObjectKey keys become their text)."""
    if isinstance(value, dict):
        return {
            (dumps(key).decode() if isinstance(key, ObjectKey) else key): _plain(item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value
