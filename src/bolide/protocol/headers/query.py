"""Message lookup headers (docs/protocol.md §2.7): VIEW_MESSAGE_BY_ID (33), QUERY_MESSAGE (12)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Self

from bolide.protocol.headers.fields import (
    WireHeader,
    parse_bool,
    required_int,
    required_str,
    wire,
    wire_header,
)

__all__ = [
    "UNIQUE_KEY_QUERY_KEY",
    "QueryMessageRequestHeader",
    "QueryMessageResponseHeader",
    "ViewMessageRequestHeader",
]

UNIQUE_KEY_QUERY_KEY = "_UNIQUE_KEY_QUERY"
"""Extra extFields key of QUERY_MESSAGE: ``"true"`` when ``key`` is a UNIQ_KEY."""


@wire_header
class ViewMessageRequestHeader(WireHeader):
    """VIEW_MESSAGE_BY_ID (33): ``commit_log_offset`` is wire ``offset``, taken from the offset
    message id."""

    commit_log_offset: int = wire("offset")


@dataclass(frozen=True, slots=True)
class QueryMessageRequestHeader:
    """QUERY_MESSAGE (12): messages of ``topic`` indexed under ``key`` stored between the two
    timestamps (ms). ``unique_key_query`` travels as the extra key ``_UNIQUE_KEY_QUERY``."""

    topic: str
    key: str
    max_messages: int
    begin_timestamp_ms: int
    end_timestamp_ms: int
    unique_key_query: bool = False

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> Self:
        """Decode; raises :class:`HeaderError`."""
        return cls(
            required_str(fields, "topic"),
            required_str(fields, "key"),
            required_int(fields, "maxNum"),
            required_int(fields, "beginTimestamp"),
            required_int(fields, "endTimestamp"),
            parse_bool(fields, UNIQUE_KEY_QUERY_KEY),
        )

    def to_ext_fields(self) -> dict[str, str]:
        fields = {
            "topic": self.topic,
            "key": self.key,
            "maxNum": str(self.max_messages),
            "beginTimestamp": str(self.begin_timestamp_ms),
            "endTimestamp": str(self.end_timestamp_ms),
        }
        if self.unique_key_query:
            fields[UNIQUE_KEY_QUERY_KEY] = "true"
        return fields


@wire_header
class QueryMessageResponseHeader(WireHeader):
    """QUERY_MESSAGE response: how far the index had been built."""

    index_last_update_timestamp_ms: int = wire("indexLastUpdateTimestamp")
    index_last_update_phy_offset: int = wire("indexLastUpdatePhyoffset")
