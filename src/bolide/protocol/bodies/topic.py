"""Topic configuration bodies: TopicConfig, DataVersion, the topics.json / GET_ALL_TOPIC_CONFIG
wrapper, and the REGISTER_BROKER (103) body.

::

    TopicConfig  {"order":false,"perm":6,"readQueueNums":4,"topicFilterType":"SINGLE_TAG",
                  "topicName":"T","topicSysFlag":0,"writeQueueNums":4}
    DataVersion  {"counter":5,"timestamp":1700000000000}
    topics.json  {"dataVersion":{…},"topicConfigTable":{"T":{TopicConfig},…}}
    register     {"filterServerList":[],"topicConfigSerializeWrapper":{topics.json form}}

The compressed REGISTER_BROKER body (``compressed=true``, off by default in Java) is not
supported: a name server answers it with an error.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Self

from bolide.protocol.bodies.fastjson import BodyError, dumps
from bolide.protocol.bodies.values import (
    as_object,
    get_bool,
    get_int,
    get_object,
    get_str,
    get_str_list,
    parse_object,
)

__all__ = [
    "MESSAGE_TYPES",
    "MESSAGE_TYPE_ATTRIBUTE",
    "PERM_INHERIT",
    "PERM_PRIORITY",
    "PERM_READ",
    "PERM_WRITE",
    "DataVersion",
    "RegisterBrokerBody",
    "TopicConfig",
    "TopicConfigSerializeWrapper",
    "format_attributes",
    "parse_attributes",
]

PERM_PRIORITY = 8
PERM_READ = 4
PERM_WRITE = 2
PERM_INHERIT = 1
"""PermName bits: a normal topic has READ | WRITE (6), TBW102 also INHERIT (7)."""

MESSAGE_TYPE_ATTRIBUTE = "message.type"
"""The topic attribute naming which 5.x message types the topic accepts."""
MESSAGE_TYPES = ("NORMAL", "FIFO", "DELAY", "TRANSACTION", "MIXED")

_DEFAULT_QUEUE_COUNT = 16  # new TopicConfig(name) without queue numbers


@dataclass(frozen=True, slots=True)
class TopicConfig:
    """One topic's configuration on a broker."""

    topic_name: str
    read_queue_count: int = _DEFAULT_QUEUE_COUNT
    write_queue_count: int = _DEFAULT_QUEUE_COUNT
    perm: int = PERM_READ | PERM_WRITE
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False
    attributes: tuple[tuple[str, str], ...] = ()
    """RocketMQ 5.x topic attributes, sorted pairs (``message.type`` = NORMAL | FIFO |
    DELAY | TRANSACTION | MIXED is the one the 5.x proxy reads)."""

    @property
    def message_type(self) -> str:
        """The ``message.type`` attribute, upper-cased; NORMAL when unset."""
        return dict(self.attributes).get(MESSAGE_TYPE_ATTRIBUTE, "NORMAL").upper()

    def to_object(self) -> dict[str, Any]:
        """The JSON object."""
        fields: dict[str, Any] = {"attributes": dict(self.attributes)} if self.attributes else {}
        return fields | {
            "order": self.order,
            "perm": self.perm,
            "readQueueNums": self.read_queue_count,
            "topicFilterType": self.topic_filter_type,
            "topicName": self.topic_name,
            "topicSysFlag": self.topic_sys_flag,
            "writeQueueNums": self.write_queue_count,
        }

    @classmethod
    def from_object(cls, value: Any) -> Self:
        """From the JSON object; raises :class:`BodyError`."""
        obj = as_object(value, "topic config")
        return cls(
            get_str(obj, "topicName"),
            get_int(obj, "readQueueNums", _DEFAULT_QUEUE_COUNT),
            get_int(obj, "writeQueueNums", _DEFAULT_QUEUE_COUNT),
            get_int(obj, "perm", PERM_READ | PERM_WRITE),
            get_str(obj, "topicFilterType", "SINGLE_TAG"),
            get_int(obj, "topicSysFlag", 0),
            get_bool(obj, "order"),
            _attributes(obj.get("attributes")),
        )


def _attributes(value: Any) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, dict):
        return ()
    return tuple(sorted((str(k), str(v)) for k, v in value.items()))


def parse_attributes(text: str | None) -> tuple[tuple[str, str], ...]:
    """The attributes of a create-topic header, Java's ``+key=value,+key2=value2`` form
    (a ``-key`` entry, which deletes, is dropped here). Raises :class:`BodyError` on a
    malformed entry."""
    pairs: dict[str, str] = {}
    for entry in (text or "").split(","):
        entry = entry.strip()
        if not entry or entry.startswith("-"):
            continue
        name, equals, value = entry.lstrip("+").partition("=")
        if not equals or not name:
            raise BodyError(f"attribute {entry!r} is not +key=value")
        pairs[name] = value
    return tuple(sorted(pairs.items()))


def format_attributes(attributes: tuple[tuple[str, str], ...]) -> str:
    """Java's ``+key=value`` list form of ``attributes``."""
    return ",".join(f"+{name}={value}" for name, value in attributes)


@dataclass(frozen=True, slots=True)
class DataVersion:
    """Version of a broker's topic (or group) table: bumped on every change.

    ``state_version`` is RocketMQ 5.x's ``stateVersion``: in controller mode a broker sets it
    to its master epoch (``nextVersion(masterEpoch)``), and the name server uses it to fence a
    stale registration (round3-facts §1.7). 0 outside controller mode, and then left out of
    the JSON so 4.x bytes stay as they were.
    """

    timestamp_ms: int = 0
    counter: int = 0
    state_version: int = 0

    def next(self, timestamp_ms: int) -> DataVersion:
        """The version after one more change made at ``timestamp_ms``."""
        return DataVersion(timestamp_ms, self.counter + 1, self.state_version)

    def next_state(self, state_version: int, timestamp_ms: int) -> DataVersion:
        """Java's ``nextVersion(stateVersion)``: one more change, under a new master epoch."""
        return DataVersion(timestamp_ms, self.counter + 1, state_version)

    def to_object(self) -> dict[str, Any]:
        """The JSON object."""
        if self.state_version:
            return {
                "counter": self.counter,
                "stateVersion": self.state_version,
                "timestamp": self.timestamp_ms,
            }
        return {"counter": self.counter, "timestamp": self.timestamp_ms}

    @classmethod
    def from_object(cls, value: Any) -> Self:
        """From the JSON object; raises :class:`BodyError`."""
        obj = as_object(value, "data version")
        return cls(
            get_int(obj, "timestamp", 0),
            get_int(obj, "counter", 0),
            get_int(obj, "stateVersion", 0),
        )


@dataclass(frozen=True, slots=True)
class TopicConfigSerializeWrapper:
    """topics.json and the GET_ALL_TOPIC_CONFIG (21) response body."""

    topic_config_table: dict[str, TopicConfig] = field(default_factory=dict)
    data_version: DataVersion = field(default_factory=DataVersion)

    def to_object(self) -> dict[str, Any]:
        """The JSON object."""
        return {
            "dataVersion": self.data_version.to_object(),
            "topicConfigTable": {
                name: config.to_object() for name, config in self.topic_config_table.items()
            },
        }

    def to_json(self) -> bytes:
        """The JSON body / file content."""
        return dumps(self.to_object())

    @classmethod
    def from_object(cls, value: Any) -> Self:
        """From the JSON object; raises :class:`BodyError`."""
        obj = as_object(value, "topic config wrapper")
        table = get_object(obj, "topicConfigTable")
        return cls(
            {str(name): TopicConfig.from_object(config) for name, config in table.items()},
            DataVersion.from_object(get_object(obj, "dataVersion")),
        )

    @classmethod
    def from_json(cls, data: bytes | bytearray | memoryview | str) -> Self:
        """Parse; raises :class:`BodyError`."""
        return cls.from_object(parse_object(data, "topic config wrapper"))


@dataclass(frozen=True, slots=True)
class RegisterBrokerBody:
    """REGISTER_BROKER body (uncompressed form)."""

    topic_config_wrapper: TopicConfigSerializeWrapper = field(
        default_factory=TopicConfigSerializeWrapper
    )
    filter_server_list: tuple[str, ...] = ()

    def to_json(self) -> bytes:
        """The JSON body."""
        return dumps(
            {
                "filterServerList": list(self.filter_server_list),
                "topicConfigSerializeWrapper": self.topic_config_wrapper.to_object(),
            }
        )

    @classmethod
    def from_json(cls, data: bytes | bytearray | memoryview | str) -> Self:
        """Parse; raises :class:`BodyError`."""
        obj = parse_object(data, "register broker body")
        return cls(
            TopicConfigSerializeWrapper.from_object(get_object(obj, "topicConfigSerializeWrapper")),
            get_str_list(obj, "filterServerList"),
        )
