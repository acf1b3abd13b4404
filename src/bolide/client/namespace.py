"""Namespaces in the client, as Java's ``withNamespace``: a namespace ``ns`` turns the topic
``orders`` into ``ns%orders`` and the group ``billing`` into ``ns%billing`` on the wire; the
retry and dead-letter topics keep their prefix in front (``%RETRY%ns%billing``); system
topics and names already in the namespace stay as they are. Received messages and send
results show names without the namespace again.
"""

from __future__ import annotations

from bolide.base.errors import ConfigError
from bolide.protocol.system_topics import (
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    DLQ_GROUP_TOPIC_PREFIX,
    OFFSET_MOVED_EVENT,
    RETRY_GROUP_TOPIC_PREFIX,
    SELF_TEST_TOPIC,
    SYSTEM_TOPIC_PREFIX,
    is_send_forbidden_topic,
)

__all__ = ["NAMESPACE_SEPARATOR", "check_namespace", "with_namespace", "without_namespace"]

NAMESPACE_SEPARATOR = "%"
"""Between the namespace and the name."""

_SYSTEM_NAMES = frozenset(
    {AUTO_CREATE_TOPIC_KEY_TOPIC, "DefaultCluster", SELF_TEST_TOPIC, OFFSET_MOVED_EVENT}
)
"""Names Java never wraps besides the send-forbidden system topics and ``rmq_sys_`` ones."""


def check_namespace(namespace: str | None) -> str | None:
    """``namespace`` when usable (None or empty: none). Raises ConfigError when it holds the
    separator or a character a topic may not hold."""
    if not namespace:
        return None
    if NAMESPACE_SEPARATOR in namespace or not all(
        char.isalnum() or char in "-_" for char in namespace
    ):
        raise ConfigError(f"namespace {namespace!r} may hold letters, digits, '-' and '_' only")
    return namespace


def _split_prefix(resource: str) -> tuple[str, str]:
    for prefix in (RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX):
        if resource.startswith(prefix):
            return prefix, resource[len(prefix) :]
    return "", resource


def _is_system(name: str) -> bool:
    return (
        name in _SYSTEM_NAMES
        or name.startswith(SYSTEM_TOPIC_PREFIX)
        or is_send_forbidden_topic(name)
    )


def with_namespace(namespace: str | None, resource: str) -> str:
    """``resource`` (topic or group) in ``namespace``; unchanged without a namespace, for a
    system name, or when already in the namespace."""
    if not namespace or not resource:
        return resource
    prefix, bare = _split_prefix(resource)
    if _is_system(bare) or bare.startswith(namespace + NAMESPACE_SEPARATOR):
        return resource
    return f"{prefix}{namespace}{NAMESPACE_SEPARATOR}{bare}"


def without_namespace(namespace: str | None, resource: str) -> str:
    """``resource`` with ``namespace`` taken off (retry/DLQ prefix kept); unchanged when it
    is not in that namespace."""
    if not namespace or not resource:
        return resource
    prefix, bare = _split_prefix(resource)
    head = namespace + NAMESPACE_SEPARATOR
    if not bare.startswith(head):
        return resource
    return prefix + bare[len(head) :]
