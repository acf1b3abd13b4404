"""What :class:`~bolide.client.admin.AdminClient` answers: plain frozen records, each with
``to_dict()`` giving JSON-ready values (the CLI's ``--json`` output and the dashboard).

Offsets are queue offsets (a max offset is exclusive: the next to be written); timestamps
are milliseconds since the epoch, 0 when unknown.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bolide.protocol.address import format_socket_address
from bolide.protocol.bodies import Connection, MessageQueue, SubscriptionGroupConfig
from bolide.protocol.message import MessageExt

__all__ = [
    "DEFAULT_QUEUE_COUNT",
    "RESET_TO_EARLIEST",
    "RESET_TO_LATEST",
    "START_BY_CONSUME_FROM",
    "BrokerSummary",
    "GroupProgress",
    "GroupSummary",
    "ProgressCallback",
    "QueueProgress",
    "QueueStatus",
    "ResendOutcome",
    "ResetResult",
    "connection_to_dict",
    "message_to_dict",
    "queue_to_dict",
]


RESET_TO_LATEST = -1
"""Reset timestamp meaning "to the max offset": skip everything not consumed yet."""
RESET_TO_EARLIEST = 0
"""Reset timestamp before every message: back to the min offset (everything still stored)."""
DEFAULT_QUEUE_COUNT = 8
"""Queues of a topic created without a count (mqadmin updateTopic's default)."""

START_BY_CONSUME_FROM = -1
"""QueueProgress.start_offset when the broker leaves the start to the client's
consumeFromWhere (it answers QUERY_NOT_FOUND to the group)."""

ProgressCallback = Callable[[int, int], None]
"""``on_progress(done, total)``: called as a long operation moves (queues read, messages
resent)."""


def queue_to_dict(queue: MessageQueue) -> dict[str, Any]:
    """``{"topic", "broker", "queueId"}``."""
    return {"topic": queue.topic, "broker": queue.broker_name, "queueId": queue.queue_id}


def connection_to_dict(connection: Connection) -> dict[str, Any]:
    """One client connection as the broker registered it."""
    return {
        "clientId": connection.client_id,
        "address": connection.client_addr,
        "language": connection.language.name,
        "version": connection.version,
    }


def message_to_dict(message: MessageExt, *, body_limit_bytes: int | None = None) -> dict[str, Any]:
    """A stored message: ids, place, times, tags, keys, properties and the body as text
    (UTF-8, undecodable bytes replaced; cut to ``body_limit_bytes`` when given)."""
    body = message.body if body_limit_bytes is None else message.body[:body_limit_bytes]
    return {
        "msgId": message.msg_id,
        "offsetMsgId": message.offset_msg_id,
        "topic": message.topic,
        "queueId": message.queue_id,
        "queueOffset": message.queue_offset,
        "tags": message.tags,
        "keys": message.keys,
        "bornTimestamp": message.born_timestamp_ms,
        "storeTimestamp": message.store_timestamp_ms,
        "bornHost": format_socket_address(message.born_host),
        "storeHost": format_socket_address(message.store_host),
        "reconsumeTimes": message.reconsume_times,
        "bodySize": len(message.body),
        "body": body.decode("utf-8", "replace"),
        "properties": dict(message.properties),
    }


@dataclass(frozen=True, slots=True)
class BrokerSummary:
    """One broker address of a cluster, with a few runtime counters (``error`` says why they
    are missing)."""

    cluster: str
    broker_name: str
    broker_id: int
    address: str
    version: str = ""
    put_today: int = 0
    get_today: int = 0
    runtime: str = ""
    error: str | None = None
    role: str = ""
    """brokerRole: ASYNC_MASTER, SYNC_MASTER or SLAVE."""
    lag_bytes: int | None = None
    """Replication lag: for a slave, master minus slave commit-log max offset
    (``rocketmq_broker_commitlog_diff``); for a master, its best slave's. None: unknown."""
    lag_ms: int | None = None
    """Age of the oldest record the replica lacks (0 when in step). None: unknown."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "replicationLagBytes": self.lag_bytes,
            "replicationLagMs": self.lag_ms,
            "cluster": self.cluster,
            "brokerName": self.broker_name,
            "brokerId": self.broker_id,
            "address": self.address,
            "version": self.version,
            "putToday": self.put_today,
            "getToday": self.get_today,
            "runtime": self.runtime,
            "error": self.error,
        }


@dataclass(frozen=True, slots=True)
class QueueStatus:
    """One queue of a topic: min and max offset, store time of its last message."""

    queue: MessageQueue
    min_offset: int
    max_offset: int
    last_update_timestamp_ms: int

    @property
    def message_count(self) -> int:
        return max(0, self.max_offset - self.min_offset)

    def to_dict(self) -> dict[str, Any]:
        return {
            **queue_to_dict(self.queue),
            "minOffset": self.min_offset,
            "maxOffset": self.max_offset,
            "messages": self.message_count,
            "lastUpdateTimestamp": self.last_update_timestamp_ms,
        }


@dataclass(frozen=True, slots=True)
class QueueProgress:
    """One queue of a consumer group: broker (max) offset, consumer offset, lag and the client
    that owns the queue (None when unknown or nobody). For a broadcasting group there is one
    row per client and queue, with that client's own offset."""

    queue: MessageQueue
    broker_offset: int
    consumer_offset: int
    client_id: str | None = None
    last_timestamp_ms: int = 0
    start_offset: int | None = None
    """For a queue with nothing committed (consumer offset 0): where a consumer of the group
    starting now begins it — the offset the broker answers (its newGroupStartRule), or
    START_BY_CONSUME_FROM when the client's consumeFromWhere decides (LAST_OFFSET: the broker
    offset). None when the group has progress on the queue."""

    @property
    def lag(self) -> int:
        return max(0, self.broker_offset - self.consumer_offset)

    def to_dict(self) -> dict[str, Any]:
        return {
            **queue_to_dict(self.queue),
            "brokerOffset": self.broker_offset,
            "consumerOffset": self.consumer_offset,
            "lag": self.lag,
            "clientId": self.client_id,
            "lastTimestamp": self.last_timestamp_ms,
            "startOffset": self.start_offset,
        }


@dataclass(frozen=True, slots=True)
class GroupProgress:
    """A consumer group's progress over every broker.

    ``message_model`` is ``CLUSTERING`` or ``BROADCASTING`` when the group is online, else
    None; ``notes`` explain gaps (a client that did not answer, a broker that failed).
    """

    group: str
    message_model: str | None
    clients: tuple[Connection, ...]
    queues: tuple[QueueProgress, ...]
    consume_tps: float = 0.0
    notes: tuple[str, ...] = ()

    @property
    def online(self) -> bool:
        return bool(self.clients)

    @property
    def total_lag(self) -> int:
        return sum(row.lag for row in self.queues)

    def to_dict(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "online": self.online,
            "messageModel": self.message_model,
            "clients": [connection_to_dict(client) for client in self.clients],
            "consumeTps": self.consume_tps,
            "totalLag": self.total_lag,
            "queues": [row.to_dict() for row in self.queues],
            "notes": list(self.notes),
        }


@dataclass(frozen=True, slots=True)
class GroupSummary:
    """A subscription group: its settings (from the first broker that has it), the brokers
    holding it and the clients online now."""

    group: str
    config: SubscriptionGroupConfig
    brokers: tuple[str, ...]
    online_clients: int = 0
    message_model: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "brokers": list(self.brokers),
            "onlineClients": self.online_clients,
            "messageModel": self.message_model,
            "config": self.config.to_object(),
        }


@dataclass(frozen=True, slots=True)
class ResetResult:
    """What a reset did: the new offset of every queue, and the consumers told (none when the
    group is offline: it finds the new offsets on the brokers when it starts)."""

    group: str
    topic: str
    timestamp_ms: int
    offsets: dict[MessageQueue, int] = field(default_factory=dict)
    clients: tuple[Connection, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def online(self) -> bool:
        return bool(self.clients)

    def to_dict(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "topic": self.topic,
            "timestamp": self.timestamp_ms,
            "online": self.online,
            "clients": [connection_to_dict(client) for client in self.clients],
            "offsets": [
                {**queue_to_dict(queue), "offset": offset}
                for queue, offset in sorted(self.offsets.items())
            ],
            "notes": list(self.notes),
        }


@dataclass(frozen=True, slots=True)
class ResendOutcome:
    """One dead letter resent to its group: the dead letter's id, its original topic, and the
    new message's id (or the error that stopped it)."""

    msg_id: str
    original_topic: str
    new_msg_id: str | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "msgId": self.msg_id,
            "originalTopic": self.original_topic,
            "newMsgId": self.new_msg_id,
            "error": self.error,
        }
