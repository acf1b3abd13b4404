"""Client settings, the client id, and the user-facing consumer options.

Library code never reads the process environment: :func:`build_client_config` is the one
place that looks at the process (its pid, the local address toward the name server) and it is
called by the facades (``bolide.Producer``, ``bolide.aio.Producer``...), never deep down.

A client id is ``ip@pid#instance`` (the layout of the Java 4.9 and C++ 2.0 clients): one
:class:`~bolide.client.instance.ClientInstance` per id, shared by the producers and
consumers that use it. Brokers tell consumers of a group apart by this id, so two consumers
of one group in one process need different instance names; when none is given, the facade
picks a unique one (as Java replaces ``DEFAULT`` by ``pid#nanotime``).
"""

from __future__ import annotations

import enum
import os
import socket
import time
from collections.abc import Iterable
from dataclasses import dataclass

from bolide.base import limits
from bolide.base.errors import ConfigError
from bolide.client.security import SessionCredentials, client_tls, credentials_of
from bolide.protocol.bodies import ConsumeFromWhere
from bolide.remoting.client_pool import split_address
from bolide.remoting.tls import TlsClientSettings

__all__ = [
    "ClientConfig",
    "ConsumeFrom",
    "build_client_config",
    "local_ip_toward",
    "parse_namesrv_addresses",
]

NAMESRV_SEPARATORS = (";", ",")
"""Name-server lists are ``;``-separated as in RocketMQ; ``,`` is accepted too."""


class ConsumeFrom(enum.Enum):
    """Where a consumer group without a committed offset starts on a queue (RocketMQ's offset
    management).

    * ``LAST_OFFSET``: at the queue's end (retry topics: at 0);
    * ``FIRST_OFFSET``: at 0;
    * ``TIMESTAMP``: at the first message stored at or after the consumer's consume timestamp
      (searched on the broker; retry topics: at the end).
    """

    LAST_OFFSET = "LAST_OFFSET"
    FIRST_OFFSET = "FIRST_OFFSET"
    TIMESTAMP = "TIMESTAMP"

    def to_wire(self) -> ConsumeFromWhere:
        """The ConsumeFromWhere a heartbeat reports."""
        return _CONSUME_FROM_WIRE[self]


_CONSUME_FROM_WIRE = {
    ConsumeFrom.LAST_OFFSET: ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
    ConsumeFrom.FIRST_OFFSET: ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    ConsumeFrom.TIMESTAMP: ConsumeFromWhere.CONSUME_FROM_TIMESTAMP,
}


def parse_namesrv_addresses(namesrv: str | Iterable[str]) -> tuple[str, ...]:
    """``"host:port;host2:port"`` (or an iterable of ``host:port``) -> the addresses.

    Raises:
        ConfigError: no address, or one that is not ``host:port``.
    """
    if isinstance(namesrv, str):
        text = namesrv
        for separator in NAMESRV_SEPARATORS[1:]:
            text = text.replace(separator, NAMESRV_SEPARATORS[0])
        items = [item.strip() for item in text.split(NAMESRV_SEPARATORS[0])]
    else:
        items = [item.strip() for item in namesrv]
    addresses = tuple(dict.fromkeys(item for item in items if item))
    if not addresses:
        raise ConfigError("no name server address given (expected host:port)")
    for address in addresses:
        try:
            split_address(address)
        except ValueError as error:
            raise ConfigError(f"bad name server address {address!r}: {error}") from error
    return addresses


def local_ip_toward(address: str) -> str:
    """The local IPv4 address the system routes to ``address`` by (``host:port``).

    A UDP socket is "connected", which sends nothing, and its own address read back. Falls back
    to ``127.0.0.1`` when the host cannot be resolved or routed to.
    """
    try:
        host, port = split_address(address)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect((host, port))
            local_ip = str(probe.getsockname()[0])
    except (OSError, ValueError):
        return "127.0.0.1"
    return local_ip if local_ip != "0.0.0.0" else "127.0.0.1"


@dataclass(frozen=True, slots=True)
class ClientConfig:
    """What a :class:`~bolide.client.instance.ClientInstance` needs.

    ``client_ip`` and ``pid`` make the client id together with ``instance_name``; the
    intervals are in milliseconds (defaults: RocketMQ's, from :mod:`bolide.base.limits`).
    """

    namesrv_addresses: tuple[str, ...]
    client_ip: str
    pid: int
    instance_name: str = "DEFAULT"
    unit_name: str | None = None
    api_timeout_ms: int = limits.CLIENT_API_TIMEOUT_MS
    route_poll_interval_ms: int = limits.ROUTE_POLL_INTERVAL_MS
    heartbeat_interval_ms: int = limits.HEARTBEAT_INTERVAL_MS
    persist_offsets_interval_ms: int = limits.CONSUMER_OFFSET_PERSIST_INTERVAL_MS
    rebalance_interval_ms: int = limits.REBALANCE_INTERVAL_MS
    credentials: SessionCredentials | None = None
    """ACL credentials signing every request (None: requests go unsigned)."""
    tls: TlsClientSettings | None = None
    """TLS toward name servers and brokers (None: plain TCP)."""

    def __post_init__(self) -> None:
        if not self.namesrv_addresses:
            raise ConfigError("a client needs at least one name server address")
        if not self.instance_name or any(c in self.instance_name for c in "@#"):
            raise ConfigError(f"instance name {self.instance_name!r} is empty or has @ or #")
        for name in (
            "api_timeout_ms",
            "route_poll_interval_ms",
            "heartbeat_interval_ms",
            "persist_offsets_interval_ms",
            "rebalance_interval_ms",
        ):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be positive, not {getattr(self, name)}")

    @property
    def client_id(self) -> str:
        """``ip@pid#instance`` (plus ``@unit`` when a unit name is set, as Java does)."""
        client_id = f"{self.client_ip}@{self.pid}#{self.instance_name}"
        if self.unit_name:
            client_id += f"@{self.unit_name}"
        return client_id


def build_client_config(
    namesrv: str | Iterable[str],
    instance_name: str | None = None,
    *,
    client_ip: str | None = None,
    pid: int | None = None,
    api_timeout_ms: int = limits.CLIENT_API_TIMEOUT_MS,
    access_key: str | None = None,
    secret_key: str | None = None,
    tls: TlsClientSettings | bool | None = None,
) -> ClientConfig:
    """A :class:`ClientConfig` for this process: the facades' entry point.

    ``pid`` defaults to ``os.getpid()``; ``client_ip`` to the local address toward the first
    name server; ``instance_name`` to a name unique in this process (monotonic nanoseconds),
    so that two consumers of one group in one process never share a client id.
    ``access_key``/``secret_key`` sign every request (ACL); ``tls`` connects over TLS (True:
    checked against the system's CAs).

    Raises:
        ConfigError: see :func:`parse_namesrv_addresses` and :class:`ClientConfig`; only one of
            access_key and secret_key given.
    """
    addresses = parse_namesrv_addresses(namesrv)
    return ClientConfig(
        namesrv_addresses=addresses,
        client_ip=client_ip or local_ip_toward(addresses[0]),
        pid=os.getpid() if pid is None else pid,
        instance_name=instance_name or str(time.monotonic_ns()),
        api_timeout_ms=api_timeout_ms,
        credentials=credentials_of(access_key, secret_key),
        tls=client_tls(tls),
    )
