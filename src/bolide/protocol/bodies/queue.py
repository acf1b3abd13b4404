"""MessageQueue: (topic, broker, queue id), the key of lock sets and offset tables in bodies.

JSON form (Java field names, sorted as fastjson writes them)::

    {"brokerName":"broker-a","queueId":0,"topic":"T"}

As a map key fastjson inlines that object (see :mod:`bolide.protocol.bodies.fastjson`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Self

from bolide.protocol.bodies.fastjson import ObjectKey
from bolide.protocol.bodies.values import as_object, get_int, get_str, object_key_fields

__all__ = ["MessageQueue"]


@dataclass(frozen=True, slots=True, order=True)
class MessageQueue:
    """One queue of a topic on one broker. Orders as Java's ``compareTo``: topic, broker, id."""

    topic: str
    broker_name: str
    queue_id: int

    def to_object(self) -> dict[str, Any]:
        """The JSON object."""
        return {"brokerName": self.broker_name, "queueId": self.queue_id, "topic": self.topic}

    def to_key(self) -> ObjectKey:
        """The fastjson object key for a ``Map<MessageQueue, …>``."""
        return ObjectKey(
            (("brokerName", self.broker_name), ("queueId", self.queue_id), ("topic", self.topic))
        )

    @classmethod
    def from_object(cls, value: Any) -> Self:
        """From the JSON object; raises :class:`BodyError`."""
        obj: Mapping[str, Any] = as_object(value, "message queue")
        return cls(get_str(obj, "topic"), get_str(obj, "brokerName"), get_int(obj, "queueId"))

    @classmethod
    def from_key(cls, key: Any) -> Self:
        """From a map key (inlined object or its JSON text); raises :class:`BodyError`."""
        return cls.from_object(object_key_fields(key, "message queue"))
