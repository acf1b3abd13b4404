"""The shared-subscription source: ``option("consumeMode", "pop")`` with ``group``.

Micro-batches take messages through POP (RocketMQ 5's consumption by receipt handles), so
several queries and ordinary 5.x consumers of the same group share the topic's messages, each
message going to one of them at a time.

* The stream offset is a batch counter, ``{"pop": n}``; it says nothing about the topic.
* ``latestOffset`` (driver) pops up to the trigger's bound (``maxMessagesPerTrigger``, default
  limits.SPARK_POP_BATCH_DEFAULT_MESSAGES) from every broker of the topics, with the
  ``invisibleTime`` option as the messages' invisible time; the popped rows become batch
  ``n + 1`` and travel to the executors inside its input partition.
* ``commit(end)`` (driver, after Spark committed the batch's output) acknowledges every
  message of the batches up to ``end``. A message whose batch never commits (the query
  failed or was killed) is not acknowledged: once its invisible time is over the brokers
  deliver it again, to this query or to another consumer of the group. **At-least-once.**
* A batch replayed after a restart finds no rows (they were in the dead driver's memory):
  it is empty, and its messages come back through their invisible time instead.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows

from bolide.base import limits
from bolide.base.errors import BolideError
from bolide.client.rpc.pop import ack_message, pop_message
from bolide.protocol.headers.pop import (
    POP_CK_PROPERTY,
    AckMessageRequestHeader,
    ConsumeInitMode,
    PopMessageRequestHeader,
)
from bolide.protocol.message import MessageExt
from bolide.spark.client import BlockingClient
from bolide.spark.options import ReadOptions
from bolide.spark.queues import list_queues, matching_topics
from bolide.spark.records import ARROW_SCHEMA

__all__ = ["BolidePopStreamReader", "PoppedPartition", "rows_of"]

_log = logging.getLogger("bolide.spark")
_POP_RPC_MARGIN_MS = 3_000
"""Added to a pop's poll time for its request timeout (the broker holds the long poll)."""


class PoppedPartition(InputPartition):
    """One micro-batch's popped rows, as Arrow IPC bytes (picklable)."""

    def __init__(self, batch_number: int, payload: bytes) -> None:
        super().__init__(batch_number)
        self.payload = payload


def rows_of(popped: Sequence[tuple[str, MessageExt]]) -> pa.RecordBatch:
    """(broker name, message) pairs as one record batch of the source's schema."""
    columns: dict[str, list[Any]] = {field.name: [] for field in ARROW_SCHEMA}
    for broker_name, message in popped:
        columns["topic"].append(message.topic)
        columns["broker_name"].append(broker_name)
        columns["queue_id"].append(message.queue_id)
        columns["queue_offset"].append(message.queue_offset)
        columns["msg_id"].append(message.msg_id)
        columns["keys"].append(message.keys)
        columns["tags"].append(message.tags)
        columns["body"].append(message.body)
        columns["properties"].append(list(message.properties.items()))
        columns["born_timestamp"].append(message.born_timestamp_ms * 1000)
        columns["store_timestamp"].append(message.store_timestamp_ms * 1000)
        columns["reconsume_times"].append(message.reconsume_times)
        columns["body_error"].append(message.body_error)
    arrays = [pa.array(columns[field.name], field.type) for field in ARROW_SCHEMA]
    return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)


def _ipc(batch: pa.RecordBatch) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    payload: bytes = sink.getvalue().to_pybytes()
    return payload


def _from_ipc(payload: bytes) -> Iterator[pa.RecordBatch]:
    yield from pa.ipc.open_stream(payload)


class BolidePopStreamReader(DataSourceStreamReader):
    """``spark.readStream.format("bolide").option("consumeMode", "pop")`` (module docstring)."""

    def __init__(self, options: ReadOptions) -> None:
        self.options = options
        self._client: BlockingClient | None = None
        self._popped: dict[int, list[tuple[str, MessageExt]]] = {}
        """Batch number -> (broker address, message) of every message popped for it."""
        self._payloads: dict[int, bytes] = {}

    @property
    def client(self) -> BlockingClient:
        if self._client is None:
            self._client = BlockingClient(self.options.namesrv, "pop", self.options.access)
        return self._client

    def initialOffset(self) -> dict[str, int]:  # noqa: N802 (Spark's name)
        return {"pop": 0}

    def getDefaultReadLimit(self) -> ReadLimit:  # noqa: N802 (Spark's name)
        bound = self.options.max_messages_per_trigger or limits.SPARK_POP_BATCH_DEFAULT_MESSAGES
        return ReadMaxRows(bound)

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:  # noqa: N802
        """Pop the next batch (at most the limit's rows); ``start`` when nothing came."""
        bound = limits.SPARK_POP_BATCH_DEFAULT_MESSAGES
        if isinstance(limit, ReadMaxRows):
            bound = limit.max_rows
        elif not isinstance(limit, ReadAllAvailable):
            bound = self.options.max_messages_per_trigger or bound
        popped = self.client.run(self._pop(bound))
        if not popped:
            return start
        number = int(start["pop"]) + 1
        self._popped[number] = [(address, message) for address, _, message in popped]
        self._payloads[number] = _ipc(rows_of([(name, message) for _, name, message in popped]))
        return {"pop": number}

    async def _pop(self, bound: int) -> list[tuple[str, str, MessageExt]]:
        """Up to ``bound`` messages popped from the brokers of the topics, as (broker
        address, broker name, message)."""
        instance = self.client.instance
        options = self.options
        topics = options.topics
        if options.topic_pattern is not None:
            topics = tuple(await matching_topics(instance, options.topic_pattern))
        targets: dict[tuple[str, str], str] = {}
        for queue in await list_queues(instance, topics):
            address = await instance.queue_broker_address(queue)
            targets[(queue.topic, address)] = queue.broker_name
        popped: list[tuple[str, str, MessageExt]] = []
        poll_ms = limits.SPARK_POP_POLL_MS  # only the trigger's first pop waits
        for (topic, address), broker_name in sorted(targets.items()):
            while (want := bound - len(popped)) > 0:
                header = PopMessageRequestHeader(
                    options.pull_group, topic, -1, min(want, limits.POP_BATCH_MAX_MESSAGES),
                    options.pop_invisible_time_ms, poll_ms, int(time.time() * 1000),
                    ConsumeInitMode.MIN, "TAG", options.tags,
                )  # fmt: skip
                timeout_ms = poll_ms + _POP_RPC_MARGIN_MS
                messages = await pop_message(instance.pool, address, header, timeout_ms)
                poll_ms = 0
                if not messages:
                    break
                popped.extend((address, broker_name, message) for message in messages)
        return popped

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        """The popped rows of batches ``(start, end]`` still in memory (none after a restart:
        their messages come back once invisible time is over)."""
        parts: list[InputPartition] = []
        for number in range(int(start["pop"]) + 1, int(end["pop"]) + 1):
            payload = self._payloads.get(number)
            if payload is not None:
                parts.append(PoppedPartition(number, payload))
            else:
                _log.warning("pop batch %d is not in this driver's memory: its messages"
                             " come back after their invisible time", number)  # fmt: skip
        return parts

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if isinstance(partition, PoppedPartition):
            return _from_ipc(partition.payload)
        return iter(())

    def commit(self, end: dict[str, int]) -> None:
        """Acknowledge every message of the batches up to ``end`` (their output is
        committed). A failed ack is logged: the message comes back, at-least-once."""
        done = [number for number in self._popped if number <= int(end["pop"])]
        messages = [item for number in done for item in self._popped.pop(number)]
        for number in done:
            self._payloads.pop(number, None)
        if messages:
            self.client.run(self._ack(messages))

    async def _ack(self, messages: list[tuple[str, MessageExt]]) -> None:
        pool, group = self.client.instance.pool, self.options.pull_group
        timeout_ms = self.client.instance.config.api_timeout_ms

        async def one(address: str, message: MessageExt) -> None:
            handle = message.properties.get(POP_CK_PROPERTY, "")
            header = AckMessageRequestHeader(
                group, message.topic, message.queue_id, handle, message.queue_offset
            )
            try:
                await ack_message(pool, address, header, timeout_ms)
            except BolideError as error:
                _log.warning("ack of %s failed (%s): it will be delivered again",
                             message.msg_id, error)  # fmt: skip

        await asyncio.gather(*(one(address, message) for address, message in messages))

    def stop(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            client.close()
