"""The 5.x proxy maps SystemProperties.trace_context to message properties and back:
TRACE_CONTEXT (as Apache's proxy), plus ``traceparent`` for a W3C value so 4.x consumers
(OpenTelemetry agents, Bolide's client) continue the trace; a 4.x producer's traceparent
reaches 5.x consumers as trace_context."""

from __future__ import annotations

from bolide.protocol.message import MessageExt, PropertyKey
from bolide.proxy.messages import properties_of, to_proto_message
from bolide.proxy.proto import definition_pb2 as pb

W3C = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def _sent(trace_context: str | None) -> dict[str, str]:
    message = pb.Message()
    message.topic.name = "Orders"
    message.system_properties.message_id = "01ABC"
    if trace_context is not None:
        message.system_properties.trace_context = trace_context
    properties, _ = properties_of(message, "producers")
    return properties


def test_trace_context_in() -> None:
    properties = _sent(W3C)
    assert properties[PropertyKey.TRACE_CONTEXT] == W3C
    assert properties[PropertyKey.TRACEPARENT] == W3C
    opaque = _sent("vendor-specific")
    assert opaque[PropertyKey.TRACE_CONTEXT] == "vendor-specific"
    assert PropertyKey.TRACEPARENT not in opaque
    assert PropertyKey.TRACE_CONTEXT not in _sent(None)


def _received(properties: dict[str, str]) -> pb.Message:
    stored = MessageExt(topic="Orders", body=b"x", properties=properties)
    stored.store_host = ("127.0.0.1", 10911)
    stored.born_host = ("127.0.0.1", 50000)
    return to_proto_message(stored)


def test_trace_context_out() -> None:
    both = _received({PropertyKey.TRACE_CONTEXT: W3C, PropertyKey.TRACEPARENT: W3C})
    assert both.system_properties.trace_context == W3C
    assert PropertyKey.TRACE_CONTEXT not in both.user_properties
    from_4x = _received({PropertyKey.TRACEPARENT: W3C})  # a 4.x producer's OTel context
    assert from_4x.system_properties.trace_context == W3C
    assert from_4x.user_properties[PropertyKey.TRACEPARENT] == W3C
    assert not _received({}).system_properties.HasField("trace_context")
