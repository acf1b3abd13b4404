"""Permission bits and what each request needs (RocketMQ ACL 1.0's table, Bolide's additions).

Bits (as RocketMQ): ``DENY=1``, ``ANY=2``, ``PUB=4``, ``SUB=8``. An owned permission with the
DENY bit refuses everything; a needed ``ANY`` is met by PUB or SUB; otherwise the needed bit
must be owned. A group's permission is kept under its retry topic ``%RETRY%<group>``.

What a request needs (resources read from its ext fields or body)::

    SEND_MESSAGE 10, SEND_MESSAGE_V2 310,    topic PUB; when the topic is a %RETRY% topic,
    SEND_BATCH_MESSAGE 320 (Bolide),           SUB on it instead (a consumer's send-back)
    SEND_REPLY_MESSAGE 324 / _V2 325 (Bolide)
    CONSUMER_SEND_MSG_BACK 36                %RETRY%group SUB
    PULL_MESSAGE 11                          topic SUB + %RETRY%consumerGroup SUB
    QUERY_MESSAGE 12                         topic SUB
    HEART_BEAT 34                            per consumer group: %RETRY%group SUB and every
                                             subscribed topic SUB
    UNREGISTER_CLIENT 35,                    %RETRY%consumerGroup SUB (when one is named)
    GET_CONSUMER_LIST_BY_GROUP 38
    UPDATE_CONSUMER_OFFSET 15,               %RETRY%consumerGroup SUB + topic SUB
    QUERY_CONSUMER_OFFSET 14 (Bolide)
    LOCK_BATCH_MQ 41, UNLOCK_BATCH_MQ 42     %RETRY%consumerGroup SUB (Bolide)
    admin codes (ADMIN_REQUEST_CODES)        an account with ``admin: true``
    anything else                            a valid signature only

"(Bolide)" marks checks RocketMQ 4.x leaves out: without them a batch send reached a denied
topic and any account could rewrite the ACL file or reset a group's offsets.

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

from bolide.acl.addresses import AclConfigError
from bolide.base.errors import BolideError
from bolide.protocol.bodies.heartbeat import HeartbeatData
from bolide.protocol.bodies.values import get_str, parse_object
from bolide.protocol.codes import RequestCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.system_topics import RETRY_GROUP_TOPIC_PREFIX, is_retry_topic, retry_topic

__all__ = [
    "ADMIN_REQUEST_CODES",
    "NAMESRV_ADMIN_REQUEST_CODES",
    "RETRY_GROUP_TOPIC_PREFIX",
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


def required_resources(request: RemotingCommand) -> dict[str, Perm]:
    """Resource -> permission ``request`` needs (empty: the signature suffices).

    Raises :class:`RequestParseError` when a field the check needs is missing or the body
    does not parse (such a request is refused, never let through unchecked).
    """
    code = request.code
    fields = request.ext_fields
    needed: dict[str, Perm] = {}
    if code in (R.SEND_MESSAGE, R.SEND_REPLY_MESSAGE):
        _send(needed, _field(fields, "topic", code))
    elif code in (R.SEND_MESSAGE_V2, R.SEND_BATCH_MESSAGE, R.SEND_REPLY_MESSAGE_V2):
        _send(needed, _field(fields, "b" if "b" in fields else "topic", code))
    elif code == R.CONSUMER_SEND_MSG_BACK:
        needed[retry_topic(_field(fields, "group", code))] = Perm.SUB
    elif code == R.PULL_MESSAGE:
        needed[_field(fields, "topic", code)] = Perm.SUB
        needed[retry_topic(_field(fields, "consumerGroup", code))] = Perm.SUB
    elif code == R.QUERY_MESSAGE:
        needed[_field(fields, "topic", code)] = Perm.SUB
    elif code == R.HEART_BEAT:
        _heartbeat(needed, request)
    elif code in (R.UNREGISTER_CLIENT, R.GET_CONSUMER_LIST_BY_GROUP):
        group = fields.get("consumerGroup")
        if group:
            needed[retry_topic(group)] = Perm.SUB
        elif code == R.GET_CONSUMER_LIST_BY_GROUP:
            raise RequestParseError(f"request code {code} without consumerGroup")
    elif code in (R.UPDATE_CONSUMER_OFFSET, R.QUERY_CONSUMER_OFFSET):
        needed[retry_topic(_field(fields, "consumerGroup", code))] = Perm.SUB
        needed[_field(fields, "topic", code)] = Perm.SUB
    elif code in (R.LOCK_BATCH_MQ, R.UNLOCK_BATCH_MQ):
        try:
            group = get_str(parse_object(request.body, "lock body"), "consumerGroup")
        except BolideError as error:
            raise RequestParseError(f"request code {code}: bad body: {error}") from error
        needed[retry_topic(group)] = Perm.SUB
    return needed


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


def _field(fields: Mapping[str, str], name: str, code: int) -> str:
    value = fields.get(name)
    if not value:
        raise RequestParseError(f"request code {code} without {name}")
    return value


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
