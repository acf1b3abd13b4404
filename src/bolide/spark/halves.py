"""Deciding the exactly-once sink's half messages on the brokers (:mod:`.exactly_once`).

* :func:`end_transaction` sends END_TRANSACTION as a request, not oneway as producers do:
  when a batch's commit returns, the brokers have applied every decision, so a broker killed
  just after cannot lose one (a oneway END still in a socket buffer would leave a committed
  batch's half undecided, and no driver would ever decide it again).
* :func:`rescue_given_up` brings back a half the ledger names whose broker gave it up (its
  driver stayed away longer than ``transactionCheckMax`` checks) and commits it.
* :func:`settle_stale_halves` decides, from the ledger, the halves earlier runs of the query
  left undecided (a driver killed before its decision, the halves of a replay that lost to
  the recorded ones), so none waits for the brokers' checks.

Both listings use Bolide's QUERY_HALF_MESSAGES, an admin request under ACL: refused, the
brokers' check-backs (answered from the ledger while a commit runs) and their giving up after
``transactionCheckMax`` checks settle what is left.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass

from bolide.base.errors import BolideError, NoRouteError, RemoteError
from bolide.client.instance import ClientInstance
from bolide.client.producer.transaction import LocalTransactionState, TransactionProducer
from bolide.client.rpc.query import view_message
from bolide.client.rpc.transactions import (
    end_transaction_answered,
    query_half_messages,
    resume_check_half_message,
)
from bolide.protocol.bodies import MessageQueue
from bolide.protocol.bodies.transaction import (
    HALF_MESSAGE_LIST_MAX_COUNT,
    HalfMessageInfo,
    QueryHalfMessagesRequestHeader,
)
from bolide.protocol.headers import EndTransactionRequestHeader
from bolide.protocol.message import MessageExt

__all__ = [
    "EndTarget",
    "end_transaction",
    "master_address",
    "rescue_given_up",
    "settle_stale_halves",
]

_log = logging.getLogger("bolide.spark")

_ALREADY_DECIDED = "already decided"
"""What a Bolide broker's refusal of END_TRANSACTION for a decided half says."""

StateOf = Callable[[MessageExt], LocalTransactionState | None]
"""A stale half's decision from the ledger; None: not this query's to decide."""


@dataclass(frozen=True, slots=True)
class EndTarget:
    """What END_TRANSACTION names: a half's record on the broker at ``address``."""

    address: str
    queue_offset: int
    commit_log_offset: int
    msg_id: str
    transaction_id: str | None = None


async def master_address(instance: ClientInstance, queue: MessageQueue) -> str:
    """The master address of ``queue``'s broker (the route refreshed once when unknown).
    Raises NoRouteError."""
    address = instance.routes.master_address(queue.broker_name)
    if address is None:
        await instance.update_route(queue.topic)
        address = instance.routes.master_address(queue.broker_name)
    if address is None:
        raise NoRouteError(f"broker {queue.broker_name!r} of {queue} has no master address")
    return address


async def end_transaction(
    producer: TransactionProducer,
    target: EndTarget,
    state: LocalTransactionState,
    timeout_ms: int,
) -> bool:
    """END_TRANSACTION for ``target`` as a request: the broker has applied the decision when
    this returns. True: applied now; False: the broker had decided the half already (an
    earlier commit of the batch, a check-back, or given up after its checks).

    Raises BolideError for any other refusal, and the transport's errors (broker down).
    """
    header = EndTransactionRequestHeader(
        producer_group=producer.group,
        tran_state_table_offset=target.queue_offset,
        commit_log_offset=target.commit_log_offset,
        commit_or_rollback=state.wire_value,
        msg_id=target.msg_id,
        from_transaction_check=False,
        transaction_id=target.transaction_id,
    )
    refusal = await end_transaction_answered(
        producer.instance.pool, target.address, header, timeout_ms
    )
    if refusal is None:
        return True
    if _ALREADY_DECIDED in refusal:
        return False
    raise BolideError(f"{target.address} refused END_TRANSACTION of {target.msg_id}: {refusal}")


async def _listed(
    producer: TransactionProducer, address: str, *, given_up: bool, timeout_ms: int
) -> tuple[HalfMessageInfo, ...] | None:
    header = QueryHalfMessagesRequestHeader(
        producer.group, None, HALF_MESSAGE_LIST_MAX_COUNT, given_up
    )
    try:
        listing = await query_half_messages(producer.instance.pool, address, header, timeout_ms)
    except RemoteError as error:
        _log.info("half messages of %s not listed (%s): the brokers' checks settle them",
                  address, error)  # fmt: skip
        return None
    return listing.half_messages


def _target_of(address: str, info: HalfMessageInfo) -> EndTarget:
    return EndTarget(address, info.half_queue_offset, info.commit_log_offset, info.msg_id)


async def rescue_given_up(
    producer: TransactionProducer,
    addresses: Iterable[str],
    wanted: Collection[str],
    timeout_ms: int,
) -> int:
    """Resume and commit every given-up half whose unique key is in ``wanted`` (halves a
    ledger record names); returns how many were committed. Transport errors raise."""
    rescued = 0
    for address in sorted(set(addresses)):
        given_up = await _listed(producer, address, given_up=True, timeout_ms=timeout_ms)
        resumed = 0
        for info in given_up or ():
            if info.msg_id not in wanted:
                continue
            try:
                await resume_check_half_message(
                    producer.instance.pool, address, info.offset_msg_id, timeout_ms
                )
                resumed += 1
            except RemoteError as error:  # already pending again, or committed after all
                _log.info("given-up half %s not resumed: %s", info.msg_id, error)
        if not resumed:
            continue
        pending = await _listed(producer, address, given_up=False, timeout_ms=timeout_ms)
        for info in pending or ():
            if info.msg_id in wanted:
                target = _target_of(address, info)
                commit = LocalTransactionState.COMMIT_MESSAGE
                rescued += await end_transaction(producer, target, commit, timeout_ms)
    return rescued


async def settle_stale_halves(
    producer: TransactionProducer,
    addresses: Iterable[str],
    state_of: StateOf,
    skip: Collection[str],
    timeout_ms: int,
) -> int:
    """Decide the pending halves of the producer's group, already checked at least once by
    their broker (so none a task is still writing) and not in ``skip``, that ``state_of``
    decides; returns how many were decided here. Transport errors raise."""
    settled = 0
    for address in sorted(set(addresses)):
        pending = await _listed(producer, address, given_up=False, timeout_ms=timeout_ms)
        for info in pending or ():
            if info.check_times < 1 or info.msg_id in skip:
                continue
            pool = producer.instance.pool
            try:
                message = await view_message(pool, address, info.commit_log_offset, timeout_ms)
            except RemoteError as error:  # decided and gone meanwhile
                _log.info("pending half %s not read: %s", info.msg_id, error)
                continue
            state = state_of(message)
            if state is None or state is LocalTransactionState.UNKNOW:
                continue
            target = _target_of(address, info)
            settled += await end_transaction(producer, target, state, timeout_ms)
    return settled
