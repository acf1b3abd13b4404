"""Topic pages: the list (with create), one topic (queues, offsets, route, consumers, live
put rate) with update, delete and "send a test message"."""

from __future__ import annotations

import asyncio

from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from bolide.base.errors import BolideError
from bolide.client import admin_stats
from bolide.dashboard.auth import Session
from bolide.dashboard.data import PageError, gather
from bolide.dashboard.history_svg import history_chart_svg, merge_points
from bolide.dashboard.rendering import Dashboard, form_text, page
from bolide.protocol.message import Message
from bolide.protocol.system_topics import topic_kind

__all__ = ["topic_routes"]

_PERMS = {"6": "read and write", "4": "read only", "2": "write only", "0": "none"}


def topic_routes() -> list[Route]:
    return [
        Route("/topics", page(topics_page)),
        Route("/topics/create", page(create_topic, change=True), methods=["POST"]),
        Route("/topics/{topic}", page(topic_page)),
        Route("/topics/{topic}/update", page(update_topic, change=True), methods=["POST"]),
        Route("/topics/{topic}/delete", page(delete_topic, change=True), methods=["POST"]),
        Route("/topics/{topic}/send", page(send_test_message, change=True), methods=["POST"]),
    ]


async def topics_page(dashboard: Dashboard, request: Request, session: Session) -> Response:
    show = request.query_params.get("show", "normal")
    admin = dashboard.admin
    names, info = await asyncio.gather(admin.topic_list(), admin.cluster_info())
    system = frozenset(info.cluster_addr_table) | frozenset(info.broker_addr_table)
    topics = [(topic, topic_kind(topic, system)) for topic in names]
    if show != "all":
        topics = [(topic, kind) for topic, kind in topics if kind == "normal"]
    return dashboard.render(request, session, "topics.html", topics=topics, show=show)


def _count(text: str, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise PageError(400, f"{what} must be a whole number, not {text!r}") from None
    if not 1 <= value <= 1024:
        raise PageError(400, f"{what} must be between 1 and 1024, not {value}")
    return value


async def create_topic(dashboard: Dashboard, request: Request, session: Session) -> Response:
    name = await form_text(request, "topic")
    if not name:
        raise PageError(400, "A topic needs a name.")
    queues = _count(await form_text(request, "queues", "8"), "Queues")
    order = await form_text(request, "order") == "on"
    try:
        brokers = await dashboard.admin.create_topic(name, queue_count=queues, order=order)
    except BolideError as error:
        raise PageError(400, f"Topic {name!r} was not created: {error}") from error
    session.flashes.append(f"Topic {name} created on {', '.join(brokers)}.")
    return RedirectResponse(f"/topics/{name}", status_code=303)


async def topic_page(dashboard: Dashboard, request: Request, session: Session) -> Response:
    topic = request.path_params["topic"]
    admin = dashboard.admin
    route = await admin.topic_route(topic)  # TopicNotFoundError: 404
    status, groups, configs = await gather(
        [admin.topic_status(topic), admin.topic_consumer_groups(topic), admin.topic_configs(topic)]
    )
    masters = {data.broker_name: data.master_addr for data in route.broker_datas}
    rates = await gather(
        [
            admin_stats.view_broker_stats(admin, address, "TOPIC_PUT_NUMS", topic)
            for address in masters.values()
            if address
        ]
    )
    history = merge_points(
        await gather([admin.stats_history(a, topic) for a in masters.values() if a])
    )
    put_chart = history_chart_svg(
        "put-tps-history",
        "Put TPS, last hour",
        "msg/s",
        [(point.timestamp_ms, point.tps) for point in history.points],
    )
    message_types = (
        sorted({config.message_type for config in configs.values()})
        if isinstance(configs, dict)
        else []
    )
    put_tps = sum(r.stats_minute.tps for r in rates if not isinstance(r, BolideError))
    put_today = sum(r.stats_day.sum for r in rates if not isinstance(r, BolideError))
    return dashboard.render(
        request,
        session,
        "topic.html",
        topic=topic,
        kind=topic_kind(topic),
        message_type=" / ".join(message_types),
        route=route,
        queues=[] if isinstance(status, BolideError) else status,
        groups=[] if isinstance(groups, BolideError) else groups,
        configs={} if isinstance(configs, BolideError) else configs,
        perms=_PERMS,
        put_tps=put_tps,
        put_day=put_today,
        put_chart=Markup(put_chart),  # every text inside is escaped (history_chart_svg)
        history_errors=history.errors,
        errors=[str(e) for e in (status, groups, configs) if isinstance(e, BolideError)],
    )


async def update_topic(dashboard: Dashboard, request: Request, session: Session) -> Response:
    topic = request.path_params["topic"]
    await dashboard.admin.topic_route(topic)
    read = _count(await form_text(request, "read_queues"), "Read queues")
    write = _count(await form_text(request, "write_queues"), "Write queues")
    perm = await form_text(request, "perm", "6")
    if perm not in _PERMS:
        raise PageError(400, f"Permission {perm!r} is not one of 6, 4, 2, 0.")
    try:
        await dashboard.admin.update_topic(
            topic, read_queue_count=read, write_queue_count=write, perm=int(perm)
        )
    except BolideError as error:
        raise PageError(400, f"Topic {topic!r} was not changed: {error}") from error
    session.flashes.append(f"Topic {topic} updated: {read} read / {write} write queues.")
    return RedirectResponse(f"/topics/{topic}", status_code=303)


async def delete_topic(dashboard: Dashboard, request: Request, session: Session) -> Response:
    topic = request.path_params["topic"]
    if await form_text(request, "confirm") != topic:
        raise PageError(400, f"Type the topic's name ({topic}) to delete it; nothing changed.")
    brokers = await dashboard.admin.delete_topic(topic)
    session.flashes.append(f"Topic {topic} deleted from {', '.join(brokers)}.")
    return RedirectResponse("/topics", status_code=303)


async def send_test_message(dashboard: Dashboard, request: Request, session: Session) -> Response:
    topic = request.path_params["topic"]
    await dashboard.admin.topic_route(topic)
    body = await form_text(request, "body")
    if not body:
        raise PageError(400, "A test message needs a body.")
    message = Message(
        topic,
        body.encode(),
        tags=await form_text(request, "tags") or None,
        keys=await form_text(request, "keys") or None,
    )
    result = await dashboard.admin.send_message(message)
    session.flashes.append(
        f"Sent to {topic}: msgId {result.msg_id}, queue {result.queue.queue_id}, "
        f"offset {result.queue_offset}."
    )
    return RedirectResponse(f"/topics/{topic}", status_code=303)
