"""Message pages: look messages up (by key, by id, by time range, by queue and offset), see
one (body, properties, which groups consumed it), and the dead letters of a group (browse,
resend one or many, export as JSON)."""

from __future__ import annotations

import orjson
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from bolide.base import limits
from bolide.base.errors import BolideError, MessageNotFoundError, ProtocolError
from bolide.client import admin_stats, rpc
from bolide.client.admin import AdminClient
from bolide.dashboard.auth import Session
from bolide.dashboard.data import PageError, gather, message_view, parse_time_ms
from bolide.dashboard.rendering import Dashboard, page, query_text, required_query_text
from bolide.protocol.bodies import PERM_READ
from bolide.protocol.headers import PullMessageRequestHeader, PullSysFlag
from bolide.protocol.message import MessageExt
from bolide.protocol.msgid import decode_offset_message_id
from bolide.protocol.system_topics import TOOLS_CONSUMER_GROUP, dlq_topic

__all__ = ["message_routes"]


def message_routes() -> list[Route]:
    return [
        Route("/messages", page(messages_page)),
        Route("/messages/view", page(message_page)),
        Route("/messages/consume", page(consume_directly, change=True), methods=["POST"]),
        Route("/dlq", page(dlq_page)),
        Route("/dlq/resend", page(dlq_resend, change=True), methods=["POST"]),
        Route("/dlq/export", page(dlq_export)),
    ]


async def _by_queue_offset(
    admin: AdminClient, topic: str, queue_id: int, offset: int, count: int
) -> list[MessageExt]:
    """Up to ``count`` messages from ``offset`` of queue ``queue_id`` on each broker."""
    masters = await admin.topic_masters(topic)
    found: list[MessageExt] = []
    for _broker, address in sorted(masters.items()):
        header = PullMessageRequestHeader(
            consumer_group=TOOLS_CONSUMER_GROUP,
            topic=topic,
            queue_id=queue_id,
            queue_offset=max(0, offset),
            max_messages=count,
            sys_flag=int(PullSysFlag.SUBSCRIPTION),
            commit_offset=0,
            suspend_timeout_ms=0,
            sub_version=0,
            subscription="*",
            expression_type="TAG",
        )
        result = await rpc.pull_message(admin.pool, address, header, admin.timeout_ms)
        found.extend(result.messages[:count])
    return found


async def _search(dashboard: Dashboard, request: Request) -> tuple[str, list[MessageExt]]:
    params = request.query_params
    mode = params.get("mode", "key")
    topic = params.get("topic", "").strip()
    admin = dashboard.admin
    limit = limits.DASHBOARD_QUERY_MAX_MESSAGES
    if mode == "id":
        msg_id = params.get("id", "").strip()
        if not msg_id:
            return mode, []
        try:
            return mode, await admin.get_message(msg_id, topic=topic or None)
        except MessageNotFoundError:
            return mode, []
    if not topic:
        return mode, []
    if mode == "key":
        key = params.get("key", "").strip()
        if not key:
            raise PageError(400, "Give a key to look for.")
        return mode, await admin.query_by_key(topic, key, max_count=limit)
    if mode == "time":
        now_ms = admin.clock.now_ms()
        try:
            begin = parse_time_ms(params.get("begin", "1h"), now_ms)
            end = parse_time_ms(params.get("end", "now"), now_ms)
        except ValueError as error:
            raise PageError(400, str(error)) from None
        return mode, await admin.query_by_time(topic, max(0, begin), end, max_count=limit)
    if mode == "offset":
        try:
            queue_id, offset = int(params.get("queue", "0")), int(params.get("offset", "0"))
        except ValueError:
            raise PageError(400, "Queue and offset are whole numbers.") from None
        return mode, await _by_queue_offset(admin, topic, queue_id, offset, 16)
    raise PageError(400, f"Unknown search {mode!r}: key, id, time or offset.")


async def messages_page(dashboard: Dashboard, request: Request, session: Session) -> Response:
    mode, found = await _search(dashboard, request)
    return dashboard.render(
        request,
        session,
        "messages.html",
        mode=mode,
        params=dict(request.query_params),
        messages=[message_view(m) for m in found[: limits.DASHBOARD_QUERY_MAX_MESSAGES]],
        searched=bool(request.query_params),
    )


async def _consumed_by(
    admin: AdminClient, message: MessageExt
) -> list[tuple[str, str, str | None]]:
    """(group, "consumed" | "not yet" | error, the client holding the message's queue) for
    every group consuming the topic."""
    try:
        groups = await admin.topic_consumer_groups(message.topic)
    except BolideError:
        return []
    address = f"{message.store_host[0]}:{message.store_host[1]}"
    masters = await admin.master_addresses()
    broker = next((name for name, addr in masters.items() if addr == address), None)
    progress = await gather([admin.group_progress(g, topic=message.topic) for g in groups])
    states: list[tuple[str, str, str | None]] = []
    for group, result in zip(groups, progress, strict=True):
        if isinstance(result, BolideError):
            states.append((group, f"unknown: {result}", None))
            continue
        rows = [
            row
            for row in result.queues
            if row.queue.queue_id == message.queue_id
            and (broker is None or row.queue.broker_name == broker)
        ]
        done = any(row.consumer_offset > message.queue_offset for row in rows)
        owner = next((row.client_id for row in rows if row.client_id), None)
        states.append((group, "consumed" if done else "not yet", owner))
    return states


async def message_page(dashboard: Dashboard, request: Request, session: Session) -> Response:
    msg_id = required_query_text(request, "id", "Which message? Give its id.")
    topic = query_text(request, "topic") or None
    try:
        found = await dashboard.admin.get_message(msg_id, topic=topic)
    except MessageNotFoundError as error:
        raise PageError(404, str(error)) from error
    message = found[0]
    return dashboard.render(
        request,
        session,
        "message.html",
        message=message_view(message),
        consumed_by=await _consumed_by(dashboard.admin, message),
    )


async def consume_directly(dashboard: Dashboard, request: Request, session: Session) -> Response:
    """Have one consumer's listener run on the message (CONSUME_MESSAGE_DIRECTLY)."""
    form = await request.form()
    group, client_id, msg_id = (
        str(form.get(name, "")).strip() for name in ("group", "client_id", "msg_id")
    )
    if not (group and client_id and msg_id):
        raise PageError(400, "Which group, consumer and message? Nothing was consumed.")
    try:
        (host, port), _ = decode_offset_message_id(msg_id)
    except ProtocolError:
        raise PageError(400, f"{msg_id!r} is not a message id of a broker.") from None
    verdict = await admin_stats.consume_message_directly(
        dashboard.admin, group, client_id, msg_id, f"{host}:{port}"
    )
    remark = f" ({verdict.remark})" if verdict.remark else ""
    session.flashes.append(
        f"{client_id} of {group} consumed it directly: {verdict.consume_result.value}{remark}, "
        f"{verdict.spent_time_ms} ms."
    )
    return RedirectResponse(f"/messages/view?id={msg_id}", status_code=303)


async def _dead_letters(admin: AdminClient, group: str) -> list[MessageExt]:
    dlq = dlq_topic(group)
    configs = await admin.topic_configs(dlq)  # TopicNotFoundError: no dead letters, 404
    if any(not config.perm & PERM_READ for config in configs.values()):
        # A DLQ is created write-only; reading it (as resend does) needs the read bit.
        await admin.update_topic(dlq, perm=max(c.perm for c in configs.values()) | PERM_READ)
    return await admin.query_by_time(
        dlq, 0, admin.clock.now_ms() + 1, max_count=limits.DASHBOARD_QUERY_MAX_MESSAGES
    )


async def dlq_page(dashboard: Dashboard, request: Request, session: Session) -> Response:
    group = query_text(request, "group")
    messages = (
        [message_view(m) for m in await _dead_letters(dashboard.admin, group)] if group else []
    )
    return dashboard.render(request, session, "dlq.html", group=group, messages=messages)


async def dlq_resend(dashboard: Dashboard, request: Request, session: Session) -> Response:
    form = await request.form()
    group = str(form.get("group", "")).strip()
    msg_ids = [str(value) for value in form.getlist("msg_id")][
        : limits.DASHBOARD_QUERY_MAX_MESSAGES
    ]
    if not group or not msg_ids:
        raise PageError(400, "Tick the dead letters to resend; nothing was sent.")
    outcomes = await dashboard.admin.resend_dead_letters(group, msg_ids=msg_ids)
    return dashboard.render(request, session, "dlq_resent.html", group=group, outcomes=outcomes)


async def dlq_export(dashboard: Dashboard, request: Request, session: Session) -> Response:
    del session
    group = required_query_text(request, "group", "Which group's dead letters?")
    views = [message_view(m) for m in await _dead_letters(dashboard.admin, group)]
    return Response(
        orjson.dumps(views, option=orjson.OPT_INDENT_2),
        media_type="application/json",
        headers={"Content-Disposition": f'attachment; filename="dlq-{group}.json"'},
    )
