"""What a POP request lets through: its tag subscription or SQL92 expression, applied to every
message it would hand over — new ones and ones that came back after their invisible time.

* The store reads with the tag **hash** codes (the consume queue keeps only those); two tags
  with the same Java ``String.hashCode`` (``Aa`` and ``BB``) pass that step together, so each
  message read is then checked on its tag **string**, as Apache's proxy re-checks popped
  messages (``PopMessageResultFilterImpl``): ``*`` and SQL92 match every tag, a message
  without a tag matches only those, else the tag must be one subscribed.
* A SQL92 expression is evaluated on the stored properties of each message (three-valued: a
  message matches when it is TRUE, see :mod:`bolide.broker.sql_filter`).
* A message the request does not want is done for the group (as Apache's proxy acks a
  NO_MATCH at once): it is never handed over and does not hold the group's offset back.
"""

from __future__ import annotations

from dataclasses import dataclass

from bolide.broker.sql_filter import SqlFilter
from bolide.protocol.message import MessageExt, PropertyKey

__all__ = ["MATCH_ALL", "PopFilter"]


@dataclass(frozen=True, slots=True)
class PopFilter:
    """A POP request's filter; the default lets everything through."""

    tag_codes: frozenset[int] | None = None
    """The subscribed tags' hash codes, for the store's read (None: every tag)."""
    tags: frozenset[str] | None = None
    """The subscribed tag strings (None: ``*`` or SQL92, every tag)."""
    sql: SqlFilter | None = None
    """The compiled SQL92 expression (None: a tag subscription)."""

    def matches(self, message: MessageExt) -> bool:
        """Whether ``message`` is one the request subscribed to."""
        properties = message.properties
        if self.tags is not None and properties.get(PropertyKey.TAGS) not in self.tags:
            return False
        return self.sql is None or self.sql.matches(properties)


MATCH_ALL = PopFilter()
"""``*``: every message."""
