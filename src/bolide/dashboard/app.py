"""The dashboard's ASGI application: Starlette routes rendering Jinja2 templates shipped in
the wheel (``templates/``, ``static/``; no CDN, no node build).

Reads are GETs; every change is a POST carrying the session's CSRF token (see :mod:`.auth`).
Each page runs under one deadline (DASHBOARD_PAGE_DEADLINE_MS) over batched admin calls
(:mod:`.data`). Errors become pages: unknown topic or group 404, bad input 400 (nothing
changed), a broker that refuses 502, no answer in time 504. Pages live in
:mod:`.pages_topics`, :mod:`.pages_groups`, :mod:`.pages_messages` and :mod:`.pages_trace`,
the shared machinery in :mod:`.rendering`; this module holds the cluster, delay and producer
pages and assembles the routes.
"""

from __future__ import annotations

import asyncio

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from bolide.client.admin import AdminClient
from bolide.dashboard.auth import Session
from bolide.dashboard.data import broker_rows, delay_backlog, last_elections, timer_rows
from bolide.dashboard.pages_groups import group_routes
from bolide.dashboard.pages_messages import message_routes
from bolide.dashboard.pages_topics import topic_routes
from bolide.dashboard.pages_trace import trace_routes
from bolide.dashboard.rendering import (
    PACKAGE_DIR,
    Dashboard,
    DashboardSettings,
    form_text,
    not_found,
    page,
    query_text,
)

__all__ = ["Dashboard", "DashboardSettings", "create_app"]

# --- cluster, delay, producers, login -------------------------------------------------------------


async def cluster_page(dashboard: Dashboard, request: Request, session: Session) -> Response:
    rows = await broker_rows(dashboard.admin)
    return dashboard.render(
        request, session, "cluster.html", brokers=rows, elections=last_elections(rows)
    )


async def cluster_api(dashboard: Dashboard, request: Request, session: Session) -> Response:
    del request, session
    rows = await broker_rows(dashboard.admin)
    return JSONResponse(
        [
            {
                "name": f"{row.name}/{row.broker_id}",
                "address": row.address,
                "put_tps": row.put_tps,
                "get_tps": row.get_tps,
                "put_today": row.info.get("msgPutTotalTodayNow", "-"),
                "get_today": row.info.get("msgGetTotalTodayNow", "-"),
                "error": row.error,
            }
            for row in rows
        ]
    )


async def delay_page(dashboard: Dashboard, request: Request, session: Session) -> Response:
    levels, timers = await asyncio.gather(
        delay_backlog(dashboard.admin), timer_rows(dashboard.admin)
    )
    return dashboard.render(request, session, "delay.html", levels=levels, timers=timers)


async def producers_page(dashboard: Dashboard, request: Request, session: Session) -> Response:
    group = query_text(request, "group")
    clients = await dashboard.admin.producer_connections(group) if group else []
    return dashboard.render(request, session, "producers.html", group=group, clients=clients)


async def login_page(dashboard: Dashboard, request: Request, session: Session) -> Response:
    accounts = dashboard.settings.accounts
    target = request.query_params.get("next", "/")
    if not target.startswith("/") or target.startswith("//"):
        target = "/"
    if request.method == "GET" or accounts is None:
        return dashboard.render(request, session, "login.html", next=target, failed=False)
    access_key = await form_text(request, "access_key")
    role = accounts.check(access_key, await form_text(request, "secret_key"))
    if role is None:
        return dashboard.render(request, session, "login.html", 401, next=target, failed=True)
    session.user, session.role = access_key, role
    session.credentials = (access_key, await form_text(request, "secret_key"))
    return RedirectResponse(target, status_code=303)


async def logout_page(dashboard: Dashboard, request: Request, session: Session) -> Response:
    session.user = session.role = session.credentials = None
    return RedirectResponse("/login" if dashboard.settings.accounts else "/", status_code=303)


def create_app(admin: AdminClient, settings: DashboardSettings) -> Starlette:
    """The dashboard over a started ``admin`` client."""
    routes = [
        Route("/", page(cluster_page)),
        Route("/api/cluster", page(cluster_api)),
        Route("/delay", page(delay_page)),
        Route("/producers", page(producers_page)),
        Route("/login", page(login_page, public=True), methods=["GET", "POST"]),
        Route("/logout", page(logout_page, public=True), methods=["POST"]),
        *topic_routes(),
        *group_routes(),
        *message_routes(),
        *trace_routes(),
        Mount("/static", StaticFiles(directory=PACKAGE_DIR / "static"), name="static"),
    ]
    app = Starlette(routes=routes, exception_handlers={404: not_found})
    app.state.dashboard = Dashboard(admin, settings)
    return app
