"""The exactly-once sink (``option("exactlyOnce", "true")`` on writeStream): half messages per
task, one decision per micro-batch, recorded on the brokers.

* **Tasks** (executors) send every row as a transactional half message (consumers cannot see
  it) carrying the query id, batch id, the driver run that planned it and the task attempt in
  its properties, and return a :class:`HalvesReport` naming each half.
* **The driver's commit(messages, batch_id)** looks the batch up in the *ledger*: a topic
  (:data:`LEDGER_TOPIC`) where each committed batch is one message, KEYS ``query:batch``, the
  body the JSON list of the halves it committed. No record yet: it writes the record first
  (the decision point), then sends END_TRANSACTION COMMIT for every half, as requests whose
  answers it awaits (:mod:`.halves`): the commit returns only once the brokers applied every
  decision. A record already there from another run (the driver died after deciding; Spark
  replays the batch with the same id): the recorded halves are committed again (a no-op for
  those already committed; those the broker gave up meanwhile are resumed and committed),
  and the replay's new halves are rolled back. Then the pending halves of the query that
  earlier runs left behind are decided from the ledger. ``abort`` rolls the task's halves
  back.
* **Check-back**: while a commit runs, its producer answers the brokers' checks of the group
  from the ledger: a half named by its batch's record is committed, a half of a batch
  recorded with other halves is rolled back, a half of an unrecorded batch stays unknown. A
  half nobody decides is given up by the broker after ``transactionCheckMax`` checks: it is
  never delivered.

Why a topic and not the broker's KV store: Bolide brokers keep no KV table (the name
server's is not persisted across a name-server restart), while a topic is stored in the
commit log, replicated like any data, and survives a broker restart or ``kill -9``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
import pyarrow as pa
from pyspark.sql.datasource import WriterCommitMessage

from bolide.base import limits
from bolide.base.errors import BolideError, InvalidMessageError
from bolide.client.instance import ClientInstance
from bolide.client.message import SYSTEM_PROPERTY_NAMES, Message, SendResult, SendStatus
from bolide.client.producer.producer import Producer
from bolide.client.producer.transaction import LocalTransactionState, TransactionProducer
from bolide.protocol.bodies import MessageQueue
from bolide.protocol.message import MessageExt, PropertyKey
from bolide.protocol.msgid import decode_offset_message_id
from bolide.spark.client import BlockingClient
from bolide.spark.halves import (
    EndTarget,
    end_transaction,
    master_address,
    rescue_given_up,
    settle_stale_halves,
)
from bolide.spark.offsets import QueueRange
from bolide.spark.options import WriteOptions
from bolide.spark.queues import PullSettings, fetch_bounds, list_queues, pull_range
from bolide.spark.records import RowColumns

__all__ = [
    "LEDGER_TOPIC",
    "HalfRef",
    "HalvesReport",
    "Ledger",
    "commit_batch",
    "rollback_halves",
    "write_halves",
]

_log = logging.getLogger("bolide.spark")

LEDGER_TOPIC = "BOLIDE_SPARK_LEDGER"
"""Where committed micro-batches are recorded (created on first use when the brokers
auto-create topics; else create it, one queue is enough)."""
QUERY_PROPERTY = "BOLIDE_SPARK_QUERY"
BATCH_PROPERTY = "BOLIDE_SPARK_BATCH"
RUN_PROPERTY = "BOLIDE_SPARK_RUN"
_LEDGER_READER_GROUP = "bolide-spark-ledger"
_LEDGER_PRODUCER_GROUP = "bolide-spark-ledger"


@dataclass(frozen=True, slots=True)
class HalfRef:
    """What END_TRANSACTION needs of one half message (picklable, JSON-able)."""

    topic: str
    broker_name: str
    queue_id: int
    queue_offset: int
    msg_id: str
    offset_msg_id: str
    transaction_id: str | None

    def send_result(self) -> SendResult:
        queue = MessageQueue(self.topic, self.broker_name, self.queue_id)
        return SendResult(
            SendStatus.SEND_OK,
            self.msg_id,
            self.offset_msg_id,
            queue,
            self.queue_offset,
            self.transaction_id,
        )

    def to_list(self) -> list[Any]:
        return [self.topic, self.broker_name, self.queue_id, self.queue_offset, self.msg_id,
                self.offset_msg_id, self.transaction_id]  # fmt: skip


@dataclass(frozen=True, slots=True)
class HalvesReport(WriterCommitMessage):
    """One task's halves, in send order."""

    query_id: str
    partition_id: int
    halves: tuple[HalfRef, ...]


def _half_ref(result: SendResult) -> HalfRef:
    queue = result.queue
    return HalfRef(queue.topic, queue.broker_name, queue.queue_id, result.queue_offset,
                   result.msg_id, result.offset_msg_id, result.transaction_id)  # fmt: skip


def _row_messages(batch: pa.RecordBatch, default_topic: str | None) -> Iterator[Message]:
    columns = {name: batch.column(index).to_pylist() for index, name in
               enumerate(batch.schema.names)}  # fmt: skip
    nothing: list[Any] = [None] * batch.num_rows
    for row, body in enumerate(columns["body"]):
        if body is None:
            raise InvalidMessageError(f"row {row}: the body is null")
        topic = (columns.get("topic") or nothing)[row] or default_topic
        if topic is None:
            raise InvalidMessageError(f"row {row}: no topic (column null, no option)")
        properties = {
            name: value
            for name, value in ((columns.get("properties") or nothing)[row] or ())
            if name not in SYSTEM_PROPERTY_NAMES and value is not None
        }
        yield Message(
            topic,
            body.encode() if isinstance(body, str) else body,
            properties=properties,
            tags=(columns.get("tags") or nothing)[row],
            keys=(columns.get("keys") or nothing)[row],
        )


def _never_decides(_message: MessageExt) -> LocalTransactionState:
    return LocalTransactionState.UNKNOW


async def _send_halves(producer: TransactionProducer, messages: Iterator[Message]) -> list[HalfRef]:
    window = asyncio.Semaphore(limits.SPARK_WRITE_WINDOW_REQUESTS)

    async def one(message: Message) -> HalfRef:
        try:
            return _half_ref(await producer.send_half(message))
        finally:
            window.release()

    tasks: list[asyncio.Task[HalfRef]] = []
    try:
        for message in messages:
            await window.acquire()
            tasks.append(asyncio.ensure_future(one(message)))
        return list(await asyncio.gather(*tasks))
    finally:
        await asyncio.gather(*tasks, return_exceptions=True)


def write_halves(
    options: WriteOptions,
    batches: Iterator[pa.RecordBatch],
    identity: tuple[str, int, str],
    partition_id: int,
) -> HalvesReport:
    """Send every row of ``batches`` as a half message stamped with ``identity`` (query id,
    batch id, run id). Raises the first send failure; halves already sent are left to the
    driver's abort and to the brokers' checks."""
    query_id, batch_id, run_id = identity
    client = BlockingClient(options.namesrv, "writer", options.access)
    producer = TransactionProducer(
        options.group, instance=client.instance, checker=_never_decides,
        send_timeout_ms=options.send_timeout_ms,
    )  # fmt: skip
    stamps = {QUERY_PROPERTY: query_id, BATCH_PROPERTY: str(batch_id), RUN_PROPERTY: run_id}

    def stamped() -> Iterator[Message]:
        for batch in batches:
            for message in _row_messages(batch, options.topic):
                message.properties.update(stamps)
                yield message

    try:
        client.run(producer.start())
        try:
            halves = client.run(_send_halves(producer, stamped()))
        finally:
            client.run(producer.shutdown())
    finally:
        client.close()
    return HalvesReport(query_id, partition_id, tuple(halves))


@dataclass(frozen=True, slots=True)
class LedgerRecord:
    """A committed batch: the run that decided it and the halves it committed."""

    run_id: str
    halves: tuple[HalfRef, ...]


class Ledger:
    """The ledger topic as read so far (``records`` by ``query:batch``), read on from where
    it stopped at each :meth:`refresh`."""

    def __init__(self, client: BlockingClient) -> None:
        self.client = client
        self.records: dict[str, LedgerRecord] = {}
        self._next: dict[MessageQueue, int] = {}

    async def refresh(self) -> None:
        instance = self.client.instance
        queues = await list_queues(instance, [LEDGER_TOPIC])
        bounds = await fetch_bounds(instance, queues)
        for queue, queue_bounds in bounds.items():
            start = self._next.get(queue, queue_bounds.min_offset)
            if queue_bounds.max_offset <= start:
                continue
            columns = RowColumns(queue)
            settings = PullSettings(_LEDGER_READER_GROUP, "*")
            queue_range = QueueRange(queue, start, queue_bounds.max_offset)
            async for chunk in pull_range(instance, queue_range, settings):
                columns.add(chunk.body, chunk.stop_offset)
            for row in columns.take_batch().to_pylist():
                self._add(row["keys"], row["body"])
            self._next[queue] = queue_bounds.max_offset

    def _add(self, key: str | None, body: bytes) -> None:
        try:
            document = orjson.loads(body)
            halves = tuple(HalfRef(*item) for item in document["halves"])
            record = LedgerRecord(str(document["run"]), halves)
        except (orjson.JSONDecodeError, KeyError, TypeError) as error:
            _log.warning("ledger record %s unreadable (%s): ignored", key, error)
            return
        if key is not None:
            self.records.setdefault(key, record)  # the first record of a batch decides

    async def record(self, producer: Producer, key: str, record: LedgerRecord) -> None:
        body = orjson.dumps(
            {"run": record.run_id, "halves": [half.to_list() for half in record.halves]}
        )
        result = await producer.send(Message(LEDGER_TOPIC, body, keys=key))
        if result.status is not SendStatus.SEND_OK:
            raise BolideError(f"the ledger record of {key} was stored as {result.status.name}")
        await self.refresh()


def ledger_key(query_id: str, batch_id: int) -> str:
    return f"{query_id}:{batch_id}"


def _check_state(ledger: Ledger, message: MessageExt) -> LocalTransactionState:
    query_id = message.properties.get(QUERY_PROPERTY)
    batch_text = message.properties.get(BATCH_PROPERTY)
    if query_id is None or batch_text is None:
        return LocalTransactionState.UNKNOW
    record = ledger.records.get(f"{query_id}:{batch_text}")
    if record is None:
        return LocalTransactionState.UNKNOW
    unique_key = message.properties.get(PropertyKey.UNIQ_KEY) or message.msg_id
    if any(half.msg_id == unique_key for half in record.halves):
        return LocalTransactionState.COMMIT_MESSAGE
    return LocalTransactionState.ROLLBACK_MESSAGE


async def _target(instance: ClientInstance, half: HalfRef) -> EndTarget:
    _, commit_log_offset = decode_offset_message_id(half.offset_msg_id)
    address = await master_address(instance, half.send_result().queue)
    return EndTarget(address, half.queue_offset, commit_log_offset, half.msg_id,
                     half.transaction_id)  # fmt: skip


async def _end_all(
    producer: TransactionProducer,
    targets: Sequence[EndTarget],
    state: LocalTransactionState,
    timeout_ms: int,
) -> list[str]:
    """Decide every half (a bounded window of requests in flight); returns the unique keys
    of those the broker had decided already. Raises the first failure (the batch's commit
    then fails and Spark replays it: a replay decides the recorded halves again)."""
    window = asyncio.Semaphore(limits.SPARK_WRITE_WINDOW_REQUESTS)

    async def one(target: EndTarget) -> bool:
        async with window:
            return await end_transaction(producer, target, state, timeout_ms)

    applied = await asyncio.gather(*(one(target) for target in targets))
    return [target.msg_id for target, now in zip(targets, applied, strict=True) if not now]


def _stale_state(
    ledger: Ledger, query_id: str, batch_id: int
) -> Callable[[MessageExt], LocalTransactionState | None]:
    """A pending half's decision: the ledger's for a half of this query's batches up to
    ``batch_id`` (every one of them is recorded: Spark commits batches in order), a
    rollback when its batch has no record (retention dropped a record only of batches long
    committed); None for other queries' halves and later batches."""

    def state_of(message: MessageExt) -> LocalTransactionState | None:
        if message.properties.get(QUERY_PROPERTY) != query_id:
            return None
        try:
            batch = int(message.properties.get(BATCH_PROPERTY, ""))
        except ValueError:
            return None
        if batch > batch_id:
            return None
        state = _check_state(ledger, message)
        if state is LocalTransactionState.UNKNOW:
            return LocalTransactionState.ROLLBACK_MESSAGE
        return state

    return state_of


async def _apply(
    producer: TransactionProducer,
    ledger: Ledger,
    batch: tuple[str, int],
    record: LedgerRecord,
    halves: Sequence[HalfRef],
    timeout_ms: int,
) -> tuple[int, int]:
    """Commit the halves ``record`` names (resuming any its broker gave up), roll back the
    other ``halves`` of this run, settle what earlier runs left pending; returns (halves
    committed, halves rolled back)."""
    instance = producer.instance
    named = [await _target(instance, half) for half in record.halves]
    mine = {half.msg_id for half in record.halves}
    stale = [await _target(instance, half) for half in halves if half.msg_id not in mine]
    addresses = {target.address for target in (*named, *stale)}
    commit, rollback = LocalTransactionState.COMMIT_MESSAGE, LocalTransactionState.ROLLBACK_MESSAGE
    decided = await _end_all(producer, named, commit, timeout_ms)
    if decided:  # committed by an earlier run of this batch, or given up by the broker
        rescued = await rescue_given_up(producer, addresses, set(decided), timeout_ms)
        if rescued:
            _log.warning("batch %s:%d: %d given-up halves of its record resumed and committed",
                         *batch, rescued)  # fmt: skip
    await _end_all(producer, stale, rollback, timeout_ms)
    skip = mine | {target.msg_id for target in stale}
    state_of = _stale_state(ledger, *batch)
    settled = await settle_stale_halves(producer, addresses, state_of, skip, timeout_ms)
    if settled:
        _log.info("batch %s:%d: %d halves left by earlier runs decided", *batch, settled)
    return len(record.halves), len(stale)


def commit_batch(
    options: WriteOptions, identity: tuple[str, int, str], reports: Sequence[HalvesReport]
) -> tuple[int, int]:
    """Decide batch ``identity`` (query id, batch id, run id): record it once, commit its
    halves. Returns (halves committed, halves rolled back). Raises the client's errors
    when the ledger cannot be read or written (Spark then fails the batch and replays it)."""
    query_id, batch_id, run_id = identity
    halves = tuple(half for report in reports for half in report.halves)
    key = ledger_key(query_id, batch_id)
    client = BlockingClient(options.namesrv, "committer", options.access)
    ledger = Ledger(client)

    def check(message: MessageExt) -> LocalTransactionState:
        return _check_state(ledger, message)

    producer = TransactionProducer(
        options.group, instance=client.instance, checker=check,
        send_timeout_ms=options.send_timeout_ms,
    )  # fmt: skip
    recorder = Producer(_LEDGER_PRODUCER_GROUP, instance=client.instance,
                        send_timeout_ms=options.send_timeout_ms)  # fmt: skip

    async def decide() -> tuple[int, int]:
        await producer.start()
        await recorder.start()
        try:
            await ledger.refresh()
            existing = ledger.records.get(key)
            if existing is None:
                await ledger.record(recorder, key, LedgerRecord(run_id, halves))
                existing = ledger.records[key]
            batch = (query_id, batch_id)
            timeout_ms = options.send_timeout_ms
            return await _apply(producer, ledger, batch, existing, halves, timeout_ms)
        finally:
            await recorder.shutdown()
            await producer.shutdown()

    try:
        return client.run(decide())
    finally:
        client.close()


def rollback_halves(options: WriteOptions, reports: Sequence[HalvesReport]) -> int:
    """Roll back every half of ``reports`` (an aborted batch); returns how many."""
    halves = [half for report in reports for half in report.halves]
    if not halves:
        return 0
    client = BlockingClient(options.namesrv, "committer", options.access)
    producer = TransactionProducer(
        options.group, instance=client.instance, checker=_never_decides,
        send_timeout_ms=options.send_timeout_ms,
    )  # fmt: skip

    async def roll_back() -> None:
        await producer.start()
        try:
            for half in halves:  # oneway: a lost rollback is settled by the brokers' checks
                await producer.end_transaction(
                    half.send_result(), LocalTransactionState.ROLLBACK_MESSAGE
                )
        finally:
            await producer.shutdown()

    try:
        client.run(roll_back())
    finally:
        client.close()
    return len(halves)
