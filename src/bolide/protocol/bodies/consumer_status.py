"""Bodies of two admin queries on a group's progress: the consumers' own offsets
(INVOKE_BROKER_TO_GET_CONSUMER_STATUS 223, the broker asking each client with
GET_CONSUMER_STATUS_FROM_CLIENT 221) and the correction offsets (QUERY_CORRECTION_OFFSET 308).

::

    consumer status   {"messageQueueTable":{{MessageQueue}:12,…},
                       "consumerTable":{"clientId":{{MessageQueue}:12,…},…}}
    correction        {"correctionOffsets":{0:12,1:7}}

Both are written as fastjson writes them (MessageQueue keys inlined, integer keys unquoted)
and read in that form or standard JSON.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Self

from bolide.protocol.bodies.fastjson import dumps
from bolide.protocol.bodies.queue import MessageQueue
from bolide.protocol.bodies.values import (
    as_object,
    get_object,
    int_key,
    parse_object,
    to_int,
    to_text,
)

__all__ = ["GetConsumerStatusBody", "QueryCorrectionOffsetBody"]


def _queue_table(value: Any, what: str) -> dict[MessageQueue, int]:
    table = {} if value is None else as_object(value, what)
    return {MessageQueue.from_key(key): to_int(offset, what) for key, offset in table.items()}


def _queue_keys(table: dict[MessageQueue, int]) -> dict[Any, int]:
    return {queue.to_key(): offset for queue, offset in sorted(table.items())}


@dataclass(frozen=True, slots=True)
class GetConsumerStatusBody:
    """One client's committed offsets of a topic (``message_queue_table``, its answer to
    221), or the broker's gathering of them (``consumer_table``: client id -> offsets, its
    answer to 223)."""

    message_queue_table: dict[MessageQueue, int] = field(default_factory=dict)
    consumer_table: dict[str, dict[MessageQueue, int]] = field(default_factory=dict)

    def to_json(self) -> bytes:
        return dumps(
            {
                "consumerTable": {
                    client: _queue_keys(table)
                    for client, table in sorted(self.consumer_table.items())
                },
                "messageQueueTable": _queue_keys(self.message_queue_table),
            }
        )

    @classmethod
    def from_json(cls, data: bytes | bytearray | memoryview | str) -> Self:
        """Parse; raises :class:`BodyError`."""
        obj = parse_object(data, "consumer status body")
        consumers = get_object(obj, "consumerTable")
        return cls(
            _queue_table(obj.get("messageQueueTable"), "messageQueueTable"),
            {
                to_text(client, "client id"): _queue_table(table, "consumerTable")
                for client, table in consumers.items()
            },
        )


@dataclass(frozen=True, slots=True)
class QueryCorrectionOffsetBody:
    """Queue id -> the lowest committed offset of the groups on the topic (those not
    filtered out), or Java's Long.MAX_VALUE where the compared group is behind it."""

    correction_offsets: dict[int, int] = field(default_factory=dict)

    def to_json(self) -> bytes:
        table = dict(sorted(self.correction_offsets.items()))
        return dumps({"correctionOffsets": table}, unquoted_int_keys=True)

    @classmethod
    def from_json(cls, data: bytes | bytearray | memoryview | str) -> Self:
        """Parse; raises :class:`BodyError`."""
        obj = parse_object(data, "correction offset body")
        table = get_object(obj, "correctionOffsets")
        return cls(
            {
                int_key(key, "queue id"): to_int(offset, "correction offset")
                for key, offset in table.items()
            }
        )
