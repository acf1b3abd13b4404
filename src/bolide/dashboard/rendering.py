"""The dashboard's shared page machinery: :class:`Dashboard` (the admin client, sessions and
templates the pages share), :class:`DashboardSettings`, the :func:`page` wrapper (session
cookie, CSRF on POSTs, the one deadline a page, errors as pages) and form reading. Every page
module imports it; it imports none of them (no circle with :mod:`.app`, which assembles the
routes).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.requests import ClientDisconnect, Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from bolide.base import limits
from bolide.base.errors import (
    BolideError,
    GroupNotFoundError,
    NotFoundError,
    RequestTimeoutError,
    TopicNotFoundError,
)
from bolide.client.admin import AdminClient
from bolide.client.security import TlsClientSettings
from bolide.dashboard.auth import (
    SESSION_COOKIE,
    AccountChecker,
    Role,
    Session,
    SessionStore,
    csrf_ok,
    same_origin,
)
from bolide.dashboard.data import (
    PageError,
    format_time_ms,
)
from bolide.dashboard.formats import format_percent, format_uptime

__all__ = [
    "PACKAGE_DIR",
    "Dashboard",
    "DashboardSettings",
    "Handler",
    "form_text",
    "not_found",
    "page",
    "post_allowed",
    "query_text",
    "required_query_text",
]

_log = logging.getLogger("bolide.dashboard")

PACKAGE_DIR = Path(__file__).parent
Handler = Callable[["Dashboard", Request, Session], Awaitable[Response]]


@dataclass(frozen=True, slots=True)
class DashboardSettings:
    """``accounts`` None: open dashboard (no ACL); else logins as :mod:`.auth` says, and each
    logged-in account's requests to the brokers are signed with its own keys."""

    namesrv: str
    accounts: AccountChecker | None = None
    tls: TlsClientSettings | bool | None = None
    """The admin clients' TLS (as :class:`AdminClient` takes it)."""
    refresh_ms: int = limits.DASHBOARD_REFRESH_MS
    page_deadline_ms: int = limits.DASHBOARD_PAGE_DEADLINE_MS


class Dashboard:
    """State shared by the pages: the admin client, sessions, templates."""

    def __init__(self, admin: AdminClient, settings: DashboardSettings) -> None:
        self._shared_admin = admin
        self._account_admins: dict[tuple[str, str], AdminClient] = {}
        self._current_admin: contextvars.ContextVar[AdminClient | None] = contextvars.ContextVar(
            "bolide_dashboard_admin", default=None
        )
        self.settings = settings
        self.sessions = SessionStore()
        self.templates = Environment(
            loader=FileSystemLoader(PACKAGE_DIR / "templates"),
            autoescape=select_autoescape(("html",)),
            enable_async=False,
        )
        self.templates.filters["time"] = format_time_ms
        self.templates.filters["number"] = lambda value: f"{value:,}"
        self.templates.filters["rate"] = lambda value: f"{value:,.1f}"
        self.templates.filters["percent"] = format_percent
        self.templates.filters["uptime"] = format_uptime

    @property
    def admin(self) -> AdminClient:
        """The admin client of the request being served: with logins (ACL on), one signing
        with the logged-in account's keys, so the brokers check that account's rights too;
        without, the shared one."""
        return self._current_admin.get() or self._shared_admin

    async def use_account_of(self, session: Session) -> None:
        """Make :attr:`admin` sign as ``session``'s account for the rest of this request."""
        credentials = session.credentials
        if credentials is None:
            return
        client = self._account_admins.get(credentials)
        if client is None:
            if len(self._account_admins) >= limits.DASHBOARD_ACCOUNT_CLIENTS_MAX_COUNT:
                _, oldest = self._account_admins.popitem()
                await oldest.close()
            access_key, secret_key = credentials
            client = AdminClient(
                self.settings.namesrv,
                access_key=access_key,
                secret_key=secret_key,
                tls=self.settings.tls,
            )
            await client.start()
            self._account_admins[credentials] = client
        self._current_admin.set(client)

    async def close(self) -> None:
        """Close the per-account admin clients (the shared one is its owner's)."""
        clients, self._account_admins = list(self._account_admins.values()), {}
        for client in clients:
            await client.close()

    def render(
        self, request: Request, session: Session, template: str, status: int = 200, **context: Any
    ) -> HTMLResponse:
        flashes, session.flashes = session.flashes, []
        html = self.templates.get_template(template).render(
            request=request,
            session=session,
            csrf=session.csrf,
            can_change=self.can_change(session),
            login_required=self.settings.accounts is not None,
            refresh_ms=self.settings.refresh_ms,
            chart_points=limits.DASHBOARD_CHART_POINTS_COUNT,
            flashes=flashes,
            path=request.url.path,
            **context,
        )
        return HTMLResponse(html, status_code=status)

    def can_change(self, session: Session) -> bool:
        return self.settings.accounts is None or session.role is Role.ADMIN

    def error(self, request: Request, session: Session, status: int, message: str) -> Response:
        return self.render(request, session, "error.html", status, code=status, message=message)


def _session_of(dashboard: Dashboard, request: Request) -> tuple[Session, bool]:
    session = dashboard.sessions.get(request.cookies.get(SESSION_COOKIE))
    if session is not None:
        return session, False
    return dashboard.sessions.create(), True


def _with_cookie(response: Response, session: Session, fresh: bool) -> Response:
    if fresh:
        response.set_cookie(
            SESSION_COOKIE,
            session.token,
            max_age=limits.DASHBOARD_SESSION_MAX_AGE_MS // 1000,
            httponly=True,
            samesite="strict",
        )
    return response


def page(
    handler: Handler, *, change: bool = False, public: bool = False
) -> Callable[[Request], Awaitable[Response]]:
    """Wrap a page: session, login and role checks, CSRF for changes, the page deadline,
    and errors shown as pages."""

    @functools.wraps(handler)
    async def endpoint(request: Request) -> Response:
        dashboard: Dashboard = request.app.state.dashboard
        session, fresh = _session_of(dashboard, request)
        response = await _guarded(dashboard, handler, request, session, change, public)
        return _with_cookie(response, session, fresh)

    return endpoint


async def _guarded(
    dashboard: Dashboard,
    handler: Handler,
    request: Request,
    session: Session,
    change: bool,
    public: bool,
) -> Response:
    login_needed = dashboard.settings.accounts is not None and session.user is None
    if login_needed and not public:
        return RedirectResponse(f"/login?next={request.url.path}", status_code=303)
    if request.method == "POST":
        if not await post_allowed(request, session):
            return dashboard.error(
                request, session, 403, "This form was not sent from this dashboard (CSRF)."
            )
        if change and not dashboard.can_change(session):
            return dashboard.error(
                request, session, 403, f"{session.user} may look but not change (read-only)."
            )
    try:
        async with asyncio.timeout(dashboard.settings.page_deadline_ms / 1000):
            await dashboard.use_account_of(session)
            return await handler(dashboard, request, session)
    except PageError as error:
        return dashboard.error(request, session, error.status, error.message)
    except (TopicNotFoundError, GroupNotFoundError, NotFoundError) as error:
        return dashboard.error(request, session, 404, str(error))
    except TimeoutError:
        return dashboard.error(
            request,
            session,
            504,
            f"The brokers did not answer within {dashboard.settings.page_deadline_ms} ms.",
        )
    except BolideError as error:
        _log.warning("dashboard page %s failed: %s", request.url.path, error)
        status = 504 if _no_answer_in_time(error) else 502
        return dashboard.error(request, session, status, str(error))


def _no_answer_in_time(error: BolideError) -> bool:
    """A request that timed out, or a name-server round whose last try did: a 504 like the
    page's own deadline. The admin client's request timeout is as long as that deadline, so
    which of the two fires first is chance; the status must not depend on it."""
    return isinstance(error, RequestTimeoutError) or isinstance(
        error.__cause__, RequestTimeoutError
    )


async def post_allowed(request: Request, session: Session) -> bool:
    headers = {key.lower(): value for key, value in request.headers.items()}
    if not same_origin(headers, request.headers.get("host", "")):
        return False
    length = int(request.headers.get("content-length") or 0)
    if length > limits.DASHBOARD_FORM_MAX_BYTES:
        return False
    try:
        form = await request.form()
    except ClientDisconnect:  # gone before its body was in: nothing to answer (issue 30)
        return False
    token = form.get("csrf")
    return csrf_ok(session, token if isinstance(token, str) else None)


async def form_text(request: Request, name: str, default: str = "") -> str:
    value = (await request.form()).get(name, default)
    return value.strip() if isinstance(value, str) else default


def query_text(request: Request, name: str) -> str:
    """The query parameter ``name``, stripped; empty when absent."""
    return request.query_params.get(name, "").strip()


def required_query_text(request: Request, name: str, question: str) -> str:
    """The query parameter ``name``, stripped; raises :class:`PageError` 400 with ``question``
    (what the page needs) when it is absent or blank."""
    value = query_text(request, name)
    if not value:
        raise PageError(400, question)
    return value


async def not_found(request: Request, exc: Exception) -> Response:
    del exc
    dashboard: Dashboard = request.app.state.dashboard
    session, fresh = _session_of(dashboard, request)
    response = dashboard.error(request, session, 404, f"No page at {request.url.path}.")
    return _with_cookie(response, session, fresh)
