"""Name-server headers (docs/protocol.md §2.3): register (103), unregister (104), route (105),
delete topic (216)."""

from __future__ import annotations

from bolide.protocol.headers.fields import WireHeader, wire, wire_header

__all__ = [
    "DeleteTopicFromNamesrvRequestHeader",
    "GetRouteInfoRequestHeader",
    "RegisterBrokerRequestHeader",
    "RegisterBrokerResponseHeader",
    "UnregisterBrokerRequestHeader",
]


@wire_header
class GetRouteInfoRequestHeader(WireHeader):
    """GET_ROUTEINFO_BY_TOPIC (105). ``accept_standard_json_only`` (4.9.7; ``None`` when not
    sent): the client wants standard JSON whatever its version."""

    topic: str = wire("topic")
    accept_standard_json_only: bool | None = wire("acceptStandardJsonOnly", default=None)


@wire_header
class RegisterBrokerRequestHeader(WireHeader):
    """REGISTER_BROKER (103). ``broker_id`` 0 is the master. ``body_crc32``, when not 0, is the
    CRC32 of the body masked with 0x7FFFFFFF, checked by the name server."""

    broker_name: str = wire("brokerName")
    broker_addr: str = wire("brokerAddr")
    cluster_name: str = wire("clusterName")
    ha_server_addr: str = wire("haServerAddr")
    broker_id: int = wire("brokerId")
    compressed: bool = wire("compressed", default=False)
    body_crc32: int = wire("bodyCrc32", default=0)


@wire_header
class RegisterBrokerResponseHeader(WireHeader):
    """REGISTER_BROKER response: filled for slaves only. No field is required."""

    ha_server_addr: str | None = wire("haServerAddr", default=None)
    master_addr: str | None = wire("masterAddr", default=None)


@wire_header
class UnregisterBrokerRequestHeader(WireHeader):
    """UNREGISTER_BROKER (104); the same fields make QUERY_DATA_VERSION's (322) header."""

    broker_name: str = wire("brokerName")
    broker_addr: str = wire("brokerAddr")
    cluster_name: str = wire("clusterName")
    broker_id: int = wire("brokerId")


@wire_header
class DeleteTopicFromNamesrvRequestHeader(WireHeader):
    """DELETE_TOPIC_IN_NAMESRV (216); ``cluster_name`` limits the deletion to one cluster."""

    topic: str = wire("topic")
    cluster_name: str | None = wire("clusterName", default=None)
