"""The fast forms of a send: stored inside the dispatcher's call, answered when durable.

:meth:`SendHandlers.send_message <bolide.broker.handlers.send.SendHandlers.send_message>` is
the one definition of a send; these forms take the common ones — what
:func:`~bolide.broker.handlers.send_rules.takes_fast_form` allows, plain properties (no
DELAY/TIMER/transaction/CLUSTER) for a single send, a master that does not wait for a slave —
and store them at once: no coroutine, no task and no header object per request, a SUCCESS
answer as a precompiled frame. Under ASYNC flush, or when the records are already durable,
the answer is returned at once; under SYNC flush the group commit round that covers the send
calls back once its fsync completed (FLUSH_DISK_TIMEOUT when it did not in time) and the
answer is sent then: never an answer before the data is durable. Anything else returns None,
having changed nothing, and the general handler takes the request (same record, same answer:
tests/broker/test_send_fast_path.py and test_send_batch_fast_path.py compare them).
"""

from __future__ import annotations

import logging
import time

from bolide.base import limits
from bolide.base.errors import BolideError
from bolide.broker.config import BrokerRole
from bolide.broker.context import BrokerContext, RefusedError, born_host_of
from bolide.broker.handlers.send_answers import SendAnswers
from bolide.broker.handlers.send_properties import SLOW_MARKS
from bolide.broker.handlers.send_rules import (
    MULTI_TAG_FILTER,
    BatchPreparer,
    any_writable_queue,
    takes_fast_form,
)
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import FLAG_ONEWAY, RemotingCommand, decode_command
from bolide.protocol.frame import RawFrame, SerializeType
from bolide.protocol.headers.send import send_header_values
from bolide.protocol.message import MessageSysFlag, PropertyKey
from bolide.protocol.record import NAME_VALUE_SEPARATOR, edit_plain_properties
from bolide.protocol.send_scan import ScannedSend
from bolide.remoting import Connection
from bolide.remoting.dispatcher import ANSWER_LATER
from bolide.store.api import PutRequest, PutResult, PutStatus

__all__ = ["FastSends"]

_log = logging.getLogger("bolide.broker.send")
_perf_counter_ns = time.perf_counter_ns


class FastSends:
    """The fast forms of SEND_MESSAGE / SEND_MESSAGE_V2 (and their scanned frames) and of
    SEND_BATCH_MESSAGE, with their collaborators named: the broker's ``context`` (topics,
    store, statistics), ``answers`` (how a send is answered) and ``batches`` (a batch's
    checked entries)."""

    def __init__(
        self, context: BrokerContext, answers: SendAnswers, batches: BatchPreparer
    ) -> None:
        self._context = context
        self._answers = answers
        self._batches = batches
        self._cluster_pair = (
            f"{PropertyKey.CLUSTER}{NAME_VALUE_SEPARATOR}{context.config.broker_cluster_name}"
        )
        self.batch_fast_path = True
        """False: every batch takes the general path (differential tests turn it off)."""
        self.sends_waiting = 0
        """Sends stored by the fast forms under SYNC flush still waiting for their fsync."""

    def puts_at_once(self) -> bool:
        """Whether the fast forms may take a send now: the broker is no SYNC_MASTER waiting
        for a slave (its replication's current role: in controller mode brokerRole stays
        SLAVE while the controller makes the broker a master that waits), and (SYNC flush)
        fewer than the send family's bound of fast sends wait for their fsync."""
        replication = self._context.replication
        waits = (
            replication.waits_for_replicas  # controller mode: the SyncStateSet's role
            if replication is not None
            else self._context.config.broker_role is BrokerRole.SYNC_MASTER
        )
        return not waits and self.sends_waiting < limits.HANDLER_CONCURRENCY_MAX_REQUESTS

    def send_message_at_once(
        self, connection: Connection, request: RemotingCommand
    ) -> RemotingCommand | bytes | None:
        """The common single send answered inside the dispatcher's call, or None (see the
        module docstring)."""
        if not self.puts_at_once():
            return None
        values = send_header_values(request.ext_fields, v2=request.code != RequestCode.SEND_MESSAGE)
        if values is None:
            return None
        _, topic, _, _, queue_id, sys_flag, born_ms, flag, text, reconsume, _, _, batch, _ = values
        return self._store_at_once(
            connection, topic, queue_id, sys_flag, born_ms, flag, text, reconsume, batch,
            request.body, request.opaque, request.serialize_type == SerializeType.JSON, request,
        )  # fmt: skip

    def send_scanned(
        self, connection: Connection, scanned: ScannedSend, frame: RawFrame
    ) -> RemotingCommand | bytes | None:
        """:meth:`send_message_at_once` for a request whose JSON header the send scan read
        (:func:`~bolide.protocol.send_scan.scan_send_request`): no command, no field mapping;
        the same checks, record and answer. The dispatcher asked :meth:`puts_at_once` (its
        readiness gate) just before."""
        (
            _, opaque, _, _, _, topic, _, _, queue_id, sys_flag, born_ms, flag, text, reconsume,
            _, _, batch, _,
        ) = scanned  # fmt: skip
        return self._store_at_once(
            connection, topic, queue_id, sys_flag, born_ms, flag, text, reconsume, batch,
            frame.body, opaque, True, frame,
        )  # fmt: skip

    def _store_at_once(
        self,
        connection: Connection,
        topic: str,
        queue_id: int,
        sys_flag: int,
        born_ms: int,
        flag: int,
        text: str | None,
        reconsume: int | None,
        batch: bool,
        body: bytes,
        opaque: int,
        json: bool,
        source: RemotingCommand | RawFrame,
    ) -> RemotingCommand | bytes | None:
        """The fast send of both single forms, once :meth:`puts_at_once` said yes; ``source``
        (the command, or the frame to decode) is needed only to answer something else than
        SUCCESS."""
        started_ns = _perf_counter_ns()
        context = self._context
        config = context.topics.find(topic)
        if batch or config is None:
            return None
        if not takes_fast_form(config, context.config.broker_permission, topic, queue_id, sys_flag):
            return None
        # WAIT dropped, CLUSTER appended, as send_message's string edit (None: not plain).
        properties = edit_plain_properties(
            text or "", SLOW_MARKS, PropertyKey.WAIT, self._cluster_pair
        )
        if properties is None:
            return None
        if queue_id < 0:
            queue_id = any_writable_queue(config, context.random)
        if config.topic_filter_type == MULTI_TAG_FILTER:
            sys_flag |= MessageSysFlag.MULTI_TAGS
        try:
            put = PutRequest(
                topic, queue_id, body, flag, properties, sys_flag, born_ms,
                born_host_of(connection), reconsume or 0,
            )  # fmt: skip
            result = (
                context.store.put_message_at_once(put)
                if context.store.puts_at_once
                else self._put_single_then(put, connection, source, opaque, json, started_ns)
            )
        except BolideError as error:  # as send_message answers it (an unusable peer address)
            context.stats.record_put_failure()
            _log.warning("send from %s failed: %s", connection.remote_address, error)
            return _command_of(source).make_response(
                ResponseCode.SYSTEM_ERROR, str(error), self._answers.error_fields
            )
        if result is None:  # SYNC flush: _put_single_then answers once the record is durable
            return ANSWER_LATER
        if result.status is not PutStatus.PUT_OK or result.remark or not json:
            return self._answers.answer(_command_of(source), result, queue_id, topic, started_ns)
        self._answers.record_single_put(result, topic, started_ns)
        return self._answers.success(opaque, result.message_ids[0], queue_id, result.queue_offset)

    def _put_single_then(
        self,
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
        answers = self._answers

        def durable(result: PutResult) -> None:
            self.sends_waiting -= 1
            topic, queue_id = put.topic, put.queue_id
            if result.status is not PutStatus.PUT_OK or result.remark or not json:
                request = source if isinstance(source, RemotingCommand) else decode_command(source)
                response = answers.answer(request, result, queue_id, topic, started_ns)
                answers.answer_later(connection, request, response)
                return
            answers.record_single_put(result, topic, started_ns)
            oneway = isinstance(source, RemotingCommand) and source.flag & FLAG_ONEWAY
            if not oneway and not connection.is_closed:
                connection.send_frame(
                    answers.success_later(
                        opaque, result.message_ids[0], queue_id, result.queue_offset
                    )
                )

        result = self._context.store.put_message_then(put, durable)
        if result is None:
            self.sends_waiting += 1
        return result

    def send_batch_at_once(
        self, connection: Connection, request: RemotingCommand
    ) -> RemotingCommand | bytes | None:
        """SEND_BATCH_MESSAGE stored at once: the answer, or
        :data:`~bolide.remoting.ANSWER_LATER` once it waits for the fsync, or None (general
        path). The batch's checks are the general path's own (:class:`BatchPreparer`)."""
        context = self._context
        if not self.batch_fast_path or not self.puts_at_once():
            return None
        started_ns = _perf_counter_ns()
        values = send_header_values(request.ext_fields, v2=True)
        if values is None:
            return None  # the general path says what is wrong with the header
        _, topic, _, _, queue_id, sys_flag, born_ms, _, properties, reconsume, _, _, _, _ = values
        config = context.topics.find(topic)
        if config is None or not takes_fast_form(
            config, context.config.broker_permission, topic, queue_id, sys_flag
        ):
            return None
        try:
            entries, extra_properties = self._batches.parts(
                topic, sys_flag, properties, request.body
            )
            if queue_id < 0:
                queue_id = any_writable_queue(config, context.random)
            put = self._batches.request(
                connection, topic, sys_flag, born_ms, reconsume, config, queue_id, entries,
                extra_properties,
            )  # fmt: skip
        except (RefusedError, BolideError):  # refused: the general path answers it, as it does
            return None
        answers = self._answers

        def durable(result: PutResult) -> None:
            self.sends_waiting -= 1
            response = answers.answer_frame(request, result, queue_id, topic, started_ns)
            answers.answer_later(connection, request, response)

        result = context.store.put_messages_then(put, durable)
        if result is not None:
            return answers.answer_frame(request, result, queue_id, topic, started_ns)
        self.sends_waiting += 1
        return ANSWER_LATER


def _command_of(source: RemotingCommand | RawFrame) -> RemotingCommand:
    """The request as a command (the scanned form decodes its frame only to answer an error)."""
    return source if isinstance(source, RemotingCommand) else decode_command(source)
