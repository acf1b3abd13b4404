"""Transactional sends (``bolide.aio.TransactionProducer``; ``bolide.TransactionProducer`` is
its blocking facade), RocketMQ's TransactionMQProducer (round2-facts §5).

:meth:`TransactionProducer.send_in_transaction` goes as Java's sendMessageInTransaction:

1. the message is sent as a *half* (TRAN_MSG=true, PGROUP=<group>, sysFlag PREPARED) through
   the ordinary send path (route, queue choice, retries); consumers cannot see it yet;
2. once the broker stored it, ``execute(message, arg)`` runs the local transaction and
   returns a :class:`LocalTransactionState` (an exception, or None, counts as UNKNOW; a
   half that was not stored is rolled back without running it);
3. END_TRANSACTION (oneway) tells the broker: COMMIT_MESSAGE delivers the message,
   ROLLBACK_MESSAGE drops it, UNKNOW leaves it to the broker's check-back.

Check-back: the broker sends CHECK_TRANSACTION_STATE for a half left undecided; the producer
calls ``checker(message)`` and answers with END_TRANSACTION (fromTransactionCheck=true) on
the same connection. A coroutine checker runs as a task; a plain function runs on a bounded
thread pool (``checker_threads``) with at most ``check_queue_max`` checks waiting — beyond
that a check is dropped with a warning (the broker asks again next round). An exception in
the checker counts as UNKNOW.

Transactional messages cannot be delayed or batched (the broker refuses them too).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import enum
import inspect
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from bolide.base import limits
from bolide.base.clock import Clock
from bolide.base.errors import BolideError, ConfigError, InvalidMessageError, ProtocolError
from bolide.client.instance import ClientInstance
from bolide.client.lifecycle import AsyncLifecycle
from bolide.client.message import Message, SendResult, SendStatus
from bolide.client.producer.producer import Producer
from bolide.client.rpc.transactions import answer_transaction_check, end_transaction
from bolide.protocol.headers import (
    CheckTransactionStateRequestHeader,
    EndTransactionRequestHeader,
)
from bolide.protocol.message import MessageExt, MessageSysFlag, PropertyKey
from bolide.protocol.msgid import decode_offset_message_id
from bolide.protocol.trace import TraceMessageType
from bolide.remoting import Connection

__all__ = [
    "LocalTransactionState",
    "TransactionChecker",
    "TransactionExecutor",
    "TransactionProducer",
    "TransactionSendResult",
    "state_of",
    "with_state",
]

_log = logging.getLogger("bolide.client.transaction")

_TRAN_MSG = PropertyKey.TRAN_MSG
_PRODUCER_GROUP = PropertyKey.PGROUP
_DELAY_PROPERTIES = (
    PropertyKey.DELAY,
    PropertyKey.TIMER_DELIVER_MS,
    PropertyKey.TIMER_DELAY_MS,
    PropertyKey.TIMER_DELAY_SEC,
)


class LocalTransactionState(enum.Enum):
    """What the local transaction decided (RocketMQ's names, ``UNKNOW`` spelling included)."""

    COMMIT_MESSAGE = "COMMIT_MESSAGE"
    ROLLBACK_MESSAGE = "ROLLBACK_MESSAGE"
    UNKNOW = "UNKNOW"

    @property
    def wire_value(self) -> int:
        """END_TRANSACTION's commitOrRollback: 8 commit, 12 rollback, 0 unknown."""
        return _WIRE_VALUES[self]


_WIRE_VALUES = {
    LocalTransactionState.COMMIT_MESSAGE: int(MessageSysFlag.TRANSACTION_COMMIT),
    LocalTransactionState.ROLLBACK_MESSAGE: int(MessageSysFlag.TRANSACTION_ROLLBACK),
    LocalTransactionState.UNKNOW: 0,
}

TransactionExecutor = Callable[
    [Message, Any], "LocalTransactionState | Awaitable[LocalTransactionState | None] | None"
]
"""``execute(message, arg)``: runs the local transaction after the half is stored."""
TransactionChecker = Callable[
    [MessageExt], "LocalTransactionState | Awaitable[LocalTransactionState | None] | None"
]
"""``checker(message)``: tells the broker what became of an undecided transaction."""


@dataclasses.dataclass(frozen=True, slots=True)
class TransactionSendResult(SendResult):
    """A :class:`SendResult` plus what the local transaction decided."""

    local_transaction_state: LocalTransactionState = LocalTransactionState.UNKNOW


class TransactionProducer(AsyncLifecycle):
    """Sends messages in transactions; see the module docstring.

    ``TransactionProducer("order-tx", namesrv="127.0.0.1:9876", checker=check)``. Other
    options are the :class:`~bolide.client.producer.producer.Producer`'s (``instance``,
    ``instance_name``, ``send_timeout_ms``, ...), plus ``checker_threads`` (default 4) and
    ``check_queue_max`` (default 2000) for plain-function checkers, and ``topics``: topics
    whose brokers should know this producer from its start (it answers checks for the whole
    group; the brokers of the auto-create topic TBW102 are always told).

    Raises:
        ConfigError: no checker, a bad bound, or what Producer raises.
    """

    def __init__(
        self,
        group: str,
        namesrv: str | Iterable[str] | None = None,
        *,
        checker: TransactionChecker,
        instance_name: str | None = None,
        instance: ClientInstance | None = None,
        clock: Clock | None = None,
        checker_threads: int = limits.TRANSACTION_CHECKER_THREADS_MAX_COUNT,
        check_queue_max: int = limits.TRANSACTION_CHECK_QUEUE_MAX_REQUESTS,
        topics: Iterable[str] = (),
        **producer_options: Any,
    ) -> None:
        if not callable(checker):
            raise ConfigError("a transaction producer needs a checker function")
        if checker_threads < 1 or check_queue_max < 1:
            raise ConfigError("checker_threads and check_queue_max must be at least 1")
        self._producer = Producer(
            group,
            namesrv,
            instance_name=instance_name,
            instance=instance,
            clock=clock,
            **producer_options,
        )
        self.group = group
        self.checker = checker
        self.topics = tuple(topics)
        self._checker_threads = checker_threads
        self._check_queue_max = check_queue_max
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._checks: set[asyncio.Future[None]] = set()
        self._announced_to: set[str] = set()

    @property
    def instance(self) -> ClientInstance:
        return self._producer.instance

    @property
    def running(self) -> bool:
        return self._producer.running

    # ---- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the producer and take the group's CHECK_TRANSACTION_STATE requests."""
        if self.running:
            return
        await self._producer.start()
        self._executor = concurrent.futures.ThreadPoolExecutor(
            self._checker_threads, thread_name_prefix=f"bolide-check-{self.group}"
        )
        self.instance.register_transaction_checker(self.group, self._on_check)
        await self._announce()

    async def _announce(self) -> None:
        """Make the brokers know this producer before it sends anything, so that it can
        answer checks of transactions another producer of the group left undecided: learn
        the brokers of ``topics`` and of the auto-create topic (as Java's producer does with
        its createTopicKey), then heartbeat them."""
        producer = self._producer
        for topic in (*self.topics, producer.settings.default_topic):
            try:
                await producer._route(topic)
            except BolideError as error:
                _log.info("transaction producer %s: no route of %s yet (%s)", self.group, topic,
                          error)  # fmt: skip
        await self.instance.send_heartbeat_to_all_brokers()

    async def shutdown(self) -> None:
        """Stop taking checks, let running ones finish, shut the producer down. Idempotent."""
        if not self.running:
            return
        self.instance.unregister_transaction_checker(self.group)
        if self._checks:
            await asyncio.wait(list(self._checks), timeout=limits.REMOTING_STOP_GRACE_MS / 1000)
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)
        await self._producer.shutdown()

    async def _close(self) -> None:
        await self.shutdown()

    # ---- the transaction -------------------------------------------------------------------

    async def send_in_transaction(
        self, message: Message, execute: TransactionExecutor, arg: Any = None
    ) -> TransactionSendResult:
        """Send ``message`` as a half, run ``execute(message, arg)``, end the transaction.

        Returns the half's send result with the local state. The END_TRANSACTION is oneway:
        if it cannot be written (logged), the broker's check-back settles the transaction.

        Raises:
            InvalidMessageError: the message asks for a delay, or the send's checks fail.
            The send's errors (see :meth:`Producer.send`) when the half was not stored;
            ``execute`` did not run then.
        """
        result = await self.send_half(message)
        state, error = LocalTransactionState.ROLLBACK_MESSAGE, None
        if result.status is SendStatus.SEND_OK:
            state, error = await _run_local(execute, message, arg)
        await self.end_transaction(result, state, error, message)
        return with_state(result, state)

    async def send_half(self, message: Message) -> SendResult:
        """Step 1 alone: store ``message`` as a half message (for the blocking facade, which
        runs ``execute`` on the caller's thread). Raises as :meth:`send_in_transaction`."""
        for name in _DELAY_PROPERTIES:
            if message.properties.get(name, "0") not in ("", "0"):
                raise InvalidMessageError(
                    f"a transactional message cannot be delayed (it has {name})"
                )
        half = Message(message.topic, message.body, message.flag, dict(message.properties))
        half.properties[_TRAN_MSG] = "true"
        half.properties[_PRODUCER_GROUP] = self.group
        producer = self._producer
        prepared = producer._prepare(half)
        # A half message always travels alone (brokers refuse transactional batches): sent
        # with the producer's retries, past its natural batching.
        prepared = dataclasses.replace(
            prepared,
            sys_flag=prepared.sys_flag | MessageSysFlag.TRANSACTION_PREPARED,
            batchable=False,
        )
        clock = self.instance.clock
        started_ms, began_ms = clock.now_ms(), clock.monotonic_ms()
        result = await producer._send_with_retries(prepared, None)
        if producer.trace is not None:
            producer.trace.published(
                half, result.msg_id, result.offset_msg_id,
                self.instance.broker_address(result.queue.broker_name) or "",
                started_ms=started_ms, cost_ms=clock.monotonic_ms() - began_ms,
                trace_on=result.region_id is not None,
                message_type=TraceMessageType.TRANS_MSG_HALF,
            )  # fmt: skip
        broker_name = result.queue.broker_name
        if broker_name not in self._announced_to:
            # The broker checks back only producers it knows from a heartbeat: announce the
            # group now rather than at the next 30 s heartbeat.
            self._announced_to.add(broker_name)
            await self.instance.send_heartbeat_to_all_brokers()
        return result

    async def end_transaction(
        self,
        result: SendResult,
        state: LocalTransactionState,
        error: BaseException | None = None,
        message: Message | None = None,
    ) -> None:
        """Step 3 alone: END_TRANSACTION (oneway) for the half ``result`` names. A failure to
        write it is logged, not raised: the broker will check the transaction. With
        ``enable_trace``, ``message`` (the one sent) gives its EndTransaction record."""
        try:
            _, commit_log_offset = decode_offset_message_id(result.offset_msg_id)
            address = await self._producer._master_address(result.queue)
        except (ProtocolError, BolideError) as failure:
            _log.warning("transaction %s: END_TRANSACTION not sent (%s); the broker will ask",
                         result.msg_id, failure)  # fmt: skip
            return
        header = EndTransactionRequestHeader(
            producer_group=self.group,
            tran_state_table_offset=result.queue_offset,
            commit_log_offset=commit_log_offset,
            commit_or_rollback=state.wire_value,
            msg_id=result.msg_id,
            from_transaction_check=False,
            transaction_id=result.transaction_id,
        )
        remark = None if error is None else f"executeLocalTransactionBranch exception: {error!r}"
        try:
            await end_transaction(
                self.instance.pool, address, header, self._producer.send_timeout_ms, remark=remark
            )
        except BolideError as failure:
            _log.warning("transaction %s (%s): END_TRANSACTION to %s failed: %s; the broker "
                         "will ask", result.msg_id, state.name, address, failure)  # fmt: skip
            return
        trace = self._producer.trace
        if trace is not None and message is not None:
            trace.transaction_ended(
                message, result.msg_id, address, state=state.name,
                transaction_id=result.transaction_id or result.msg_id, from_check=False,
                now_ms=self.instance.clock.now_ms(),
            )  # fmt: skip

    # ---- check-back ------------------------------------------------------------------------

    def _on_check(
        self,
        connection: Connection,
        header: CheckTransactionStateRequestHeader,
        message: MessageExt,
    ) -> None:
        if len(self._checks) >= self._check_queue_max:
            _log.warning("transaction check of %s dropped: %d checks already wait",
                         header.msg_id, len(self._checks))  # fmt: skip
            return
        task = asyncio.ensure_future(self._check(connection, header, message))
        self._checks.add(task)
        task.add_done_callback(self._checks.discard)

    async def _check(
        self,
        connection: Connection,
        header: CheckTransactionStateRequestHeader,
        message: MessageExt,
    ) -> None:
        state, error = await self._ask_checker(message)
        unique_key = message.properties.get(PropertyKey.UNIQ_KEY) or message.msg_id
        answer = EndTransactionRequestHeader(
            producer_group=self.group,
            tran_state_table_offset=header.tran_state_table_offset,
            commit_log_offset=header.commit_log_offset,
            commit_or_rollback=state.wire_value,
            msg_id=unique_key,
            from_transaction_check=True,
            transaction_id=header.transaction_id,
        )
        remark = None if error is None else f"checkLocalTransactionState exception: {error!r}"
        try:
            timeout_ms = self._producer.send_timeout_ms
            await answer_transaction_check(connection, answer, timeout_ms, remark=remark)
        except BolideError as failure:
            _log.warning("answer to the check of %s not sent: %s", unique_key, failure)
            return
        trace = self._producer.trace
        if trace is not None:
            trace.transaction_ended(
                message, unique_key, connection.remote_address, state=state.name,
                transaction_id=header.transaction_id or unique_key, from_check=True,
                now_ms=self.instance.clock.now_ms(),
            )  # fmt: skip

    async def _ask_checker(
        self, message: MessageExt
    ) -> tuple[LocalTransactionState, BaseException | None]:
        checker = self.checker
        what = f"transaction checker of {self.group}"
        if inspect.iscoroutinefunction(checker):
            return await _verdict_of(lambda: checker(message), what)
        executor = self._executor
        if executor is None:
            return LocalTransactionState.UNKNOW, None
        loop = asyncio.get_running_loop()
        return await _verdict_of(lambda: loop.run_in_executor(executor, checker, message), what)


async def _run_local(
    execute: TransactionExecutor, message: Message, arg: Any
) -> tuple[LocalTransactionState, BaseException | None]:
    """Run the local transaction; an exception (or None) means UNKNOW."""
    return await _verdict_of(lambda: execute(message, arg), f"local transaction of {message.topic}")


async def _verdict_of(
    user_call: Callable[[], object], what: str
) -> tuple[LocalTransactionState, BaseException | None]:
    """The state the user's code answers through ``user_call()``, awaited as long as it is
    awaitable (a coroutine, an executor's future, a coroutine a plain function returned),
    with the exception it raised; an exception means UNKNOW and is logged as ``what``
    failing."""
    try:
        outcome = user_call()
        while inspect.isawaitable(outcome):
            outcome = await outcome
    except Exception as error:  # the user's code: any failure means "unknown"
        _log.warning("%s failed: %r", what, error)
        return LocalTransactionState.UNKNOW, error
    return state_of(outcome), None


def with_state(result: SendResult, state: LocalTransactionState) -> TransactionSendResult:
    """``result`` with the local transaction's ``state``."""
    return TransactionSendResult(
        status=result.status,
        msg_id=result.msg_id,
        offset_msg_id=result.offset_msg_id,
        queue=result.queue,
        queue_offset=result.queue_offset,
        transaction_id=result.transaction_id,
        region_id=result.region_id,
        local_transaction_state=state,
    )


def state_of(outcome: object) -> LocalTransactionState:
    """The state a callback returned; anything but a LocalTransactionState is UNKNOW."""
    if isinstance(outcome, LocalTransactionState):
        return outcome
    if outcome is not None:
        _log.warning("a transaction callback returned %r, not a LocalTransactionState: UNKNOW",
                     outcome)  # fmt: skip
    return LocalTransactionState.UNKNOW
