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
9. the store's status becomes the response code (:mod:`~bolide.broker.handlers.send_answers`).

The common sends also have fast forms (:mod:`~bolide.broker.handlers.send_fast`), which take
only what :func:`~bolide.broker.handlers.send_rules.takes_fast_form` allows and give the same
record and the same answer.

Whether a request is a batch is decided by the header's ``batch`` flag alone (``"true"`` or
the C++ client's ``"1"``), never by the code. Every response carries extFields (MSG_REGION
and TRACE_ON, plus msgId / queueId / queueOffset when stored): the Java client reads
MSG_REGION without a null check and the C++ client dereferences the decoded header.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable

from bolide.base.errors import BolideError
from bolide.broker.context import (
    BrokerContext,
    RefusedError,
    born_host_of,
    find_group_or_refuse,
)
from bolide.broker.delivery import DELIVERED_FROM
from bolide.broker.handlers.send_answers import SendAnswers
from bolide.broker.handlers.send_fast import FastSends
from bolide.broker.handlers.send_properties import (
    has_delay,
    plain_properties,
    waits_for_store,
    without_wait,
)
from bolide.broker.handlers.send_rules import MULTI_TAG_FILTER, BatchPreparer, any_writable_queue
from bolide.broker.schedule import schedule_target
from bolide.broker.timer import TIMER_OUT_MS, TIMER_TRIGGER_PROPERTIES, TimerPropertyError
from bolide.broker.topics import TopicConfig, TopicCreation, is_writeable, validate_topic
from bolide.broker.transactions.records import half_target, is_transaction_half
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import HeaderError, SendMessageRequestHeader
from bolide.protocol.headers.recall import RecallHandle
from bolide.protocol.message import (
    TRANSACTION_NOT_TYPE,
    MessageSysFlag,
    PropertyKey,
    transaction_type,
)
from bolide.protocol.record import (
    NAME_VALUE_SEPARATOR,
    decode_properties,
    join_properties,
)
from bolide.protocol.system_topics import (
    TIMER_TOPIC,
    dlq_topic,
    group_of_retry_topic,
    is_retry_topic,
    is_send_forbidden_topic,
)
from bolide.remoting import Connection, Dispatcher
from bolide.store.api import PutRequest, PutResult, PutStatus

__all__ = ["SendHandlers"]

_log = logging.getLogger("bolide.broker.send")

_VERSION_V3_4_9 = 121
"""Clients at or above this wire version send a trustworthy ``maxReconsumeTimes``."""
_TOPIC_SYS_FLAG_UNIT = 1
_TOPIC_SYS_FLAG_UNIT_SUB = 2


class SendHandlers:
    """The producer-facing handlers of one broker."""

    def __init__(self, context: BrokerContext) -> None:
        self._context = context
        self._answers = SendAnswers(context)
        self._batches = BatchPreparer(context)
        self._cluster_pair = (
            f"{PropertyKey.CLUSTER}{NAME_VALUE_SEPARATOR}{context.config.broker_cluster_name}"
        )
        self.fast = FastSends(context, self._answers, self._batches)
        """The fast forms of the same sends (send_fast.py); they take only the common ones."""

    def install(self, dispatcher: Dispatcher) -> None:
        """Register codes 10, 310 and 320 in the ``send`` family, with their fast forms."""
        for code in (
            RequestCode.SEND_MESSAGE,
            RequestCode.SEND_MESSAGE_V2,
            RequestCode.SEND_BATCH_MESSAGE,
        ):
            dispatcher.register(code, self.send_message, family="send")
        self._answers.attach(dispatcher)
        fast = self.fast
        dispatcher.register_fast(RequestCode.SEND_BATCH_MESSAGE, fast.send_batch_at_once)
        for code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2):
            dispatcher.register_fast(code, fast.send_message_at_once)
            dispatcher.register_scanned(code, fast.send_scanned, ready=fast.puts_at_once)

    async def send_message(
        self, connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """Store the message (or batch) of ``request``; see the module docstring."""
        started_ns = time.perf_counter_ns()
        try:
            header = _decode_header(request)
            config = await self._topic_config(header)
            queue_id = self._queue_id(header, config)
            recall_handle: str | None = None
            if header.batch:
                result = await self._put_batch(connection, request, header, config, queue_id)
            else:
                result, recall_handle = await self._put_single(
                    connection, request, header, config, queue_id
                )
        except RefusedError as refused:
            return self._answers.refused(request, refused.code, refused.remark)
        except BolideError as error:  # still answered with extFields: clients read them
            _log.warning("send from %s failed: %s", connection.remote_address, error)
            return self._answers.refused(request, ResponseCode.SYSTEM_ERROR, str(error))
        replication = self._context.replication
        if (
            replication is not None
            and result.status is PutStatus.PUT_OK
            and waits_for_store(header.properties)
        ):
            await replication.wait_replicated(result)
        return self._answers.answer(
            request, result, queue_id, header.topic, started_ns, recall_handle=recall_handle
        )

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
        creation = await _recorded(
            context,
            context.topics.create_topic_in_send(
                header.topic,
                header.default_topic,
                header.default_topic_queue_count,
                topic_sys_flag=topic_sys_flag,
            ),
            f"topic {header.topic}",
        )
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
            queue_id = any_writable_queue(config, self._context.random)
        return queue_id

    # --- one message ------------------------------------------------------------------------

    async def _put_single(
        self,
        connection: Connection,
        request: RemotingCommand,
        header: SendMessageRequestHeader,
        config: TopicConfig,
        queue_id: int,
    ) -> tuple[PutResult, str | None]:
        """Store one message; its result and, for a timer message, its recall handle (the
        ``recallHandle`` of the answer, as RocketMQ 5.3's broker gives)."""
        context = self._context
        sys_flag = header.sys_flag
        if config.topic_filter_type == MULTI_TAG_FILTER:
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
                half = await self._put_half(connection, request, header, properties, topic,
                                            store_queue_id, sys_flag)  # fmt: skip
                return half, None
            topic, store_queue_id = self._wait_target(properties, sys_flag, topic, store_queue_id)
        # A mapping of properties is encoded by the store.
        put = _put_request(
            connection, request.body, topic, store_queue_id, properties, sys_flag, header.flag,
            header.born_timestamp_ms, header.reconsume_times,
        )  # fmt: skip
        result = await context.store.put_message(put)
        return result, self._recall_handle(header.topic, topic, properties)

    def _recall_handle(
        self, real_topic: str, stored_topic: str, properties: dict[str, str] | str
    ) -> str | None:
        """The recall handle of a message stored on the timer topic (None for any other):
        its real topic, this broker, its delivery time and its UNIQ_KEY."""
        if stored_topic != TIMER_TOPIC or isinstance(properties, str):
            return None
        unique_key = properties.get(PropertyKey.UNIQ_KEY)
        deliver_ms = properties.get(TIMER_OUT_MS, "")
        if not unique_key or not deliver_ms.isdigit():
            return None
        broker_name = self._context.config.broker_name
        return RecallHandle(real_topic, broker_name, int(deliver_ms), unique_key).encode()

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
        creation = await _recorded(
            context, context.topics.create_dlq_topic(group), f"DLQ of {group}"
        )
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
        entries, extra_properties = self._batches.parts(
            header.topic, header.sys_flag, header.properties, request.body
        )
        return await self._context.store.put_messages(
            self._batches.request(
                connection, header.topic, header.sys_flag, header.born_timestamp_ms,
                header.reconsume_times, config, queue_id, entries, extra_properties,
            )
        )  # fmt: skip


async def _recorded(
    context: BrokerContext, creating: Awaitable[TopicCreation], what: str
) -> TopicCreation:
    """The outcome of ``creating`` a topic; a new one is announced to the name servers soon.

    Raises:
        RefusedError: SYSTEM_ERROR, the topic (``what``) could not be recorded on disk.
    """
    try:
        creation = await creating
    except OSError as error:
        raise RefusedError(ResponseCode.SYSTEM_ERROR, f"cannot record {what}: {error}") from error
    if creation.created:
        context.register_soon()
    return creation


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


def _decode_header(request: RemotingCommand) -> SendMessageRequestHeader:
    try:
        if request.code == RequestCode.SEND_MESSAGE:
            return SendMessageRequestHeader.from_ext_fields(request.ext_fields)
        return SendMessageRequestHeader.from_v2_ext_fields(request.ext_fields)
    except HeaderError as error:
        raise RefusedError(ResponseCode.SYSTEM_ERROR, str(error)) from error
