"""Name-server headers (docs/protocol.md §2.3): register (103), unregister (104), route (105),
delete topic (216)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Self

from bolide.protocol.headers.fields import (
    TRUE_TEXTS,
    format_bool,
    optional_int,
    optional_str,
    parse_bool,
    put_optional,
    required_int,
    required_str,
)

__all__ = [
    "DeleteTopicFromNamesrvRequestHeader",
    "GetRouteInfoRequestHeader",
    "RegisterBrokerRequestHeader",
    "RegisterBrokerResponseHeader",
    "UnregisterBrokerRequestHeader",
]


@dataclass(frozen=True, slots=True)
class GetRouteInfoRequestHeader:
    """GET_ROUTEINFO_BY_TOPIC (105). ``accept_standard_json_only`` (4.9.7; ``None`` when not
    sent): the client wants standard JSON whatever its version."""

    topic: str
    accept_standard_json_only: bool | None = None

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> Self:
        """Decode; raises :class:`HeaderError`."""
        accept = fields.get("acceptStandardJsonOnly")
        return cls(
            required_str(fields, "topic"),
            None if not accept else accept.lower() in TRUE_TEXTS,
        )

    def to_ext_fields(self) -> dict[str, str]:
        fields = {"topic": self.topic}
        if self.accept_standard_json_only is not None:
            fields["acceptStandardJsonOnly"] = format_bool(self.accept_standard_json_only)
        return fields


@dataclass(frozen=True, slots=True)
class RegisterBrokerRequestHeader:
    """REGISTER_BROKER (103). ``broker_id`` 0 is the master. ``body_crc32``, when not 0, is the
    CRC32 of the body masked with 0x7FFFFFFF, checked by the name server."""

    broker_name: str
    broker_addr: str
    cluster_name: str
    ha_server_addr: str
    broker_id: int
    compressed: bool = False
    body_crc32: int = 0

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> Self:
        """Decode; raises :class:`HeaderError`."""
        return cls(
            required_str(fields, "brokerName"),
            required_str(fields, "brokerAddr"),
            required_str(fields, "clusterName"),
            required_str(fields, "haServerAddr"),
            required_int(fields, "brokerId"),
            parse_bool(fields, "compressed"),
            optional_int(fields, "bodyCrc32") or 0,
        )

    def to_ext_fields(self) -> dict[str, str]:
        return {
            "brokerName": self.broker_name,
            "brokerAddr": self.broker_addr,
            "clusterName": self.cluster_name,
            "haServerAddr": self.ha_server_addr,
            "brokerId": str(self.broker_id),
            "compressed": format_bool(self.compressed),
            "bodyCrc32": str(self.body_crc32),
        }


@dataclass(frozen=True, slots=True)
class RegisterBrokerResponseHeader:
    """REGISTER_BROKER response: filled for slaves only."""

    ha_server_addr: str | None = None
    master_addr: str | None = None

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> Self:
        """Decode (no field is required)."""
        return cls(optional_str(fields, "haServerAddr"), optional_str(fields, "masterAddr"))

    def to_ext_fields(self) -> dict[str, str]:
        fields: dict[str, str] = {}
        put_optional(fields, "haServerAddr", self.ha_server_addr)
        put_optional(fields, "masterAddr", self.master_addr)
        return fields


@dataclass(frozen=True, slots=True)
class UnregisterBrokerRequestHeader:
    """UNREGISTER_BROKER (104); the same fields make QUERY_DATA_VERSION's (322) header."""

    broker_name: str
    broker_addr: str
    cluster_name: str
    broker_id: int

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> Self:
        """Decode; raises :class:`HeaderError`."""
        return cls(
            required_str(fields, "brokerName"),
            required_str(fields, "brokerAddr"),
            required_str(fields, "clusterName"),
            required_int(fields, "brokerId"),
        )

    def to_ext_fields(self) -> dict[str, str]:
        return {
            "brokerName": self.broker_name,
            "brokerAddr": self.broker_addr,
            "clusterName": self.cluster_name,
            "brokerId": str(self.broker_id),
        }


@dataclass(frozen=True, slots=True)
class DeleteTopicFromNamesrvRequestHeader:
    """DELETE_TOPIC_IN_NAMESRV (216); ``cluster_name`` limits the deletion to one cluster."""

    topic: str
    cluster_name: str | None = None

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> Self:
        """Decode; raises :class:`HeaderError`."""
        return cls(required_str(fields, "topic"), optional_str(fields, "clusterName"))

    def to_ext_fields(self) -> dict[str, str]:
        fields = {"topic": self.topic}
        put_optional(fields, "clusterName", self.cluster_name)
        return fields
