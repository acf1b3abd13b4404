"""A message's trace, as stock tools read it: QUERY_MESSAGE on the trace topic with key = the
message id (at most 64 trace messages, any time), every record decoded, and only the records
whose msgId is that id kept, sorted by time (the dashboard's MessageTraceServiceImpl does the
same; a record that does not decode is reported, not dropped silently).
"""

from __future__ import annotations

from dataclasses import dataclass

from bolide.client.admin.messages import query_by_key
from bolide.client.admin.session import AdminSession
from bolide.protocol.address import format_socket_address
from bolide.protocol.system_topics import DEFAULT_TRACE_TOPIC
from bolide.protocol.trace import TraceDecodeError, TraceRecord, TraceType, decode_records

__all__ = [
    "TRACE_QUERY_MAX_MESSAGES",
    "MessageTrace",
    "TraceStep",
    "format_duration_ms",
    "message_trace",
]

TRACE_QUERY_MAX_MESSAGES = 64
"""Trace messages one look-up reads at most (the dashboard's own bound)."""


@dataclass(frozen=True, slots=True)
class TraceStep:
    """One record of the message's life. ``client`` is the record's client host when it names
    one, else the born host of the trace message that carried it; ``status`` is ``success``,
    ``failed`` or, for a delivery, ``delivered``."""

    record: TraceRecord
    client: str

    @property
    def status(self) -> str:
        kind = self.record.type
        if kind is TraceType.SUB_BEFORE:
            return "delivered"
        if kind is TraceType.END_TRANSACTION:
            return self.record.transaction_state
        return "success" if self.record.success else "failed"

    @property
    def detail(self) -> str:
        """One line for people (the CLI table and the dashboard say the same)."""
        r = self.record
        if r.type is TraceType.SUB_BEFORE:
            return f"attempt {r.retry_times + 1}, request {r.request_id}"
        if r.type is TraceType.SUB_AFTER:
            return f"took {format_duration_ms(r.cost_time_ms)}, request {r.request_id}"
        if r.type is TraceType.PUB:
            return (
                f"{r.message_type.name} to {r.topic} on {r.store_host}, "
                f"stored after {format_duration_ms(r.cost_time_ms)}"
            )
        if r.type is TraceType.RECALL:
            return f"recall on {r.topic} by {r.group or 'a producer'}"
        return f"{r.topic} {r.transaction_state}".strip()

    def to_json_object(self) -> dict[str, object]:
        """The ``--json`` form: type (the 4.x record type), time (ms), group, client, status,
        and the fields of that type."""
        r = self.record
        step: dict[str, object] = {
            "type": str(r.type),
            "time": r.timestamp_ms,
            "group": r.group,
            "client": self.client,
            "status": self.status,
            "msgId": r.msg_id,
            "keys": r.keys,
        }
        if r.type in (TraceType.PUB, TraceType.END_TRANSACTION, TraceType.RECALL):
            step |= {"topic": r.topic, "tags": r.tags, "storeHost": r.store_host,
                     "msgType": r.message_type.name}  # fmt: skip
        if r.type is TraceType.PUB:
            step |= {"costTime": r.cost_time_ms, "offsetMsgId": r.offset_msg_id,
                     "bodyLength": r.body_length}  # fmt: skip
        if r.type in (TraceType.SUB_BEFORE, TraceType.SUB_AFTER):
            step["requestId"] = r.request_id
        if r.type is TraceType.SUB_BEFORE:
            step["retryTimes"] = r.retry_times
        if r.type is TraceType.SUB_AFTER:
            step |= {"costTime": r.cost_time_ms, "contextCode": r.context_code}
        if r.type is TraceType.END_TRANSACTION:
            step |= {"transactionId": r.transaction_id,
                     "fromTransactionCheck": r.from_transaction_check}  # fmt: skip
        return step


@dataclass(frozen=True, slots=True)
class MessageTrace:
    """The steps found (oldest first) and the trace messages that did not decode."""

    msg_id: str
    trace_topic: str
    steps: list[TraceStep]
    undecodable: list[str]


async def message_trace(
    admin: AdminSession, msg_id: str, trace_topic: str = DEFAULT_TRACE_TOPIC
) -> MessageTrace:
    """The trace of ``msg_id`` from ``trace_topic``.

    Raises TopicNotFoundError when no broker holds the trace topic; a broker failure is
    raised.
    """
    found = await query_by_key(admin, trace_topic, msg_id, 0, None, TRACE_QUERY_MAX_MESSAGES,
                               False)  # fmt: skip
    steps: list[TraceStep] = []
    undecodable: list[str] = []
    for message in reversed(found):  # oldest first: records keep their written order
        try:
            records = decode_records(message.body.decode("utf-8", errors="replace"))
        except TraceDecodeError as error:
            undecodable.append(f"{message.offset_msg_id}: {error}")
            continue
        born = format_socket_address(message.born_host)
        steps.extend(
            TraceStep(record, record.client_host or born)
            for record in records
            if record.msg_id == msg_id
        )
    steps.sort(key=lambda step: step.record.timestamp_ms)  # stable: ties keep that order
    return MessageTrace(msg_id, trace_topic, steps, undecodable)


def format_duration_ms(duration_ms: int) -> str:
    """``850 ms``, ``1.25 s``, ``3 min 5 s``: a duration for people."""
    if duration_ms < 1_000:
        return f"{duration_ms} ms"
    if duration_ms < 60_000:
        return f"{duration_ms / 1000:.3g} s"
    minutes, rest_ms = divmod(duration_ms, 60_000)
    return f"{minutes} min {rest_ms // 1000} s"
