"""OpenTelemetry spans for Bolide's client, when an OpenTelemetry SDK is configured (the
``otel`` extra); nothing at all otherwise: no import error, no cost beyond one check.

As the OpenTelemetry Java agent does for RocketMQ 4.x:

* ``send``: a PRODUCER span ``<topic> publish`` around a send; the W3C context
  (``traceparent``, and ``tracestate`` when set) goes into the message's properties, which
  brokers keep end to end;
* ``receive``: a CONSUMER span ``<topic> receive`` over one listener call, linked to every
  message's producer context;
* ``process``: a CONSUMER span ``<topic> process`` per message of the call, whose parent is
  the context its producer put in the properties, so one trace spans producer and consumer.

Attributes follow the (experimental) semantic conventions: ``messaging.system`` =
``rocketmq``, ``messaging.destination.name``, ``messaging.operation``,
``messaging.message.id``, ``messaging.rocketmq.client_group``,
``messaging.rocketmq.message.tag`` and ``messaging.rocketmq.message.keys``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, MutableMapping, Sequence
from typing import Any

from bolide.protocol.message import PropertyKey

__all__ = ["TRACEPARENT", "active", "consume_spans", "end_consume", "send_span", "set_message_id"]

TRACEPARENT = PropertyKey.TRACEPARENT
"""The W3C Trace Context property a message carries (and ``tracestate``)."""

try:  # the optional dependency
    from opentelemetry import propagate, trace
    from opentelemetry.trace import Link, SpanKind, Status, StatusCode

    _AVAILABLE = True
except ImportError:  # pragma: no cover - exercised where the extra is absent
    _AVAILABLE = False

_TAGS, _KEYS = PropertyKey.TAGS, PropertyKey.KEYS


def _tracer() -> Any | None:
    """The tracer, or None when OpenTelemetry is absent or no SDK provider is configured."""
    if not _AVAILABLE:
        return None
    provider = trace.get_tracer_provider()
    if isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
        return None
    return provider.get_tracer("bolide.client")


def active() -> bool:
    """Whether spans are made (OpenTelemetry present and an SDK provider configured)."""
    return _tracer() is not None


def _attributes(topic: str, group: str, operation: str, properties: Any) -> dict[str, str]:
    attributes = {
        "messaging.system": "rocketmq",
        "messaging.destination.name": topic,
        "messaging.operation": operation,
        "messaging.rocketmq.client_group": group,
    }
    for key, name in ((_TAGS, "tag"), (_KEYS, "keys")):
        value = properties.get(key)
        if value:
            attributes[f"messaging.rocketmq.message.{name}"] = value
    return attributes


@contextlib.contextmanager
def send_span(topic: str, group: str, properties: MutableMapping[str, str]) -> Iterator[Any]:
    """A ``publish`` span around a send; puts ``traceparent`` into ``properties``. Yields the
    span (None without OpenTelemetry): the caller sets the message id on it."""
    tracer = _tracer()
    if tracer is None:
        yield None
        return
    with tracer.start_as_current_span(
        f"{topic} publish",
        kind=SpanKind.PRODUCER,
        attributes=_attributes(topic, group, "publish", properties),
    ) as span:
        propagate.inject(properties)
        yield span


def set_message_id(span: Any, msg_id: str) -> None:
    """Name the sent message on its span (nothing without OpenTelemetry)."""
    if span is not None:
        span.set_attribute("messaging.message.id", msg_id)


@contextlib.contextmanager
def consume_spans(group: str, messages: Sequence[Any]) -> Iterator[list[Any]]:
    """A ``receive`` span over one listener call and a ``process`` span per message (parent:
    the producer's context from its properties). Yields the process spans (empty without
    OpenTelemetry); :func:`end_consume` marks their outcome."""
    tracer = _tracer()
    if tracer is None or not messages:
        yield []
        return
    contexts = [propagate.extract(message.properties) for message in messages]
    links = [
        Link(trace.get_current_span(context).get_span_context())
        for context in contexts
        if trace.get_current_span(context).get_span_context().is_valid
    ]
    topic = messages[0].topic
    with tracer.start_as_current_span(
        f"{topic} receive",
        kind=SpanKind.CONSUMER,
        links=links,
        attributes=_attributes(topic, group, "receive", {}),
    ):
        spans = []
        for message, context in zip(messages, contexts, strict=True):
            attributes = _attributes(message.topic, group, "process", message.properties)
            attributes["messaging.message.id"] = message.msg_id
            spans.append(
                tracer.start_span(
                    f"{message.topic} process",
                    context=context,
                    kind=SpanKind.CONSUMER,
                    attributes=attributes,
                )
            )
        try:
            yield spans
        finally:
            for span in spans:
                span.end()


def end_consume(spans: list[Any], success: bool) -> None:
    """Mark the process spans with the listener's verdict."""
    for span in spans:
        span.set_status(Status(StatusCode.OK if success else StatusCode.ERROR))
