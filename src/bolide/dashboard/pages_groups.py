"""Consumer group pages: the list (lag, rate, members of every group from one request per
broker), one group (members with language and version, subscription consistency, orderly
queues blocked, lag per queue and in total, live rate), reset offset by time with a preview
of what changes, and clone offsets."""

from __future__ import annotations

import asyncio

from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from bolide.base.errors import BolideError
from bolide.client import rpc
from bolide.client.admin import RESET_TO_EARLIEST, RESET_TO_LATEST
from bolide.client.admin.views import GroupProgress
from bolide.dashboard.auth import Session
from bolide.dashboard.data import (
    MemberRow,
    PageError,
    consistent,
    format_time_ms,
    gather,
    group_rows,
    member_rows,
    parse_time_ms,
)
from bolide.dashboard.history_svg import history_chart_svg, merge_points
from bolide.dashboard.rendering import Dashboard, form_text, page, query_text
from bolide.protocol.bodies import MessageQueue

__all__ = ["group_routes"]


def group_routes() -> list[Route]:
    return [
        Route("/groups", page(groups_page)),
        Route("/groups/{group}", page(group_page)),
        Route("/api/groups/{group}", page(group_api)),
        Route("/groups/{group}/reset", page(reset_preview, change=True), methods=["POST"]),
        Route("/groups/{group}/reset/confirm", page(reset_confirm, change=True), methods=["POST"]),
        Route("/groups/{group}/clone", page(clone_offsets, change=True), methods=["POST"]),
    ]


async def groups_page(dashboard: Dashboard, request: Request, session: Session) -> Response:
    include_system = request.query_params.get("show") == "all"
    rows = await group_rows(dashboard.admin, include_system=include_system)
    text = query_text(request, "q").lower()
    if text:
        rows = [row for row in rows if text in row.group.lower()]
    return dashboard.render(
        request,
        session,
        "groups.html",
        groups=rows,
        show="all" if include_system else "normal",
        q=text,
        total_lag=sum(row.lag for row in rows),
    )


async def group_page(dashboard: Dashboard, request: Request, session: Session) -> Response:
    group = request.path_params["group"]
    admin = dashboard.admin
    await admin.ensure_group(group)  # GroupNotFoundError: 404
    progress, members = await asyncio.gather(
        admin.group_progress(group), _members(dashboard, group)
    )
    lag_chart, tps_chart, history_errors = await _history_charts(dashboard, group, progress)
    member_list = [] if isinstance(members, BolideError) else members
    topics = sorted({row.queue.topic for row in progress.queues})
    return dashboard.render(
        request,
        session,
        "group.html",
        group=group,
        progress=progress,
        lag=sum(max(0, r.broker_offset - r.consumer_offset) for r in progress.queues),
        members=member_list,
        consistent=consistent(member_list),
        blocked=[(m.client_id, q, ms) for m in member_list for q, ms in m.blocked_queues],
        topics=topics,
        member_error=str(members) if isinstance(members, BolideError) else None,
        lag_chart=lag_chart,
        tps_chart=tps_chart,
        history_errors=history_errors,
    )


async def _history_charts(
    dashboard: Dashboard, group: str, progress: GroupProgress
) -> tuple[Markup, Markup, list[str]]:
    """Lag and consume TPS over the last hour, from every master holding the group's
    topics (GET_STATS_HISTORY), summed per minute; and the errors of brokers that failed."""
    admin = dashboard.admin
    info = await admin.cluster_info()
    pairs = sorted({(row.queue.topic, row.queue.broker_name) for row in progress.queues})
    calls = []
    for topic, broker_name in pairs:
        data = info.broker_addr_table.get(broker_name)
        address = data.master_addr if data is not None else None
        if address:
            calls.append(admin.stats_history(address, topic, group=group))
    charts = merge_points(await gather(calls))
    lag = [(point.timestamp_ms, float(point.lag)) for point in charts.points]
    tps = [(point.timestamp_ms, point.tps) for point in charts.points]
    return (
        # every text inside is escaped (history_chart_svg)
        Markup(history_chart_svg("lag-history", "Lag, last hour", "msgs", lag)),
        Markup(history_chart_svg("consume-tps-history", "Consume TPS, last hour", "msg/s", tps)),
        charts.errors,
    )


async def _members(dashboard: Dashboard, group: str) -> list[MemberRow] | BolideError:
    try:
        return await member_rows(dashboard.admin, group)
    except BolideError as error:  # the page still shows the offsets
        return error


async def group_api(dashboard: Dashboard, request: Request, session: Session) -> Response:
    del session
    group = request.path_params["group"]
    progress = await dashboard.admin.group_progress(group)
    return JSONResponse(
        {
            "group": group,
            "consume_tps": progress.consume_tps,
            "lag": sum(max(0, r.broker_offset - r.consumer_offset) for r in progress.queues),
            "queues": [
                {
                    "topic": r.queue.topic,
                    "broker": r.queue.broker_name,
                    "queue_id": r.queue.queue_id,
                    "broker_offset": r.broker_offset,
                    "consumer_offset": r.consumer_offset,
                    "lag": max(0, r.broker_offset - r.consumer_offset),
                }
                for r in progress.queues
            ],
        }
    )


async def _reset_target(dashboard: Dashboard, request: Request) -> tuple[str, str, int]:
    group = request.path_params["group"]
    topic = await form_text(request, "topic")
    when = await form_text(request, "time")
    if not topic:
        raise PageError(400, "Choose the topic whose offsets to reset; nothing changed.")
    try:
        timestamp_ms = parse_time_ms(when, dashboard.admin.clock.now_ms())
    except ValueError as error:
        raise PageError(400, f"{error}. Nothing changed.") from None
    await dashboard.admin.ensure_group(group)
    return group, topic, timestamp_ms


async def _new_offset(
    dashboard: Dashboard, queue: MessageQueue, address: str, timestamp_ms: int
) -> int:
    admin = dashboard.admin
    if timestamp_ms == RESET_TO_LATEST:
        return await rpc.get_max_offset(
            admin.pool, address, queue.topic, queue.queue_id, admin.timeout_ms
        )
    if timestamp_ms == RESET_TO_EARLIEST:
        return await rpc.get_min_offset(
            admin.pool, address, queue.topic, queue.queue_id, admin.timeout_ms
        )
    return await rpc.search_offset_by_timestamp(
        admin.pool, address, queue.topic, queue.queue_id, timestamp_ms, admin.timeout_ms
    )


async def reset_preview(dashboard: Dashboard, request: Request, session: Session) -> Response:
    """What a reset would change, per queue; nothing changes until it is confirmed."""
    group, topic, timestamp_ms = await _reset_target(dashboard, request)
    admin = dashboard.admin
    masters = await admin.topic_masters(topic)  # TopicNotFoundError: 404
    progress = await admin.group_progress(group, topic=topic)
    rows = [row for row in progress.queues if row.queue.topic == topic]
    targets = await gather(
        [
            _new_offset(dashboard, row.queue, masters[row.queue.broker_name], timestamp_ms)
            for row in rows
        ]
    )
    preview = [
        (row, None if isinstance(target, BolideError) else target)
        for row, target in zip(rows, targets, strict=True)
    ]
    return dashboard.render(
        request,
        session,
        "reset_preview.html",
        group=group,
        topic=topic,
        timestamp_ms=timestamp_ms,
        when=format_time_ms(timestamp_ms)
        if timestamp_ms > 0
        else ("latest" if timestamp_ms == RESET_TO_LATEST else "earliest"),
        preview=preview,
        moved=sum(
            1 for row, target in preview if target is not None and target != row.consumer_offset
        ),
    )


async def reset_confirm(dashboard: Dashboard, request: Request, session: Session) -> Response:
    group = request.path_params["group"]
    topic = await form_text(request, "topic")
    try:
        timestamp_ms = int(await form_text(request, "timestamp_ms"))
    except ValueError:
        raise PageError(400, "The confirmed reset lost its time; nothing changed.") from None
    await dashboard.admin.ensure_group(group)
    result = await dashboard.admin.reset_offset(group, topic, timestamp_ms)
    session.flashes.append(
        f"Offsets of {group} on {topic} reset: {len(result.offsets)} queues moved, "
        f"{len(result.clients)} online consumers told."
    )
    return RedirectResponse(f"/groups/{group}", status_code=303)


async def clone_offsets(dashboard: Dashboard, request: Request, session: Session) -> Response:
    group = request.path_params["group"]
    target = await form_text(request, "target")
    topic = await form_text(request, "topic") or None
    if not target or target == group:
        raise PageError(400, "Name another group to copy the offsets to; nothing changed.")
    await dashboard.admin.ensure_group(group)
    brokers = await dashboard.admin.clone_offsets(group, target, topic=topic)
    session.flashes.append(f"Offsets of {group} copied to {target} on {', '.join(brokers)}.")
    return RedirectResponse(f"/groups/{target}", status_code=303)
