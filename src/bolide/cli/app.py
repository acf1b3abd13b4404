"""The ``bolide`` command line (typer). One module per command group joins the app here."""

from __future__ import annotations

import sys

import typer

from bolide.cli import admin_app, bench, servers, transaction

app = typer.Typer(
    name="bolide",
    help="Bolide: a message queue that speaks the Apache RocketMQ 4.x wire protocol.",
    no_args_is_help=True,
    add_completion=False,
)

servers.register(app)
admin_app.register(app, servers.broker)  # topic, group, offset, message, cluster, broker
app.add_typer(bench.app, name="bench")
transaction.register(app)


@app.command()
def version() -> None:
    """Print the Bolide version."""
    from bolide import __version__

    typer.echo(__version__)


def main() -> None:
    sys.exit(app())
