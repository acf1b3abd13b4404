"""Bolide's client trace (``enable_trace=True`` on a Producer or PushConsumer): 4.x trace
records of its own sends and consume calls, as the Java client's trace hooks write them.

* A producer writes a ``Pub`` record per sent message (time = before the send, cost = the
  send's duration, store host = the broker's address, msgType Normal_Msg or Delay_Msg), unless
  the broker's reply said ``TRACE_ON=false``.
* A transaction producer writes a ``Pub`` (Trans_Msg_Half) per half message and an
  ``EndTransaction`` per END_TRANSACTION it sends, after its local transaction or in answer to
  the broker's check-back (fromTransactionCheck true): Java's layout, msgType
  Trans_msg_Commit, the state's name (COMMIT_MESSAGE, ROLLBACK_MESSAGE, UNKNOW), the store
  host the broker's address.
* A push consumer (concurrent or orderly) writes, per listener call, a ``SubBefore`` per
  message and a ``SubAfter`` per message (sharing a fresh request id; cost = the call's time /
  its message count; success as the listener said; context code 0 SUCCESS or 4 FAILED),
  skipping messages whose ``TRACE_ON`` property is "false".

The records wait in memory, off the send and consume paths, and an internal producer
(``_INNER_TRACE_PRODUCER-<group>`` on the same client instance) sends them to the trace topic
once TRACE_CLIENT_BATCH_CONTEXTS sends or calls gathered or every TRACE_CLIENT_FLUSH_INTERVAL_MS,
in messages whose KEYS are the msgIds and user keys they mention. A trace send that fails is
logged and counted, never raised to the application.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
from collections.abc import Sequence
from typing import Protocol

from bolide.base import limits
from bolide.base.errors import BolideError
from bolide.client.message import Message
from bolide.protocol.message import Message as WireMessage
from bolide.protocol.message import MessageExt, PropertyKey
from bolide.protocol.trace import (
    TraceMessageType,
    TraceRecord,
    TraceType,
    pack_records,
    trace_message_keys,
)

__all__ = ["TRACE_PRODUCER_GROUP_PREFIX", "TraceDispatcher", "TraceSender"]

_log = logging.getLogger("bolide.client.trace")

TRACE_PRODUCER_GROUP_PREFIX = "_INNER_TRACE_PRODUCER-"
_SUCCESS_CODE, _FAILED_CODE = 0, 4


class TraceSender(Protocol):
    """What sends the trace messages: Bolide's Producer (auto_batch off)."""

    async def start(self) -> None: ...

    async def shutdown(self) -> None: ...

    async def send(self, message: Message) -> object: ...


class TraceDispatcher:
    """Gathers trace records and sends them with ``producer`` (started and stopped here)."""

    def __init__(self, producer: TraceSender, group: str, trace_topic: str, region_id: str) -> None:
        self._producer = producer
        self.group = group
        self.trace_topic = trace_topic
        self.region_id = region_id
        self._records: list[TraceRecord] = []
        self._contexts = 0
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._request_ids = itertools.count(1)
        self._request_prefix = f"{os.getpid():x}-{id(self):x}-"
        self.sent_records = 0
        self.failed_records = 0

    async def start(self) -> None:
        await self._producer.start()
        self._task = asyncio.get_running_loop().create_task(self._run(), name="client-trace")

    async def shutdown(self) -> None:
        """Send what is left, then stop the internal producer."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.flush()
        await self._producer.shutdown()

    # --- records, from the hot paths (list appends only) ----------------------------------

    def published(
        self,
        message: WireMessage,
        msg_id: str,
        offset_msg_id: str,
        store_host: str,
        *,
        started_ms: int,
        cost_ms: int,
        trace_on: bool,
        message_type: TraceMessageType | None = None,
    ) -> None:
        """A send of ``message`` succeeded (``message_type``: Normal_Msg or Delay_Msg from
        its properties unless given)."""
        if not trace_on:
            return
        properties = message.properties
        delayed = PropertyKey.DELAY in properties or PropertyKey.TIMER_DELIVER_MS in properties
        if message_type is None:
            message_type = TraceMessageType.DELAY_MSG if delayed else TraceMessageType.NORMAL_MSG
        self._add(
            [
                TraceRecord(
                    TraceType.PUB, started_ms, self.region_id, self.group, message.topic, msg_id,
                    properties.get(PropertyKey.TAGS, ""), properties.get(PropertyKey.KEYS, ""),
                    store_host, len(message.body), cost_ms, message_type, offset_msg_id, True,
                )
            ]
        )  # fmt: skip

    def transaction_ended(
        self,
        message: WireMessage | MessageExt,
        msg_id: str,
        store_host: str,
        *,
        state: str,
        transaction_id: str,
        from_check: bool,
        now_ms: int,
    ) -> None:
        """An END_TRANSACTION of ``message`` (the half, or the message a check named) was
        sent with ``state`` (the LocalTransactionState's name)."""
        properties = message.properties
        self._add(
            [
                TraceRecord(
                    TraceType.END_TRANSACTION,
                    now_ms,
                    properties.get(PropertyKey.MSG_REGION) or self.region_id,
                    self.group,
                    message.topic,
                    msg_id,
                    properties.get(PropertyKey.TAGS, ""),
                    properties.get(PropertyKey.KEYS, ""),
                    store_host,
                    message_type=TraceMessageType.TRANS_MSG_COMMIT,
                    transaction_id=transaction_id,
                    transaction_state=state,
                    from_transaction_check=from_check,
                )
            ]
        )

    def recalled(self, topic: str, msg_id: str, *, now_ms: int, success: bool) -> None:
        """A RECALL_MESSAGE of ``msg_id`` on ``topic`` was answered (``success``: the broker
        recalled it): a ``Recall`` record, as Java's recall trace hook writes."""
        self._add(
            [TraceRecord(TraceType.RECALL, now_ms, self.region_id, self.group, topic, msg_id,
                         success=success)]
        )  # fmt: skip

    def consumed(
        self, messages: Sequence[MessageExt], *, started_ms: int, ended_ms: int, success: bool
    ) -> None:
        """One listener call over ``messages`` ended (``success``: the listener consumed them)."""
        traced = [m for m in messages if m.properties.get(PropertyKey.TRACE_ON) != "false"]
        if not traced:
            return
        request_id = f"{self._request_prefix}{next(self._request_ids):x}"
        cost_ms = max(0, ended_ms - started_ms) // len(traced)
        records = []
        for message in traced:
            keys = message.properties.get(PropertyKey.KEYS, "")
            region = message.properties.get(PropertyKey.MSG_REGION, self.region_id)
            records.append(
                TraceRecord(
                    TraceType.SUB_BEFORE,
                    started_ms,
                    region,
                    self.group,
                    request_id=request_id,
                    msg_id=message.msg_id,
                    retry_times=message.reconsume_times,
                    keys=keys,
                )
            )
        for message in traced:
            records.append(
                TraceRecord(
                    TraceType.SUB_AFTER,
                    ended_ms,
                    group=self.group,
                    request_id=request_id,
                    msg_id=message.msg_id,
                    cost_time_ms=cost_ms,
                    success=success,
                    keys=message.properties.get(PropertyKey.KEYS, ""),
                    context_code=_SUCCESS_CODE if success else _FAILED_CODE,
                )
            )
        self._add(records)

    def _add(self, records: list[TraceRecord]) -> None:
        self._records.extend(records)
        self._contexts += 1
        if self._contexts >= limits.TRACE_CLIENT_BATCH_CONTEXTS:
            self._wake.set()

    # --- sending, in the background ---------------------------------------------------------

    async def _run(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(limits.TRACE_CLIENT_FLUSH_INTERVAL_MS / 1000):
                    await self._wake.wait()
            self._wake.clear()
            await self.flush()

    async def flush(self) -> int:
        """Send every gathered record now; the number sent."""
        records, self._records, self._contexts = self._records, [], 0
        sent = 0
        packed = pack_records(
            records, limits.TRACE_MESSAGE_MAX_RECORDS, limits.TRACE_MESSAGE_MAX_BYTES
        )
        for chunk, body in packed:
            message = Message(self.trace_topic, body, keys=trace_message_keys(chunk))
            try:
                await self._producer.send(message)
            except BolideError as error:
                self.failed_records += len(chunk)
                _log.warning("%d trace records not sent: %s", len(chunk), error)
                continue
            sent += len(chunk)
        self.sent_records += sent
        return sent
