"""Broker configuration bodies and persisted files (docs/protocol.md §2.11, §4.4).

::

    SubscriptionGroupConfig  {"brokerId":0,"consumeBroadcastEnable":true,"consumeEnable":true,
                              "consumeFromMinEnable":true,"consumeOrderlyEnable":false,
                              "groupName":"G","notifyConsumerIdsChangedEnable":true,
                              "retryMaxTimes":16,"retryQueueNums":1,
                              "whichBrokerWhenConsumeSlowly":1}
                             (consumeOrderlyEnable is Bolide's; RocketMQ 5 calls it
                             consumeMessageOrderly, read as well; 4.x brokers ignore it)
    subscriptionGroup.json   {"dataVersion":{…},"subscriptionGroupTable":{"G":{…},…}}
    consumerOffset.json      {"offsetTable":{"T@G":{0:12,1:7}}}    (Java writes unquoted keys)
    delayOffset.json         {"offsetTable":{1:0,2:0,3:17}}        (delay level -> CQ offset)
    KVTable                  {"table":{"k":"v",…}}                 (every value a string)

Files written by Java carry fastjson's unquoted keys; both forms are read, standard JSON is
written.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Self

from bolide.protocol.bodies.fastjson import dumps
from bolide.protocol.bodies.retry_policy import GroupRetryPolicy
from bolide.protocol.bodies.topic import DataVersion
from bolide.protocol.bodies.values import (
    as_object,
    get_bool,
    get_int,
    get_object,
    get_str,
    int_key,
    parse_object,
    to_int,
    to_text,
)

__all__ = [
    "ConsumerOffsetSerializeWrapper",
    "DelayOffsetSerializeWrapper",
    "KVTable",
    "SubscriptionGroupConfig",
    "SubscriptionGroupWrapper",
]


@dataclass(frozen=True, slots=True)
class SubscriptionGroupConfig:
    """A consumer group's settings on a broker (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP body).

    ``consume_orderly_enable`` marks a group that consumes orderly (informational for 4.x
    clients, which decide that themselves)."""

    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    retry_queue_count: int = 1
    retry_max_times: int = 16
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True
    consume_orderly_enable: bool = False
    group_retry_policy: GroupRetryPolicy | None = None
    """RocketMQ 5's ``groupRetryPolicy``: the 5.x consumers' retry back-off (None: the
    proxy's default, RocketMQ's delay levels); written only when set."""

    def to_object(self) -> dict[str, Any]:
        """The JSON object."""
        policy = self.group_retry_policy
        retry = {} if policy is None else {"groupRetryPolicy": policy.to_object()}
        return {
            "brokerId": self.broker_id,
            "consumeBroadcastEnable": self.consume_broadcast_enable,
            "consumeEnable": self.consume_enable,
            "consumeFromMinEnable": self.consume_from_min_enable,
            "consumeOrderlyEnable": self.consume_orderly_enable,
            "groupName": self.group_name,
            **retry,
            "notifyConsumerIdsChangedEnable": self.notify_consumer_ids_changed_enable,
            "retryMaxTimes": self.retry_max_times,
            "retryQueueNums": self.retry_queue_count,
            "whichBrokerWhenConsumeSlowly": self.which_broker_when_consume_slowly,
        }

    def to_json(self) -> bytes:
        """The JSON body."""
        return dumps(self.to_object())

    @classmethod
    def from_object(cls, value: Any) -> Self:
        """From the JSON object; missing settings take Java's defaults. Raises
        :class:`BodyError`."""
        obj = as_object(value, "subscription group config")
        return cls(
            get_str(obj, "groupName"),
            get_bool(obj, "consumeEnable", True),
            get_bool(obj, "consumeFromMinEnable", True),
            get_bool(obj, "consumeBroadcastEnable", True),
            get_int(obj, "retryQueueNums", 1),
            get_int(obj, "retryMaxTimes", 16),
            get_int(obj, "brokerId", 0),
            get_int(obj, "whichBrokerWhenConsumeSlowly", 1),
            get_bool(obj, "notifyConsumerIdsChangedEnable", True),
            get_bool(obj, "consumeOrderlyEnable", get_bool(obj, "consumeMessageOrderly", False)),
            _retry_policy(obj.get("groupRetryPolicy")),
        )

    @classmethod
    def from_json(cls, data: bytes | bytearray | memoryview | str) -> Self:
        """Parse; raises :class:`BodyError`."""
        return cls.from_object(parse_object(data, "subscription group config"))


def _retry_policy(value: Any) -> GroupRetryPolicy | None:
    return None if value is None else GroupRetryPolicy.from_object(value)


@dataclass(frozen=True, slots=True)
class SubscriptionGroupWrapper:
    """subscriptionGroup.json and the GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201) body."""

    subscription_group_table: dict[str, SubscriptionGroupConfig] = field(default_factory=dict)
    data_version: DataVersion = field(default_factory=DataVersion)

    def to_json(self) -> bytes:
        """The JSON body / file content."""
        return dumps(
            {
                "dataVersion": self.data_version.to_object(),
                "subscriptionGroupTable": {
                    name: config.to_object()
                    for name, config in self.subscription_group_table.items()
                },
            }
        )

    @classmethod
    def from_json(cls, data: bytes | bytearray | memoryview | str) -> Self:
        """Parse; raises :class:`BodyError`."""
        obj = parse_object(data, "subscription group wrapper")
        table = get_object(obj, "subscriptionGroupTable")
        return cls(
            {str(name): SubscriptionGroupConfig.from_object(item) for name, item in table.items()},
            DataVersion.from_object(get_object(obj, "dataVersion")),
        )


@dataclass(frozen=True, slots=True)
class ConsumerOffsetSerializeWrapper:
    """consumerOffset.json: ``"topic@group"`` -> queue id -> committed offset."""

    offset_table: dict[str, dict[int, int]] = field(default_factory=dict)

    def to_json(self) -> bytes:
        """Standard JSON (quoted queue ids), which Java reads as well."""
        return dumps({"offsetTable": self.offset_table})

    @classmethod
    def from_json(cls, data: bytes | bytearray | memoryview | str) -> Self:
        """Parse either key form; raises :class:`BodyError`."""
        table = get_object(parse_object(data, "consumer offsets"), "offsetTable")
        return cls(
            {
                str(key): {
                    int_key(queue_id, "queue id"): to_int(offset, "offset")
                    for queue_id, offset in as_object(queues, str(key)).items()
                }
                for key, queues in table.items()
            }
        )


@dataclass(frozen=True, slots=True)
class DelayOffsetSerializeWrapper:
    """delayOffset.json: delay level -> offset in SCHEDULE_TOPIC_XXXX queue ``level - 1``."""

    offset_table: dict[int, int] = field(default_factory=dict)

    def to_json(self) -> bytes:
        """Standard JSON (quoted levels), which Java reads as well."""
        return dumps({"offsetTable": self.offset_table})

    @classmethod
    def from_json(cls, data: bytes | bytearray | memoryview | str) -> Self:
        """Parse either key form; raises :class:`BodyError`."""
        table = get_object(parse_object(data, "delay offsets"), "offsetTable")
        return cls(
            {
                int_key(level, "delay level"): to_int(offset, "offset")
                for level, offset in table.items()
            }
        )


@dataclass(frozen=True, slots=True)
class KVTable:
    """A string map body (GET_BROKER_RUNTIME_INFO, REGISTER_BROKER response, KV config)."""

    table: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> bytes:
        """The JSON body; every value a string."""
        return dumps({"table": self.table})

    @classmethod
    def from_json(cls, data: bytes | bytearray | memoryview | str) -> Self:
        """Parse (non-string values become text); raises :class:`BodyError`."""
        table = get_object(parse_object(data, "kv table"), "table")
        return cls({str(key): to_text(value, str(key)) for key, value in table.items()})
