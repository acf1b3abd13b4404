"""``bolide cluster list`` and ``bolide broker status``.

``bolide broker`` also runs a broker server (``bolide broker --config broker.conf``), so it is
a group that runs the server when no subcommand follows: :func:`broker_group` wraps the
server command of :mod:`bolide.cli.servers` with the ``status`` subcommand.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Annotated, Any

import typer

from bolide.cli.common import AdminCommand, ExitCode, admin_options, fail
from bolide.client.admin import AdminClient

__all__ = ["broker_group", "register"]

cluster_app = typer.Typer(help="Clusters and their brokers.", no_args_is_help=True)
_SHOWN_RUNTIME_KEYS = (
    "brokerVersionDesc",
    "runtime",
    "bootTimestamp",
    "msgPutTotalTodayNow",
    "msgGetTotalTodayNow",
    "msgPutTotalTodayMorning",
    "msgGetTotalTodayMorning",
    "commitLogMinOffset",
    "commitLogMaxOffset",
    "commitLogDiskRatio",
    "remainHowManyDataToFlush",
    "longPollingParkedPulls",
)
"""Runtime figures ``broker status`` shows first (every other key follows)."""


def register(root: typer.Typer) -> None:
    """Add the ``cluster`` group to ``root`` (``broker``: see :func:`broker_group`)."""
    root.add_typer(cluster_app, name="cluster")


@cluster_app.command("list")
@admin_options
def cluster_list(*, command: AdminCommand) -> None:
    """Every broker of every cluster: role, address, replication lag (bytes and ms behind the
    master), version, messages in and out today."""
    output = command.output
    brokers = command.run(lambda admin: admin.list_brokers())
    if output.json_output:
        output.json([broker.to_dict() for broker in brokers])
        return
    output.table(
        None,
        (
            "cluster",
            "broker",
            "id",
            "role",
            "address",
            "lag bytes",
            "lag ms",
            "version",
            "put today",
            "get today",
            "up",
        ),
        [
            (
                item.cluster,
                item.broker_name,
                item.broker_id,
                item.role,
                item.address,
                "" if item.lag_bytes is None else item.lag_bytes,
                "" if item.lag_ms is None else item.lag_ms,
                item.version or item.error,
                item.put_today,
                item.get_today,
                item.runtime,
            )
            for item in brokers
        ],
    )


@admin_options
def broker_status(
    broker: Annotated[
        str | None,
        typer.Argument(help="Broker name or host:port (default: every broker)."),
    ] = None,
    *,
    command: AdminCommand,
) -> None:
    """A broker's runtime figures (GET_BROKER_RUNTIME_INFO): version, uptime, messages put
    and got, commit-log offsets, flush backlog, parked pulls..."""
    output = command.output

    async def action(admin: AdminClient) -> dict[str, dict[str, str] | str]:
        if broker is not None:
            targets = await admin.resolve_brokers([broker])
        else:
            targets = await admin.master_addresses()
        infos = await admin.fan_out(
            [admin.broker_runtime_info(address) for address in targets.values()]
        )
        return {
            f"{name} ({address})": info if isinstance(info, dict) else str(info)
            for (name, address), info in zip(targets.items(), infos, strict=True)
        }

    tables = command.run(action)
    if output.json_output:
        output.json(tables)
    else:
        for title, table in tables.items():
            if isinstance(table, str):
                output.note(f"{title}: {table}")
                continue
            keys = [key for key in _SHOWN_RUNTIME_KEYS if key in table]
            keys += sorted(key for key in table if key not in _SHOWN_RUNTIME_KEYS)
            output.table(title, ("key", "value"), [(key, table[key]) for key in keys])
    if any(isinstance(table, str) for table in tables.values()):
        fail(output, "some brokers did not answer", ExitCode.UNREACHABLE)


def broker_group(server: Callable[..., None]) -> typer.Typer:
    """The ``broker`` group: ``status`` as a subcommand, ``server`` (the ``bolide broker``
    server command, with all its options) when no subcommand is given."""
    group = typer.Typer(
        help="Run a broker (bolide broker [OPTIONS]) or inspect one (bolide broker status).",
        invoke_without_command=True,
        no_args_is_help=False,
    )
    signature = inspect.signature(server, eval_str=True)
    context = inspect.Parameter(
        "ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context
    )

    @functools.wraps(server)
    def run_or_dispatch(ctx: typer.Context, **options: Any) -> None:
        if ctx.invoked_subcommand is None:
            server(**options)

    # Typer reads the options from the signature: the server's, plus the context.
    run_or_dispatch.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[context, *signature.parameters.values()]
    )
    run_or_dispatch.__annotations__ = {**server.__annotations__, "ctx": typer.Context}
    group.callback()(run_or_dispatch)
    group.command("status")(broker_status)
    return group
