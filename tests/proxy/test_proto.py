"""The proxy's protobuf modules, generated during the install from the official SDK's
descriptors (tools/generate_proto.py), are current and carry exactly the SDK's descriptors
(every message, field number and type)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bolide.proxy.proto import admin_pb2, definition_pb2, service_pb2

ROOT = Path(__file__).resolve().parents[2]


def test_installed_modules_are_what_protoc_generates_from_the_sdk() -> None:
    pytest.importorskip("grpc_tools")
    result = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "generate_proto.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr


def test_descriptors_equal_those_of_the_official_sdk() -> None:
    sdk = pytest.importorskip("rocketmq.grpc_protocol")
    from rocketmq.grpc_protocol import admin_pb2 as sdk_admin
    from rocketmq.grpc_protocol import definition_pb2 as sdk_definition
    from rocketmq.grpc_protocol import service_pb2 as sdk_service

    del sdk
    for ours, theirs in (
        (definition_pb2, sdk_definition),
        (service_pb2, sdk_service),
        (admin_pb2, sdk_admin),
    ):
        assert ours.DESCRIPTOR.serialized_pb == theirs.DESCRIPTOR.serialized_pb
        assert sorted(ours.DESCRIPTOR.message_types_by_name) == sorted(
            theirs.DESCRIPTOR.message_types_by_name
        )
        for name, message in ours.DESCRIPTOR.message_types_by_name.items():
            other = theirs.DESCRIPTOR.message_types_by_name[name]
            assert [(f.name, f.number, f.type) for f in message.fields] == [
                (f.name, f.number, f.type) for f in other.fields
            ]
    methods = [m.name for m in service_pb2.DESCRIPTOR.services_by_name["MessagingService"].methods]
    assert "ReceiveMessage" in methods and "Telemetry" in methods
