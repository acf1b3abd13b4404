"""Joins the admin command groups to the ``bolide`` app (docs/cli.md):
``topic``, ``group``, ``offset``, ``message``, ``cluster``, and ``broker`` — which keeps
running a broker server when no subcommand is given (``bolide broker --config ...``) and adds
``bolide broker status``."""

from __future__ import annotations

from collections.abc import Callable

import typer

from bolide.cli import acl, cluster, group, message, offset, topic

__all__ = ["register"]


def register(app: typer.Typer, broker_server: Callable[..., None]) -> None:
    """Add the admin groups to ``app``. Call after the server commands are registered:
    the plain ``broker`` command (``broker_server``) is replaced by the ``broker`` group that
    runs it without a subcommand."""
    app.registered_commands[:] = [
        command for command in app.registered_commands if command.name != "broker"
    ]
    app.add_typer(cluster.broker_group(broker_server), name="broker")
    for module in (topic, group, offset, message, cluster, acl):
        module.register(app)
