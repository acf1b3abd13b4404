"""RocketMQ's remote-address patterns (``globalWhiteRemoteAddresses``, ``whiteRemoteAddress``).

The forms plain_acl.yml accepts, and what each matches (the peer's IP, port left out)::

    (empty)                      nothing
    *   *.*.*.*   *:*:*:*:*:*:*:*   every address
    192.168.0.1                  that address (IPv6 too: 2001:db8::1, written any way)
    192.168.0.{1,2,7}            the listed last parts (also 2001:db8::{1,a})
    192.168.0.1,192.168.0.9      the listed addresses
    192.168.0.*                  a whole part: here 192.168.0.0 - 192.168.0.255
    192.168.*.*  192.*.*.*       the same, from the second or third part on
    192.168.0.10-20              a range of one part (the parts after it, if any, are *)
    192.168.1-5.*                   e.g. 192.168.1.0 - 192.168.5.255

A malformed pattern raises :class:`AclConfigError` naming it: a file with one is refused as a
whole (the broker keeps its previous rules), where Java would sometimes accept it and match
nothing.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from dataclasses import dataclass

from bolide.base.errors import ConfigError

__all__ = ["AclConfigError", "AddressPattern", "compile_address_pattern", "host_of"]

_EVERYTHING = frozenset({"*", "*.*.*.*", "*:*:*:*:*:*:*:*"})


class AclConfigError(ConfigError):
    """An ACL file or an ACL update is malformed; the message names the entry and why."""


@dataclass(frozen=True, slots=True)
class AddressPattern:
    """A compiled address pattern: ``matches(ip)``; ``text`` is what the file said."""

    text: str
    _match: Callable[[str], bool]

    def matches(self, ip: str) -> bool:
        """Whether the peer address ``ip`` (no port) is covered by the pattern."""
        return self._match(ip)


def host_of(remote_address: str) -> str:
    """``"10.0.0.5:4711"`` -> ``"10.0.0.5"`` (the IP a pattern is matched against)."""
    host, separator, port = remote_address.rpartition(":")
    if not separator or not port.isdigit():
        return remote_address
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


def compile_address_pattern(text: str) -> AddressPattern:
    """Compile one pattern (see the module table). Raises :class:`AclConfigError`."""
    pattern = text.strip()
    if not pattern:
        return AddressPattern(text, _nothing)
    if pattern in _EVERYTHING:
        return AddressPattern(text, _anything)
    if pattern.endswith("}"):
        return AddressPattern(text, _listed(_expand_braces(pattern)))
    if "," in pattern:
        return AddressPattern(text, _listed([part.strip() for part in pattern.split(",")]))
    if "*" in pattern or "-" in pattern:
        if ":" in pattern:
            raise AclConfigError(
                f"address pattern {text!r}: ranges and * are supported for IPv4 only"
            )
        return AddressPattern(text, _ipv4_range(pattern))
    return AddressPattern(text, _listed([pattern]))


def _nothing(ip: str) -> bool:
    return False


def _anything(ip: str) -> bool:
    return True


def _parse_ip(text: str, pattern: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        raise AclConfigError(
            f"address pattern {pattern!r}: {text!r} is not an IP address"
        ) from None


def _peer(ip: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        address = ipaddress.ip_address(ip)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _listed(texts: list[str]) -> Callable[[str], bool]:
    pattern = ",".join(texts)
    addresses = frozenset(_parse_ip(text, pattern) for text in texts)

    def match(ip: str) -> bool:
        return _peer(ip) in addresses

    return match


def _expand_braces(pattern: str) -> list[str]:
    """``a.b.c.{1,2}`` -> ``[a.b.c.1, a.b.c.2]`` (and ``2001:db8::{1,a}`` likewise)."""
    head, brace, tail = pattern.partition("{")
    if not brace or "{" in tail or not tail.endswith("}"):
        raise AclConfigError(f"address pattern {pattern!r}: expected one {{x,y}} at the end")
    separator = ":" if ":" in head else "."
    if not head.endswith(separator):
        raise AclConfigError(f"address pattern {pattern!r}: {{...}} must be a whole last part")
    if separator == "." and head.count(".") != 3:
        raise AclConfigError(f"address pattern {pattern!r}: an IPv4 pattern has four parts")
    parts = [part.strip() for part in tail[:-1].split(",")]
    if not all(parts):
        raise AclConfigError(f"address pattern {pattern!r}: an empty entry in {{...}}")
    return [head + part for part in parts]


def _octet(text: str, pattern: str) -> int:
    if not text.isdigit() or not 0 <= int(text) <= 255:
        raise AclConfigError(f"address pattern {pattern!r}: {text!r} is not a number 0-255")
    return int(text)


def _ipv4_range(pattern: str) -> Callable[[str], bool]:
    """``a.b.*.*``, ``a.b.c.*``, ``a.b.c.10-20``, ``a.b.1-5.*``: fixed head, one ranged part,
    then only ``*`` parts."""
    parts = [part.strip() for part in pattern.split(".")]
    if len(parts) != 4:
        raise AclConfigError(f"address pattern {pattern!r}: an IPv4 pattern has four parts")
    ranged = next(i for i, part in enumerate(parts) if "*" in part or "-" in part)
    if ranged == 0:
        raise AclConfigError(f"address pattern {pattern!r}: the first part must be a number")
    head = tuple(_octet(part, pattern) for part in parts[:ranged])
    if any(part != "*" for part in parts[ranged + 1 :]):
        raise AclConfigError(f"address pattern {pattern!r}: only * may follow a range")
    spec = parts[ranged]
    if spec == "*":
        low, high = 0, 255
    else:
        low_text, dash, high_text = spec.partition("-")
        if not dash:
            raise AclConfigError(f"address pattern {pattern!r}: bad range {spec!r}")
        low, high = _octet(low_text, pattern), _octet(high_text, pattern)
        if low > high:
            raise AclConfigError(f"address pattern {pattern!r}: range {spec!r} is backwards")

    def match(ip: str) -> bool:
        address = _peer(ip)
        if not isinstance(address, ipaddress.IPv4Address):
            return False
        octets = address.packed
        return tuple(octets[:ranged]) == head and low <= octets[ranged] <= high

    return match
