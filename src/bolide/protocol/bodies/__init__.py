"""JSON bodies, including fastjson's non-standard maps (all in :mod:`.fastjson`).

Each body class has ``to_json() -> bytes`` and ``from_json(data)`` raising
:class:`~bolide.protocol.bodies.fastjson.BodyError` (a
:class:`~bolide.base.errors.ProtocolError`); nested parts have ``to_object``/``from_object``.
Readers accept Java's and the C++ client's variants; writers produce what Java produces.
"""

from __future__ import annotations

from bolide.protocol.bodies.admin import (
    Connection,
    ConsumerConnection,
    ConsumeStats,
    OffsetWrapper,
    ProducerConnection,
    TopicOffset,
    TopicStatsTable,
)
from bolide.protocol.bodies.config import (
    ConsumerOffsetSerializeWrapper,
    DelayOffsetSerializeWrapper,
    KVTable,
    SubscriptionGroupConfig,
    SubscriptionGroupWrapper,
)
from bolide.protocol.bodies.consumer import (
    ConsumerRunningInfo,
    GetConsumerListByGroupResponseBody,
    LockBatchRequestBody,
    LockBatchResponseBody,
    ResetOffsetBody,
    ResetOffsetBodyForC,
    UnlockBatchRequestBody,
)
from bolide.protocol.bodies.fastjson import BodyError, ObjectKey
from bolide.protocol.bodies.heartbeat import (
    EXPRESSION_TYPE_SQL92,
    EXPRESSION_TYPE_TAG,
    SUBSCRIBE_ALL,
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    HeartbeatData,
    MessageModel,
    ProducerData,
    SubscriptionData,
)
from bolide.protocol.bodies.queue import MessageQueue
from bolide.protocol.bodies.route import (
    MASTER_BROKER_ID,
    BrokerData,
    ClusterInfo,
    GroupList,
    QueueData,
    TopicList,
    TopicRouteData,
)
from bolide.protocol.bodies.topic import (
    PERM_INHERIT,
    PERM_PRIORITY,
    PERM_READ,
    PERM_WRITE,
    DataVersion,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigSerializeWrapper,
)

__all__ = [
    "EXPRESSION_TYPE_SQL92",
    "EXPRESSION_TYPE_TAG",
    "MASTER_BROKER_ID",
    "PERM_INHERIT",
    "PERM_PRIORITY",
    "PERM_READ",
    "PERM_WRITE",
    "SUBSCRIBE_ALL",
    "BodyError",
    "BrokerData",
    "ClusterInfo",
    "Connection",
    "ConsumeFromWhere",
    "ConsumeStats",
    "ConsumeType",
    "ConsumerConnection",
    "ConsumerData",
    "ConsumerOffsetSerializeWrapper",
    "ConsumerRunningInfo",
    "DataVersion",
    "DelayOffsetSerializeWrapper",
    "GetConsumerListByGroupResponseBody",
    "GroupList",
    "HeartbeatData",
    "KVTable",
    "LockBatchRequestBody",
    "LockBatchResponseBody",
    "MessageModel",
    "MessageQueue",
    "ObjectKey",
    "OffsetWrapper",
    "ProducerConnection",
    "ProducerData",
    "QueueData",
    "RegisterBrokerBody",
    "ResetOffsetBody",
    "ResetOffsetBodyForC",
    "SubscriptionData",
    "SubscriptionGroupConfig",
    "SubscriptionGroupWrapper",
    "TopicConfig",
    "TopicConfigSerializeWrapper",
    "TopicList",
    "TopicOffset",
    "TopicRouteData",
    "TopicStatsTable",
    "UnlockBatchRequestBody",
]
