"""Message look-up for :class:`~bolide.client.admin.AdminClient`: by id, by key, by time range,
following a topic (tail), and resending dead letters to their group.

* **By id**: an *offset message id* names its broker and commit-log offset
  (VIEW_MESSAGE_BY_ID there); a *message id* (UNIQ_KEY, what producers and consumers show) is
  looked up in the index of every broker holding the topic, so it needs the topic.
* **By key / unique key**: QUERY_MESSAGE on every broker holding the topic, merged newest
  first (the brokers' index matches hashes; :func:`bolide.client.rpc.query_message`
  re-filters).
* **By time range** and **tail**: pulls with the tools group ``TOOLS_CONSUMER`` (a group every
  RocketMQ broker has; no offset is committed) from the offset each queue holds for the
  start time, keeping messages stored in the range. A tail parks its pulls on the broker
  (long polling) and yields messages as they arrive.
* **Resend**: dead letters of group G (topic ``%DLQ%G``) are sent as new messages to
  ``%RETRY%G``, which only G's consumers subscribe (in clustering mode, the C++ and Java
  clients too), with ``RETRY_TOPIC`` = their original topic so listeners see that topic,
  the same message id (UNIQ_KEY) so idempotent consumers recognise them, and a fresh retry
  count. A dead-letter topic created write-only (as Bolide and RocketMQ before 4.9.4 do) is
  made readable first when reading it by time range.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Sequence

from bolide.base import limits
from bolide.base.errors import (
    BolideError,
    MessageNotFoundError,
    NoRouteError,
    ProtocolError,
    RemoteError,
    TopicNotFoundError,
    TransportError,
)
from bolide.client import rpc
from bolide.client.admin.session import AdminSession
from bolide.client.admin.views import ProgressCallback, ResendOutcome
from bolide.client.route import subscribe_queues
from bolide.protocol.address import format_socket_address
from bolide.protocol.bodies import MASTER_BROKER_ID, PERM_READ, MessageQueue, SubscriptionData
from bolide.protocol.headers import PullMessageRequestHeader, PullSysFlag, QueryMessageRequestHeader
from bolide.protocol.message import Message, MessageExt, PropertyKey
from bolide.protocol.msgid import decode_offset_message_id
from bolide.protocol.system_topics import TOOLS_CONSUMER_GROUP, dlq_topic, retry_topic

__all__ = [
    "get_message",
    "query_by_key",
    "query_by_time",
    "resend_dead_letters",
    "tail",
]

LATEST = -1
EARLIEST = 0
_FAR_FUTURE_MS = 2**62
"""End of an open time range."""
_RESEND_DROPPED_PROPERTIES = (
    PropertyKey.RECONSUME_TIME,
    PropertyKey.MAX_RECONSUME_TIMES,
    PropertyKey.DELAY,
    PropertyKey.MIN_OFFSET,
    PropertyKey.MAX_OFFSET,
    PropertyKey.CLUSTER,
    PropertyKey.TRACE_ON,
    PropertyKey.MSG_REGION,
    PropertyKey.REAL_TOPIC,
    PropertyKey.REAL_QID,
    PropertyKey.TIMER_DELIVER_MS,
    PropertyKey.TIMER_DELAY_MS,
    PropertyKey.TIMER_DELAY_SEC,
    PropertyKey.CONSUME_START_TIME,
)
"""Properties of a dead letter that must not follow it back: retry counts and delays (a fresh
start), and what brokers and clients add on their own."""


# --- by id and key ------------------------------------------------------------------------------


async def get_message(admin: AdminSession, msg_id: str, topic: str | None) -> list[MessageExt]:
    """Messages with ``msg_id``: by UNIQ_KEY in ``topic`` when given, else (or when that finds
    nothing) as an offset message id. Raises MessageNotFoundError, TopicNotFoundError."""
    if topic is not None:
        found = await query_by_key(admin, topic, msg_id, 0, None, 1, True)
        if found:
            return found
    hint = "" if topic else "; a message id (UNIQ_KEY) is found with its topic (--topic)"
    try:
        store_host, commit_log_offset = decode_offset_message_id(msg_id)
    except ProtocolError as error:
        raise MessageNotFoundError(f"no message {msg_id}{hint}") from error
    if not 0 < store_host[1] < 65_536:
        raise MessageNotFoundError(f"no message {msg_id}{hint}")
    address = format_socket_address(store_host)
    try:
        message = await rpc.view_message(admin.pool, address, commit_log_offset, admin.timeout_ms)
    except RemoteError as error:
        raise MessageNotFoundError(
            f"no message {msg_id}: {address} holds none at commit-log offset "
            f"{commit_log_offset}{hint}"
        ) from error
    except (TransportError, ValueError) as error:
        raise MessageNotFoundError(
            f"no message {msg_id}: it names broker {address}, which did not answer{hint}"
        ) from error
    return [message]


async def query_by_key(
    admin: AdminSession,
    topic: str,
    key: str,
    begin_ms: int,
    end_ms: int | None,
    max_count: int,
    unique: bool,
) -> list[MessageExt]:
    """Messages of ``topic`` indexed under ``key`` on every broker holding it, newest first,
    at most ``max_count``. Raises TopicNotFoundError; a broker failure is raised."""
    masters = await admin.topic_masters(topic)
    header = QueryMessageRequestHeader(
        topic,
        key,
        max_count,
        begin_ms,
        end_ms if end_ms is not None else _FAR_FUTURE_MS,
        unique,
    )
    results = await admin.fan_out(
        [
            rpc.query_message(admin.pool, address, header, admin.timeout_ms)
            for address in masters.values()
        ]
    )
    found: list[MessageExt] = []
    for result in results:
        if isinstance(result, BolideError):
            raise result
        found += result
    found.sort(key=lambda message: message.store_timestamp_ms, reverse=True)
    return found[:max_count]


# --- by time and tail --------------------------------------------------------------------------


def _pull_header(
    queue: MessageQueue, offset: int, expression: str, suspend_ms: int
) -> PullMessageRequestHeader:
    flags = PullSysFlag.SUBSCRIPTION | (PullSysFlag.SUSPEND if suspend_ms else 0)
    return PullMessageRequestHeader(
        consumer_group=TOOLS_CONSUMER_GROUP,
        topic=queue.topic,
        queue_id=queue.queue_id,
        queue_offset=offset,
        max_messages=limits.PULL_BATCH_MAX_MESSAGES,
        sys_flag=int(flags),
        commit_offset=0,
        suspend_timeout_ms=suspend_ms,
        sub_version=0,
        subscription=expression,
        expression_type="TAG",
    )


async def _readable_queues(admin: AdminSession, topic: str) -> dict[MessageQueue, str]:
    """Readable queue -> its master's address. Raises TopicNotFoundError, NoRouteError."""
    route = await admin.topic_route(topic)
    masters = {
        data.broker_name: address
        for data in route.broker_datas
        if (address := data.broker_addrs.get(MASTER_BROKER_ID)) is not None
    }
    queues = {
        q: masters[q.broker_name]
        for q in subscribe_queues(topic, route)
        if q.broker_name in masters
    }
    if not queues:
        if any(not data.perm & PERM_READ for data in route.queue_datas):
            raise NoRouteError(
                f"topic {topic!r} is not readable; make it readable first "
                f"(bolide topic update {topic} --perm 6)"
            )
        raise NoRouteError(f"topic {topic!r} has no readable queue with a master")
    return queues


async def _start_offset(
    admin: AdminSession, queue: MessageQueue, address: str, start_ms: int
) -> int:
    timeout_ms = admin.timeout_ms
    if start_ms == LATEST:
        return await rpc.get_max_offset(
            admin.pool, address, queue.topic, queue.queue_id, timeout_ms
        )
    if start_ms == EARLIEST:
        return await rpc.get_min_offset(
            admin.pool, address, queue.topic, queue.queue_id, timeout_ms
        )
    return await rpc.search_offset_by_timestamp(
        admin.pool, address, queue.topic, queue.queue_id, start_ms, timeout_ms
    )


async def _read_range(
    admin: AdminSession, queue: MessageQueue, address: str, begin_ms: int, end_ms: int, limit: int
) -> list[MessageExt]:
    """Messages of one queue stored in [begin_ms, end_ms), oldest first, at most ``limit``."""
    offset = await _start_offset(admin, queue, address, begin_ms)
    end_offset = await _start_offset(admin, queue, address, end_ms)
    # The search gives the message nearest the time (Java) or the first at or after it
    # (Bolide): read one more at each end and keep what the store times say.
    offset = max(0, offset - 1)
    found: list[MessageExt] = []
    while offset <= end_offset and len(found) < limit:
        result = await rpc.pull_message(
            admin.pool, address, _pull_header(queue, offset, "*", 0), admin.timeout_ms
        )
        if result.status is not rpc.PullStatus.FOUND or result.next_begin_offset <= offset:
            if result.status is rpc.PullStatus.OFFSET_ILLEGAL and result.next_begin_offset > offset:
                offset = result.next_begin_offset
                continue
            break
        found += [m for m in result.messages if begin_ms <= m.store_timestamp_ms < end_ms]
        offset = result.next_begin_offset
    return found[:limit]


async def query_by_time(
    admin: AdminSession,
    topic: str,
    begin_ms: int,
    end_ms: int,
    max_count: int,
    on_progress: ProgressCallback | None,
) -> list[MessageExt]:
    """Messages of ``topic`` stored in [begin_ms, end_ms), sorted by store time, at most
    ``max_count``. Raises TopicNotFoundError, NoRouteError (not readable), RemoteError."""
    queues = await _readable_queues(admin, topic)
    done = 0
    if on_progress is not None:
        on_progress(0, len(queues))

    async def one(queue: MessageQueue, address: str) -> list[MessageExt]:
        nonlocal done
        found = await _read_range(admin, queue, address, max(1, begin_ms), end_ms, max_count)
        done += 1
        if on_progress is not None:
            on_progress(done, len(queues))
        return found

    results = await admin.fan_out([one(queue, address) for queue, address in queues.items()])
    messages: list[MessageExt] = []
    for result in results:
        if isinstance(result, BolideError):
            raise result
        messages += result
    messages.sort(key=lambda m: (m.store_timestamp_ms, m.queue_id, m.queue_offset))
    return messages[:max_count]


async def tail(
    admin: AdminSession, topic: str, start_ms: int, expression: str
) -> AsyncGenerator[MessageExt, None]:
    """Messages of ``topic`` matching ``expression`` from ``start_ms`` on, as they arrive
    (each queue in order). Runs until the caller stops iterating. Raises TopicNotFoundError,
    NoRouteError, BodyError (an expression without a tag)."""
    subscription = SubscriptionData.from_expression(topic, expression, 0)
    queues = await _readable_queues(admin, topic)
    buffer: asyncio.Queue[MessageExt] = asyncio.Queue(limits.ADMIN_TAIL_BUFFER_MAX_MESSAGES)

    async def follow(queue: MessageQueue, address: str) -> None:
        offset = await _start_offset(admin, queue, address, start_ms)
        header_expression = subscription.sub_string
        while True:
            try:
                result = await rpc.pull_message(
                    admin.pool,
                    address,
                    _pull_header(queue, offset, header_expression, limits.PULL_SUSPEND_TIMEOUT_MS),
                    limits.PULL_RPC_TIMEOUT_MS,
                )
            except BolideError:
                # A broker restarting or a slow answer: try again after the clients' back-off.
                await admin.clock.sleep_ms(limits.PULL_DELAY_ON_ERROR_MS)
                continue
            for message in rpc.filter_by_tags(result.messages, subscription.tags_set):
                await buffer.put(message)
            offset = max(offset, result.next_begin_offset)

    tasks = [asyncio.ensure_future(follow(queue, address)) for queue, address in queues.items()]
    try:
        while True:
            getter = asyncio.ensure_future(buffer.get())
            await asyncio.wait([getter, *tasks], return_when=asyncio.FIRST_COMPLETED)
            if not getter.done():
                getter.cancel()
                failed = next(task for task in tasks if task.done())
                failed.result()  # raises what ended that queue's follower
                raise NoRouteError(f"following {topic!r} stopped")
            yield getter.result()
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, BolideError):
                await task


# --- dead letters --------------------------------------------------------------------------------


async def _dead_letters(
    admin: AdminSession,
    dlq: str,
    msg_ids: Sequence[str],
    begin_ms: int,
    end_ms: int | None,
    max_count: int,
) -> tuple[list[MessageExt], list[ResendOutcome]]:
    if msg_ids:
        found: list[MessageExt] = []
        missing: list[ResendOutcome] = []
        for msg_id in msg_ids:
            try:
                matches = await get_message(admin, msg_id, dlq)
            except MessageNotFoundError:
                matches = []
            matches = [message for message in matches if message.topic == dlq]
            if matches:
                found.append(matches[0])
            else:
                missing.append(ResendOutcome(msg_id, "", error=f"not found in {dlq}"))
        return found, missing
    configs = await admin.topic_configs(dlq)
    if any(not config.perm & PERM_READ for config in configs.values()):
        await admin.update_topic(dlq, perm=max(c.perm for c in configs.values()) | PERM_READ)
    end = end_ms if end_ms is not None else admin.clock.now_ms() + 1
    return await query_by_time(admin, dlq, begin_ms, end, max_count, None), []


def _resend_message(dead: MessageExt, retry_topic: str) -> Message:
    properties = {
        key: value
        for key, value in dead.properties.items()
        if key not in _RESEND_DROPPED_PROPERTIES
    }
    properties.setdefault(PropertyKey.ORIGIN_MESSAGE_ID, dead.offset_msg_id)
    return Message(retry_topic, dead.body, dead.flag, properties)


async def resend_dead_letters(
    admin: AdminSession,
    group: str,
    msg_ids: Sequence[str],
    begin_ms: int,
    end_ms: int | None,
    max_count: int,
    on_progress: ProgressCallback | None,
) -> list[ResendOutcome]:
    """Send ``group``'s dead letters back to it (module docstring). Raises
    TopicNotFoundError when the group has no dead-letter or no retry topic."""
    dlq, retry = dlq_topic(group), retry_topic(group)
    try:
        await admin.topic_route(retry)
    except TopicNotFoundError as error:
        raise TopicNotFoundError(
            f"group {group!r} has no retry topic {retry}: it has not consumed in clustering "
            "mode yet, so nothing would read the resent messages"
        ) from error
    try:
        dead, outcomes = await _dead_letters(admin, dlq, msg_ids, begin_ms, end_ms, max_count)
    except TopicNotFoundError as error:
        raise TopicNotFoundError(f"group {group!r} has no dead letters ({dlq})") from error
    total = len(dead)
    for index, message in enumerate(dead[:max_count]):
        original = message.properties.get(PropertyKey.RETRY_TOPIC, "")
        try:
            result = await admin.send_message(_resend_message(message, retry))
        except BolideError as error:
            outcomes.append(ResendOutcome(message.msg_id, original, error=str(error)))
        else:
            outcomes.append(ResendOutcome(message.msg_id, original, result.msg_id))
        if on_progress is not None:
            on_progress(index + 1, total)
    return outcomes
