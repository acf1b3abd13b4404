"""The batch send (SEND_BATCH_MESSAGE) stored inside the dispatcher's call, answered when durable.

:meth:`SendHandlers.send_message` is the one definition of a send; this form takes the
common batch — a known, writable topic, a valid queue, no SYNC_MASTER waiting for a slave — and
stores it at once (:meth:`MessageStore.put_messages_then`). Under ASYNC flush, or when the
records are already durable, the answer is returned at once; under SYNC flush the group
commit round that covers the batch calls back once its fsync completed (FLUSH_DISK_TIMEOUT
when it did not in time) and the answer is sent then: no task, no coroutine and no future per
request, never an answer before the data is durable. Anything else returns None, having
changed nothing, and the general handler takes the request (same record, same answer: see
tests/broker/test_send_batch_fast_path.py).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from bolide.base import limits
from bolide.base.errors import BolideError
from bolide.broker.config import BrokerRole
from bolide.broker.handlers.context import RefusedError
from bolide.broker.topics import is_writeable
from bolide.protocol.command import FLAG_ONEWAY, RemotingCommand, decode_command
from bolide.protocol.frame import RawFrame
from bolide.protocol.headers.send import send_header_values
from bolide.protocol.system_topics import is_send_forbidden_topic
from bolide.remoting import Connection
from bolide.remoting.dispatcher import ANSWER_LATER
from bolide.store.api import PutRequest, PutResult, PutStatus

if TYPE_CHECKING:
    from bolide.broker.handlers.send import SendHandlers


def send_batch_at_once(
    handlers: SendHandlers, connection: Connection, request: RemotingCommand
) -> RemotingCommand | bytes | None:
    """The fast form of SEND_BATCH_MESSAGE (see the module docstring): the answer, or
    :data:`~bolide.remoting.ANSWER_LATER` once it waits for the fsync, or None (general path)."""
    # The handlers' own helpers, shared with send_message (one definition of a batch).
    context = handlers._context
    if (
        not handlers.batch_fast_path
        or context.config.broker_role is BrokerRole.SYNC_MASTER  # waits for a slave
        or handlers.sends_waiting >= limits.HANDLER_CONCURRENCY_MAX_REQUESTS
    ):
        return None
    started_ns = time.perf_counter_ns()
    values = send_header_values(request.ext_fields, v2=True)
    if values is None:
        return None  # the general path says what is wrong with the header
    _, topic, _, _, queue_id, sys_flag, born_ms, _, properties, reconsume, _, _, _, _ = values
    config = context.topics.find(topic)
    if (
        config is None  # auto-creation awaits: the general path does it
        or (config.order and not is_writeable(context.config.broker_permission))
        or is_send_forbidden_topic(topic)
        or queue_id >= max(config.read_queue_count, config.write_queue_count)
    ):
        return None
    try:
        entries, extra_properties = handlers._batch_parts(topic, sys_flag, properties, request.body)
        if queue_id < 0:
            queue_id = handlers._any_writable_queue(config)
        put = handlers._batch_request(
            connection, topic, sys_flag, born_ms, reconsume, config, queue_id, entries,
            extra_properties,
        )  # fmt: skip
    except (RefusedError, BolideError):  # refused: the general path answers it, as it does
        return None

    def durable(result: PutResult) -> None:
        handlers.sends_waiting -= 1
        response = handlers._answer_frame(request, result, queue_id, topic, started_ns)
        handlers._dispatcher_answer(connection, request, response)

    result = context.store.put_messages_then(put, durable)
    if result is not None:
        return handlers._answer_frame(request, result, queue_id, topic, started_ns)
    handlers.sends_waiting += 1
    return ANSWER_LATER


def put_single_then(
    handlers: SendHandlers,
    put: PutRequest,
    connection: Connection,
    source: RemotingCommand | RawFrame,
    opaque: int,
    json: bool,
    started_ns: int,
) -> PutResult | None:
    """The store call of the single send's fast form under SYNC flush: the result when it is
    to be answered at once, else None (the caller returns ANSWER_LATER) and the answer the
    fast form would have given is sent once the record is durable."""

    def durable(result: PutResult) -> None:
        handlers.sends_waiting -= 1
        topic, queue_id = put.topic, put.queue_id
        if result.status is not PutStatus.PUT_OK or result.remark or not json:
            request = source if isinstance(source, RemotingCommand) else decode_command(source)
            response = handlers._answer(request, result, queue_id, topic, started_ns)
            handlers._dispatcher_answer(connection, request, response)
            return
        handlers._context.stats.record_single_put(
            result.wrote_bytes, topic, (time.perf_counter_ns() - started_ns) // 1000
        )
        oneway = isinstance(source, RemotingCommand) and source.flag & FLAG_ONEWAY
        if not oneway and not connection.is_closed:
            connection.send_frame(
                handlers._success_frames.frame(
                    opaque, result.message_ids[0], queue_id, result.queue_offset
                )
            )

    result = handlers._context.store.put_message_then(put, durable)
    if result is None:
        handlers.sends_waiting += 1
    return result
