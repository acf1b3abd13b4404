"""The ``bolide`` command line (typer). One module per command group joins the app here."""

from __future__ import annotations

import sys

import typer

app = typer.Typer(
    name="bolide",
    help="Bolide: a message queue that speaks the Apache RocketMQ 4.x wire protocol.",
    no_args_is_help=True,
    add_completion=False,
)


@app.command()
def standalone(
    data_dir: str = typer.Option("./data", "--data-dir", help="Broker data directory."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address both listeners bind."),
    namesrv_port: int = typer.Option(9876, "--namesrv-port", help="Name server port."),
    broker_port: int = typer.Option(10911, "--broker-port", help="Broker port."),
) -> None:
    """Run a name server and a broker in one process."""
    del data_dir, host, namesrv_port, broker_port
    typer.echo("bolide standalone: the broker is not built yet (issue 4)", err=True)
    raise typer.Exit(code=2)


@app.command()
def version() -> None:
    """Print the Bolide version."""
    from bolide import __version__

    typer.echo(__version__)


def main() -> None:
    sys.exit(app())
