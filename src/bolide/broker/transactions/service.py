"""Transactional messages on the broker: half messages, END_TRANSACTION, the checker.

Semantics are Apache RocketMQ 4.9.7's (round2-facts §5; the record layouts are in
:mod:`.records`):

* a send with TRAN_MSG=true is stored by :meth:`TransactionService.put_half` in
  RMQ_SYS_TRANS_HALF_TOPIC queue 0, invisible to consumers;
* END_TRANSACTION commits (the message is stored under its real topic and queue) or rolls
  back; both write an op record. A wrong or stale request changes nothing and is answered
  with the Java broker's code and remark;
* every ``transactionCheckInterval`` the checker re-appends each half older than
  ``transactionTimeOut`` (or its CHECK_IMMUNITY_TIME_IN_SECONDS) with TRANSACTION_CHECK_TIMES
  + 1 and sends CHECK_TRANSACTION_STATE to a live producer channel of its group; a half
  checked ``transactionCheckMax`` times (or older than fileReservedTime) is given up to
  TRANS_CHECK_MAX_TIME_TOPIC, with an error log.

Crash safety: halves, copies and ops are commit-log records; the checker's progress is two
consume offsets (group CID_RMQ_SYS_TRANS) in consumerOffset.json. :meth:`recover` rebuilds
the pending table from them at start. A commit stored just before a crash whose op record
was lost is found again through the index (same UNIQ_KEY, sysFlag COMMIT, in the real topic),
so a committed message is delivered once; only a half without UNIQ_KEY (no client sends
one) would be asked about again.

Differences from RocketMQ, on purpose: the age of a half counts on the broker's clock from its
first store (Java uses the producer's born time, so clock skew moves checks); an op record is
also written for a given-up half; and an END_TRANSACTION for a transaction already decided is
refused (Java would store a second copy of a committed message).
"""

from __future__ import annotations

import collections
import dataclasses
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from bolide.base import limits
from bolide.base.clock import Clock
from bolide.base.errors import BolideError, ProtocolError
from bolide.base.service import Service
from bolide.broker.held_messages import read_message
from bolide.broker.offsets import ConsumerOffsetManager
from bolide.broker.outbound import check_transaction_state_request
from bolide.broker.producers import ProducerManager
from bolide.broker.topics import TopicConfigManager
from bolide.broker.transactions.pending import PendingHalf, PendingTable
from bolide.broker.transactions.records import (
    HALF_QUEUE_ID,
    TRANSACTION_CONSUMER_GROUP,
    HalfRecord,
    check_request,
    commit_request,
    discard_request,
    op_request,
    parse_half,
    parse_op,
    renew_request,
    resume_request,
)
from bolide.protocol.address import SocketAddress
from bolide.protocol.bodies.topic import PERM_READ, PERM_WRITE
from bolide.protocol.bodies.transaction import (
    HALF_MESSAGE_LIST_MAX_COUNT,
    HalfMessageInfo,
    HalfMessageList,
)
from bolide.protocol.codes import ResponseCode
from bolide.protocol.headers import EndTransactionRequestHeader
from bolide.protocol.message import MessageExt, MessageSysFlag, transaction_type
from bolide.protocol.msgid import decode_offset_message_id, offset_message_id
from bolide.protocol.record import decode_record
from bolide.protocol.system_topics import (
    TRANS_CHECK_MAX_TIME_TOPIC,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
)
from bolide.remoting import Connection
from bolide.store.api import MessageStore, PutRequest, PutResult, PutStatus

__all__ = ["ALL_HALVES", "EndOutcome", "HalfFilter", "TransactionService", "TransactionSettings"]

_log = logging.getLogger("bolide.broker.transactions")

_STORED = frozenset({PutStatus.PUT_OK, PutStatus.FLUSH_DISK_TIMEOUT})
_NOT_FOUND = "Find prepared transaction message failed"
_CHECKER_HOST = "broker"
"""The client host logged by the offset table when the checker moves its offsets."""


@dataclass(frozen=True, slots=True)
class HalfFilter:
    """Which half messages a QUERY_HALF_MESSAGES listing shows: those of ``producer_group``
    and ``topic`` (None: any), at most ``max_count`` (None or 0: HALF_MESSAGE_LIST_MAX_COUNT,
    which also caps a larger count)."""

    producer_group: str | None = None
    topic: str | None = None
    max_count: int | None = None

    @property
    def limit(self) -> int:
        """How many entries the listing holds at most."""
        return min(self.max_count or HALF_MESSAGE_LIST_MAX_COUNT, HALF_MESSAGE_LIST_MAX_COUNT)

    def matches(self, record: HalfRecord) -> bool:
        """Whether ``record``'s producer group and real topic are the ones asked for."""
        return (self.producer_group is None or record.producer_group == self.producer_group) and (
            self.topic is None or record.real_topic == self.topic
        )


ALL_HALVES = HalfFilter()
"""Every half message, up to the cap."""


@dataclass(frozen=True, slots=True)
class TransactionSettings:
    """broker.conf's transactionCheckInterval / transactionTimeOut / transactionCheckMax (ms,
    ms, count) and fileReservedTime in ms (a half older than that is given up)."""

    check_interval_ms: int = limits.TRANSACTION_CHECK_INTERVAL_MS
    timeout_ms: int = limits.TRANSACTION_TIMEOUT_MS
    check_max: int = limits.TRANSACTION_CHECK_MAX_COUNT
    file_reserved_ms: int = 72 * 3_600_000
    round_max_messages: int = limits.TRANSACTION_CHECK_ROUND_MAX_MESSAGES
    checker_enabled: bool = True
    """False on a slave: only a master checks (Java starts the check service on masters)."""


@dataclass(frozen=True, slots=True)
class EndOutcome:
    """How an END_TRANSACTION ended: ``code`` and ``remark`` as a Java broker answers."""

    code: ResponseCode
    remark: str | None = None

    @property
    def ok(self) -> bool:
        return self.code is ResponseCode.SUCCESS


def _final_outcome(result: PutResult, max_message_bytes: int) -> EndOutcome:
    """EndTransactionProcessor.sendFinalMessage's mapping of the commit's put."""
    status = result.status
    if status in _STORED:
        return EndOutcome(ResponseCode.SUCCESS)
    if status in (PutStatus.MESSAGE_ILLEGAL, PutStatus.PROPERTIES_SIZE_EXCEEDED):
        return EndOutcome(
            ResponseCode.MESSAGE_ILLEGAL,
            "The message is illegal, maybe msg body or properties length not matched. msg body "
            f"length limit {max_message_bytes}B, msg properties length limit 32KB.",
        )
    if status in (PutStatus.SERVICE_NOT_AVAILABLE, PutStatus.DISK_FULL):
        return EndOutcome(ResponseCode.SERVICE_NOT_AVAILABLE, "Service not available now.")
    if status is PutStatus.OS_PAGE_CACHE_BUSY:
        return EndOutcome(
            ResponseCode.SYSTEM_ERROR, "OS page cache busy, please try another machine"
        )
    return EndOutcome(ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR")


class TransactionService:
    """The broker's transactions; see the module docstring.

    Lifecycle: :meth:`start` (after the store and the offset table are loaded: rebuilds the
    pending table, then starts the checker loop on ``clock``), :meth:`stop` (stops the loop and
    leaves the offsets in the offset table for its next flush). Loop thread only.
    """

    def __init__(
        self,
        store: MessageStore,
        topics: TopicConfigManager,
        offsets: ConsumerOffsetManager,
        producers: ProducerManager[Connection],
        clock: Clock,
        *,
        settings: TransactionSettings,
        store_host: SocketAddress,
        max_message_bytes: int = limits.MESSAGE_BODY_MAX_BYTES,
        on_crash: Callable[[Service, BaseException], None] | None = None,
    ) -> None:
        self._store = store
        self._topics = topics
        self._offsets = offsets
        self._producers = producers
        self._clock = clock
        self.settings = settings
        self._store_host = store_host
        self._max_message_bytes = max_message_bytes
        self._on_crash = on_crash
        self._table = PendingTable()
        self._checker: Service | None = None
        self._recovered = False
        self.half_count = 0
        """Half messages stored since start."""
        self.commit_count = 0
        self.rollback_count = 0
        self.commits_by_topic: collections.Counter[str] = collections.Counter()
        """Commits per real topic since start (rocketmq_commit_messages_total)."""
        self.rollbacks_by_topic: collections.Counter[str] = collections.Counter()
        """Rollbacks per real topic since start (rocketmq_rollback_messages_total)."""
        self.on_finish: Callable[[str, int], None] | None = None
        """Called with (real topic, ms from the first store to the decision) for every
        commit and rollback: a metrics exporter's rocketmq_finish_message_latency."""
        self.discard_count = 0
        """Halves given up to TRANS_CHECK_MAX_TIME_TOPIC since start."""
        self.check_count = 0
        """CHECK_TRANSACTION_STATE requests sent since start."""

    # --- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        """Rebuild the pending table, then check every ``check_interval_ms``."""
        await self.recover()
        if not self.settings.checker_enabled:
            return
        self._checker = Service(
            "transaction-check",
            self._check_step,
            interval_ms=self.settings.check_interval_ms,
            clock=self._clock,
            on_crash=self._on_crash,
        )
        self._checker.start()

    async def stop(self) -> None:
        """Stop the checker (a round in progress finishes); the offsets are in the table."""
        checker, self._checker = self._checker, None
        if checker is not None:
            await checker.stop()
        if self._recovered:  # a slave never started: its offsets are the master's
            self._save_offsets()

    @property
    def pending_count(self) -> int:
        return len(self._table)

    def half_messages_by_topic(self) -> dict[str, int]:
        """Undecided transactions per real topic now (rocketmq_half_messages)."""
        counts: collections.Counter[str] = collections.Counter(
            pending.record.real_topic for pending in self._table
        )
        return dict(counts)

    def _finished(self, pending: PendingHalf, committed: bool) -> None:
        topic = pending.record.real_topic
        if committed:
            self.commit_count += 1
            self.commits_by_topic[topic] += 1
        else:
            self.rollback_count += 1
            self.rollbacks_by_topic[topic] += 1
        if self.on_finish is not None:
            self.on_finish(topic, pending.age_ms(self._clock.now_ms()))

    # --- step 1: the half message -----------------------------------------------------------

    async def put_half(self, request: PutRequest, producer_group: str) -> PutResult:
        """Store a half message (already re-targeted by :func:`.records.half_target`) and
        track it. Returns the store's result (the send's answer)."""
        await self._ensure_topic(TRANS_HALF_TOPIC)
        result = await self._store.put_message(request)
        if result.status not in _STORED:
            return result
        self.half_count += 1
        record = self._read_half(result.commit_log_offset)
        if record is None:  # cannot happen for a record just stored; never lose track silently
            _log.error("half message at %d unreadable after its put", result.commit_log_offset)
            return result
        self._table.add(PendingHalf(record, result.store_timestamp_ms))
        _log.debug("half %s of %s stored", record.unique_key, producer_group)
        return result

    # --- step 2: END_TRANSACTION ------------------------------------------------------------

    async def end_transaction(self, header: EndTransactionRequestHeader) -> EndOutcome:
        """Commit or roll back the half ``header`` names (commitOrRollback 8 or 12).

        Refused (nothing changes): no half record at ``commitLogOffset``
        (SYSTEM_ERROR "Find prepared transaction message failed"), another producer group
        ("The producer group wrong"), another queue offset ("The transaction state table
        offset wrong"), a transaction already decided or given up (the not-found remark,
        saying so). A failed commit put answers as Java's sendFinalMessage does.
        """
        message = self._read_message(header.commit_log_offset)
        if message is None or message.topic != TRANS_HALF_TOPIC:
            return EndOutcome(ResponseCode.SYSTEM_ERROR, _NOT_FOUND)
        try:
            record = parse_half(message)
        except ProtocolError:
            return EndOutcome(ResponseCode.SYSTEM_ERROR, _NOT_FOUND)
        if record.producer_group != header.producer_group:
            return EndOutcome(ResponseCode.SYSTEM_ERROR, "The producer group wrong")
        if record.queue_offset != header.tran_state_table_offset:
            return EndOutcome(ResponseCode.SYSTEM_ERROR, "The transaction state table offset wrong")
        pending = self._table.get(record.origin_queue_offset)
        if pending is None:
            return EndOutcome(ResponseCode.SYSTEM_ERROR, f"{_NOT_FOUND}: already decided")
        async with pending.lock:
            if not self._table.is_current(pending):
                return EndOutcome(ResponseCode.SYSTEM_ERROR, f"{_NOT_FOUND}: already decided")
            if header.commit_or_rollback == MessageSysFlag.TRANSACTION_COMMIT:
                return await self._commit(pending, message, record)
            return await self._rollback(pending)

    async def _commit(
        self, pending: PendingHalf, message: MessageExt, record: HalfRecord
    ) -> EndOutcome:
        result = await self._store.put_message(commit_request(message, record))
        outcome = _final_outcome(result, self._max_message_bytes)
        if not outcome.ok:
            _log.warning(
                "commit of %s to %s failed: %s", record.unique_key, record.real_topic, result.status
            )
            return outcome
        self._finished(pending, committed=True)
        if not await self._write_op(pending):
            _log.error(
                "op record of committed %s not written; the index settles it at the next start",
                record.unique_key,
            )
        self._decided(pending)
        return outcome

    async def _rollback(self, pending: PendingHalf) -> EndOutcome:
        if not await self._write_op(pending):
            return EndOutcome(ResponseCode.SYSTEM_ERROR, "the op record could not be stored")
        self._finished(pending, committed=False)
        self._decided(pending)
        return EndOutcome(ResponseCode.SUCCESS)

    def _decided(self, pending: PendingHalf) -> None:
        # The checker's offsets move at its next round (or at stop): computing them is O(n)
        # in the pending transactions, and an older offset only means a longer scan at start.
        self._table.remove(pending)

    async def _write_op(self, pending: PendingHalf) -> bool:
        """Store the op record deciding ``pending``'s latest copy; False if it failed."""
        await self._ensure_topic(TRANS_OP_HALF_TOPIC)
        half_offset = pending.record.queue_offset
        result = await self._store.put_message(
            op_request(half_offset, self._clock.now_ms(), self._store_host)
        )
        if result.status not in _STORED:
            _log.error("op record for half %d not stored: %s", half_offset, result.status.name)
            return False
        self._table.record_op(result.queue_offset, half_offset)
        return True

    # --- step 3: the checker ----------------------------------------------------------------

    async def _check_step(self) -> None:
        try:
            await self.check_once()
        except (BolideError, OSError):
            _log.exception("transaction check round failed; next round in %d ms",
                           self.settings.check_interval_ms)  # fmt: skip

    async def check_once(self) -> int:
        """One check round; returns the number of halves checked or given up."""
        settings = self.settings
        now_ms = self._clock.now_ms()
        due = [pending for pending in self._table if pending.due(now_ms, settings.timeout_ms)]
        handled = 0
        for pending in due[: settings.round_max_messages]:
            async with pending.lock:
                if not self._table.is_current(pending):
                    continue
                if (
                    pending.record.check_times >= settings.check_max
                    or pending.age_ms(now_ms) > settings.file_reserved_ms
                ):
                    await self._discard(pending)
                else:
                    await self._check(pending)
                handled += 1
        self._save_offsets()
        return handled

    async def _check(self, pending: PendingHalf) -> None:
        """Re-append ``pending`` with one more check and ask a producer of its group."""
        message = self._read_message(pending.record.commit_log_offset)
        if message is None:
            _log.error("half %d is gone from the commit log; forgotten", pending.origin)
            self._table.remove(pending)
            return
        check_times = pending.record.check_times + 1
        result = await self._store.put_message(renew_request(message, check_times, pending.origin))
        if result.status not in _STORED:
            _log.warning("half %d not re-appended (%s); checked next round",
                         pending.origin, result.status.name)  # fmt: skip
            return
        renewed = self._read_message(result.commit_log_offset)
        if renewed is None:
            _log.error("re-appended half at %d unreadable", result.commit_log_offset)
            return
        pending.record = parse_half(renewed)
        await self._send_check(pending, renewed)

    async def _send_check(self, pending: PendingHalf, message: MessageExt) -> None:
        group = pending.record.producer_group
        info = self._producers.find_channel(group, lambda channel: not channel.is_closed)
        if info is None:
            _log.warning("check of transaction %s skipped: no producer of group %s is online",
                         pending.record.unique_key, group)  # fmt: skip
            return
        fields, body = check_request(message, pending.record)
        request = check_transaction_state_request(fields, body)
        try:
            await info.channel.invoke_oneway(request, limits.TRANSACTION_CHECK_SEND_TIMEOUT_MS)
        except BolideError as error:
            _log.warning("check of %s to %s not sent: %s",
                         pending.record.unique_key, info.channel.remote_address, error)  # fmt: skip
            return
        self.check_count += 1

    async def _discard(self, pending: PendingHalf) -> None:
        """Give ``pending`` up: store it in TRANS_CHECK_MAX_TIME_TOPIC, decide it with an op."""
        record = pending.record
        message = self._read_message(record.commit_log_offset)
        if message is not None:
            await self._ensure_topic(TRANS_CHECK_MAX_TIME_TOPIC)
            result = await self._store.put_message(discard_request(message))
            if result.status not in _STORED:
                _log.warning("half %d not given up (%s); next round",
                             pending.origin, result.status.name)  # fmt: skip
                return
        if not await self._write_op(pending):
            return
        self.discard_count += 1
        self._table.remove(pending)
        _log.error(
            "transaction %s of group %s (topic %s) was checked %d times without an answer: "
            "given up to %s",
            record.unique_key, record.producer_group, record.real_topic, record.check_times,
            TRANS_CHECK_MAX_TIME_TOPIC,
        )  # fmt: skip

    # --- restart ----------------------------------------------------------------------------

    async def recover(self) -> None:
        """Rebuild the pending table from the half and op queues, from the checker's offsets
        on; a pending half whose commit the index finds is decided (its op was lost)."""
        half_from = self._start_offset(TRANS_HALF_TOPIC)
        op_from = self._start_offset(TRANS_OP_HALF_TOPIC)
        decided_halves: set[int] = set()
        for op_offset, message in self._read_queue(TRANS_OP_HALF_TOPIC, op_from):
            half_offset = parse_op(message)
            if half_offset is None:
                _log.error("op record %d is not a 'd' op; ignored", op_offset)
                continue
            self._table.record_op(op_offset, half_offset)
            decided_halves.add(half_offset)
        origins: dict[int, int] = {}
        latest: dict[int, HalfRecord] = {}
        for queue_offset, message in self._read_queue(TRANS_HALF_TOPIC, half_from):
            try:
                record = parse_half(message)
            except ProtocolError as error:
                _log.error("half record %d skipped: %s", queue_offset, error)
                continue
            origins[queue_offset] = record.origin_queue_offset
            latest[record.origin_queue_offset] = record
        decided = {origins[half] for half in decided_halves if half in origins}
        settled = 0
        for origin, record in latest.items():
            if origin in decided:
                continue
            first_store_ms = self._store.store_time_at(TRANS_HALF_TOPIC, HALF_QUEUE_ID, origin)
            pending = PendingHalf(record, first_store_ms if first_store_ms >= 0
                                  else record.store_timestamp_ms)  # fmt: skip
            if self._committed(record):
                settled += await self._write_op(pending)  # committed before the crash
                continue
            self._table.add(pending)
        self._recovered = True
        self._save_offsets()
        _log.info(
            "transactions: %d pending after restart (%d committed before a crash settled)",
            len(self._table), settled,
        )  # fmt: skip

    def _start_offset(self, topic: str) -> int:
        stored = self._offsets.query_offset(TRANSACTION_CONSUMER_GROUP, topic, HALF_QUEUE_ID)
        low = self._store.min_offset(topic, HALF_QUEUE_ID)
        high = self._store.max_offset(topic, HALF_QUEUE_ID)
        return min(max(stored, low), high)

    def _read_queue(self, topic: str, from_offset: int) -> Iterator[tuple[int, MessageExt]]:
        """Every readable record of ``topic`` queue 0 from ``from_offset``, decoded, in
        order (records retention deleted are skipped)."""
        offset = from_offset
        end = self._store.max_offset(topic, HALF_QUEUE_ID)
        step = limits.TRANSACTION_RECOVERY_READ_BATCH_ENTRIES
        while offset < end:
            entries = self._store.consume_queue_entries(topic, HALF_QUEUE_ID, offset, step)
            if not entries:
                break
            for commit_log_offset, _, _ in entries:
                message = self._read_message(commit_log_offset)
                if message is not None:
                    yield message.queue_offset, message
            offset += len(entries)

    def _committed(self, record: HalfRecord) -> bool:
        """Whether the commit of ``record``'s transaction is already in its real topic."""
        if not record.unique_key:
            return False
        found = self._store.query_by_key(
            record.real_topic, record.unique_key, 32, 0, 2**62, unique=True
        )
        for raw in found:
            try:
                message, _ = decode_record(raw, decompress=False)
            except ProtocolError:
                continue
            if transaction_type(message.sys_flag) == MessageSysFlag.TRANSACTION_COMMIT:
                return True
        return False

    # --- listing ----------------------------------------------------------------------------

    def list_pending(self, broker_name: str, wanted: HalfFilter = ALL_HALVES) -> HalfMessageList:
        """The pending transactions ``wanted`` selects (oldest first, at most its limit) and
        the counters."""
        now_ms = self._clock.now_ms()
        matching = [pending for pending in self._table if wanted.matches(pending.record)]
        infos = [_info(pending, now_ms, self._store_host) for pending in matching[: wanted.limit]]
        return self._listing(broker_name, len(matching), infos)

    def list_given_up(self, broker_name: str, wanted: HalfFilter = ALL_HALVES) -> HalfMessageList:
        """The newest half messages given up to TRANS_CHECK_MAX_TIME_TOPIC (newest first; the
        last ``wanted.limit`` stored, those ``wanted`` selects)."""
        store = self._store
        end = store.max_offset(TRANS_CHECK_MAX_TIME_TOPIC, 0)
        start = max(store.min_offset(TRANS_CHECK_MAX_TIME_TOPIC, 0), end - wanted.limit)
        now_ms = self._clock.now_ms()
        infos: list[HalfMessageInfo] = []
        for commit_log_offset, _, _ in store.consume_queue_entries(
            TRANS_CHECK_MAX_TIME_TOPIC, 0, start, end - start
        ):
            message = self._read_message(commit_log_offset)
            if message is None:
                continue
            try:
                record = parse_half(message)
            except ProtocolError:
                continue
            if wanted.matches(record):
                infos.append(_given_up_info(message, record, now_ms))
        infos.reverse()
        return self._listing(broker_name, end - store.min_offset(TRANS_CHECK_MAX_TIME_TOPIC, 0),
                             infos)  # fmt: skip

    async def resume(self, offset_msg_id: str) -> EndOutcome:
        """RESUME_CHECK_HALF_MESSAGE: put a given-up half message back among the pending
        ones, check count 0 (its age counts from now). Refused (SYSTEM_ERROR) for an id that
        does not name a given-up message, and for a transaction already pending or committed
        (resuming it would deliver it twice)."""
        try:
            _, commit_log_offset = decode_offset_message_id(offset_msg_id)
        except ProtocolError as error:
            return EndOutcome(ResponseCode.SYSTEM_ERROR, f"bad message id: {error}")
        message = self._read_message(commit_log_offset)
        if message is None or message.topic != TRANS_CHECK_MAX_TIME_TOPIC:
            return EndOutcome(
                ResponseCode.SYSTEM_ERROR,
                f"{offset_msg_id} is not a message of {TRANS_CHECK_MAX_TIME_TOPIC}",
            )
        try:
            given_up = parse_half(message)
        except ProtocolError as error:
            return EndOutcome(ResponseCode.SYSTEM_ERROR, str(error))
        key = given_up.unique_key
        if key and any(pending.record.unique_key == key for pending in self._table):
            return EndOutcome(ResponseCode.SYSTEM_ERROR, f"transaction {key} is already pending")
        if self._committed(given_up):
            return EndOutcome(ResponseCode.SYSTEM_ERROR, f"transaction {key} was committed")
        result = await self.put_half(resume_request(message), given_up.producer_group)
        if result.status not in _STORED:
            return EndOutcome(
                ResponseCode.SYSTEM_ERROR, "Put message back to RMQ_SYS_TRANS_HALF_TOPIC failed."
            )
        _log.info("transaction %s of %s resumed: checked again", key, given_up.producer_group)
        return EndOutcome(ResponseCode.SUCCESS)

    def _listing(
        self, broker_name: str, count: int, infos: list[HalfMessageInfo]
    ) -> HalfMessageList:
        settings = self.settings
        return HalfMessageList(
            broker_name=broker_name,
            pending_count=count,
            half_messages=tuple(infos),
            half_count=self.half_count,
            commit_count=self.commit_count,
            rollback_count=self.rollback_count,
            discard_count=self.discard_count,
            check_interval_ms=settings.check_interval_ms,
            timeout_ms=settings.timeout_ms,
            check_max=settings.check_max,
        )

    # --- helpers ----------------------------------------------------------------------------

    def _read_message(self, commit_log_offset: int) -> MessageExt | None:
        return read_message(self._store, commit_log_offset)

    def _read_half(self, commit_log_offset: int) -> HalfRecord | None:
        message = self._read_message(commit_log_offset)
        if message is None:
            return None
        try:
            return parse_half(message)
        except ProtocolError:
            return None

    async def _ensure_topic(self, topic: str) -> None:
        """Create a transaction system topic (1 queue, read/write) on first use, as Java."""
        if self._topics.find(topic) is not None:
            return
        try:
            await self._topics.create_topic_in_send_back(topic, 1, PERM_READ | PERM_WRITE)
        except OSError as error:  # the queue works without its topics.json entry
            _log.warning("topic %s not recorded in topics.json: %s", topic, error)

    def _save_offsets(self) -> None:
        """Move the checker's consume offsets in the offset table (flushed every 5 s)."""
        store, table = self._store, self._table
        half_offset = table.half_offset(store.max_offset(TRANS_HALF_TOPIC, HALF_QUEUE_ID))
        op_offset = table.op_offset(store.max_offset(TRANS_OP_HALF_TOPIC, HALF_QUEUE_ID),
                                    half_offset)  # fmt: skip
        for topic, offset in ((TRANS_HALF_TOPIC, half_offset), (TRANS_OP_HALF_TOPIC, op_offset)):
            group = TRANSACTION_CONSUMER_GROUP
            if self._offsets.query_offset(group, topic, HALF_QUEUE_ID) != offset:
                self._offsets.commit_offset(_CHECKER_HOST, group, topic, HALF_QUEUE_ID, offset)


def _given_up_info(message: MessageExt, record: HalfRecord, now_ms: int) -> HalfMessageInfo:
    """A given-up message: its own offsets and id; age since it was given up."""
    return dataclasses.replace(
        _record_info(record, message.store_timestamp_ms, now_ms),
        half_queue_offset=message.queue_offset,
        commit_log_offset=message.commit_log_offset,
        offset_msg_id=message.offset_msg_id,
    )


def _info(pending: PendingHalf, now_ms: int, store_host: SocketAddress) -> HalfMessageInfo:
    record = pending.record
    return dataclasses.replace(
        _record_info(record, pending.first_store_ms, now_ms),
        offset_msg_id=offset_message_id(store_host, record.commit_log_offset),
    )


def _record_info(record: HalfRecord, first_store_ms: int, now_ms: int) -> HalfMessageInfo:
    return HalfMessageInfo(
        topic=record.real_topic,
        queue_id=record.real_queue_id,
        producer_group=record.producer_group,
        msg_id=record.unique_key,
        half_queue_offset=record.queue_offset,
        origin_queue_offset=record.origin_queue_offset,
        commit_log_offset=record.commit_log_offset,
        check_times=record.check_times,
        first_store_timestamp_ms=first_store_ms,
        born_timestamp_ms=record.born_timestamp_ms,
        age_ms=now_ms - first_store_ms,
        tags=record.tags,
        keys=record.keys,
        body_length=record.body_length,
    )
