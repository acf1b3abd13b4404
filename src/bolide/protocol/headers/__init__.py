"""One typed dataclass per request and response header.

Each has ``to_ext_fields() -> dict[str, str]`` and ``from_ext_fields(fields)`` (raising
:class:`HeaderError`, a :class:`~bolide.base.errors.ProtocolError`, for a missing required field
or an unparsable number). Python names are snake_case; wire names are Java's exactly. Unknown
keys (``AccessKey``, ``Signature``, ``OnsChannel``, ``bname``, …) are ignored.

A header is declared, not coded: a :class:`~bolide.protocol.headers.fields.WireHeader`
subclass under ``@wire_header`` names each field's wire key once, and both methods follow
from the annotations and defaults (rules in :func:`~bolide.protocol.headers.fields.wire_header`)::

    @wire_header
    class GetConsumeStatsRequestHeader(WireHeader):
        consumer_group: str = wire("consumerGroup")          # required
        topic: str | None = wire("topic", default=None)      # optional, omitted when None

A header with a rule of its own is written by hand as a frozen slots dataclass: the hot
send and pull headers (:mod:`~bolide.protocol.headers.send`, :mod:`~bolide.protocol.headers.pull`,
decoded on every message through a positional constructor), the send response, POP's request
(a missing ``initMode`` reads 0 while the constructor defaults to 1), QUERY_MESSAGE's request
(``_UNIQUE_KEY_QUERY`` written only when true) and the reply push (``unitMode`` true only as
``"true"``).
"""

from __future__ import annotations

from bolide.protocol.headers.admin import (
    CloneGroupOffsetRequestHeader,
    CreateTopicRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    DeleteTopicRequestHeader,
    GetConsumeStatsRequestHeader,
    GetProducerConnectionListRequestHeader,
    GetTopicStatsInfoRequestHeader,
    QueryCorrectionOffsetHeader,
    QueryTopicConsumeByWhoRequestHeader,
    TopicRequestHeader,
)
from bolide.protocol.headers.client import (
    ConsumeMessageDirectlyResultRequestHeader,
    ConsumerGroupRequestHeader,
    GetConsumerConnectionListRequestHeader,
    GetConsumerListByGroupRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetConsumerStatusRequestHeader,
    NotifyConsumerIdsChangedRequestHeader,
    ResetOffsetRequestHeader,
    UnregisterClientRequestHeader,
)
from bolide.protocol.headers.fields import Header, HeaderError
from bolide.protocol.headers.namesrv import (
    DeleteTopicFromNamesrvRequestHeader,
    GetRouteInfoRequestHeader,
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    UnregisterBrokerRequestHeader,
)
from bolide.protocol.headers.offsets import (
    GetEarliestMsgStoretimeRequestHeader,
    GetEarliestMsgStoretimeResponseHeader,
    GetMaxOffsetRequestHeader,
    GetMaxOffsetResponseHeader,
    GetMinOffsetRequestHeader,
    GetMinOffsetResponseHeader,
    OffsetResponseHeader,
    QueryConsumerOffsetRequestHeader,
    QueryConsumerOffsetResponseHeader,
    QueueRequestHeader,
    SearchOffsetRequestHeader,
    SearchOffsetResponseHeader,
    UpdateConsumerOffsetRequestHeader,
)
from bolide.protocol.headers.pull import (
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    PullSysFlag,
)
from bolide.protocol.headers.query import (
    UNIQUE_KEY_QUERY_KEY,
    QueryMessageRequestHeader,
    QueryMessageResponseHeader,
    ViewMessageRequestHeader,
)
from bolide.protocol.headers.send import (
    CheckTransactionStateRequestHeader,
    ConsumerSendMsgBackRequestHeader,
    EndTransactionRequestHeader,
    SendMessageRequestHeader,
    SendMessageResponseHeader,
)

__all__ = [
    "UNIQUE_KEY_QUERY_KEY",
    "CheckTransactionStateRequestHeader",
    "CloneGroupOffsetRequestHeader",
    "ConsumeMessageDirectlyResultRequestHeader",
    "ConsumerGroupRequestHeader",
    "ConsumerSendMsgBackRequestHeader",
    "CreateTopicRequestHeader",
    "DeleteSubscriptionGroupRequestHeader",
    "DeleteTopicFromNamesrvRequestHeader",
    "DeleteTopicRequestHeader",
    "EndTransactionRequestHeader",
    "GetConsumeStatsRequestHeader",
    "GetConsumerConnectionListRequestHeader",
    "GetConsumerListByGroupRequestHeader",
    "GetConsumerRunningInfoRequestHeader",
    "GetConsumerStatusRequestHeader",
    "GetEarliestMsgStoretimeRequestHeader",
    "GetEarliestMsgStoretimeResponseHeader",
    "GetMaxOffsetRequestHeader",
    "GetMaxOffsetResponseHeader",
    "GetMinOffsetRequestHeader",
    "GetMinOffsetResponseHeader",
    "GetProducerConnectionListRequestHeader",
    "GetRouteInfoRequestHeader",
    "GetTopicStatsInfoRequestHeader",
    "Header",
    "HeaderError",
    "NotifyConsumerIdsChangedRequestHeader",
    "OffsetResponseHeader",
    "PullMessageRequestHeader",
    "PullMessageResponseHeader",
    "PullSysFlag",
    "QueryConsumerOffsetRequestHeader",
    "QueryConsumerOffsetResponseHeader",
    "QueryCorrectionOffsetHeader",
    "QueryMessageRequestHeader",
    "QueryMessageResponseHeader",
    "QueryTopicConsumeByWhoRequestHeader",
    "QueueRequestHeader",
    "RegisterBrokerRequestHeader",
    "RegisterBrokerResponseHeader",
    "ResetOffsetRequestHeader",
    "SearchOffsetRequestHeader",
    "SearchOffsetResponseHeader",
    "SendMessageRequestHeader",
    "SendMessageResponseHeader",
    "TopicRequestHeader",
    "UnregisterBrokerRequestHeader",
    "UnregisterClientRequestHeader",
    "UpdateConsumerOffsetRequestHeader",
    "ViewMessageRequestHeader",
]
