"""Socket addresses as the wire carries them: IP literals packed in 4 or 16 bytes, and the
``ip:port`` text form (``[ipv6]:port``). Shared by the message codec and message ids."""

from __future__ import annotations

import socket

from bolide.base.errors import ProtocolError

__all__ = [
    "SocketAddress",
    "format_socket_address",
    "is_ipv6_host",
    "pack_ip",
    "parse_socket_address",
    "unpack_ip",
]

SocketAddress = tuple[str, int]
"""``(ip, port)``, e.g. ``("127.0.0.1", 10911)``; an IPv6 literal when the ip contains ``:``."""


def is_ipv6_host(host: str) -> bool:
    """Whether ``host`` is written as an IPv6 literal (it contains ``:``)."""
    return ":" in host


def pack_ip(host: str) -> bytes:
    """The 4 (IPv4) or 16 (IPv6) address bytes of an IP literal.

    Raises:
        ProtocolError: ``host`` is not an IP literal (host names are not resolved here).
    """
    try:
        if ":" in host:
            return socket.inet_pton(socket.AF_INET6, host)
        # inet_pton, unlike inet_aton, refuses shorthand such as "127.1" and trailing junk.
        return socket.inet_pton(socket.AF_INET, host)
    except (OSError, ValueError, TypeError) as error:
        raise ProtocolError(f"not an IP literal: {host!r}") from error


def unpack_ip(packed: bytes) -> str:
    """The text form of 4 or 16 address bytes.

    Raises:
        ProtocolError: ``packed`` is neither 4 nor 16 bytes long.
    """
    if len(packed) == 4:
        return socket.inet_ntoa(packed)
    if len(packed) == 16:
        return socket.inet_ntop(socket.AF_INET6, packed)
    raise ProtocolError(f"an IP address has 4 or 16 bytes, not {len(packed)}")


def format_socket_address(address: SocketAddress) -> str:
    """``"ip:port"``, with brackets around an IPv6 ip (``"[::1]:10911"``)."""
    host, port = address
    if ":" in host:
        return f"[{host}]:{port}"
    return f"{host}:{port}"


def parse_socket_address(text: str) -> SocketAddress:
    """Parse ``"ip:port"`` or ``"[ipv6]:port"`` (the inverse of :func:`format_socket_address`).

    Raises:
        ProtocolError: no port, a port outside 0..65535, or empty host.
    """
    host, separator, port_text = text.rpartition(":")
    if not separator or not host:
        raise ProtocolError(f"not a host:port address: {text!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        port = int(port_text)
    except ValueError as error:
        raise ProtocolError(f"bad port in address {text!r}") from error
    if not 0 <= port <= 0xFFFF:
        raise ProtocolError(f"port out of range in address {text!r}")
    return (host, port)
