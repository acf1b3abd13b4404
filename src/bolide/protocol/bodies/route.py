"""Name-server bodies (docs/protocol.md §2.3): topic route (105), cluster info (106), topic list
(206), and the group list of QUERY_TOPIC_CONSUME_BY_WHO (300).

Route JSON as written here::

    {"brokerDatas":[{"brokerAddrs":{"0":"10.0.0.1:10911"},"brokerName":"broker-a",
                     "cluster":"DefaultCluster"}],
     "filterServerTable":{},
     "orderTopicConf":"broker-a:4",                 (only when set)
     "queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSynFlag":0,
                    "topicSysFlag":0,"writeQueueNums":4}]}

``brokerAddrs`` keys are broker ids, written as strings (``"0"`` = master) — or unquoted, as a
Java name server does for clients older than V4_9_4, with ``standard_json=False``. QueueData
carries both spellings of the topic flag: ``topicSynFlag`` (before 4.9.0) and ``topicSysFlag``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Self

from bolide.protocol.bodies.fastjson import dumps
from bolide.protocol.bodies.values import (
    as_object,
    get_int,
    get_list,
    get_object,
    get_optional_str,
    get_str,
    get_str_list,
    int_key,
    parse_object,
    to_text,
)

__all__ = [
    "MASTER_BROKER_ID",
    "BrokerData",
    "ClusterInfo",
    "GroupList",
    "QueueData",
    "TopicList",
    "TopicRouteData",
]

MASTER_BROKER_ID = 0
"""brokerId of a master (MixAll.MASTER_ID)."""


@dataclass(frozen=True, slots=True)
class QueueData:
    """The queues one broker holds for a topic; ``perm`` uses PermName bits."""

    broker_name: str
    read_queue_count: int
    write_queue_count: int
    perm: int
    topic_sys_flag: int = 0

    def to_object(self) -> dict[str, Any]:
        """The JSON object, with both flag spellings."""
        return {
            "brokerName": self.broker_name,
            "perm": self.perm,
            "readQueueNums": self.read_queue_count,
            "topicSynFlag": self.topic_sys_flag,
            "topicSysFlag": self.topic_sys_flag,
            "writeQueueNums": self.write_queue_count,
        }

    @classmethod
    def from_object(cls, value: Any) -> Self:
        """From the JSON object (either flag spelling); raises :class:`BodyError`."""
        obj = as_object(value, "queue data")
        return cls(
            get_str(obj, "brokerName"),
            get_int(obj, "readQueueNums"),
            get_int(obj, "writeQueueNums"),
            get_int(obj, "perm"),
            get_int(obj, "topicSysFlag", get_int(obj, "topicSynFlag", 0)),
        )


@dataclass(frozen=True, slots=True)
class BrokerData:
    """One broker name of a cluster: its addresses by broker id (0 = master)."""

    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)

    @property
    def master_addr(self) -> str | None:
        """The master's ``ip:port``, if it is registered."""
        return self.broker_addrs.get(MASTER_BROKER_ID)

    def to_object(self) -> dict[str, Any]:
        """The JSON object (int keys: see the module docstring)."""
        return {
            "brokerAddrs": dict(self.broker_addrs),
            "brokerName": self.broker_name,
            "cluster": self.cluster,
        }

    @classmethod
    def from_object(cls, value: Any) -> Self:
        """From the JSON object (quoted or unquoted id keys); raises :class:`BodyError`."""
        obj = as_object(value, "broker data")
        addrs = {
            int_key(key, "brokerAddrs"): to_text(address, "brokerAddrs")
            for key, address in get_object(obj, "brokerAddrs").items()
        }
        return cls(get_str(obj, "cluster", ""), get_str(obj, "brokerName"), addrs)


@dataclass(frozen=True, slots=True)
class TopicRouteData:
    """GET_ROUTEINFO_BY_TOPIC success body."""

    queue_datas: tuple[QueueData, ...] = ()
    broker_datas: tuple[BrokerData, ...] = ()
    order_topic_conf: str | None = None
    filter_server_table: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def to_json(self, *, standard_json: bool = True) -> bytes:
        """The JSON body; ``standard_json=False`` writes fastjson's unquoted id keys."""
        body: dict[str, Any] = {
            "brokerDatas": [item.to_object() for item in self.broker_datas],
            "filterServerTable": {k: list(v) for k, v in self.filter_server_table.items()},
        }
        if self.order_topic_conf is not None:
            body["orderTopicConf"] = self.order_topic_conf
        body["queueDatas"] = [item.to_object() for item in self.queue_datas]
        return dumps(body, unquoted_int_keys=not standard_json)

    @classmethod
    def from_json(cls, data: bytes | bytearray | memoryview | str) -> Self:
        """Parse either key form; raises :class:`BodyError`."""
        obj = parse_object(data, "topic route data")
        filter_servers = get_object(obj, "filterServerTable")
        return cls(
            tuple(QueueData.from_object(item) for item in get_list(obj, "queueDatas")),
            tuple(BrokerData.from_object(item) for item in get_list(obj, "brokerDatas")),
            get_optional_str(obj, "orderTopicConf"),
            {str(key): get_str_list(filter_servers, key) for key in filter_servers},
        )


@dataclass(frozen=True, slots=True)
class ClusterInfo:
    """GET_BROKER_CLUSTER_INFO body: brokers by name, broker names by cluster."""

    broker_addr_table: dict[str, BrokerData] = field(default_factory=dict)
    cluster_addr_table: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def to_json(self) -> bytes:
        """The JSON body."""
        return dumps(
            {
                "brokerAddrTable": {k: v.to_object() for k, v in self.broker_addr_table.items()},
                "clusterAddrTable": {k: list(v) for k, v in self.cluster_addr_table.items()},
            }
        )

    @classmethod
    def from_json(cls, data: bytes | bytearray | memoryview | str) -> Self:
        """Parse; raises :class:`BodyError`."""
        obj = parse_object(data, "cluster info")
        brokers = get_object(obj, "brokerAddrTable")
        clusters = get_object(obj, "clusterAddrTable")
        return cls(
            {str(name): BrokerData.from_object(value) for name, value in brokers.items()},
            {str(name): get_str_list(clusters, name) for name in clusters},
        )


@dataclass(frozen=True, slots=True)
class TopicList:
    """GET_ALL_TOPIC_LIST_FROM_NAMESERVER (and friends) body; ``brokerAddr`` omitted when None."""

    topic_list: tuple[str, ...] = ()
    broker_addr: str | None = None

    def to_json(self) -> bytes:
        """The JSON body."""
        body: dict[str, Any] = {}
        if self.broker_addr is not None:
            body["brokerAddr"] = self.broker_addr
        body["topicList"] = list(self.topic_list)
        return dumps(body)

    @classmethod
    def from_json(cls, data: bytes | bytearray | memoryview | str) -> Self:
        """Parse; raises :class:`BodyError`."""
        obj = parse_object(data, "topic list")
        return cls(get_str_list(obj, "topicList"), get_optional_str(obj, "brokerAddr"))


@dataclass(frozen=True, slots=True)
class GroupList:
    """QUERY_TOPIC_CONSUME_BY_WHO body: the consumer groups of a topic."""

    group_list: tuple[str, ...] = ()

    def to_json(self) -> bytes:
        """The JSON body."""
        return dumps({"groupList": list(self.group_list)})

    @classmethod
    def from_json(cls, data: bytes | bytearray | memoryview | str) -> Self:
        """Parse; raises :class:`BodyError`."""
        return cls(get_str_list(parse_object(data, "group list"), "groupList"))
