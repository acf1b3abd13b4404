"""``bolide dashboard`` and the dashboard inside ``bolide standalone``.

The web framework is imported only when a dashboard starts (the ``dashboard`` extra):
without it, ``bolide dashboard`` exits with a clear message and ``bolide standalone``
warns and runs without its dashboard.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from bolide.acl.v2_model import UserType
from bolide.cli.runtime import (
    advertised_address,
    configure_console_logging,
    print_ready,
    run_until_signalled,
)

if TYPE_CHECKING:
    from bolide.acl import AclValidator
    from bolide.acl.v2_auth import AuthV2
    from bolide.client.security import TlsClientSettings
    from bolide.dashboard.auth import AccountChecker, Role
    from bolide.dashboard.server import DashboardServer

__all__ = [
    "DEFAULT_DASHBOARD_PORT",
    "auth_v2_accounts",
    "dashboard",
    "start_dashboard",
    "validator_accounts",
]

_log = logging.getLogger("bolide.cli")

DEFAULT_DASHBOARD_PORT = 8080
"""rocketmq-dashboard's port."""
INSTALL_HINT = "the dashboard needs its extra: pip install 'bolide[dashboard]'"


class _ValidatorAccounts:
    """The broker's own ACL validator as the dashboard's account checker (standalone)."""

    def __init__(self, validator: AclValidator) -> None:
        self._validator = validator

    def check(self, access_key: str, secret_key: str) -> Role | None:
        from bolide.dashboard.auth import Role

        account = self._validator.authenticate(access_key, secret_key)
        if account is None:
            return None
        return Role.ADMIN if account.admin else Role.READ_ONLY


class _AuthV2Accounts:
    """ACL 2.0's users as the dashboard's account checker: a Super user administers, an
    enabled Normal user reads."""

    def __init__(self, auth: AuthV2) -> None:
        self._auth = auth

    def check(self, access_key: str, secret_key: str) -> Role | None:
        from bolide.dashboard.auth import Role

        user = self._auth.authenticate(access_key, secret_key)
        if user is None:
            return None
        return Role.ADMIN if user.user_type is UserType.SUPER else Role.READ_ONLY


def auth_v2_accounts(auth: AuthV2) -> AccountChecker:
    """Logins checked against ACL 2.0's users (see :class:`_AuthV2Accounts`)."""
    return _AuthV2Accounts(auth)


def validator_accounts(validator: AclValidator | None) -> AccountChecker | None:
    """Logins checked by ``validator`` (None: ACL off, an open dashboard)."""
    return None if validator is None else _ValidatorAccounts(validator)


async def start_dashboard(
    namesrv: str,
    host: str,
    port: int,
    *,
    acl_file: Path | None = None,
    accounts: AccountChecker | None = None,
    tls: TlsClientSettings | None = None,
) -> DashboardServer | None:
    """A started dashboard over ``namesrv`` on ``host:port`` (0: a free port). Logins are
    checked by ``accounts``, else against ``acl_file``'s accounts, else not asked for;
    ``tls`` is how its admin clients reach the servers. None (with a warning) when the
    extra is missing. Raises OSError when the port cannot be bound."""
    try:
        from bolide.dashboard.app import DashboardSettings
        from bolide.dashboard.auth import PlainAclAccounts
        from bolide.dashboard.server import DashboardServer
    except ImportError as error:
        _log.warning("no dashboard: %s (%s)", INSTALL_HINT, error)
        return None
    if accounts is None and acl_file is not None:
        accounts = PlainAclAccounts(acl_file)
    settings = DashboardSettings(namesrv, accounts=accounts, tls=tls)
    server = DashboardServer(settings, host, port)
    await server.start()
    return server


def dashboard(
    namesrv: Annotated[
        str,
        typer.Option("--namesrv", envvar="BOLIDE_NAMESRV", help="Name servers, host:port;..."),
    ] = "127.0.0.1:9876",
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port, 0: any.")] = DEFAULT_DASHBOARD_PORT,
    acl_file: Annotated[
        Path | None,
        typer.Option("--acl-file", help="plain_acl.yml whose accounts may log in (ACL on)."),
    ] = None,
    json_output: Annotated[bool, typer.Option("--json", help="Ready line as JSON.")] = False,
) -> None:
    """Run the web dashboard over the given name servers."""
    configure_console_logging()

    async def serve(stop: asyncio.Event) -> None:
        server = await start_dashboard(namesrv, host, port, acl_file=acl_file)
        if server is None:
            raise typer.Exit(code=2)
        try:
            print_ready(json_output, dashboard=advertised_address(host, server.port))
            await stop.wait()
        finally:
            await server.stop()

    run_until_signalled(serve)
