"""Client configuration: name-server lists, client ids, defaults from the process."""

from __future__ import annotations

import os

import pytest

from bolide.base.errors import ConfigError
from bolide.client.config import (
    ClientConfig,
    ConsumeFrom,
    build_client_config,
    local_ip_toward,
    parse_namesrv_addresses,
)
from bolide.protocol.bodies import ConsumeFromWhere


def test_namesrv_lists() -> None:
    assert parse_namesrv_addresses("a:1;b:2, c:3;") == ("a:1", "b:2", "c:3")
    assert parse_namesrv_addresses(["a:1", "a:1"]) == ("a:1",)
    for bad in ("", ";", "nohost", "a:99999"):
        with pytest.raises(ConfigError):
            parse_namesrv_addresses(bad)


def test_client_id_is_ip_pid_instance() -> None:
    config = ClientConfig(("127.0.0.1:9876",), client_ip="10.0.0.5", pid=42, instance_name="w1")
    assert config.client_id == "10.0.0.5@42#w1"
    with_unit = ClientConfig(("n:1",), "10.0.0.5", 42, instance_name="w1", unit_name="u")
    assert with_unit.client_id == "10.0.0.5@42#w1@u"


@pytest.mark.parametrize("name", ["", "a@b", "a#b"])
def test_instance_names_that_would_break_the_id_are_refused(name: str) -> None:
    with pytest.raises(ConfigError):
        ClientConfig(("n:1",), "1.2.3.4", 1, instance_name=name)


def test_build_uses_this_process_and_unique_default_names() -> None:
    first = build_client_config("127.0.0.1:9876")
    second = build_client_config("127.0.0.1:9876")
    assert first.pid == os.getpid()
    assert first.client_ip == "127.0.0.1"  # the address toward a loopback name server
    assert first.client_id != second.client_id
    named = build_client_config("127.0.0.1:9876", "worker-1", client_ip="10.1.1.1", pid=7)
    assert named.client_id == "10.1.1.1@7#worker-1"


def test_local_ip_falls_back_to_loopback() -> None:
    assert local_ip_toward("not-an-address") == "127.0.0.1"


def test_consume_from_maps_to_the_wire_enum() -> None:
    assert ConsumeFrom.FIRST_OFFSET.to_wire() is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    assert ConsumeFrom.LAST_OFFSET.to_wire() is ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    assert ConsumeFrom.TIMESTAMP.to_wire() is ConsumeFromWhere.CONSUME_FROM_TIMESTAMP
