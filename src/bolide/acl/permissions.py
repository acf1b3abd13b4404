"""Permission bits and what each request needs (RocketMQ ACL 1.0's table, Bolide's additions).

Bits (as RocketMQ): ``DENY=1``, ``ANY=2``, ``PUB=4``, ``SUB=8``. An owned permission with the
DENY bit refuses everything; a needed ``ANY`` is met by PUB or SUB; otherwise the needed bit
must be owned. A group's permission is kept under its retry topic ``%RETRY%<group>``.

What a request needs (resources read from its ext fields, :data:`RESOURCE_TABLE`, or its
body; docs/security.md has the same table)::

    SEND_MESSAGE 10, SEND_MESSAGE_V2 310,    topic PUB; when the topic is a %RETRY% topic,
    SEND_BATCH_MESSAGE 320 (Bolide),           SUB on it instead (a consumer's send-back)
    SEND_REPLY_MESSAGE 324 / _V2 325 (Bolide),
    RECALL_MESSAGE 370 (Bolide)
    END_TRANSACTION 37,                      topic PUB when the request names one (5.x
    RESUME_CHECK_HALF_MESSAGE 323 (Bolide)     clients do), else the signature only
    CONSUMER_SEND_MSG_BACK 36                %RETRY%group SUB
    PULL_MESSAGE 11, POP_MESSAGE 200050,     topic SUB + %RETRY%consumerGroup SUB
    ACK_MESSAGE 200051,
    CHANGE_MESSAGE_INVISIBLETIME 200053,
    QUERY_CONSUMER_OFFSET 14 (Bolide),
    UPDATE_CONSUMER_OFFSET 15 (all Bolide but 11, 15)
    QUERY_MESSAGE 12                         topic SUB
    VIEW_MESSAGE_BY_ID 33                    topic SUB when named (5.x clients), else the
                                               signature only (as RocketMQ)
    SEARCH_OFFSET_BY_TIMESTAMP 29,           topic ANY (PUB or SUB: offsets, no content)
    GET_MAX_OFFSET 30, GET_MIN_OFFSET 31,
    GET_EARLIEST_MSG_STORETIME 32,
    GET_TOPIC_STATS_INFO 202,
    QUERY_TOPIC_CONSUME_BY_WHO 300 (Bolide)
    HEART_BEAT 34                            per consumer group: %RETRY%group SUB and every
                                             subscribed topic SUB
    UNREGISTER_CLIENT 35,                    %RETRY%consumerGroup SUB (35: when one is named)
    GET_CONSUMER_LIST_BY_GROUP 38,
    GET_CONSUMER_CONNECTION_LIST 203,
    GET_CONSUMER_RUNNING_INFO 307 (Bolide)
    GET_CONSUME_STATS 208,                   %RETRY%consumerGroup SUB + topic SUB when named
    CONSUME_MESSAGE_DIRECTLY 309 (Bolide)
    QUERY_CONSUME_TIME_SPAN 303 (Bolide)     topic SUB + %RETRY%group SUB
    QUERY_CONSUME_QUEUE 321 (Bolide)         topic SUB (+ %RETRY%consumerGroup SUB if named)
    INVOKE_BROKER_TO_GET_CONSUMER_STATUS     topic SUB + %RETRY%group SUB
      223 (Bolide)
    QUERY_CORRECTION_OFFSET 308 (Bolide)     topic SUB + %RETRY%compareGroup SUB
    LOCK_BATCH_MQ 41, UNLOCK_BATCH_MQ 42     %RETRY%consumerGroup SUB (Bolide)
    admin codes (ADMIN_REQUEST_CODES)        an account with ``admin: true``
    SIGNATURE_ONLY_CODES                     a valid signature only (each with its reason)

"(Bolide)" marks checks RocketMQ's ACL 1.0 leaves out: without them a batch send reached a
denied topic, an account refused a topic for PULL read it through POP or 33, and any account
could rewrite the ACL file or reset a group's offsets.

What a 5.x gRPC call needs (:func:`grpc_required_resources`, the proxy's check; as RocketMQ 5's
proxy with ACL 1.0)::

    SendMessage, RecallMessage, EndTransaction     topic PUB (SUB for a %RETRY% topic)
    ReceiveMessage, AckMessage, QueryAssignment,   topic SUB + %RETRY%group SUB
    ChangeInvisibleDuration,
    ForwardMessageToDeadLetterQueue
    Heartbeat, NotifyClientTermination             %RETRY%group SUB (a consumer's; a
                                                   producer names no group: nothing)
    QueryRoute                                     topic ANY (PUB or SUB)
    anything else (Telemetry)                      a valid signature only
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from bolide.acl.addresses import AclConfigError
from bolide.base.errors import BolideError
from bolide.protocol.bodies.heartbeat import HeartbeatData
from bolide.protocol.bodies.values import get_str, parse_object
from bolide.protocol.codes import RequestCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.system_topics import RETRY_GROUP_TOPIC_PREFIX, is_retry_topic, retry_topic

__all__ = [
    "ADMIN_REQUEST_CODES",
    "BODY_CODES",
    "NAMESRV_ADMIN_REQUEST_CODES",
    "RESOURCE_TABLE",
    "RETRY_GROUP_TOPIC_PREFIX",
    "SIGNATURE_ONLY_CODES",
    "Kind",
    "Need",
    "Perm",
    "RequestParseError",
    "check_permission",
    "format_perm",
    "grpc_required_resources",
    "parse_perm",
    "required_resources",
    "retry_topic",
]


class Perm(enum.IntFlag):
    """RocketMQ's ACL permission bits."""

    NONE = 0
    DENY = 1
    ANY = 2
    PUB = 4
    SUB = 8


_PERM_BY_TEXT: Mapping[str, Perm] = {
    "DENY": Perm.DENY,
    "PUB": Perm.PUB,
    "SUB": Perm.SUB,
    "PUB|SUB": Perm.PUB | Perm.SUB,
    "SUB|PUB": Perm.PUB | Perm.SUB,
}

R = RequestCode
ADMIN_REQUEST_CODES: frozenset[int] = frozenset(
    {
        # RocketMQ's Permission.ADMIN_CODE
        R.UPDATE_AND_CREATE_TOPIC,
        R.UPDATE_BROKER_CONFIG,
        R.DELETE_TOPIC_IN_BROKER,
        R.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
        R.DELETE_SUBSCRIPTIONGROUP,
        # Bolide: the ACL itself, offset resets and destructive maintenance
        R.UPDATE_AND_CREATE_ACL_CONFIG,
        R.DELETE_ACL_CONFIG,
        R.GET_BROKER_CLUSTER_ACL_INFO,
        R.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
        R.GET_BROKER_CLUSTER_ACL_CONFIG,
        R.INVOKE_BROKER_TO_RESET_OFFSET,
        R.RESET_CONSUMER_OFFSET_IN_BROKER,
        R.CLONE_GROUP_OFFSET,
        R.CLEAN_EXPIRED_CONSUMEQUEUE,
        R.CLEAN_UNUSED_TOPIC,
        R.DELETE_EXPIRED_COMMITLOG,
        R.BOLIDE_QUERY_HALF_MESSAGES,  # lists every pending transaction's message
        # ACL 2.0's user and policy codes (3001-3010); under ACL 1.0 they answer that 2.0 is off
        R.AUTH_CREATE_USER,
        R.AUTH_UPDATE_USER,
        R.AUTH_DELETE_USER,
        R.AUTH_GET_USER,
        R.AUTH_LIST_USER,
        R.AUTH_CREATE_ACL,
        R.AUTH_UPDATE_ACL,
        R.AUTH_DELETE_ACL,
        R.AUTH_GET_ACL,
        R.AUTH_LIST_ACL,
    }
)
"""Requests only an ``admin: true`` account may make on a broker."""

NAMESRV_ADMIN_REQUEST_CODES: frozenset[int] = frozenset(
    {
        R.PUT_KV_CONFIG,
        R.DELETE_KV_CONFIG,
        R.REGISTER_BROKER,
        R.UNREGISTER_BROKER,
        R.WIPE_WRITE_PERM_OF_BROKER,
        R.ADD_WRITE_PERM_OF_BROKER,
        R.DELETE_TOPIC_IN_NAMESRV,
        R.UPDATE_NAMESRV_CONFIG,
    }
)
"""Requests only an ``admin: true`` account may make on a name server (brokers register
with an admin account: broker.conf ``innerClientAuthenticationCredentials``)."""


class RequestParseError(BolideError):
    """A request lacks the field (or has a body that does not parse) its check needs."""


def parse_perm(text: object, where: str) -> Perm:
    """``"PUB"``, ``"SUB"``, ``"PUB|SUB"``, ``"SUB|PUB"`` or ``"DENY"`` -> the bits.

    RocketMQ reads any other text as DENY; Bolide refuses it (a typo must not silently lock an
    account out or, worse, be mistaken for a grant). Raises :class:`AclConfigError`.
    """
    perm = _PERM_BY_TEXT.get(str(text).strip().upper()) if isinstance(text, str) else None
    if perm is None:
        raise AclConfigError(f"{where}: permission {text!r} is not PUB, SUB, PUB|SUB or DENY")
    return perm


def format_perm(perm: Perm) -> str:
    """The file's spelling of ``perm`` (``PUB|SUB`` for both)."""
    if perm & Perm.DENY:
        return "DENY"
    if perm & Perm.PUB and perm & Perm.SUB:
        return "PUB|SUB"
    return "PUB" if perm & Perm.PUB else "SUB" if perm & Perm.SUB else "DENY"


def check_permission(needed: Perm, owned: Perm) -> bool:
    """Whether ``owned`` grants ``needed``: DENY always wins, ANY takes PUB or SUB."""
    if owned & Perm.DENY:
        return False
    if needed & Perm.ANY:
        return bool(owned & (Perm.PUB | Perm.SUB))
    return bool(needed & owned)


class Kind(enum.Enum):
    """How a request field names a resource."""

    TOPIC = "topic"
    """A topic (a ``%RETRY%`` topic is its group's resource)."""
    GROUP = "group"
    """A consumer group, checked under ``%RETRY%<group>``."""
    SEND_TOPIC = "send topic"
    """A topic written to: PUB, or SUB when it is a ``%RETRY%`` topic (a consumer's
    send-back)."""


@dataclass(frozen=True)
class Need:
    """One resource a request needs: the ext field naming it (the first of ``fields``
    present), its kind and the permission. ``optional``: a request without the field needs
    nothing for it (older clients leave it out)."""

    fields: tuple[str, ...]
    kind: Kind
    perm: Perm = Perm.SUB
    optional: bool = False


_TOPIC_SUB = Need(("topic",), Kind.TOPIC)
_TOPIC_ANY = Need(("topic",), Kind.TOPIC, Perm.ANY)
_CONSUMER_GROUP = Need(("consumerGroup",), Kind.GROUP)
_POP_FAMILY = (_TOPIC_SUB, _CONSUMER_GROUP)

RESOURCE_TABLE: Mapping[int, tuple[Need, ...]] = MappingProxyType(
    {
        R.SEND_MESSAGE: (Need(("topic",), Kind.SEND_TOPIC, Perm.PUB),),
        R.SEND_REPLY_MESSAGE: (Need(("topic",), Kind.SEND_TOPIC, Perm.PUB),),
        R.SEND_MESSAGE_V2: (Need(("b", "topic"), Kind.SEND_TOPIC, Perm.PUB),),
        R.SEND_BATCH_MESSAGE: (Need(("b", "topic"), Kind.SEND_TOPIC, Perm.PUB),),
        R.SEND_REPLY_MESSAGE_V2: (Need(("b", "topic"), Kind.SEND_TOPIC, Perm.PUB),),
        R.CONSUMER_SEND_MSG_BACK: (Need(("group",), Kind.GROUP),),
        R.PULL_MESSAGE: _POP_FAMILY,
        R.QUERY_MESSAGE: (_TOPIC_SUB,),
        R.QUERY_CONSUMER_OFFSET: _POP_FAMILY,
        R.UPDATE_CONSUMER_OFFSET: _POP_FAMILY,
        R.SEARCH_OFFSET_BY_TIMESTAMP: (_TOPIC_ANY,),
        R.GET_MAX_OFFSET: (_TOPIC_ANY,),
        R.GET_MIN_OFFSET: (_TOPIC_ANY,),
        R.GET_EARLIEST_MSG_STORETIME: (_TOPIC_ANY,),
        R.VIEW_MESSAGE_BY_ID: (Need(("topic",), Kind.TOPIC, optional=True),),
        R.UNREGISTER_CLIENT: (Need(("consumerGroup",), Kind.GROUP, optional=True),),
        R.GET_CONSUMER_LIST_BY_GROUP: (_CONSUMER_GROUP,),
        R.END_TRANSACTION: (Need(("topic",), Kind.SEND_TOPIC, Perm.PUB, optional=True),),
        R.RESUME_CHECK_HALF_MESSAGE: (Need(("topic",), Kind.SEND_TOPIC, Perm.PUB, optional=True),),
        R.RECALL_MESSAGE: (Need(("topic",), Kind.SEND_TOPIC, Perm.PUB),),
        R.POP_MESSAGE: _POP_FAMILY,
        R.ACK_MESSAGE: _POP_FAMILY,
        R.CHANGE_MESSAGE_INVISIBLETIME: _POP_FAMILY,
        R.GET_TOPIC_STATS_INFO: (_TOPIC_ANY,),
        R.BOLIDE_GET_STATS_HISTORY: (_TOPIC_ANY, Need(("group",), Kind.GROUP, optional=True)),
        R.QUERY_TOPIC_CONSUME_BY_WHO: (_TOPIC_ANY,),
        R.GET_CONSUMER_CONNECTION_LIST: (_CONSUMER_GROUP,),
        R.GET_CONSUME_STATS: (_CONSUMER_GROUP, Need(("topic",), Kind.TOPIC, optional=True)),
        R.GET_CONSUMER_RUNNING_INFO: (_CONSUMER_GROUP,),
        R.CONSUME_MESSAGE_DIRECTLY: (
            _CONSUMER_GROUP,
            Need(("topic",), Kind.TOPIC, optional=True),
        ),
        R.QUERY_CONSUME_TIME_SPAN: (_TOPIC_SUB, Need(("group",), Kind.GROUP)),
        R.QUERY_CONSUME_QUEUE: (
            _TOPIC_SUB,
            Need(("consumerGroup",), Kind.GROUP, optional=True),
        ),
        R.INVOKE_BROKER_TO_GET_CONSUMER_STATUS: (_TOPIC_SUB, Need(("group",), Kind.GROUP)),
        R.QUERY_CORRECTION_OFFSET: (_TOPIC_SUB, Need(("compareGroup",), Kind.GROUP)),
    }
)
"""Request code -> the resources its ext fields name (see the module docstring). HEART_BEAT
(34), LOCK_BATCH_MQ (41) and UNLOCK_BATCH_MQ (42) name theirs in the body (:data:`BODY_CODES`)."""

BODY_CODES: frozenset[int] = frozenset({R.HEART_BEAT, R.LOCK_BATCH_MQ, R.UNLOCK_BATCH_MQ})
"""Requests whose resources are read from the JSON body."""

SIGNATURE_ONLY_CODES: Mapping[int, str] = MappingProxyType(
    {
        R.GET_ALL_TOPIC_CONFIG: "lists topic names and settings, no messages",
        R.GET_TOPIC_CONFIG_LIST: "lists topic names and settings, no messages",
        R.GET_TOPIC_NAME_LIST: "lists topic names",
        R.GET_BROKER_CONFIG: "the broker's settings, no topic or group",
        R.GET_BROKER_RUNTIME_INFO: "the broker's counters",
        R.GET_ALL_CONSUMER_OFFSET: "the whole offset table (a slave copying it)",
        R.GET_ALL_DELAY_OFFSET: "the delay levels' progress (a slave copying it)",
        R.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: "group settings (a slave copying them)",
        R.CHECK_CLIENT_CONFIG: "validates an expression; reads no data",
        R.GET_PRODUCER_CONNECTION_LIST: "a producer group is no ACL 1.0 resource",
        R.GET_ALL_PRODUCER_INFO: "producer groups and their connections (no ACL 1.0 resource)",
        R.VIEW_BROKER_STATS_DATA: "one statistics window",
        R.GET_BROKER_CONSUME_STATS: "every group's progress, as the dashboard's overview",
    }
)
"""Codes the broker serves that name no topic or group it could check (each with why): a
valid signature is all they need. VIEW_MESSAGE_BY_ID without ``topic`` (clients before 5.x)
is checked the same way, as RocketMQ's brokers do."""


def required_resources(request: RemotingCommand) -> dict[str, Perm]:
    """Resource -> permission ``request`` needs (empty: the signature suffices), from
    :data:`RESOURCE_TABLE` or, for :data:`BODY_CODES`, the body.

    Raises :class:`RequestParseError` when a field the check needs is missing or the body
    does not parse (such a request is refused, never let through unchecked).
    """
    code = request.code
    needed: dict[str, Perm] = {}
    table_needs = RESOURCE_TABLE.get(code)
    if table_needs is not None:
        fields = request.ext_fields
        for need in table_needs:
            name = next((fields[key] for key in need.fields if fields.get(key)), None)
            if name is None:
                if need.optional:
                    continue
                raise RequestParseError(f"request code {code} without {need.fields[-1]}")
            _add(needed, need, name)
    elif code == R.HEART_BEAT:
        _heartbeat(needed, request)
    elif code in (R.LOCK_BATCH_MQ, R.UNLOCK_BATCH_MQ):
        try:
            group = get_str(parse_object(request.body, "lock body"), "consumerGroup")
        except BolideError as error:
            raise RequestParseError(f"request code {code}: bad body: {error}") from error
        needed[retry_topic(group)] = Perm.SUB
    return needed


def _add(needed: dict[str, Perm], need: Need, name: str) -> None:
    if need.kind is Kind.SEND_TOPIC:
        _send(needed, name)
    elif need.kind is Kind.GROUP:
        needed[retry_topic(name)] = need.perm
    else:
        needed[name] = need.perm


_GRPC_PUBLISH = frozenset({"SendMessage", "RecallMessage", "EndTransaction"})
_GRPC_CONSUME = frozenset(
    {
        "ReceiveMessage",
        "AckMessage",
        "QueryAssignment",
        "ChangeInvisibleDuration",
        "ForwardMessageToDeadLetterQueue",
    }
)
_GRPC_GROUP_ONLY = frozenset({"Heartbeat", "NotifyClientTermination"})


def grpc_required_resources(method: str, topics: Iterable[str], group: str) -> dict[str, Perm]:
    """Resource -> permission the 5.x RPC ``method`` (``SendMessage``...) needs, given the
    topics and the consumer group (``""``: none) its request names. Raises
    :class:`RequestParseError` when a call that needs a topic or group names none."""
    needed: dict[str, Perm] = {}
    names = [topic for topic in topics if topic]
    if method in _GRPC_PUBLISH:
        if not names:
            raise RequestParseError(f"{method} without a topic")
        for topic in names:
            _send(needed, topic)
    elif method in _GRPC_CONSUME:
        if not names or not group:
            raise RequestParseError(f"{method} without a topic and a group")
        for topic in names:
            needed[topic] = Perm.SUB
        needed[retry_topic(group)] = Perm.SUB
    elif method in _GRPC_GROUP_ONLY:
        if group:
            needed[retry_topic(group)] = Perm.SUB
    elif method == "QueryRoute":
        for topic in names:
            needed[topic] = Perm.ANY
    return needed


def _send(needed: dict[str, Perm], topic: str) -> None:
    if is_retry_topic(topic):
        needed[topic] = Perm.SUB
    else:
        needed[topic] = Perm.PUB


def _heartbeat(needed: dict[str, Perm], request: RemotingCommand) -> None:
    try:
        heartbeat = HeartbeatData.from_json(request.body)
    except BolideError as error:
        raise RequestParseError(f"heartbeat: bad body: {error}") from error
    for consumer in heartbeat.consumer_data_set:
        needed[retry_topic(consumer.group_name)] = Perm.SUB
        for subscription in consumer.subscription_data_set:
            needed.setdefault(subscription.topic, Perm.SUB)
