"""SEND_MESSAGE (10), SEND_MESSAGE_V2 (310) and SEND_BATCH_MESSAGE (320) (docs/protocol.md §2.2).

The path of one send, in the Java broker's order:

1. decode the header (long names for 10, one letter for 310/320); a bad field answers
   SYSTEM_ERROR naming it;
2. an order topic on a broker without write permission: NO_PERMISSION;
3. the topic name must match ``^[%|a-zA-Z0-9_-]+$`` and be at most 127 characters
   (SYSTEM_ERROR); system topics such as SCHEDULE_TOPIC_XXXX refuse producers
   (NO_PERMISSION);
4. an unknown topic is auto-created from ``defaultTopic`` (TBW102) and the broker re-registers
   with the name servers at once; if it cannot be, TOPIC_NOT_EXIST;
5. ``queueId`` at or above the topic's queue count is SYSTEM_ERROR, a negative one picks a
   random writable queue;
6. ``%RETRY%<group>`` topics need the subscription group (auto-created) and move to
   ``%DLQ%<group>`` once ``reconsumeTimes`` reaches the maximum;
7. the stored properties lose WAIT (and any forged BOLIDE_DELIVERED_FROM) and gain CLUSTER;
   a DELAY level re-targets the message to SCHEDULE_TOPIC_XXXX queue ``level - 1`` with
   REAL_TOPIC / REAL_QID (the store sets the consume-queue tags code to the delivery time);
   TIMER_DELIVER_MS / TIMER_DELAY_MS / TIMER_DELAY_SEC re-target it to the timer topic
   (:mod:`bolide.broker.timer`; MESSAGE_ILLEGAL beyond timerMaxDelaySec); batches may carry
   neither; the born host is the peer's address;
8. a half message (TRAN_MSG=true or a PREPARED sysFlag) goes to RMQ_SYS_TRANS_HALF_TOPIC
   through :mod:`bolide.broker.transactions` (NO_PERMISSION under rejectTransactionMessage,
   MESSAGE_ILLEGAL with a delay; batches may not be transactional);
9. the store's status becomes the response code.

Whether a request is a batch is decided by the header's ``batch`` flag alone (``"true"`` or
the C++ client's ``"1"``), never by the code. Every response carries extFields (MSG_REGION
and TRACE_ON, plus msgId / queueId / queueOffset when stored): the Java client reads
MSG_REGION without a null check and the C++ client dereferences the decoded header.
"""

from __future__ import annotations

import logging
import time
from typing import TypeVar

from bolide.base import limits
from bolide.base.errors import BolideError, ProtocolError
from bolide.broker.config import BrokerRole
from bolide.broker.controller_mode.settings import IN_SYNC_REPLICAS_NOT_ENOUGH
from bolide.broker.delivery import DELIVERED_FROM
from bolide.broker.handlers.context import (
    BrokerContext,
    RefusedError,
    born_host_of,
    find_group_or_refuse,
)
from bolide.broker.handlers.send_durable import put_single_then, send_batch_at_once
from bolide.broker.handlers.send_properties import (
    SLOW_MARKS,
    clean_entry,
    has_delay,
    plain_properties,
    waits_for_store,
    without_wait,
)
from bolide.broker.schedule import schedule_target
from bolide.broker.timer import TIMER_TRIGGER_PROPERTIES, TimerPropertyError
from bolide.broker.topics import TopicConfig, is_writeable, validate_topic
from bolide.broker.transactions.records import half_target, is_transaction_half
from bolide.protocol.answer_frames import SendSuccessFrames, success_frame
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand, decode_command
from bolide.protocol.frame import RawFrame, SerializeType
from bolide.protocol.headers import HeaderError, SendMessageRequestHeader
from bolide.protocol.headers.send import send_header_values
from bolide.protocol.message import (
    TRANSACTION_MASK,
    TRANSACTION_NOT_TYPE,
    MessageSysFlag,
    PropertyKey,
    transaction_type,
)
from bolide.protocol.message_codec import BatchEntry, decode_batch_body
from bolide.protocol.send_scan import ScannedSend
from bolide.protocol.system_topics import (
    RETRY_GROUP_TOPIC_PREFIX,
    SEND_FORBIDDEN_TOPICS,
    dlq_topic,
    group_of_retry_topic,
    is_retry_topic,
    is_send_forbidden_topic,
)
from bolide.protocol.wire import (
    NAME_VALUE_SEPARATOR,
    decode_properties,
    edit_plain_properties,
    encode_properties,
    join_properties,
)
from bolide.remoting import Connection, Dispatcher
from bolide.remoting.dispatcher import ANSWER_LATER
from bolide.store.api import BatchPutRequest, PutRequest, PutResult, PutStatus

__all__ = ["SendHandlers"]

_log = logging.getLogger("bolide.broker.send")

_PutT = TypeVar("_PutT", PutRequest, BatchPutRequest)

_perf_counter_ns = time.perf_counter_ns
_PREPARED = int(MessageSysFlag.TRANSACTION_PREPARED)
_VERSION_V3_4_9 = 121
"""Clients at or above this wire version send a trustworthy ``maxReconsumeTimes``."""
_TOPIC_SYS_FLAG_UNIT = 1
_TOPIC_SYS_FLAG_UNIT_SUB = 2
_MULTI_TAG = "MULTI_TAG"

# Store status -> (response code, remark when the store gave none).
_STATUS_CODES: dict[PutStatus, tuple[ResponseCode, str]] = {
    PutStatus.PUT_OK: (ResponseCode.SUCCESS, ""),
    PutStatus.FLUSH_DISK_TIMEOUT: (ResponseCode.FLUSH_DISK_TIMEOUT, "flush to disk timed out"),
    PutStatus.MESSAGE_ILLEGAL: (ResponseCode.MESSAGE_ILLEGAL, "the message is illegal"),
    PutStatus.PROPERTIES_SIZE_EXCEEDED: (
        ResponseCode.MESSAGE_ILLEGAL,
        "the message properties are too long",
    ),
    PutStatus.SERVICE_NOT_AVAILABLE: (
        ResponseCode.SERVICE_NOT_AVAILABLE,
        "the store is not available (shutting down, or a write failed earlier)",
    ),
    PutStatus.DISK_FULL: (
        ResponseCode.SERVICE_NOT_AVAILABLE,
        "the broker's disk is full: message refused",
    ),
    PutStatus.OS_PAGE_CACHE_BUSY: (ResponseCode.SYSTEM_ERROR, "[PC_SYNCHRONIZED] broker busy"),
    PutStatus.UNKNOWN_ERROR: (ResponseCode.SYSTEM_ERROR, "the store failed the message"),
    PutStatus.FLUSH_SLAVE_TIMEOUT: (
        ResponseCode.FLUSH_SLAVE_TIMEOUT,
        "wait for the slave timed out",
    ),
    PutStatus.SLAVE_NOT_AVAILABLE: (ResponseCode.SLAVE_NOT_AVAILABLE, "no slave is in sync"),
}

_STORED_CODES = frozenset(
    {
        ResponseCode.SUCCESS,
        ResponseCode.FLUSH_DISK_TIMEOUT,
        ResponseCode.FLUSH_SLAVE_TIMEOUT,
        ResponseCode.SLAVE_NOT_AVAILABLE,
    }
)
"""Codes under which the message was stored (the client reads the send result header)."""


class SendHandlers:
    """The producer-facing handlers of one broker."""

    def __init__(self, context: BrokerContext) -> None:
        self._context = context
        config = context.config
        self._error_fields = {
            PropertyKey.MSG_REGION: config.region_id,
            PropertyKey.TRACE_ON: "true" if config.trace_on else "false",
        }
        self._success_frames = SendSuccessFrames(self._error_fields)
        self._success_head, self._success_tail, self._success_end = self._success_frames.pieces
        self._cluster_pair = (
            f"{PropertyKey.CLUSTER}{NAME_VALUE_SEPARATOR}{config.broker_cluster_name}"
        )
        self._dispatcher: Dispatcher | None = None
        self.batch_fast_path = True
        """False: every batch takes :meth:`send_message` (differential tests turn it off)."""
        self.sends_waiting = 0
        """Sends stored by the fast forms under SYNC flush still waiting for their fsync."""

    def install(self, dispatcher: Dispatcher) -> None:
        """Register codes 10, 310 and 320 in the ``send`` family."""
        for code in (
            RequestCode.SEND_MESSAGE,
            RequestCode.SEND_MESSAGE_V2,
            RequestCode.SEND_BATCH_MESSAGE,
        ):
            dispatcher.register(code, self.send_message, family="send")
        self._dispatcher = dispatcher
        dispatcher.register_fast(RequestCode.SEND_BATCH_MESSAGE, self.send_batch_at_once)
        for code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2):
            dispatcher.register_fast(code, self.send_message_at_once)
            dispatcher.register_scanned(code, self.send_scanned, ready=self.puts_at_once)

    def puts_at_once(self) -> bool:
        """Whether the fast forms may take a send now: the broker is no SYNC_MASTER waiting
        for a slave, and (SYNC flush) fewer than the send family's bound of fast sends wait for
        their fsync. Under SYNC flush a fast send is stored at once and answered when the group
        commit covering it completed (send_durable.py)."""
        context = self._context
        return (
            context.config.broker_role is not BrokerRole.SYNC_MASTER
            and self.sends_waiting < limits.HANDLER_CONCURRENCY_MAX_REQUESTS
        )

    def send_message_at_once(
        self, connection: Connection, request: RemotingCommand
    ) -> RemotingCommand | bytes | None:
        """The common single send answered inside the dispatcher's call (no coroutine, no
        task, no header object; a SUCCESS answer as a precompiled frame): a known topic that
        is not a retry or system topic, plain properties (no DELAY/TIMER/transaction/
        CLUSTER), a valid queue id and a master that does not wait for a slave (under SYNC
        flush the answer is sent once durable: send_durable.py). Anything else returns None,
        having changed nothing, and :meth:`send_message` — the one definition of the
        behaviour — handles it; both give the same record and the same answer
        (tests/broker/test_send_fast_path.py compares them byte for byte)."""
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

    def send_batch_at_once(
        self, connection: Connection, request: RemotingCommand
    ) -> RemotingCommand | bytes | None:
        """SEND_BATCH_MESSAGE stored at once, answered once durable (see send_durable.py)."""
        return send_batch_at_once(self, connection, request)

    def _dispatcher_answer(
        self, connection: Connection, request: RemotingCommand, response: RemotingCommand | bytes
    ) -> None:
        dispatcher = self._dispatcher
        if dispatcher is not None:
            dispatcher.answer(connection, request, response)

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
        """The fast send of both forms, once :meth:`puts_at_once` said yes; ``source`` (the
        command, or the frame to decode) is needed only to answer something else than
        SUCCESS."""
        started_ns = _perf_counter_ns()
        context = self._context
        broker_config = context.config
        config = context.topics.find(topic)
        if (
            batch
            or config is None
            or (config.order and not is_writeable(broker_config.broker_permission))
            or topic in SEND_FORBIDDEN_TOPICS
            or topic.startswith(RETRY_GROUP_TOPIC_PREFIX)
            or sys_flag & TRANSACTION_MASK == _PREPARED
            or queue_id >= max(config.read_queue_count, config.write_queue_count)
        ):
            return None
        # WAIT dropped, CLUSTER appended, as send_message's string edit (None: not plain).
        properties = edit_plain_properties(
            text or "", SLOW_MARKS, PropertyKey.WAIT, self._cluster_pair
        )
        if properties is None:
            return None
        if queue_id < 0:
            queue_id = self._any_writable_queue(config)
        if config.topic_filter_type == _MULTI_TAG:
            sys_flag |= MessageSysFlag.MULTI_TAGS
        try:
            put = PutRequest(
                topic, queue_id, body, flag, properties, sys_flag, born_ms,
                born_host_of(connection), reconsume or 0,
            )  # fmt: skip
            result = (
                context.store.put_message_at_once(put)
                if context.store.puts_at_once
                else put_single_then(self, put, connection, source, opaque, json, started_ns)
            )
        except BolideError as error:  # as send_message answers it (an unusable peer address)
            context.stats.record_put_failure()
            _log.warning("send from %s failed: %s", connection.remote_address, error)
            return _command_of(source).make_response(
                ResponseCode.SYSTEM_ERROR, str(error), self._error_fields
            )
        if result is None:  # SYNC flush: put_single_then answers once the record is durable
            return ANSWER_LATER
        if result.status is not PutStatus.PUT_OK or result.remark or not json:
            return self._answer(_command_of(source), result, queue_id, topic, started_ns)
        context.stats.record_single_put(
            result.wrote_bytes, topic, (_perf_counter_ns() - started_ns) // 1000
        )
        return success_frame(
            self._success_head, self._success_tail, self._success_end,
            opaque, result.message_ids[0], queue_id, result.queue_offset,
        )  # fmt: skip

    async def send_message(
        self, connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """Store the message (or batch) of ``request``; see the module docstring."""
        started_ns = time.perf_counter_ns()
        try:
            header = _decode_header(request)
            config = await self._topic_config(header)
            queue_id = self._queue_id(header, config)
            if header.batch:
                result = await self._put_batch(connection, request, header, config, queue_id)
            else:
                result = await self._put_single(connection, request, header, config, queue_id)
        except RefusedError as refused:
            self._context.stats.record_put_failure()
            return request.make_response(refused.code, refused.remark, self._error_fields)
        except BolideError as error:  # still answered with extFields: clients read them
            self._context.stats.record_put_failure()
            _log.warning("send from %s failed: %s", connection.remote_address, error)
            return request.make_response(ResponseCode.SYSTEM_ERROR, str(error), self._error_fields)
        replication = self._context.replication
        if (
            replication is not None
            and result.status is PutStatus.PUT_OK
            and waits_for_store(header.properties)
        ):
            await replication.wait_replicated(result)
        return self._answer(request, result, queue_id, header.topic, started_ns)

    # --- checks -----------------------------------------------------------------------------

    async def _topic_config(self, header: SendMessageRequestHeader) -> TopicConfig:
        context = self._context
        topic = header.topic
        config = context.topics.find(topic)
        if not is_writeable(context.config.broker_permission) and (
            config is not None and config.order
        ):
            raise RefusedError(
                ResponseCode.NO_PERMISSION,
                f"the broker {context.config.broker_address} refuses writes to order topic {topic}",
            )
        if config is None:  # known topics were validated when they were created
            validation = validate_topic(topic)
            if not validation.ok:
                raise RefusedError(ResponseCode.SYSTEM_ERROR, validation.reason)
        if is_send_forbidden_topic(topic):
            raise RefusedError(
                ResponseCode.NO_PERMISSION, f"sending to the system topic {topic} is forbidden"
            )
        if config is not None:
            return config
        return await self._auto_create(header)

    async def _auto_create(self, header: SendMessageRequestHeader) -> TopicConfig:
        context = self._context
        topic_sys_flag = 0
        if header.unit_mode:
            is_retry = is_retry_topic(header.topic)
            topic_sys_flag = _TOPIC_SYS_FLAG_UNIT_SUB if is_retry else _TOPIC_SYS_FLAG_UNIT
        try:
            creation = await context.topics.create_topic_in_send(
                header.topic,
                header.default_topic,
                header.default_topic_queue_count,
                topic_sys_flag=topic_sys_flag,
            )
        except OSError as error:
            raise RefusedError(
                ResponseCode.SYSTEM_ERROR, f"cannot record topic {header.topic}: {error}"
            ) from error
        if creation.created:
            context.register_soon()
        if creation.config is None:
            raise RefusedError(
                ResponseCode.TOPIC_NOT_EXIST,
                f"topic[{header.topic}] does not exist and was not auto-created: {creation.reason}",
            )
        return creation.config

    def _queue_id(self, header: SendMessageRequestHeader, config: TopicConfig) -> int:
        queue_id = header.queue_id
        queue_count = max(config.read_queue_count, config.write_queue_count)
        if queue_id >= queue_count:
            raise RefusedError(
                ResponseCode.SYSTEM_ERROR,
                f"request queueId[{queue_id}] is illegal: topic {header.topic} has "
                f"{queue_count} queues (producer {header.producer_group})",
            )
        if queue_id < 0:
            queue_id = self._any_writable_queue(config)
        return queue_id

    def _any_writable_queue(self, config: TopicConfig) -> int:
        """The queue of a send that left the choice to the broker (queueId < 0)."""
        writable = config.write_queue_count
        return self._context.random.randrange(writable) if writable > 0 else 0

    # --- one message ------------------------------------------------------------------------

    async def _put_single(
        self,
        connection: Connection,
        request: RemotingCommand,
        header: SendMessageRequestHeader,
        config: TopicConfig,
        queue_id: int,
    ) -> PutResult:
        context = self._context
        sys_flag = header.sys_flag
        if config.topic_filter_type == _MULTI_TAG:
            sys_flag |= MessageSysFlag.MULTI_TAGS
        topic, store_queue_id = header.topic, queue_id
        text = header.properties or ""
        properties: dict[str, str] | str
        if (
            not is_retry_topic(topic)
            and plain_properties(text)
            and transaction_type(sys_flag) != MessageSysFlag.TRANSACTION_PREPARED
        ):
            # The common send (no DELAY/TIMER/CLUSTER/BOLIDE_DELIVERED_FROM, well formed): the
            # client's string without WAIT, plus CLUSTER — the pairs that decoding, editing and
            # encoding again would give, in ~0.6 µs instead of ~1.8 µs (docs/benchmarks.md
            # "Broker profile"). The store reads TAGS/KEYS from a string as from a mapping.
            properties = join_properties(without_wait(text), self._cluster_pair)
        else:
            properties = decode_properties(text)
            properties.pop(PropertyKey.WAIT, None)
            properties.pop(DELIVERED_FROM, None)  # only the broker's deliveries carry it
            properties[PropertyKey.CLUSTER] = context.config.broker_cluster_name
            if is_retry_topic(topic):
                topic, store_queue_id = await self._retry_target(
                    header, request.version, queue_id, properties
                )
            if self._is_half(properties, sys_flag, header):
                return await self._put_half(connection, request, header, properties, topic,
                                            store_queue_id, sys_flag)  # fmt: skip
            topic, store_queue_id = self._wait_target(properties, sys_flag, topic, store_queue_id)
        # A mapping of properties is encoded by the store.
        put = _put_request(
            connection, request.body, topic, store_queue_id, properties, sys_flag, header.flag,
            header.born_timestamp_ms, header.reconsume_times,
        )  # fmt: skip
        return await context.store.put_message(put)

    def _is_half(
        self, properties: dict[str, str], sys_flag: int, header: SendMessageRequestHeader
    ) -> bool:
        """A half message: TRAN_MSG=true or a PREPARED sysFlag — except a transactional
        message a pre-4.6.1 client sends back for a retry with a delay level, which Java
        stores as an ordinary message."""
        if not is_transaction_half(properties, sys_flag):
            return False
        retried = (header.reconsume_times or 0) > 0
        return not (retried and properties.get(PropertyKey.DELAY, "0") not in ("", "0"))

    async def _put_half(
        self,
        connection: Connection,
        request: RemotingCommand,
        header: SendMessageRequestHeader,
        properties: dict[str, str],
        topic: str,
        queue_id: int,
        sys_flag: int,
    ) -> PutResult:
        """Store a half message (round2-facts §5 step 1); refused (NO_PERMISSION) when
        rejectTransactionMessage is set, and (MESSAGE_ILLEGAL) when it asks for a delay."""
        context = self._context
        config = context.config
        service = context.transactions
        if config.reject_transaction_message or service is None:
            raise RefusedError(
                ResponseCode.NO_PERMISSION,
                f"the broker[{config.broker_ip1}] sending transaction message is forbidden",
            )
        if has_delay(properties):
            raise RefusedError(
                ResponseCode.MESSAGE_ILLEGAL,
                "a transactional message cannot be delayed (DELAY or TIMER_* property)",
            )
        half_topic, half_queue_id, half_sys_flag = half_target(
            properties, topic, queue_id, header.producer_group, sys_flag
        )
        put = PutRequest(
            topic=half_topic,
            queue_id=half_queue_id,
            body=request.body,
            flag=header.flag,
            properties=properties,
            sys_flag=half_sys_flag,
            born_timestamp_ms=header.born_timestamp_ms,
            born_host=born_host_of(connection),
            reconsume_times=header.reconsume_times or 0,
        )
        return await service.put_half(put, header.producer_group)

    async def _retry_target(
        self,
        header: SendMessageRequestHeader,
        client_version: int,
        queue_id: int,
        properties: dict[str, str],
    ) -> tuple[str, int]:
        """Where a message sent to ``%RETRY%<group>`` goes: there, or to the group's DLQ
        once it was consumed ``maxReconsumeTimes`` times (delay then dropped)."""
        context = self._context
        group = group_of_retry_topic(header.topic) or ""
        group_config = await find_group_or_refuse(
            context.groups, group, missing_remark=f"subscription group {group} not exist"
        )
        max_times = group_config.retry_max_times
        if client_version >= _VERSION_V3_4_9 and header.max_reconsume_times is not None:
            max_times = header.max_reconsume_times
        if (header.reconsume_times or 0) < max_times:
            return header.topic, queue_id
        try:
            creation = await context.topics.create_dlq_topic(group)
        except OSError as error:
            raise RefusedError(
                ResponseCode.SYSTEM_ERROR, f"cannot record DLQ of {group}: {error}"
            ) from error
        if creation.created:
            context.register_soon()
        dlq = creation.config
        if dlq is None:
            raise RefusedError(ResponseCode.SYSTEM_ERROR, f"topic {dlq_topic(group)} not exist")
        if not is_writeable(dlq.perm):
            raise RefusedError(
                ResponseCode.NO_PERMISSION, f"the topic {dlq.topic_name} is not writable"
            )
        properties.pop(PropertyKey.DELAY, None)
        writable = max(1, dlq.write_queue_count)
        return dlq.topic_name, context.random.randrange(writable)

    def _wait_target(
        self, properties: dict[str, str], sys_flag: int, topic: str, queue_id: int
    ) -> tuple[str, int]:
        """Where a message waits before it is delivered to ``topic``/``queue_id``: its DELAY
        level's queue of SCHEDULE_TOPIC_XXXX (timer properties are then dropped, as in
        RocketMQ 5), the timer topic when it asks for a time (TIMER_*), or nowhere."""
        level = self._delay_level(properties, sys_flag)
        if level > 0:
            for name in TIMER_TRIGGER_PROPERTIES:
                properties.pop(name, None)
            return schedule_target(properties, topic, queue_id, level)
        timer = self._context.timer
        if timer is None or transaction_type(sys_flag) not in (
            TRANSACTION_NOT_TYPE,
            MessageSysFlag.TRANSACTION_COMMIT,
        ):
            return topic, queue_id
        try:
            return timer.plan(properties, topic, queue_id)
        except TimerPropertyError as error:
            raise RefusedError(ResponseCode.MESSAGE_ILLEGAL, str(error)) from error

    def _delay_level(self, properties: dict[str, str], sys_flag: int) -> int:
        """The DELAY level to apply (0 = none), clamped to the configured levels. Prepared and
        rolled-back transaction records are never delayed."""
        text = properties.get(PropertyKey.DELAY)
        if not text:
            return 0
        kind = transaction_type(sys_flag)
        if kind not in (TRANSACTION_NOT_TYPE, MessageSysFlag.TRANSACTION_COMMIT):
            return 0
        try:
            level = int(text)
        except ValueError as error:
            raise RefusedError(
                ResponseCode.MESSAGE_ILLEGAL, f"the DELAY property {text!r} is not a number"
            ) from error
        return min(level, len(self._context.config.message_delay_levels_ms))

    # --- batches ----------------------------------------------------------------------------

    async def _put_batch(
        self,
        connection: Connection,
        request: RemotingCommand,
        header: SendMessageRequestHeader,
        config: TopicConfig,
        queue_id: int,
    ) -> PutResult:
        entries, extra_properties = self._batch_parts(
            header.topic, header.sys_flag, header.properties, request.body
        )
        return await self._context.store.put_messages(
            self._batch_request(
                connection, header.topic, header.sys_flag, header.born_timestamp_ms,
                header.reconsume_times, config, queue_id, entries, extra_properties,
            )
        )  # fmt: skip

    def _batch_parts(
        self, topic: str, sys_flag: int, properties: str | None, body: bytes
    ) -> tuple[list[BatchEntry], str]:
        """The checked entries and shared properties of a batch to ``topic`` with the header's
        ``sys_flag`` and ``properties`` (both batch paths).

        Raises:
            RefusedError: the batch cannot be stored (as a Java broker refuses it).
        """
        context = self._context
        if is_retry_topic(topic):
            raise RefusedError(ResponseCode.MESSAGE_ILLEGAL, f"a batch cannot be sent to {topic}")
        if transaction_type(sys_flag) != TRANSACTION_NOT_TYPE:
            raise RefusedError(ResponseCode.MESSAGE_ILLEGAL, "a batch cannot be transactional")
        try:
            entries = decode_batch_body(body)
        except ProtocolError as error:
            raise RefusedError(ResponseCode.MESSAGE_ILLEGAL, f"bad batch body: {error}") from error
        shared = decode_properties(properties) if properties else {}
        shared.pop(PropertyKey.WAIT, None)
        shared.pop(DELIVERED_FROM, None)
        if has_delay(shared):
            raise RefusedError(ResponseCode.MESSAGE_ILLEGAL, "a batch cannot be delayed")
        if is_transaction_half(shared, 0):
            raise RefusedError(ResponseCode.MESSAGE_ILLEGAL, "a batch cannot be transactional")
        shared[PropertyKey.CLUSTER] = context.config.broker_cluster_name
        return [clean_entry(entry) for entry in entries], encode_properties(shared)

    def _batch_request(
        self,
        connection: Connection,
        topic: str,
        sys_flag: int,
        born_timestamp_ms: int,
        reconsume_times: int | None,
        config: TopicConfig,
        queue_id: int,
        entries: list[BatchEntry],
        extra_properties: str,
    ) -> BatchPutRequest:
        if config.topic_filter_type == _MULTI_TAG:
            sys_flag |= MessageSysFlag.MULTI_TAGS
        return BatchPutRequest(
            topic=topic,
            queue_id=queue_id,
            entries=entries,
            sys_flag=sys_flag,
            born_timestamp_ms=born_timestamp_ms,
            born_host=born_host_of(connection),
            reconsume_times=reconsume_times or 0,
            extra_properties=extra_properties,
        )

    # --- the answer -------------------------------------------------------------------------

    def _answer_frame(
        self,
        request: RemotingCommand,
        result: PutResult,
        queue_id: int,
        topic: str,
        started_ns: int,
    ) -> RemotingCommand | bytes:
        """:meth:`_answer`, as the precompiled SUCCESS frame when that is what it answers (a
        stored put, no remark, a JSON request): the same bytes without a command and its
        encoding (the batch fast form; a batch's message ids are joined by commas)."""
        if (
            result.status is not PutStatus.PUT_OK
            or result.remark
            or request.serialize_type != SerializeType.JSON
        ):
            return self._answer(request, result, queue_id, topic, started_ns)
        self._count_stored(result, topic, started_ns)
        return success_frame(
            self._success_head, self._success_tail, self._success_end,
            request.opaque, ",".join(result.message_ids), queue_id, result.queue_offset,
        )  # fmt: skip

    def _answer(
        self,
        request: RemotingCommand,
        result: PutResult,
        queue_id: int,
        topic: str,
        started_ns: int,
    ) -> RemotingCommand:
        status = result.status
        # Identity first: hashing an Enum member runs Python code, and PUT_OK is the rule.
        if status is PutStatus.PUT_OK:
            code, default_remark = ResponseCode.SUCCESS, ""
        else:
            code, default_remark = _STATUS_CODES[status]
        if code is not ResponseCode.SUCCESS and code not in _STORED_CODES:
            self._context.stats.record_put_failure()
            if result.remark == IN_SYNC_REPLICAS_NOT_ENOUGH:  # controller mode: Java's code 1
                code = ResponseCode.SYSTEM_ERROR
            return request.make_response(code, result.remark or default_remark, self._error_fields)
        self._count_stored(result, topic, started_ns)
        # The SendMessageResponseHeader fields, built directly: this runs for every send.
        fields = {
            "msgId": ",".join(result.message_ids),
            "queueId": str(queue_id),
            "queueOffset": str(result.queue_offset),
            **self._error_fields,
        }
        return request.make_response(code, result.remark or None, fields)

    def _count_stored(self, result: PutResult, topic: str, started_ns: int) -> None:
        """Count a stored put (both answers of a send that stored something)."""
        self._context.stats.record_put(
            result.message_count,
            result.wrote_bytes,
            topic=topic,
            elapsed_us=(time.perf_counter_ns() - started_ns) // 1000,
        )


def _put_request(
    connection: Connection,
    body: bytes,
    topic: str,
    queue_id: int,
    properties: dict[str, str] | str,
    sys_flag: int,
    flag: int,
    born_timestamp_ms: int,
    reconsume_times: int | None,
) -> PutRequest:
    """The store request of one message (both send paths build it here)."""
    return PutRequest(
        topic=topic,
        queue_id=queue_id,
        body=body,
        flag=flag,
        properties=properties,
        sys_flag=sys_flag,
        born_timestamp_ms=born_timestamp_ms,
        born_host=born_host_of(connection),
        reconsume_times=reconsume_times or 0,
    )


def _command_of(source: RemotingCommand | RawFrame) -> RemotingCommand:
    """The request as a command (the scanned form decodes its frame only to answer an error)."""
    return source if isinstance(source, RemotingCommand) else decode_command(source)


def _decode_header(request: RemotingCommand) -> SendMessageRequestHeader:
    try:
        if request.code == RequestCode.SEND_MESSAGE:
            return SendMessageRequestHeader.from_ext_fields(request.ext_fields)
        return SendMessageRequestHeader.from_v2_ext_fields(request.ext_fields)
    except HeaderError as error:
        raise RefusedError(ResponseCode.SYSTEM_ERROR, str(error)) from error
