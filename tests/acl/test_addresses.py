"""RocketMQ's remote-address patterns."""

from __future__ import annotations

import pytest

from bolide.acl import AclConfigError, compile_address_pattern
from bolide.acl.addresses import host_of


@pytest.mark.parametrize(
    ("pattern", "ip", "matches"),
    [
        ("", "10.0.0.1", False),
        ("*", "10.0.0.1", True),
        ("*.*.*.*", "192.168.7.9", True),
        ("192.168.0.1", "192.168.0.1", True),
        ("192.168.0.1", "192.168.0.2", False),
        ("192.168.0.{1,2,7}", "192.168.0.7", True),
        ("192.168.0.{1,2,7}", "192.168.0.3", False),
        ("192.168.0.1,10.0.0.9", "10.0.0.9", True),
        ("192.168.0.*", "192.168.0.255", True),
        ("192.168.0.*", "192.168.1.1", False),
        ("192.168.*.*", "192.168.200.3", True),
        ("192.*.*.*", "193.0.0.1", False),
        ("192.168.0.10-20", "192.168.0.15", True),
        ("192.168.0.10-20", "192.168.0.21", False),
        ("192.168.1-5.*", "192.168.5.200", True),
        ("192.168.1-5.*", "192.168.6.0", False),
        ("::1", "::1", True),
        ("0:0:0:0:0:0:0:1", "::1", True),
        ("2001:db8::{1,a}", "2001:db8::a", True),
        ("127.0.0.1", "::ffff:127.0.0.1", True),
        ("127.0.0.*", "not-an-ip", False),
    ],
)
def test_pattern_matches(pattern: str, ip: str, matches: bool) -> None:
    assert compile_address_pattern(pattern).matches(ip) is matches


@pytest.mark.parametrize(
    "pattern",
    [
        "192.168.0",
        "192.168.0.300",
        "300.*.*.*",
        "*.168.0.1",
        "192.168.*.1",
        "192.168.0.20-10",
        "192.168.0.-5",
        "192.168.0.{}",
        "192.168.{1,2}.1",
        "hello",
        "10.0.0.1,bogus",
        "2001:db8::*",
    ],
)
def test_malformed_patterns_are_refused(pattern: str) -> None:
    with pytest.raises(AclConfigError, match="address pattern"):
        compile_address_pattern(pattern)


def test_host_of_drops_the_port() -> None:
    assert host_of("10.1.2.3:4567") == "10.1.2.3"
    assert host_of("[::1]:4567") == "::1"
    assert host_of("10.1.2.3") == "10.1.2.3"
