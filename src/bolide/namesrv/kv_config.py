"""The name server's KV config: namespace -> {key: value}, in memory, bounded.

RocketMQ admin tools keep a few settings here (for example the ``ORDER_TOPIC_CONFIG``
namespace, whose items a name server hands back to registering brokers). A Java name server
also writes them to ``kvConfig.json``; a Bolide name server has no data directory, so the
items live as long as the process.
"""

from __future__ import annotations

from bolide.base import limits
from bolide.base.errors import BackpressureError

ORDER_TOPIC_CONFIG_NAMESPACE = "ORDER_TOPIC_CONFIG"
"""NamesrvUtil.NAMESPACE_ORDER_TOPIC_CONFIG: returned to brokers in the register response."""


class KvConfig:
    """Namespaced string settings; ``max_entries`` bounds the items over all namespaces."""

    def __init__(self, max_entries: int = limits.NAMESRV_KV_CONFIG_MAX_ENTRIES) -> None:
        self._max_entries = max_entries
        self._namespaces: dict[str, dict[str, str]] = {}
        self._entry_count = 0

    def put(self, namespace: str, key: str, value: str) -> None:
        """Set one item; raises :class:`BackpressureError` when a new item would exceed the
        bound (replacing an existing item always works)."""
        items = self._namespaces.get(namespace)
        is_new = items is None or key not in items
        if is_new and self._entry_count >= self._max_entries:
            raise BackpressureError(f"KV config holds {self._entry_count} items, the maximum")
        if items is None:
            items = self._namespaces[namespace] = {}
        items[key] = value
        if is_new:
            self._entry_count += 1

    def get(self, namespace: str, key: str) -> str | None:
        items = self._namespaces.get(namespace)
        return None if items is None else items.get(key)

    def delete(self, namespace: str, key: str) -> bool:
        """Remove one item; returns whether it existed. An emptied namespace disappears."""
        items = self._namespaces.get(namespace)
        if items is None or key not in items:
            return False
        del items[key]
        self._entry_count -= 1
        if not items:
            del self._namespaces[namespace]
        return True

    def items(self, namespace: str) -> dict[str, str]:
        """A copy of the namespace's items (empty when the namespace is unknown)."""
        return dict(self._namespaces.get(namespace, {}))
