"""Per-call authorization of 5.x clients (ACL on): which topics and group a request names,
checked against the calling account by the ACL's one permission table.

A call whose ``authorization`` header does not check out is answered ``UNAUTHORIZED``
(40100); an authenticated account lacking a permission the call needs is answered
``FORBIDDEN`` (40300), the message naming the access key and the permission, never a secret.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from bolide.acl.permissions import Perm, RequestParseError, grpc_required_resources
from bolide.proxy.proto import definition_pb2 as pb
from bolide.proxy.proto import service_pb2 as spb
from bolide.proxy.status import ProxyError

__all__ = ["Authorizer", "authorize_call", "resources_of"]

_log = logging.getLogger("bolide.proxy")

Authorizer = Callable[[Any, Mapping[str, Perm]], object]
"""(what the authenticator returned, resource -> permission needed) -> anything; raises to
refuse (an ACL validator's ``authorize_grpc``)."""


def resources_of(request: Any) -> tuple[list[str], str]:
    """The topics and the consumer group (``""``: none) a 5.x request names."""
    if isinstance(request, spb.SendMessageRequest):
        return [message.topic.name for message in request.messages], ""
    if isinstance(request, spb.ReceiveMessageRequest):
        return [request.message_queue.topic.name], request.group.name
    if isinstance(request, spb.HeartbeatRequest | spb.NotifyClientTerminationRequest):
        return [], request.group.name if request.HasField("group") else ""
    topic = request.topic.name if hasattr(request, "topic") else ""
    group = request.group.name if hasattr(request, "group") else ""
    return [topic], group


def authorize_call(authorizer: Authorizer, identity: object, method: str, request: Any) -> None:
    """Raise ProxyError(FORBIDDEN) unless ``identity`` may make the call ``method``
    (BAD_REQUEST when the request lacks the topic or group its check needs)."""
    topics, group = resources_of(request)
    try:
        needed = grpc_required_resources(method, topics, group)
    except RequestParseError as error:
        raise ProxyError(pb.BAD_REQUEST, str(error)) from error
    if not needed:
        return
    try:
        authorizer(identity, needed)
    except Exception as error:
        reason = getattr(error, "reason", None) or str(error)
        _log.debug("refused %s: %s", method, reason)
        raise ProxyError(pb.FORBIDDEN, reason) from error
