"""``bolide controller``: run a 5.x controller (controller mode, docs/replication.md) whose
state lives in etcd. Ready line ``bolide ready controller=H:P``; etcd unreachable at start →
an error naming the endpoints and exit code 1."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from bolide.cli.runtime import configure_file_logging, print_ready, run_until_signalled
from bolide.controller.settings import DEFAULT_CONTROLLER_PORT, ControllerSettings

if TYPE_CHECKING:
    from bolide.broker.metrics.server import MetricsServer
    from bolide.controller.controller import Controller

__all__ = ["EtcdOption", "controller", "start_controller", "start_controller_metrics"]

EtcdOption = Annotated[
    str,
    typer.Option("--etcd", help="etcd v3 client endpoints H:P[,H:P...] holding the state."),
]


def controller(
    etcd: EtcdOption,
    host: Annotated[str, typer.Option("--host", help="Address the listener binds.")] = (
        "127.0.0.1"
    ),
    port: Annotated[int, typer.Option("--port", help="Controller port, 0: any.")] = (
        DEFAULT_CONTROLLER_PORT
    ),
    data_dir: Annotated[Path, typer.Option("--data-dir", help="Where logs/ goes.")] = Path(
        "./data"
    ),
    enable_elect_unclean_master: Annotated[
        bool,
        typer.Option(
            "--enable-elect-unclean-master",
            help="Elect any live replica when no in-sync one is alive (may lose messages).",
        ),
    ] = False,
    json_output: Annotated[bool, typer.Option("--json", help="Ready line as JSON.")] = False,
    advertise_host: Annotated[
        str | None,
        typer.Option("--advertise-host", help="Host brokers reach this controller at."),
    ] = None,
    metrics_port: Annotated[
        int | None,
        typer.Option(
            "--metrics-port", help="Serve Prometheus /metrics on this port (0: any). Default: off."
        ),
    ] = None,
) -> None:
    """Run a controller (RocketMQ 5.x controller mode) on etcd."""
    configure_file_logging(data_dir)
    settings = ControllerSettings(enable_elect_unclean_master=enable_elect_unclean_master)

    async def serve(stop: asyncio.Event) -> None:
        running = await start_controller(etcd, host, port, settings, advertise_host)
        metrics: MetricsServer | None = None
        try:
            listeners = {"controller": running.address}
            if metrics_port is not None:
                metrics = await start_controller_metrics(running, host, metrics_port)
                advertised = advertise_host or running.address.rsplit(":", 1)[0]
                listeners["metrics"] = f"{advertised}:{metrics.port}"
            print_ready(json_output, **listeners)
            await stop.wait()
        finally:
            if metrics is not None:
                await metrics.stop()
            await running.stop()

    run_until_signalled(serve)


async def start_controller(
    etcd: str,
    host: str,
    port: int,
    settings: ControllerSettings | None = None,
    advertise_host: str | None = None,
) -> Controller:
    """A started controller; raises ConfigError (etcd unreachable, bad endpoints), OSError.
    A wildcard ``host`` without ``advertise_host`` advertises loopback."""
    if advertise_host is None and host in ("", "0.0.0.0", "::"):
        advertise_host = "127.0.0.1"
    # Imported here: the controller pulls in the etcd client and grpc, which no other command needs.
    from bolide.controller.controller import Controller

    running = Controller(etcd, host, port, settings=settings, advertised_host=advertise_host)
    await running.start()
    return running


async def start_controller_metrics(running: Controller, host: str, port: int) -> MetricsServer:
    """A started /metrics server for ``running`` on ``host:port`` (0: any; the families of
    :mod:`bolide.controller.metrics`). Raises OSError when the port cannot be bound."""
    from prometheus_client import CollectorRegistry

    from bolide.broker.metrics.server import MetricsServer
    from bolide.controller.metrics import ControllerCollector

    registry = CollectorRegistry(auto_describe=False)
    registry.register(ControllerCollector(running))
    server = MetricsServer(registry, host, port)
    await server.start()
    return server
