"""The ``bolide`` command line (typer). One module per command group joins the app here."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from bolide.cli import admin_app, bench, ha, proxy, servers, transaction
from bolide.cli.security import hoist_security_options, security_options

app = typer.Typer(
    name="bolide",
    help="Bolide: a message queue that speaks the Apache RocketMQ 4.x wire protocol.",
    no_args_is_help=True,
    add_completion=False,
)

app.callback()(security_options)
servers.register(app)
proxy.register(app)  # the 5.x gRPC front end on its own
admin_app.register(app, servers.broker)  # topic, group, offset, message, cluster, broker
app.add_typer(bench.app, name="bench")
transaction.register(app)
ha.register(app)  # controller mode: leader, epochs, SyncStateSets


@app.command()
def version(
    json_output: Annotated[
        bool, typer.Option("--json", help="Print version, compiled flag and details as JSON.")
    ] = False,
) -> None:
    """Print the Bolide version (``--json``: and whether the compiled hot path is loaded)."""
    from bolide import __version__

    if not json_output:
        typer.echo(__version__)
        return
    import orjson

    from bolide.base import compiled

    status = compiled.status()
    report = {
        "version": __version__,
        "compiled": status.compiled,
        "pure_python_forced": status.pure_forced,
        "compiled_modules": status.compiled_modules,
        "missing_modules": status.missing_modules,
        "hot_path": compiled.describe(),
    }
    typer.echo(orjson.dumps(report).decode())


def main() -> None:
    sys.exit(app(hoist_security_options(sys.argv[1:])))
